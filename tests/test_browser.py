"""The real app in a real browser: `streamlit run app.py` driven by Playwright in the system Chromium.

Run with `pytest -m browser tests/test_browser.py`. Screenshots go to a temporary folder, and also to
$ATTENTION_LAB_SCREENSHOTS when it is set."""

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import TINY_DEFAULT

from core.figures.attention import numbered_labels, plain_token_labels
from core.model.checkpoint import ModelCard
from core.model.run import text_tokenizer
from pages.ui.text_input import DEFAULT_TEXT

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
ERROR = '[data-testid="stException"]'
CHART = ".js-plotly-plot"
HEATMAP = ".al-heatmap"  # the app's canvas heatmap (assets/web/heatmap.js), the text explorer's head charts
ANY_CHART = f"{CHART}, {HEATMAP}"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]


def _build_models(directory: Path) -> Path:
    """The small random-weight models of tests/test_app.py (loaded by path: tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("_attention_lab_test_app", Path(__file__).with_name("test_app.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_models(directory)


def default_text_labels(card: ModelCard | None = None) -> list[str]:
    """The default text's tokens as the token pickers and the hover name them ("6: box"), read by `card`'s tokenizer
    (None: the grammar's, which the tiny models read)."""
    encoded = text_tokenizer(card).encode(DEFAULT_TEXT)
    return numbered_labels(plain_token_labels(encoded.tokens, encoded.is_unknown))


def scored(labels: list[str], query: int, key: int, where: str = "layer 1, head 1") -> str:
    """The line that names the score the page takes apart: "Query 6: box and key 4: the in layer 1, head 1"."""
    return f"Query {labels[query]} and key {labels[key]} in {where}"


TINY_LABELS = default_text_labels()
# the runner that opens a server's text pickers on the tiny models' own default (tests/default_model_streamlit.py)
TINY_DEFAULT_RUNNER = (str(Path(__file__).with_name("default_model_streamlit.py")), TINY_DEFAULT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_app(models: Path, log: Path, runner: tuple[str, ...] = ("-m", "streamlit", "run")):
    """`streamlit run app.py` on a free port reading models from `models`; yields its URL, stops it after. `runner`:
    what runs app.py, after the Python interpreter."""
    port = _free_port()
    env = {**os.environ, "ATTENTION_LAB_MODELS_DIR": str(models), "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, *runner, "app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.fileWatcherType", "none", "--server.address", "127.0.0.1"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app on small test models, its text pickers opening on their lm-rope; killed at teardown."""
    models = _build_models(tmp_path_factory.mktemp("models"))
    with serve_app(models, tmp_path_factory.mktemp("server") / "streamlit.log", runner=TINY_DEFAULT_RUNNER) as url:
        yield url


@pytest.fixture
def page(server):
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


@pytest.fixture
def shoot(tmp_path):
    """shoot(page, name): a screenshot into tmp_path and, if set, $ATTENTION_LAB_SCREENSHOTS."""
    extra = os.environ.get("ATTENTION_LAB_SCREENSHOTS")

    def take(page, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        return path
    return take


def wait_idle(page) -> None:
    """Until the script has finished rerunning (Streamlit shows a status widget while it runs) and every element
    whose code Streamlit loads on first use (Plotly's, the tables') has replaced its grey placeholder: before that, a
    column holding a chart was as narrow as one without, and a fresh browser in CI measured formulas in it."""
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"], [data-testid=\"stSkeleton\"]')",
        timeout=60_000)
    page.wait_for_timeout(500)


def click_until(button, effect, attempts: int = 8) -> None:
    """Click `button` (a Locator) until `effect` (a Locator: what the click brings) shows. A button of a page that
    reruns by itself (a polling panel, a class's fragments) is redrawn at every run: a click can land although
    Playwright, seeing it replaced, timed out (then there may be no button left to click), or, on a busy machine,
    have no effect (1 run in 8: a Stop that Playwright saw land left the run training for a minute; a teacher's
    "Start a class" started none): so look for the effect, not the click, and click again, as a person would, while
    it does not show. A redraw can also hold the old button and the new one for a moment (two matches): click
    again."""
    from playwright.sync_api import Error as PlaywrightError

    for _ in range(attempts):
        if effect.count():
            return
        try:
            button.click(timeout=5_000)
            effect.wait_for(timeout=15_000)
            return
        except PlaywrightError:  # a timeout (PlaywrightTimeout is one), or two buttons for a moment
            continue
    effect.wait_for(timeout=60_000)


def switch_on(page, label: str, attempts: int = 8) -> None:
    """Turn the switch `label` on. Unlike a button's, a switch's second click undoes the first: click only while
    it shows off (a click that a rerun swallowed), never while it shows on, and wait for it to show on."""
    from playwright.sync_api import Error as PlaywrightError

    switch = page.get_by_role("switch", name=label)
    for _ in range(attempts):
        try:
            if not switch.is_checked(timeout=15_000):
                page.get_by_text(label, exact=True).click(timeout=5_000)
            page.get_by_role("switch", name=label, checked=True).wait_for(timeout=15_000)
            return
        except PlaywrightError:  # a timeout, or the switch redrawn under the click
            continue
    page.get_by_role("switch", name=label, checked=True).wait_for(timeout=60_000)


def load(page, url: str, charts: int) -> None:
    """Open `url`, wait for `charts` charts and the end of the run; no exception box."""
    page.goto(url)
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= {charts}")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0


def chart_titles(page) -> list[str]:
    """Every chart's title, in page order: a plotly chart's title text, a canvas heatmap's data-title."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{ANY_CHART}')].map(chart =>
        chart.matches('{HEATMAP}') ? chart.dataset.title || '' : chart.querySelector('.gtitle')?.textContent || '')""")


def head_chart_rows(page) -> str:
    """What the head chart's rows are, as its canvas tells screen readers ("…; rows: query n · rows sum to 1; …")."""
    label = page.locator(f"{HEATMAP} canvas").first.get_attribute("aria-label")
    return label.split("rows: ")[1]


def cell_point(page, row: int, col: int, chart: str = HEATMAP) -> tuple[float, float]:
    """The page coordinates of a cell's centre in the first canvas heatmap (matching the selector `chart`)."""
    x0, y0, cell = page.evaluate(f"() => JSON.parse(document.querySelector('{chart}').dataset.plot)")
    bounds = page.locator(f"{chart} canvas").first.bounding_box()
    return bounds["x"] + x0 + (col + 0.5) * cell, bounds["y"] + y0 + (row + 0.5) * cell


def hover_cell(page, row: int, col: int, chart: str = HEATMAP) -> str:
    """Move the mouse over a cell of the first canvas heatmap (matching `chart`); the hover box's text."""
    page.mouse.move(*cell_point(page, row, col, chart))
    tip = page.locator(f"{chart} .al-heatmap-tip").first
    tip.wait_for()
    return tip.inner_text()


def canvas_image(page, chart: str = HEATMAP) -> str:
    """What the first canvas chart matching `chart` shows, as a data URL."""
    return page.evaluate(f"() => document.querySelector('{chart} canvas').toDataURL()")


def test_text_explorer_in_the_browser(server, page, shoot):
    page.goto(server)
    page.wait_for_selector(HEATMAP)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert page.get_by_text(f"{len(TINY_LABELS)} tokens").count() == 1
    shoot(page, "text_explorer_1_default")

    page.get_by_role("tab", name="All heads").click()
    page.locator(f'[class*="st-key-overview_chart"] {HEATMAP} canvas').wait_for()
    wait_idle(page)
    assert "view=All+heads" in page.url and page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_1b_all_heads")
    # 12 tokens a tile, layers down and heads across: row 14, column 13 is L1 H1's query 2 and key 1
    assert len(TINY_LABELS) == 12
    assert hover_cell(page, 14, 13).splitlines()[:3] == ["layer 1 · head 1", f"query {TINY_LABELS[2]}",
                                                         f"key {TINY_LABELS[1]}"]
    page.mouse.click(*cell_point(page, 14, 13))  # a click on a tile opens that head
    page.get_by_text("Layer 1, head 1", exact=True).wait_for()  # opened in "Attention pattern"
    page.locator(f'[class*="st-key-head_chart"] {HEATMAP} canvas').wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0

    text = page.get_by_role("textbox", name="Text", exact=True)
    text.fill("the dog that the children love runs .")
    text.press("Control+Enter")
    page.get_by_text("9 tokens", exact=True).wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_2_new_text")

    assert head_chart_rows(page).startswith("query")
    # a causal model: [BOS] sees only itself (weight exactly 1), and the next key is masked
    assert hover_cell(page, 0, 0).splitlines()[:3] == ["query 0: [BOS]", "key 0: [BOS]", "weight 1.0000"]
    assert "−∞ (masked)" in hover_cell(page, 0, 1)
    causal = canvas_image(page)
    with page.expect_download() as download:  # the PNG button: the chart at twice its size, named for what it shows
        page.locator(f"{HEATMAP} .al-heatmap-png").first.click()
    assert download.value.suggested_filename == "lm-rope_pattern_L1_H1_common.png"
    png = Path(download.value.path()).read_bytes()
    width = page.locator(f"{HEATMAP} canvas").first.bounding_box()["width"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == round(2 * width)
    page.mouse.click(*cell_point(page, 2, 1))  # a click takes that score apart
    page.get_by_text("Query 2: dog and key 1: the in layer 1, head 1").wait_for()
    wait_idle(page)
    assert "view=One+score" in page.url and page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_2b_clicked_cell")
    page.get_by_role("tab", name="Attention pattern").click()
    page.locator(f"{HEATMAP} canvas").wait_for()
    wait_idle(page)
    page.get_by_test_id("stSidebar").get_by_text("paper", exact=True).click()
    page.wait_for_function(f"() => document.querySelector('{HEATMAP} canvas')?.ariaLabel.includes('rows: key')")
    wait_idle(page)
    assert canvas_image(page) != causal  # the figure changed: the transpose
    assert "notation=paper" in page.url
    assert page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_3_paper_notation")

    page.get_by_text("Compare with the model's own setting").click()
    page.get_by_test_id("stSelectbox").filter(has_text="Mask").click()
    page.get_by_role("option", name="none", exact=True).click()
    page.wait_for_function(f"() => document.querySelectorAll('{HEATMAP}').length >= 3")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_4_compare")

    text = page.get_by_role("textbox", name="Text", exact=True)
    text.fill("")
    text.press("Control+Enter")
    page.get_by_text("the text is empty").wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length === 0")  # stale charts go
    assert page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_5_error")


def view_of(page) -> tuple:
    """What the text explorer shows: the chosen layer and head, the open tab and the score taken apart."""
    checked = page.locator('[data-testid="stRadio"] label:has(input:checked)')
    # four radios have a choice (notation, apply, layer, head); they may be drawn a moment after the run ends
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stRadio\"] input:checked').length >= 4",
                           timeout=30_000)  # a busy machine draws them late
    return (tuple(sorted(checked.all_inner_texts())), page.locator('[role="tab"][aria-selected="true"]').inner_text(),
            page.locator("p", has_text="Query ").filter(has_text=" in layer ").first.inner_text().split(" —")[0])


def fresh_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    return context, page


def test_the_head_view_hovers_each_band_and_a_click_on_a_query_shows_its_bands_alone(server, page, shoot):
    page.goto(f"{server}/?view=Head+view&lines_layer=L1")
    chart = f'[class*="st-key-lines_chart"] {HEATMAP}'
    page.locator(f"{chart} canvas").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_7_head_view")
    x_query, x_key, top, row = page.evaluate(f"() => JSON.parse(document.querySelector('{chart}').dataset.plot)")
    bounds = page.locator(f"{chart} canvas").first.bounding_box()
    at = lambda x, value: (bounds["x"] + x, bounds["y"] + top + (value + 0.5) * row)  # row `value`'s centre
    before = canvas_image(page, chart)
    page.mouse.click(*at(x_query - 20, 3))  # the query's label: its bands alone
    page.wait_for_function(f"() => document.querySelector('{chart}').dataset.title.startsWith('layer 1')")
    page.wait_for_function("() => window.location.search.includes('lines_token=')")
    wait_idle(page)
    assert canvas_image(page, chart) != before and page.locator(ERROR).count() == 0
    shoot(page, "text_explorer_7b_head_view_one_query")
    # two heads share a row: H0's lane is its upper half, and a query's weights (all but those < 0.01) fill it
    page.mouse.move(*at(x_query + 4, 3 - 0.21))
    tip = page.locator(f"{chart} .al-heatmap-tip")
    tip.wait_for()
    lines = tip.inner_text().splitlines()
    assert lines[0] == "H0" and lines[1].startswith("query 3: ") and lines[2].startswith("weight 0.")
    page.mouse.click(*at(x_query - 20, 3))  # again: every query's bands
    page.wait_for_function("() => !window.location.search.includes('lines_token=')")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0



def test_a_clicked_cell_is_in_the_url_and_the_link_reopens_it(server, page, shoot):
    page.goto(f"{server}/?layer=L1&head=H1")
    page.wait_for_selector(HEATMAP)
    wait_idle(page)
    page.mouse.click(*cell_point(page, 6, 4))  # query 6 "box", key 4 "the"
    page.get_by_text(scored(TINY_LABELS, 6, 4)).wait_for()
    wait_idle(page)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
    assert query == {"layer": "L1", "head": "H1", "view": "One score, step by step", "qk_query": TINY_LABELS[6],
                     "qk_key": TINY_LABELS[4]}, page.url
    shown = view_of(page)
    context, reopened = fresh_page(page.context.browser)
    reopened.goto(page.url)
    reopened.get_by_text(scored(TINY_LABELS, 6, 4)).wait_for()
    wait_idle(reopened)
    assert view_of(reopened) == shown and reopened.locator(ERROR).count() == 0
    shoot(reopened, "text_explorer_6_clicked_cell_reopened")
    context.close()


def test_a_shared_link_opens_the_same_view_every_time(server, page):
    link = f"{server}/?" + urllib.parse.urlencode({"layer": "L1", "head": "H1", "view": "One score, step by step",
                                                   "qk_query": TINY_LABELS[6], "qk_key": TINY_LABELS[4],
                                                   "notation": "paper"})
    views, urls = set(), set()
    for _ in range(10):
        context, fresh = fresh_page(page.context.browser)
        fresh.goto(link)
        fresh.get_by_text(scored(TINY_LABELS, 6, 4)).wait_for()
        wait_idle(fresh)
        assert fresh.locator(ERROR).count() == 0
        views.add(view_of(fresh))
        urls.add(frozenset(urllib.parse.parse_qsl(urllib.parse.urlsplit(fresh.url).query)))
        context.close()
    assert len(views) == 1 and len(urls) == 1, (views, urls)
    (checked, tab, _), = views
    assert {"L1", "H1", "paper"} <= set(checked) and tab == "One score, step by step"
    assert urls == {frozenset(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))}


@pytest.fixture(scope="module")
def slow_url_server(tmp_path_factory):
    """The app on the bundled models (4 layers, 4 heads), its URL writes delayed (tests/slow_url_streamlit.py) as on
    a busy machine."""
    from core.model.registry import MODELS_DIR

    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("slow_url") / "streamlit.log",
                   runner=(str(Path(__file__).with_name("slow_url_streamlit.py")),)) as url:
        yield url


