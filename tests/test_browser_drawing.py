"""The image page's drawing canvas in a real browser, on the bundled image models: strokes drawn with the mouse
reach the model, Undo and Clear work, and the link reopens the same drawing with the same prediction.

Run with `pytest -m browser tests/test_browser_drawing.py`. Screenshots go to $ATTENTION_LAB_SCREENSHOTS when set."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from test_browser import CHROMIUM, ERROR, serve_app, shoot, wait_idle  # noqa: F401

from core.data.images import CLASSES, DRAW_CELLS, template_cells
from core.model.registry import MODELS_DIR
from core.serving.drawing_link import decode_drawing, encode_drawing

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]

CANVAS = ".al-drawing canvas"
BLANK = "A" * 43  # an empty 16 x 16 drawing's link value
PREDICTION = '[data-testid="stMarkdownContainer"]:has-text(" says ")'  # the first: beside the canvas


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app on the bundled models (random ones would not tell a drawing from nothing); killed at teardown."""
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.fixture
def page(server):
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def cell_point(page, row: float, col: float) -> tuple[float, float]:
    """The page coordinates of a point of the drawing grid, in cells (row 0.5, column 0.5: the first cell's centre)."""
    box = page.locator(CANVAS).bounding_box()
    return box["x"] + col * box["width"] / DRAW_CELLS, box["y"] + row * box["height"] / DRAW_CELLS


def stroke(page, *points: tuple[float, float]) -> None:
    """Press the mouse at the first point (in cells), move through the others in small steps, release."""
    page.mouse.move(*cell_point(page, *points[0]))
    page.mouse.down()
    for point in points[1:]:
        page.mouse.move(*cell_point(page, *point), steps=8)
    page.mouse.up()


def shown(page) -> str:
    """The drawing the canvas shows, as its link value."""
    return page.locator(".al-drawing").get_attribute("data-cells")


def linked(page) -> str | None:
    """The drawing in the page's URL."""
    return parse_qs(urlparse(page.url).query).get("drawing", [None])[0]


def settle(page, drawing: str) -> str:
    """Wait until the URL holds `drawing` and the page has rerun with it; the model's verdict then."""
    page.wait_for_function("value => new URL(window.location.href).searchParams.get('drawing') === value", arg=drawing)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    return page.locator(PREDICTION).first.inner_text()


def test_draw_undo_clear_and_reopen_the_link(server, page, shoot):
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{server}/image_lab?source=draw")
    page.locator(CANVAS).wait_for()
    assert any("/drawing.js?v=" in url for url in requests)  # the canvas's code, from the app's own server
    assert all(url.startswith((server, "data:", "blob:")) for url in requests), requests
    wait_idle(page)
    blank = settle(page, BLANK)
    assert "says nothing" in blank
    assert page.get_by_role("button", name="↶ Undo").is_disabled()

    stroke(page, (3.5, 3.5), (3.5, 12.5), (12.5, 12.5))  # a square's top and right side, badly
    first = shown(page)
    assert first != BLANK
    after_one = settle(page, first)
    stroke(page, (12.5, 12.5), (12.5, 3.5), (3.5, 3.5))  # and its bottom and left side
    square = shown(page)
    assert square not in (BLANK, first)
    after_two = settle(page, square)
    assert "says nothing" not in after_two, after_two
    assert page.locator(PREDICTION).first.evaluate(  # seen while drawing, without scrolling
        "e => e.getBoundingClientRect().top >= 0 && e.getBoundingClientRect().bottom <= window.innerHeight")
    shoot(page, "drawing_1_square")

    page.get_by_role("button", name="↶ Undo").click()
    assert shown(page) == first
    assert settle(page, first) == after_one

    page.get_by_role("button", name="✕ Clear").click()
    assert shown(page) == BLANK
    assert settle(page, BLANK) == blank
    assert page.get_by_role("button", name="✕ Clear").is_disabled()
    page.get_by_role("button", name="↶ Undo").click()  # the clear is undone too
    assert shown(page) == first

    stroke(page, (12.5, 12.5), (12.5, 3.5), (3.5, 3.5))
    assert shown(page) == square
    assert settle(page, square) == after_two
    link = page.url
    page.goto(link)  # the link, opened afresh: the same drawing, the same verdict
    page.locator(CANVAS).wait_for()
    page.wait_for_function("value => document.querySelector('.al-drawing').dataset.cells === value", arg=square)
    assert settle(page, square) == after_two
    shoot(page, "drawing_2_reopened")

    page.get_by_test_id("stSelectbox").filter(has_text="Start from").click()  # a template replaces the drawing
    page.get_by_role("option", name="cross", exact=True).click()
    cross = encode_drawing(template_cells(CLASSES.index("cross")))
    page.wait_for_function("value => document.querySelector('.al-drawing').dataset.cells === value", arg=cross)
    settle(page, cross)
    page.get_by_role("button", name="↶ Undo").click()  # and Undo brings it back
    assert shown(page) == square
    assert settle(page, square) == after_two

    page.get_by_role("button", name="Eraser").click()  # the eraser rubs out what it passes over, and only that
    stroke(page, (3.5, 3.5), (3.5, 12.5))
    rubbed = decode_drawing(square, DRAW_CELLS)
    rubbed[3, 3:13] = False
    assert shown(page) == encode_drawing(rubbed)
    settle(page, encode_drawing(rubbed))


def touch_stroke(page, *points: tuple[float, float]) -> None:
    """A finger's stroke through these points (in cells), as the browser's touch input (Chrome DevTools protocol)."""
    session = page.context.new_cdp_session(page)
    kinds = ["touchStart", *["touchMove"] * (len(points) - 1)]
    for kind, point in zip(kinds, points):
        x, y = cell_point(page, *point)
        session.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": [{"x": x, "y": y}]})
    session.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})


def test_a_finger_draws_too(server, shoot):
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1024, "height": 768}, has_touch=True)
        page.set_default_timeout(60_000)
        page.goto(f"{server}/image_lab?source=draw")
        page.locator(CANVAS).wait_for()
        settle(page, BLANK)
        page.locator(CANVAS).scroll_into_view_if_needed()
        top = "() => document.querySelector('.al-drawing canvas').getBoundingClientRect().top"
        before = page.evaluate(top)
        touch_stroke(page, *[(row + 0.5, 8.5) for row in range(2, 14)])  # a bar, top to bottom
        bar = np.zeros((DRAW_CELLS, DRAW_CELLS), dtype=bool)
        bar[2:14, 8] = True
        assert "says bar" in settle(page, encode_drawing(bar))
        assert page.evaluate(top) == before  # the finger drew: it did not scroll the page
        shoot(page, "drawing_3_touch")
        browser.close()
