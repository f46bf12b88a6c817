"""Every page of app.py's menu at a laptop's 1024×768 and a desktop's 1440×900, normal and in presenter mode, in the
real app (bundled models) in the system Chromium: the presenter toggle sits at the top of the sidebar and follows the
URL, no chart is narrower than MIN_CHART_PX, and no label, value, menu entry or tab is cut off.

Run with `pytest -m browser tests/test_browser_layout.py`. One server and one browser serve every case. Screenshots of
the whole page go to $ATTENTION_LAB_SCREENSHOTS when it is set (e.g. /tmp/presenter_shots)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_browser import CHROMIUM, ERROR, serve_app, wait_idle
from test_navigation import pages_in_menu

from core.model.registry import MODELS_DIR

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]

SIZES = [(1024, 768), (1440, 900)]  # a laptop with the sidebar open; a desktop
MIN_CHART_PX = 240
CHARTS = '.js-plotly-plot, .al-heatmap, [data-testid="stVegaLiteChart"]'
# Elements whose text the browser cuts (scrolled or "…"): not inside charts, tables, code or formulas (KaTeX scrolls
# a long equation sideways by design); a drop-down's value is an <input> whose text is wider than its box.
CUT_TEXT = """() => {
  const skip = '.js-plotly-plot, .al-heatmap, [data-testid="stVegaLiteChart"], [data-testid="stDataFrame"], ' +
               '[data-testid="stTable"], pre, code, textarea, [class*="katex"]';
  const cut = [];
  for (const el of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
    if (el.closest(skip)) continue;
    const style = getComputedStyle(el), wider = el.scrollWidth > el.clientWidth + 1;
    const value = el.matches('input[role="combobox"]') ? el.value : '';
    const clips = (style.overflowX !== 'visible' || style.textOverflow === 'ellipsis') && (el.innerText || '').trim();
    if (wider && (value || clips || el.getAttribute('role') === 'tablist'))
      cut.push((value || el.innerText).trim().split('\\n')[0]);
  }
  return cut;
}"""
NARROW_CHARTS = f"""() => [...document.querySelectorAll('{CHARTS}')]
  .map(el => Math.round(el.getBoundingClientRect().width)).filter(width => width < {MIN_CHART_PX})"""
# every plotly chart resized to its column (plotly draws at a default width first, then fits): a fixed 500 ms pause
# for it failed on a machine with a load of 12 (issue 36, finding 10)
PLOTLY_FITTED = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].every(chart => {
  const svg = chart.querySelector('svg');
  return svg && Math.abs(svg.getBoundingClientRect().width - chart.getBoundingClientRect().width) < 2;
})"""
SIDEBAR_FIRST_WIDGET = """() => {
  const first = document.querySelector('[data-testid="stSidebarUserContent"] [data-testid="stWidgetLabel"]');
  return first && first.innerText.trim();
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app on its bundled models, as a class sees it."""
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield browser
        browser.close()


@pytest.fixture(scope="module", params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def page(request, browser):
    width, height = request.param
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(90_000)
    yield page
    page.close()


def open_page(page, url: str) -> None:
    """Load `url` and wait until the run has ended and its charts have been drawn."""
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1')
    wait_idle(page)  # the cost page draws its charts only after a click: no chart is awaited
    page.wait_for_function("""() => [...document.querySelectorAll('.al-heatmap')]
                                     .every(el => el.dataset.drawn !== '0')""")
    page.wait_for_function(PLOTLY_FITTED)


def screenshot(page, name: str) -> None:
    """The whole page (Streamlit scrolls inside its main block: the window is made as tall as that first)."""
    folder = os.environ.get("ATTENTION_LAB_SCREENSHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], tall)})
    page.wait_for_timeout(800)
    page.screenshot(path=str(Path(folder) / f"{name}_{size['width']}x{size['height']}.png"))
    page.set_viewport_size(size)


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
@pytest.mark.parametrize("stem, path", pages_in_menu())
def test_page_layout(server, page, stem, path, presenter):
    open_page(page, f"{server}/{path or ''}" + ("?presenter=true" if presenter else ""))  # no path: the main page
    assert page.locator(ERROR).count() == 0
    assert page.evaluate(SIDEBAR_FIRST_WIDGET) == "Presenter mode"
    assert page.get_by_role("switch", name="Presenter mode").is_checked() == presenter
    assert page.evaluate("() => getComputedStyle(document.documentElement).fontSize") == (
        "21px" if presenter else "16px")
    narrow, cut = page.evaluate(NARROW_CHARTS), page.evaluate(CUT_TEXT)
    screenshot(page, f"{stem}_{'presenter' if presenter else 'normal'}")
    assert narrow == [], f"charts narrower than {MIN_CHART_PX} px: {narrow}"
    assert cut == [], f"text cut off: {cut}"


def test_presenter_mode_stays_on_from_page_to_page(server, page):
    open_page(page, f"{server}/maths?presenter=true")
    page.get_by_role("link", name="Residual stream").click()
    page.wait_for_url("**/residual_stream**")
    wait_idle(page)
    assert "presenter=true" in page.url
    assert page.get_by_role("switch", name="Presenter mode").is_checked()
    assert page.evaluate("() => getComputedStyle(document.documentElement).fontSize") == "21px"