def test_a_head_picked_while_a_click_runs_stays_in_the_url(slow_url_server, page):
    """A run that writes the URL (here the cell click's) sends the query string its request carried: a layer and head
    picked in the browser while it ran were dropped from the URL, the page still showing them (before
    pages.ui.widgets.keep_in_url). On the default model, reading the default text."""
    from core.model.checkpoint import read_card
    from core.model.registry import DEFAULT_TEXT_MODEL, card_path

    labels = default_text_labels(read_card(card_path(DEFAULT_TEXT_MODEL)))
    for _ in range(3):
        context, fresh = fresh_page(page.context.browser)
        fresh.goto(slow_url_server)
        fresh.wait_for_selector(HEATMAP)
        wait_idle(fresh)
        fresh.mouse.click(*cell_point(fresh, 6, 4))
        fresh.locator(".st-key-layer").get_by_text("L2", exact=True).click()  # no wait: while the click runs
        fresh.locator(".st-key-head").get_by_text("H3", exact=True).click()
        fresh.get_by_text(scored(labels, 6, 4, "layer 2, head 3")).wait_for()
        wait_idle(fresh)
        fresh.wait_for_timeout(1000)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(fresh.url).query))
        assert {"L2", "H3"} <= set(view_of(fresh)[0])
        assert (query.get("layer"), query.get("head"), query.get("qk_query")) == ("L2", "H3", labels[6]), fresh.url
        context.close()
