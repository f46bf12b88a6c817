"""A link whose number has no finite value (inf, -inf, nan, 1e309) is cleaned before any widget is built: no crash,
a note naming it, and the widget's default."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ok, read_models_from

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.mark.parametrize("value", ["inf", "-inf", "1e309", "nan"])
def test_a_non_finite_number_in_a_link_is_replaced_by_the_default_with_a_note(models_dir, monkeypatch, value):
    read_models_from(monkeypatch, models_dir)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(mask="window", window=value, layer="L1")
    at.run()
    ok(at)
    assert at.number_input(key="window").value == 8  # the model's own window: the default
    assert at.radio(key="layer").value == 1  # the rest of the link still applies
    assert any("window held no finite number" in info.value for info in at.info)
    assert "window" not in at.query_params or at.query_params["window"] != value
