"""The image page in a real browser: `streamlit run` driven by Playwright in the system Chromium.

Run with `pytest -m browser tests/test_browser_image.py`. Reuses the browser fixtures of tests/test_browser.py; the
server here also has tiny image models. Screenshots also go to $ATTENTION_LAB_SCREENSHOTS when it is set."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from core.data.images import generate_dataset
from test_browser import CHART, CHROMIUM, ERROR, _build_models, page, serve_app, shoot, wait_idle  # noqa: F401
from vision_models import write_tiny_vits

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app with tiny text and image models; killed at teardown."""
    models = write_tiny_vits(_build_models(tmp_path_factory.mktemp("models")))
    with serve_app(models, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def _png(tmp_path: Path) -> Path:
    image = np.repeat(np.repeat(generate_dataset(1, 7)[0][0], 4, axis=0), 4, axis=1)  # 128 x 128
    path = tmp_path / "shape.png"
    Image.fromarray(image).save(path)
    return path


def _charts(page) -> int:
    return page.locator(CHART).count()


def test_image_page_in_the_browser(server, page, shoot, tmp_path):
    page.goto(f"{server}/image_lab")
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 7")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert page.get_by_text("Where the CLS token looks").count() == 1
    shoot(page, "image_1_sample")

    # click patch row 1, column 2 (token n = 11) on the image: it becomes the chosen patch
    chosen = page.get_by_text("Where patch n = 11 attends")
    for _ in range(4):  # a click that lands while the chart is still wiring its events is lost: click again
        plot_area = page.locator(CHART).first.locator(".nsewdrag").first.bounding_box()
        page.mouse.click(plot_area["x"] + plot_area["width"] * 10 / 32, plot_area["y"] + plot_area["height"] * 6 / 32)
        try:
            chosen.wait_for(timeout=20_000)
            break
        except PlaywrightTimeout:
            wait_idle(page)
    chosen.wait_for()
    wait_idle(page)
    assert "patch=11" in page.url and page.locator(ERROR).count() == 0

    # upload a generated PNG through the file input
    page.get_by_test_id("stButtonGroup").get_by_text("upload", exact=True).click()
    page.wait_for_selector('[data-testid="stFileUploader"] input[type="file"]', state="attached")
    wait_idle(page)
    assert "source=upload" in page.url
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(_png(tmp_path)))
    page.get_by_text("resized from 128×128 to 32×32").wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 7")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    overlay = page.locator(CHART).nth(3)  # the CLS attention of one head, over the image
    overlay.scroll_into_view_if_needed()
    assert overlay.locator(".heatmaplayer image, .heatmaplayer .hm").count() >= 1  # the heatmap is drawn
    assert overlay.locator(".layer-below image, .imagelayer image").count() >= 1  # over the image
    shoot(page, "image_2_upload")

    # a bad upload: an error box with the loader's message, no traceback
    junk = tmp_path / "junk.png"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(junk))
    page.get_by_text("not a supported image").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 1
    shoot(page, "image_3_bad_upload")

    # draw: start from a cross, tick a cell, the page reruns with the drawing
    page.get_by_test_id("stButtonGroup").get_by_text("draw", exact=True).click()
    page.get_by_text("a drawing (").first.wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert re.search(r"source=draw", page.url)
    shoot(page, "image_4_draw")
