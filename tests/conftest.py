"""Shared page-test fixtures: tiny random text models in a folder, and `app(page, **url_params)` that runs a page
under AppTest reading its models from there. A test file with other models overrides `models_dir`."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from tiny_models import write_tiny_models

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "pages"

# Pretrained models (core/model/pretrained.py) come from a Hugging Face cache made for the tests, never this machine's, and
# nothing is fetched. Set before anything imports huggingface_hub, which reads these once; servers started by the
# browser tests inherit them.
HF_HOME = Path(tempfile.mkdtemp(prefix="attention-lab-hf-"))
os.environ.update(HF_HOME=str(HF_HOME), HF_HUB_CACHE=str(HF_HOME / "hub"), HF_HUB_OFFLINE="1")
os.environ.pop("ATTENTION_LAB_ALLOW_DOWNLOADS", None)
# Runs train at the test process's priority, not only on CPU time nothing else wants: on a machine busy with other
# work a SCHED_IDLE run gets no CPU and every test that trains hits its time cap (issue 36). Servers the browser tests
# start inherit it; test_live.py checks the server's default, lower priority on a run of its own.
os.environ["ATTENTION_LAB_TRAINING_PRIORITY"] = "normal"


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory) -> Path:
    """A Hugging Face cache of this test module's own (pretrained_models.cache_model puts tiny models in it), given
    back afterwards: no other test finds its models in a picker. Servers started meanwhile inherit it."""
    from core.model import registry

    root = tmp_path_factory.mktemp("hf-hub")
    saved = os.environ["HF_HUB_CACHE"]
    os.environ["HF_HUB_CACHE"] = str(root)  # core/model/pretrained.py reads it at each call
    registry._pretrained.clear()  # the cached models' list is kept a minute: read this cache now
    yield root
    os.environ["HF_HUB_CACHE"] = saved
    registry._pretrained.clear()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return write_tiny_models(tmp_path_factory.mktemp("models"))


TINY_DEFAULT = "lm-rope"  # the text model the pickers open on in a folder of tiny models (tiny_models.py)


def read_models_from(monkeypatch, directory: Path, default: str = TINY_DEFAULT) -> None:
    """Pages read their models from `directory`, and the text pickers open on its `default` model: the bundled
    default (registry.DEFAULT_TEXT_MODEL) is not in a folder of tiny models, and a picker without its default opens
    on the folder's first model."""
    from core.model import registry

    monkeypatch.setenv("ATTENTION_LAB_MODELS_DIR", str(directory))
    monkeypatch.setattr(registry, "DEFAULT_TEXT_MODEL", default)


@pytest.fixture
def app(models_dir, monkeypatch):
    """app(page path, timeout=60, **query params) -> the AppTest after its first run."""
    read_models_from(monkeypatch, models_dir)

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


def as_shown(markdown: str) -> str:
    """What markdown shows of text escaped by pages.ui.safety.literal: every backslash escape resolved."""
    return re.sub(r"\\(.)", r"\1", markdown)


CHART_TYPES = ("plotly_chart", "bidi_component")  # plotly, and the canvas heatmap (pages/ui/heatmap.py)


def charts(at: AppTest) -> list:
    """The charts drawn, in page order: plotly charts and canvas heatmaps (not the image page's drawing canvas)."""
    return [element for element in at._tree if element.type in CHART_TYPES
            and getattr(element.proto, "component_name", "") != "attention_lab.drawing"]


def drawn(at: AppTest, key: str) -> bool:
    """Whether a chart with this key is drawn (an element's id ends with its key)."""
    return any(chart.proto.id.endswith(key) for chart in charts(at))


def figure(chart) -> dict:
    """A plotly chart element's figure, parsed from its JSON (never searched as text: how plotly escapes "·" or
    spaces depends on which JSON library is installed); a canvas heatmap's spec as the browser reads it, its arrays
    as lists (so two specs compare with ==), its title under "layout" as plotly's is."""
    if chart.type == "plotly_chart":
        return json.loads(chart.proto.spec)
    from core.figures.canvas import unpack

    spec = unpack(chart.proto.bytes)
    return {**spec, "arrays": {name: value.tolist() for name, value in spec["arrays"].items()},
            "layout": {"title": spec["title"], "xaxis": {"title": spec["x_title"]},
                       "yaxis": {"title": spec["y_title"]}}}


def figures(at: AppTest) -> list[dict]:
    return [figure(chart) for chart in charts(at)]


def figure_texts(fig: dict) -> list[str]:
    """The words a figure shows: its title, axis and colour-bar titles, annotations, and trace names."""
    layout = fig.get("layout", {})

    def title(part: dict) -> str:
        value = part.get("title", "")
        return value.get("text", "") if isinstance(value, dict) else value

    axes = [value for name, value in layout.items() if name.startswith(("xaxis", "yaxis")) and isinstance(value, dict)]
    traces = fig.get("data", [])
    return [text for text in (
        title(layout), *map(title, axes), *(a.get("text", "") for a in layout.get("annotations", [])),
        *(t.get("name", "") for t in traces), *(title(t.get("colorbar", {})) for t in traces),
        *(title(t.get("marker", {}).get("colorbar", {})) for t in traces),
    ) if text]


def shows(fig: dict, words: str) -> bool:
    """Whether any of the figure's texts contains `words`."""
    return any(words in text for text in figure_texts(fig))
