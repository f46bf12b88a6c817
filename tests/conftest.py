"""Shared page-test fixtures: tiny random text models in a folder, and `app(page, **url_params)` that runs a page
under AppTest reading its models from there. A test file with other models overrides `models_dir`."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tiny_models import write_tiny_models

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "pages"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return write_tiny_models(tmp_path_factory.mktemp("models"))


@pytest.fixture
def app(models_dir, monkeypatch):
    """app(page path, timeout=60, **query params) -> the AppTest after its first run."""
    monkeypatch.setenv("ATTENTION_LAB_MODELS_DIR", str(models_dir))

    def start(page: str, timeout: float = 60, **params: str) -> AppTest:
        at = AppTest.from_file(page, default_timeout=timeout)
        for key, value in params.items():
            at.query_params[key] = value
        return at.run()
    return start


def ok(at: AppTest) -> None:
    """No exception and no error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def charts(at: AppTest) -> list:
    return list(at.get("plotly_chart"))
