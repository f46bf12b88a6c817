"""The residual stream and TokenNorm pages in the real app (`streamlit run app.py`) in the system Chromium.

Run with `pytest -m browser tests/test_browser_stream.py`. Reuses the server, page and screenshot fixtures of
tests/test_browser.py (the app on small random models). Skipped until app.py's navigation lists both pages."""

from pathlib import Path

import pytest

from test_browser import CHART, CHROMIUM, ERROR, load, page, server, shoot, wait_idle  # noqa: F401 (fixtures)

APP = Path(__file__).resolve().parent.parent / "app.py"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium"),
              pytest.mark.skipif(not all(f'url_path="{p}"' in APP.read_text() for p in ("residual_stream", "token_norm")),
                                 reason="app.py's navigation does not list the residual and tokennorm pages yet")]


def test_residual_stream_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/residual_stream", 4)  # the fresh server's first page: a deep link
    assert page.get_by_text("Page not found").count() == 0  # Streamlit's old multipage mode stayed off
    menu = page.get_by_test_id("stSidebarNav").inner_text()
    assert "Residual stream" in menu and "common" not in menu  # app.py's menu, not the files of pages/
    assert page.get_by_text("max |Σ parts − stream|").count() == 1
    shoot(page, "residual_1_default")
    load(page, f"{server}/residual_stream?temperature=0.3&position=3:+to", 4)
    assert page.get_by_text("T = 0.3").count() >= 1
    shoot(page, "residual_2_temperature")
    text = page.get_by_role("textbox", name="Text", exact=True)
    text.fill("")
    text.press("Control+Enter")
    page.get_by_text("the text is empty").wait_for()
    wait_idle(page)  # the last run's charts stay, faded, until this run ends
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length == 0")
    assert page.locator(ERROR).count() == 0


def test_token_norm_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/token_norm", 1)  # the statistics; the one-token chart and figure 5 wait for Reveal
    page.get_by_role("button", name="Reveal").click()
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 3")
    wait_idle(page)
    shoot(page, "tokennorm_1_default")
    page.get_by_test_id("stSidebar").get_by_text("paper", exact=True).click()
    page.wait_for_function("() => document.body.innerText.includes('Paper notation: X is D × N')")
    wait_idle(page)
    assert "notation=paper" in page.url and page.locator(ERROR).count() == 0
    page.get_by_text("ln2", exact=True).click()
    page.wait_for_function("() => document.body.innerText.includes('layer 0, ln2')")
    wait_idle(page)
    assert "norm=ln2" in page.url and page.locator(ERROR).count() == 0
    shoot(page, "tokennorm_2_paper_ln2")
