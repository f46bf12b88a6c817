"""The live-training page in a real browser: `streamlit run` driven by Playwright in the system Chromium.

Run with `pytest -m browser tests/test_browser_training.py`. Starts a tiny run, sees the loss curve grow while the
page polls it, stops it, and finds the scrubber. Reuses the browser fixtures of tests/test_browser.py; saved runs go
to a temporary user directory. Screenshots also go to $ATTENTION_LAB_SCREENSHOTS when it is set."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from test_browser import (CHART, CHROMIUM, ERROR, HEATMAP, _build_models, click_until, page,  # noqa: F401
                          serve_app, shoot, wait_idle)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]

# how many steps the loss curve holds: its x values, a plain array or plotly's base64 {dtype, bdata} array
LOSS_POINTS = """() => {
    const x = document.querySelector('.st-key-tr_curves .js-plotly-plot')?.data?.[0]?.x;
    if (!x) return 0;
    if (Array.isArray(x) || ArrayBuffer.isView(x)) return x.length;
    return atob(x.bdata).length / {f8: 8, f4: 4, i4: 4, u4: 4, i2: 2, u2: 2, i1: 1, u1: 1}[x.dtype];
}"""


SERVER_LOG: dict[str, Path] = {}  # "path": the module's server's log, for a failure's message


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app on tiny text models, saving runs into a temporary user directory; killed at teardown."""
    models = _build_models(tmp_path_factory.mktemp("models"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path_factory.mktemp("runs")))
        log = SERVER_LOG["path"] = tmp_path_factory.mktemp("server") / "streamlit.log"
        with serve_app(models, log) as url:
            yield url


def test_a_run_trains_live_and_stops(server, page, shoot):
    page.goto(f"{server}/live_training?tr_steps=19000&tr_d=16&tr_batch=32")
    page.locator(".st-key-tr_start button").wait_for()
    if page.get_by_text("Page not found").count():  # Streamlit's first page load can race the page list
        page.keyboard.press("Escape")
    wait_idle(page)
    page.locator(".st-key-tr_schedule_chart " + CHART).wait_for()  # a fresh server's first page can be slow
    assert page.locator(ERROR).count() == 0
    assert page.locator(".st-key-tr_schedule_chart " + CHART).count() == 1
    shoot(page, "training_1_setup")

    click_until(page.locator(".st-key-tr_start button"), page.get_by_text("Training: step").first)
    assert "run=" in page.url
    page.wait_for_function(f"() => ({LOSS_POINTS})() >= 5", timeout=120_000)
    first = page.evaluate(LOSS_POINTS)
    page.wait_for_function(f"() => ({LOSS_POINTS})() > {first}", timeout=60_000)  # the curve grows by itself
    shoot(page, "training_2_live")

    click_until(page.locator(".st-key-tr_stop button"), page.get_by_text("Stopped: step").first)
    page.get_by_text("Attention as it formed").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert page.locator(".st-key-tr_scrub_pattern " + HEATMAP).count() == 1  # the head, on the canvas chart
    assert page.locator(".st-key-tr_save button").count() == 1
    shoot(page, "training_3_stopped")


def start_tiny_run(page, server: str) -> str:
    """Open the page with a long tiny run set up, start it; the run's id (from the URL)."""
    page.goto(f"{server}/live_training?tr_steps=19000&tr_d=16&tr_batch=32")
    page.locator(".st-key-tr_start button").first.wait_for()
    if page.get_by_text("Page not found").count():
        page.keyboard.press("Escape")
    wait_idle(page)
    click_until(page.locator(".st-key-tr_start button"), page.get_by_text("Training: step").first)
    return page.url.split("run=")[1].split("&")[0]


