""""What does this head do?" in a real browser, on the bundled lm-rope: a click on a head in the attention grid
changes that head, the prediction changes, and the link (now holding the head) reopens the same result. Run with
`pytest -m browser tests/test_browser_head_effects.py`."""

from pathlib import Path

import pytest
from test_browser import CHROMIUM, page, serve_app, wait_idle  # noqa: F401 (fixtures)

from core.model.registry import MODELS_DIR

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]

GRID = '[class*="st-key-attention_grid"] .vega-embed svg'  # Vega draws it as SVG, each cell a path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app on the bundled models: the random test models' heads barely move a prediction."""
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def head_point(page, layer: int, head: int) -> tuple[float, float]:
    """The centre of a head's cell in the attention grid (Vega labels each cell with its fields)."""
    cell = page.locator(f'{GRID} path[aria-roledescription="rect mark"][aria-label^="head: {head}; layer: {layer};"]')
    box = cell.first.bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def changed_line(page) -> str:
    line = page.locator('[data-testid="stMarkdownContainer"]', has_text="L0H1 set to its mean output")
    line.first.wait_for()
    return line.first.inner_text()


def test_a_clicked_head_changes_the_prediction_and_its_link_reopens_the_same(server, page):
    page.goto(f"{server}/head_effects?model=lm-rope")
    page.locator(GRID).first.wait_for()
    wait_idle(page)
    page.mouse.click(*head_point(page, 0, 1))
    shown = changed_line(page)
    wait_idle(page)
    after, as_run = shown.split("As run:")
    assert after.split("·")[0].split("=")[1].strip() != as_run.split("·")[0].split("=")[1].strip()  # ℓ(are) − ℓ(is)
    page.wait_for_function("() => window.location.search.includes('intervene=L0H1')")
    page.goto(page.url)
    assert changed_line(page) == shown
