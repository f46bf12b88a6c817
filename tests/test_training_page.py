"""AppTest of the live-training page (pages/live_training.py): every setting, a short run started, watched to the end,
saved into a temporary user directory and listed with the other models, a stopped run, the comparison, a reload
from the URL, and the busy server's message. Runs are tiny (D=16, a few dozen steps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import PAGES, charts, figure, ok, read_models_from
from streamlit.testing.v1 import AppTest
from tiny_models import write_tiny_models
from vision_models import write_tiny_vits

from core.model import registry
from core.training.live import runs
from core.training.live import spec as live_spec
from pages.ui.models import model_label

PAGE = str(PAGES / "live_training.py")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    """Tiny random bundled models: text ones and ViTs (the image page lists saved runs beside them)."""
    return write_tiny_vits(write_tiny_models(tmp_path_factory.mktemp("models")))


@pytest.fixture
def user_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(registry.USER_DIR_ENV, str(tmp_path / "runs"))
    return tmp_path / "runs"


@pytest.fixture(autouse=True)
def stop_runs():
    """No run outlives its test."""
    yield
    for run in runs.RUNS.runs():
        run.stop(run.owner)
        run.join(timeout=60)


@pytest.fixture
def new_page(app, user_dir, models_dir, monkeypatch):
    """new_page(browser=None, **url params): the live-training page after its first run, checked for errors; a
    new session of a new browser, or of `browser` (its id, as its cookie would give it)."""
    def start(browser: str | None = None, **query: str) -> AppTest:
        if browser is None:
            at = app(PAGE, **query)
        else:
            read_models_from(monkeypatch, models_dir)
            at = AppTest.from_file(PAGE, default_timeout=60)
            at.query_params.update(query)
            at.session_state["browser_id"] = browser
            at.run()
        ok(at)
        return at
    return start


def tiny(at: AppTest, steps: int = 30) -> None:
    at.number_input(key="tr_steps").set_value(steps)
    at.select_slider(key="tr_d").set_value(16)
    at.select_slider(key="tr_batch").set_value(8)


def start(at: AppTest) -> runs.LiveRun:
    at.button(key="tr_start").click().run()
    ok(at)
    run = runs.RUNS.get(at.session_state["live_run"])
    assert run is not None and at.query_params["run"] == run.run_id
    return run


def texts(at: AppTest) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "success", "info", "warning")
                    for e in at.get(kind))


def test_the_page_opens_with_the_tiny_preset_and_its_schedule(new_page):
    at = new_page()
    assert at.title[0].value == "Live training"
    assert at.selectbox(key="tr_task").value == "reversal" and at.select_slider(key="tr_d").value == 32
    # the first recipe's settings, the demo that learns its task (test_live.py): relative positions, 1000 steps
    assert at.selectbox(key="tr_recipe").value == live_spec.DEFAULT_RECIPE
    assert (at.selectbox(key="tr_pe").value, at.number_input(key="tr_steps").value) == ("relative", 1000)
    assert not at.button(key="tr_start").disabled
    assert charts(at), "no schedule preview"
    assert "Peak 0.003 at step 50" in texts(at)
    at.radio(key="tr_predict_warmup").set_value("fall more slowly, stall or jump up")
    at.button(key="tr_predict_warmup__reveal").click().run()
    ok(at)
    assert "You said **fall more slowly, stall or jump up**; this is measured on your own runs" in texts(at)


def test_every_setting_and_the_recipes(new_page):
    at = new_page()
    at.selectbox(key="tr_recipe").set_value("post-LN, no warm-up").run()
    assert at.segmented_control(key="tr_norm").value == "post" and at.number_input(key="tr_warmup").value == 0
    at.selectbox(key="tr_task").set_value("copy")
    at.number_input(key="tr_layers").set_value(3)
    at.select_slider(key="tr_heads").set_value(4)
    at.select_slider(key="tr_d").set_value(64)
    at.segmented_control(key="tr_norm").set_value("pre")
    at.selectbox(key="tr_pe").set_value("rope")
    at.selectbox(key="tr_mask").set_value("strided")
    at.slider(key="tr_dropout").set_value(0.1)
    at.select_slider(key="tr_lr").set_value(1e-3)
    at.slider(key="tr_smoothing").set_value(0.1)
    at.selectbox(key="tr_schedule").set_value("noam")
    at.number_input(key="tr_warmup").set_value(100)
    at.select_slider(key="tr_clip").set_value(0.0)
    at.number_input(key="tr_steps").set_value(400)
    at.select_slider(key="tr_batch").set_value(16)
    at.number_input(key="tr_seed").set_value(7)
    at.run()
    ok(at)
    assert "(D·w)^-0.5 = 0.0125 for D = 64, w = 100" in texts(at)  # 1/sqrt(6400)
    at.selectbox(key="tr_task").set_value("shapes").run()  # rope and a text mask do not apply: back to defaults
    ok(at)
    assert at.selectbox(key="tr_pe").value == "learned" and at.selectbox(key="tr_mask").value == "none"


def test_a_link_reproduces_the_settings(new_page):
    at = new_page(tr_task="copy", tr_schedule="noam", tr_lr="0.001", tr_norm="post", tr_clip="0.5", tr_heads="4")
    assert (at.selectbox(key="tr_task").value, at.selectbox(key="tr_schedule").value) == ("copy", "noam")
    assert (at.select_slider(key="tr_lr").value, at.select_slider(key="tr_clip").value) == (1e-3, 0.5)
    assert at.segmented_control(key="tr_norm").value == "post" and at.select_slider(key="tr_heads").value == 4


def test_a_short_run_trains_shows_its_curves_and_snapshots_and_saves(new_page, user_dir):
    at = new_page()
    tiny(at)
    at.run()
    run = start(at)
    assert at.button(key="tr_start").disabled  # one run at a time per session
    assert run.join(timeout=120) and run.view().status == "finished"
    at.run()
    ok(at)
    assert "Finished: step 30 of 30" in " ".join(p.proto.text for p in at.get("progress"))
    accuracy = float(np.mean(run.view().history["accuracy"][-25:]))  # 30 steps: near the guessing level
    verdict = "Not learned" if accuracy < 1.5 * live_spec.accuracy_guide("reversal").guess else "Partly learned"
    assert any(w.value.startswith(f"**{verdict}") and f"Batch accuracy **{accuracy:.2f}**" in w.value
               and "close to 1" in w.value for w in at.warning)
    assert len(charts(at)) >= 7  # curves, layers, head, all heads, TokenNorm, residual, schedule (the scores wait
    # for the pattern prompt's reveal)
    at.select_slider(key="tr_step").set_value(0)
    at.selectbox(key="tr_head").set_value("L1 H1")
    at.run()
    ok(at)
    at.radio(key="tr_predict_step").set_value("never")
    at.button(key="tr_predict_step__reveal").click().run()
    ok(at)
    assert "You said **never**; measured: in this run" in texts(at)  # 30 steps of a D=16 model: no mirrored head yet
    assert "**Right.**" in texts(at)
    at.text_input(key=f"tr_name_{run.run_id}").set_value("lm-rope")  # a bundled model's name is refused
    at.button(key="tr_save").click().run()
    assert [e.value for e in at.error] and "bundled" in at.error[0].value
    at.text_input(key=f"tr_name_{run.run_id}").set_value("class-run")
    at.button(key="tr_save").click().run()
    ok(at)
    assert "Saved as **class-run**" in texts(at) and at.get("download_button")
    assert (user_dir / "class-run" / "class-run.safetensors").is_file()
    mine = runs.visible_runs(registry.user_cards(), at.session_state["browser_id"])  # this browser's menus list it
    assert [card.name for card in mine] == ["class-run"] and model_label(mine[0]) == "class-run · your run"
    assert runs.visible_runs(registry.user_cards(), "another browser") == []
    assert "Your saved runs (1 of at most" in " ".join(e.label for e in at.expander)
    at.button(key="tr_delete_class-run").click().run()  # its browser deletes it
    ok(at)
    assert not (user_dir / "class-run").exists() and registry.user_cards() == []


def test_the_snapshots_show_masked_cells_grey_and_hatched_as_every_page_does(new_page):
    """A causal run's head and all-heads charts carry the masked cells (keys after the query), so they are drawn
    grey and hatched, not as white weights of 0."""
    at = new_page()
    tiny(at, steps=3)
    at.run()
    run = start(at)
    assert run.join(timeout=120) and run.view().status == "finished"
    at.run()
    ok(at)
    n = len(run.view().tokens)
    causal = np.triu(np.ones((n, n), dtype=bool), 1).astype(int).tolist()  # rows queries, columns keys
    shown = {key: figure(chart) for chart in charts(at) for key in ("tr_scrub_pattern", "tr_scrub_all_heads")
             if chart.proto.id.endswith(key)}
    assert shown["tr_scrub_pattern"]["arrays"]["masked"] == causal and shown["tr_scrub_pattern"]["hatch"]
    assert shown["tr_scrub_all_heads"]["arrays"]["masked"] == causal


def test_stop_compare_and_reload(new_page):
    at = new_page()
    tiny(at, steps=20000)
    at.run()
    first = start(at)
    at.button(key="tr_stop").click().run()
    assert first.view().status == "stopped"  # Stop waited for the run's end
    ok(at)  # and the click's own run shows it stopped, with the save box: no later poll needed
    assert "Stopped: step" in " ".join(p.proto.text for p in at.get("progress"))
    assert [b for b in at.button if b.key == "tr_save"] and "tr_stop" not in [b.key for b in at.button]
    tiny(at, steps=20)
    at.segmented_control(key="tr_norm").set_value("post")
    at.run()
    second = start(at)
    assert second.join(timeout=120)
    at.run()
    ok(at)
    assert at.selectbox(key="tr_a").options[0].startswith("#1") and len(at.selectbox(key="tr_b").options) == 2
    at.selectbox(key="tr_a").set_value(at.selectbox(key="tr_a").options[1])
    at.select_slider(key="tr_at").set_value(0)
    at.run()
    ok(at)
    reloaded = new_page(browser=second.owner, run=second.run_id)  # a reload or another tab: the run, in control
    assert "Finished: step 20 of 20" in " ".join(p.proto.text for p in reloaded.get("progress"))
    assert reloaded.session_state["live_owner"] == second.owner and reloaded.get("text_input")
    assert "Read-only" not in texts(reloaded)
    gone = new_page(run="0123456789ab")
    assert "no longer in this server's memory" in texts(gone)


def test_a_busy_server_says_so(new_page, monkeypatch):
    monkeypatch.setattr(runs.RUNS, "max_running", 0)
    at = new_page()
    tiny(at)
    at.button(key="tr_start").click().run()
    assert not at.exception
    assert "server is busy" in " ".join(w.value for w in at.warning)
    assert "live_run" not in at.session_state


@pytest.mark.parametrize("page, spec", [
    ("text_explorer.py", dict()),
    ("token_norm.py", dict(norm="post")),
    ("image_lab.py", dict(task="shapes", mask="none"))])
def test_a_saved_run_opens_in_the_other_pages_like_a_bundled_model(app, user_dir, page, spec):
    run = runs.LiveRegistry().start(live_spec.RunSpec(steps=3, d_model=16, batch_size=8, **spec), "saver")
    assert run.join(timeout=120)
    name = f"my-{page.removesuffix('.py')}"  # models are cached by name: one name per model, as saving ensures
    run.save(name, "saver")
    at = app(str(PAGES / page))  # another browser: the run is not in its menu until the teacher shares it
    assert f"{name} · your run" not in at.sidebar.selectbox(key="model").options
    registry.set_shared(name, True)
    at = app(str(PAGES / page))
    picker = at.sidebar.selectbox(key="model")
    assert picker.options[-1] == f"{name} · your run"
    picker.set_value(name).run()
    ok(at)
    assert at.get("plotly_chart") or at.get("vega_lite_chart") or at.get("bidi_component")  # the canvas heatmap


# --- a server one class can share (issue 15): ownership, one run per browser, the budget --------------------------

def test_a_shared_link_to_a_run_is_a_read_only_view(new_page):
    owner = new_page()
    tiny(owner, steps=20000)
    owner.run()
    run = start(owner)
    viewer = new_page(run=run.run_id)  # another browser opens the link
    assert viewer.session_state["live_owner"] != run.owner
    assert "Read-only" in texts(viewer) and "only it can stop or save it" in texts(viewer)
    assert not [b for b in viewer.button if b.key == "tr_stop"]  # no Stop for a stranger
    assert [b for b in owner.button if b.key == "tr_stop"]
    run.join(0.5)
    assert run.view().alive
    owner.button(key="tr_stop").click().run()
    assert run.join(timeout=60) and run.view().status == "stopped"
    viewer.run()
    ok(viewer)
    assert not [b for b in viewer.button if b.key == "tr_save"] and not viewer.get("text_input")  # no Save either
    owner.run()
    assert [b for b in owner.button if b.key == "tr_save"]


def test_two_tabs_of_one_browser_hold_one_run(new_page):
    first_tab = new_page(browser="b" * 32)
    tiny(first_tab, steps=20000)
    first_tab.run()
    run = start(first_tab)
    second_tab = new_page(browser="b" * 32)  # the same browser (its cookie), no run in this tab yet
    assert second_tab.button(key="tr_start").disabled
    assert "One run at a time per browser" in (second_tab.button(key="tr_start").help or "")
    other_browser = new_page(browser="c" * 32)
    assert not other_browser.button(key="tr_start").disabled
    run.stop(run.owner)


def test_the_page_says_the_step_cap_and_refuses_more(new_page):
    at = new_page()
    assert f"at most **{live_spec.RunSpec().max_steps():,} steps**" in texts(at) and "stops, and is kept" in texts(at)
    at.selectbox(key="tr_task").set_value("grammar-lm")
    at.number_input(key="tr_layers").set_value(6)
    at.select_slider(key="tr_d").set_value(128)
    at.select_slider(key="tr_batch").set_value(128)
    at.number_input(key="tr_steps").set_value(20000).run()
    assert not at.exception
    assert any("Can't train this" in e.value and "at most" in e.value for e in at.error)
    assert at.button(key="tr_start").disabled


def save_a_finished_run(at: AppTest, name: str) -> runs.LiveRun:
    """Train a tiny run on the page `at` to its end, then save it as `name` (the page's Save box)."""
    tiny(at, steps=5)
    at.run()
    run = start(at)
    assert run.join(timeout=120)
    at.run()
    at.text_input(key=f"tr_name_{run.run_id}").set_value(name)
    at.button(key="tr_save").click().run()
    assert not at.exception
    return run


def test_a_saved_run_says_its_name_and_no_server_folder(new_page, user_dir):
    at = new_page()
    run = save_a_finished_run(at, "named")
    assert str(user_dir) not in at.text_input(key=f"tr_name_{run.run_id}").help
    ok(at)
    saved = " ".join(message.value for message in at.success)
    assert "Saved as **named**" in saved and "/" not in saved and str(user_dir) not in texts(at)


def test_a_huge_run_id_in_a_link_is_named_short_once_and_leaves_the_url(new_page):
    """Issue 36, finding 9: a 200 KB ?run= was echoed whole, and every poll of the page sent it back."""
    at = new_page(run="x" * 200_000)
    note = " ".join(info.value for info in at.info)
    assert "x" * 200 in note and "x" * 201 not in note
    assert "run" not in at.query_params


def test_one_network_saves_a_bounded_number_of_runs_whatever_its_browser_ids(new_page, user_dir, monkeypatch):
    """Issue 36, finding 6: a script changing its browser id saved 300 runs in 321 s. Past SAVES_PER_ADDRESS an
    hour, a client address is refused with a message, and nothing is saved."""
    from pages.ui import browser
    browser._save_limiter.clear()
    monkeypatch.setattr(browser, "SAVES_PER_ADDRESS", 1)
    monkeypatch.setattr(browser, "client_address", lambda: "203.0.113.7")
    pages = [new_page(), new_page()]
    saved = [save_a_finished_run(at, name).view().saved_as for at, name in zip(pages, ("first", "second"))]
    assert saved == ["first", None]
    at = pages[1]
    assert any("this network has saved 1 run in the last 1 hour" in e.value for e in at.error)
    browser._save_limiter.clear()
