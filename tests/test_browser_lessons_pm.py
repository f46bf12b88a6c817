"""The two lesson pages, "Position encodings" and "Masks & generation", in the real app in the system Chromium.

Run with `pytest -m browser tests/test_browser_lessons_pm.py`. Reuses the server, page and screenshot fixtures of
tests/test_browser.py (the app on small random models). Screenshots also go to $ATTENTION_LAB_SCREENSHOTS."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_browser import (CHART, CHROMIUM, ERROR, TINY_LABELS, canvas_image, load, page, server,  # noqa: F401
                          shoot, wait_idle)

APP = Path(__file__).resolve().parent.parent / "app.py"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
              pytest.mark.skipif(not all(f'url_path="{p}"' in APP.read_text() for p in ("positions_lab", "masks_lab")),
                                 reason="app.py's navigation does not list the positions and masks pages yet")]
GRID_CELL = ".vega-embed path[aria-label]"  # the mask grid's cells (Vega draws them as SVG paths)
CELL_3_1 = f'{GRID_CELL}[aria-label*="query token: {TINY_LABELS[3]}; key token: {TINY_LABELS[1]};'  # + state, "]"


def chart_title(page, index: int) -> str:
    return page.locator(CHART).nth(index).locator(".gtitle").first.text_content()


def reveal(page, question: str) -> None:
    """Click the Reveal button of the predict-then-reveal box that asks `question`."""
    box = page.get_by_test_id("stVerticalBlock").filter(has_text=question).last  # the innermost: the box
    box.get_by_role("button", name="Reveal").click()
    wait_idle(page)


def test_positions_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/positions_lab", 3)  # the similarity and the RoPE arrows wait for their reveals
    assert chart_title(page, 0).startswith("sinusoidal")
    shoot(page, "positions_1_default")

    page.get_by_test_id("stRadio").filter(has_text="Encoding").get_by_text("rope", exact=True).click()
    page.wait_for_function(f"() => document.querySelector('{CHART} .gtitle')?.textContent.startsWith('rope')")
    wait_idle(page)
    assert "encoding=rope" in page.url and page.locator(ERROR).count() == 0

    charts = page.locator(CHART).count()
    reveal(page, "does the mask alone tell the model about order?")
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length == {charts + 1}")
    wait_idle(page)
    assert page.get_by_text("the mask itself leaks position").count() == 1
    assert page.locator(ERROR).count() == 0
    shoot(page, "positions_2_rope_permutation")


def test_masks_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/masks_lab", 3)
    page.wait_for_selector(GRID_CELL)
    assert page.get_by_text("0 cells switched from the causal preset").count() == 1
    shoot(page, "masks_1_default")

    pattern = canvas_image(page)  # the model under the mask: the page's one canvas heatmap
    page.locator(f'{CELL_3_1}"]').click()
    page.get_by_text("1 cell switched from the causal preset").wait_for()
    wait_idle(page)
    assert "cells=3%3A1" in page.url or "cells=3:1" in page.url
    assert canvas_image(page) != pattern
    assert page.locator(f'{CELL_3_1} state: masked"]').count() == 1

    page.locator(f'{CELL_3_1}"]').click()  # again: back
    page.get_by_text("0 cells switched from the causal preset").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0

    page.get_by_test_id("stSelectbox").filter(has_text="Start from a preset").click()
    page.get_by_role("option", name="block-sparse", exact=True).click()
    page.get_by_text("0 cells switched from the block-sparse preset").wait_for()
    wait_idle(page)
    reveal(page, "Which earlier representations change")
    page.get_by_text(f"0 of the {len(TINY_LABELS) - 1} earlier tokens").wait_for()
    assert page.locator(ERROR).count() == 0
    shoot(page, "masks_2_block_sparse_incremental")

    page.get_by_text("sampled", exact=True).click()
    page.wait_for_function("() => location.search.includes('decoding=sampled')")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "masks_3_sampled")
