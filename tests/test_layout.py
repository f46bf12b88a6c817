"""Presenter mode on every page of app.py's menu: every chart of the page grows with it (larger type, never a shorter
chart). The toggle itself is drawn once by app.py (tests/test_browser_layout.py checks it on every page, in the real
app: AppTest runs a page of app.py's menu by itself after its first run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_models_from
from streamlit.testing.v1 import AppTest

from core.figures.canvas import unpack
from test_navigation import pages_in_menu
from vision_models import write_tiny_vits

ROOT = Path(__file__).resolve().parent.parent
SLOW = {"live_training", "attention_cost", "cross_attention"}  # they train, time or translate: covered elsewhere
# its charts answer a prompt, so they wait for Reveal, and it reads the bundled English models: covered in
# test_it_reference_page
REVEALED_ONLY = {"it_reference"}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    from tiny_models import write_tiny_models

    return write_tiny_vits(write_tiny_models(tmp_path_factory.mktemp("models")))


def run_page(stem: str, presenter: bool) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{stem}.py"), default_timeout=120)
    at.session_state["presenter"] = presenter  # what app.py's toggle sets
    return at.run()


def font_sizes(node, in_font: bool = False) -> list[float]:
    """Every font size a plotly spec sets: the `size` of each dict under a key ending in "font" (layout.font,
    title.font, tickfont, textfont, annotations' font...)."""
    if isinstance(node, dict):
        own = [node["size"]] if in_font and isinstance(node.get("size"), (int, float)) else []
        return own + [size for name, value in node.items() for size in font_sizes(value, name.endswith("font"))]
    if isinstance(node, list):
        return [size for item in node for size in font_sizes(item)]
    return []


def chart_fonts(at: AppTest) -> list[tuple[float, float]]:
    """Per plotly chart: (smallest font size, height); per canvas heatmap: (font scale, 0); per Altair chart: (its
    axes' label size, 0)."""
    fonts = []
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        layout = spec.get("layout", {})
        sizes = [layout.get("font", {}).get("size", 12)] + font_sizes(
            {name: value for name, value in layout.items() if name != "template"}) + font_sizes(spec["data"])
        fonts.append((min(sizes), layout.get("height") or 0))
    for component in at.get("bidi_component"):
        fonts.append((unpack(component.proto.bytes)["font_scale"], 0))
    for chart in at.get("vega_lite_chart"):  # Altair: its smallest type set anywhere, Vega's own 11 px when none
        fonts.append((min(vega_font_sizes(json.loads(chart.proto.spec)), default=11), 0))
    return fonts


def vega_font_sizes(node) -> list[float]:
    """Every font size a Vega-Lite spec sets: the values of its keys ending in "FontSize" or named "fontSize"."""
    if isinstance(node, dict):
        return [size for name, value in node.items() for size in (
            [value] if name.lower().endswith("fontsize") and isinstance(value, (int, float)) else vega_font_sizes(value))]
    if isinstance(node, list):
        return [size for item in node for size in vega_font_sizes(item)]
    return []


@pytest.mark.parametrize("stem", [stem for stem, _ in pages_in_menu() if stem not in SLOW | REVEALED_ONLY])
def test_every_chart_of_every_page_grows_in_presenter_mode(models_dir, monkeypatch, stem):
    read_models_from(monkeypatch, models_dir)
    normal, presenter = run_page(stem, False), run_page(stem, True)
    for at in (normal, presenter):
        assert not at.exception, [e.value for e in at.exception]
    before, after = chart_fonts(normal), chart_fonts(presenter)
    assert len(before) == len(after) > 0
    for (font, height), (big_font, big_height) in zip(before, after):
        assert big_font > font and big_height >= height  # larger type, never a shorter chart
