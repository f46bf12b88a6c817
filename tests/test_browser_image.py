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
from test_browser import (ANY_CHART, CHART, CHROMIUM, ERROR, HEATMAP, _build_models, cell_point, hover_cell, page,  # noqa: F401
                          serve_app, shoot, wait_idle)
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


def _map(key: str) -> str:
    """The canvas chart of one attention map over the image."""
    return f'[class*="st-key-{key}"] {HEATMAP}'


def test_attention_over_the_image_hovers_and_clicks(server, page, shoot):
    """The maps over the image are canvas charts: the hover names the patch's token n and its weight (and, among
    every head, the head); a click on a patch chooses it for the whole page, a click on a head's map opens it."""
    page.goto(f"{server}/image_lab")
    page.locator(f"{_map('patch_chart')} canvas").wait_for()
    wait_idle(page)
    page.locator(f"{_map('cls_chart')} canvas").scroll_into_view_if_needed()
    lines = hover_cell(page, 1, 2, _map("cls_chart")).splitlines()
    assert lines[:2] == ["token n = 11", "patch row 1, column 2"] and lines[2].startswith("weight 0.")
    tile = hover_cell(page, 8 + 1, 8 + 2, _map("cls_all_chart")).splitlines()  # L1 H1 of 8 x 8 patches a tile
    assert tile[:2] == ["layer 1 · head 1", "token n = 11"] and tile[-1].startswith("CLS keeps on itself 0.")
    shoot(page, "image_5_maps")
    page.mouse.click(*cell_point(page, 8 + 1, 8 + 2, _map("cls_all_chart")))
    page.get_by_text("Layer 1, head 1", exact=True).wait_for()
    wait_idle(page)
    page.mouse.click(*cell_point(page, 2, 3, _map("patch_chart")))  # row 2, column 3: n = 1 + 2 * 8 + 3
    page.get_by_text("Where patch n = 20 attends").wait_for()
    wait_idle(page)
    assert "patch=20" in page.url and page.locator(ERROR).count() == 0
    assert page.locator("annotation", has_text="x_{20} = W").count() == 1  # figure 2 shows it too


def _charts(page) -> int:
    return page.locator(ANY_CHART).count()


def test_image_page_in_the_browser(server, page, shoot, tmp_path):
    page.goto(f"{server}/image_lab")
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= 7")
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
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= 7")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    page.locator(f"{_map('cls_all_chart')} canvas").scroll_into_view_if_needed()
    wait_idle(page)
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