def why_no_control(tab, context) -> str:
    """What the page shows instead of its owner's controls, for a failure's message: its texts, Stop buttons,
    whether a script run is under way, errors, cookies, and the end of the server's log."""
    shown = {text: tab.get_by_text(text).count() for text in ("Read-only", "Training: step", "Stopped: step")}
    shown |= {"stop buttons": tab.locator(".st-key-tr_stop button").count(),
              "running": tab.locator('[data-testid="stStatusWidget"]').count()}
    log = SERVER_LOG["path"].read_text(errors="replace")[-2000:] if "path" in SERVER_LOG else ""
    return (f"{shown}, errors {tab.locator(ERROR).all_inner_texts()}, "
            f"cookies {[(c['name'], c['value']) for c in context.cookies()]}, url {tab.url}, server log:\n{log}")


def stop_as_its_owner(tab, context, shoot) -> None:
    """Click the tab's Stop until the run shows stopped; a page that shows no effect after that is reloaded once,
    as a person would, and stopped again (a tab of a busy machine, left in the background, sometimes stopped
    drawing its polled panel). What the first page showed goes into the failure's message, with a screenshot."""
    stopped = tab.get_by_text("Stopped: step").first
    try:
        click_until(tab.locator(".st-key-tr_stop button"), stopped)
        return
    except PlaywrightTimeout:
        first_try = why_no_control(tab, context)
        shoot(tab, "training_stop_without_effect")
    tab.reload()
    tab.get_by_text("Training: step").or_(stopped).first.wait_for(timeout=60_000)
    try:
        click_until(tab.locator(".st-key-tr_stop button"), stopped)
    except PlaywrightTimeout:
        pytest.fail(f"the owner's tab did not stop the run: {first_try}; reloaded: {why_no_control(tab, context)}")


def test_tabs_of_one_browser_are_one_owner_and_another_browser_only_watches(server, page, shoot):
    """The browser's id lives in a cookie the app sets: a second tab of the same browser (context) controls the run
    and cannot start a second one; another browser (context) opening the run's link gets a read-only view."""
    browser = page.context.browser
    mine = browser.new_context(viewport={"width": 1400, "height": 1800})
    first_tab = mine.new_page()
    first_tab.set_default_timeout(120_000)
    run_id = start_tiny_run(first_tab, server)
    assert any(cookie["name"] == "attention_lab_browser" for cookie in mine.cookies())

    second_tab = mine.new_page()
    second_tab.set_default_timeout(120_000)
    second_tab.goto(f"{server}/live_training?tr_d=16&tr_batch=8")
    second_tab.locator(".st-key-tr_start button").first.wait_for()
    wait_idle(second_tab)
    assert second_tab.locator(".st-key-tr_start button").first.is_disabled()  # one run per browser, in any tab
    second_tab.goto(f"{server}/live_training?run={run_id}")
    second_tab.get_by_text("Training: step").first.wait_for(timeout=60_000)
    assert second_tab.locator(".st-key-tr_stop button").count() == 1 and not second_tab.get_by_text("Read-only").count()
    first_tab.close()  # the run's starter is gone: the other tab still controls it (and one tab fewer polls)

    other = browser.new_context(viewport={"width": 1400, "height": 1800})
    stranger = other.new_page()
    stranger.set_default_timeout(120_000)
    stranger.goto(f"{server}/live_training?run={run_id}")
    stranger.get_by_text("Read-only").first.wait_for()
    stranger.get_by_text("Training: step").first.wait_for(timeout=60_000)  # the polled panel, drawn
    stranger.locator(".st-key-tr_start button").first.wait_for(state="attached")  # in the folded set-up expander
    assert stranger.locator(".st-key-tr_stop button").count() == 0
    assert not stranger.locator(".st-key-tr_start button").first.is_disabled()  # it may start a run of its own
    shoot(stranger, "training_read_only")

    # a reload: a fresh session of the same browser (its cookie) still owns the run (the tab left in the background
    # while the stranger's window was driven sometimes lost its polled panel here)
    second_tab.bring_to_front()
    second_tab.reload()
    second_tab.get_by_text("Training: step").first.wait_for(timeout=60_000)
    stop_as_its_owner(second_tab, mine, shoot)
    stranger.reload()
    stranger.get_by_text("Stopped: step").first.wait_for(timeout=60_000)
    wait_idle(stranger)
    assert stranger.locator(".st-key-tr_save button").count() == 0  # and it cannot save it
    other.close()
    mine.close()
