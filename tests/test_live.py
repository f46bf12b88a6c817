"""The live-training worker without Streamlit (core/training/live/): schedules and step statistics of core/training/train.py, a run
started, watched, stopped, bounded, saved atomically into the user directory and loaded back like a bundled model;
the figures of a run draw its own numbers."""

from __future__ import annotations

import base64
import io
import math
import os
import sys
import threading
import time
import zipfile
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from torch.nn import functional as F

from core.data import algorithmic
from core.figures.training import gradient_norm_figure, lines_over_steps, running_mean, training_curves
from core.lessons.analysis import mirrored_score
from core.model import registry
from core.model.checkpoint import load_checkpoint
from core.model.config import ConfigError
from core.model.run import record_text, tokenizer
from core.model.transformer import Transformer
from core.training.live import runs, spec, worker
from core.training.live.runs import LiveRegistry, RunStateError, ServerBusyError, SessionBusyError
from core.training.live.spec import RunSpec
from core.training.live.worker import record_probe, snapshot_steps
from core.training.tasks import IGNORE, Batch
from core.training.train import (Preset, batches, gradient_norms, loss_of, noam_peak, noam_rate, presets,
                                 scheduled_rate, text_config, train_step)

TINY = dict(d_model=16, n_heads=2, n_layers=2, batch_size=8)


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(registry.USER_DIR_ENV, str(tmp_path / "runs"))
    return tmp_path / "runs"


def finished(spec: RunSpec, owner: str = "test") -> runs.LiveRun:
    run = LiveRegistry(max_running=1).start(spec, owner)
    assert run.join(timeout=120), "the run did not end"
    return run


@pytest.fixture(scope="module")
def reversal_run() -> runs.LiveRun:
    return finished(RunSpec(steps=24, **TINY))


# ---------------------------------------------------------------------------------------------------------
# core/training/train.py: schedules, loss, step statistics
# ---------------------------------------------------------------------------------------------------------

def _preset(**changes) -> Preset:
    return Preset("t", "reversal", text_config(tokenizer().vocab_size, d_model=16, n_heads=2, n_layers=2, d_mlp=32,
                                                max_len=32), "", **{"steps": 400, **changes})


def test_noam_schedule_is_the_seed_formula_at_the_seed_peak():
    d, w = 16, 40
    preset = _preset(schedule="noam", warmup=w, learning_rate=noam_peak(d, w))
    for step in range(400):
        s = step + 1
        assert scheduled_rate(step, preset) == pytest.approx(d ** -0.5 * min(s ** -0.5, s * w ** -1.5), rel=1e-12)
    rates = [noam_rate(step, preset) for step in range(400)]
    assert int(np.argmax(rates)) == w - 1  # the peak is at s = w
    no_warmup = _preset(schedule="noam", warmup=0, learning_rate=1e-3)
    assert scheduled_rate(0, no_warmup) == 1e-3 and scheduled_rate(99, no_warmup) == pytest.approx(1e-4)


def test_constant_and_cosine_schedules():
    constant = _preset(schedule="constant", warmup=10, learning_rate=2e-3)
    assert [scheduled_rate(s, constant) for s in (0, 4, 9, 10, 399)] == pytest.approx([2e-4, 1e-3, 2e-3, 2e-3, 2e-3])
    assert scheduled_rate(0, _preset(schedule="constant", warmup=0, learning_rate=2e-3)) == 2e-3
    cosine = _preset(warmup=10, learning_rate=2e-3)
    assert scheduled_rate(9, cosine) == pytest.approx(2e-3) and scheduled_rate(399, cosine) == pytest.approx(
        2e-4, rel=1e-3)


@pytest.mark.parametrize("changes, message", [
    (dict(schedule="linear"), "schedule"), (dict(clip=-1.0), "clipping"), (dict(label_smoothing=1.0), "smoothing"),
    (dict(warmup=-1), "warm-up"), (dict(learning_rate=0.0), "learning rate")])
def test_preset_options_are_checked(changes, message):
    with pytest.raises(ConfigError, match=message):
        _preset(**changes)


def test_label_smoothing_is_the_mixture_of_one_hot_and_uniform_targets():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    targets = torch.tensor([[1, IGNORE, 4], [0, 6, IGNORE]])
    batch = Batch(torch.zeros(2, 3, dtype=torch.long), targets)
    log_p = F.log_softmax(logits, -1)[targets != IGNORE]  # [4 counted positions, 7]
    right = -log_p.gather(1, targets[targets != IGNORE][:, None]).squeeze(1)
    uniform = -log_p.mean(1)
    expected = ((1 - 0.2) * right + 0.2 * uniform).mean()
    torch.testing.assert_close(loss_of(logits, batch, 0.2), expected)
    torch.testing.assert_close(loss_of(logits, batch), right.mean())


def _one_step(clip: float):
    preset = _preset(clip=clip, learning_rate=1e-3, warmup=0)
    torch.manual_seed(0)
    model = Transformer(preset.config)
    batch = next(batches(preset, tokenizer(), 0, worker.shared_pool("reversal", 5000)))
    optimizer = torch.optim.AdamW(model.parameters())
    model.train()
    return model, train_step(model, optimizer, batch, 0, preset)


def test_per_layer_gradient_norms_make_up_the_global_norm_and_clipping_bounds_it():
    model, stats = _one_step(clip=1e-3)
    assert list(stats.grad_norms) == ["embedding", "blocks.0", "blocks.1", "head"]
    total = math.sqrt(sum(value ** 2 for value in stats.grad_norms.values()))
    assert total == pytest.approx(stats.grad_norm, rel=1e-5) and stats.grad_norm > 1e-3
    clipped = math.sqrt(sum(value ** 2 for value in gradient_norms(model).values()))  # the gradient Adam used
    assert clipped == pytest.approx(1e-3, rel=1e-4)
    assert 0.0 <= stats.accuracy <= 1.0
    model, stats = _one_step(clip=0.0)  # no clipping: the gradient is left as it was
    assert math.sqrt(sum(v ** 2 for v in gradient_norms(model).values())) == pytest.approx(stats.grad_norm, rel=1e-5)


# ---------------------------------------------------------------------------------------------------------
# RunSpec
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    (dict(task="poetry"), "task"), (dict(mask="none"), "masks"), (dict(task="shapes", mask="none", pos_encoding="rope"),
                                                                   "position encodings"),
    (dict(n_layers=7), "n_layers"), (dict(d_model=24, n_heads=8, pos_encoding="rope"), "RoPE"),
    (dict(d_model=30, n_heads=4), "divisible"), (dict(dropout=1.0), "dropout"), (dict(schedule="warm"), "schedule")])
def test_run_spec_refuses_what_cannot_train(changes, message):
    with pytest.raises(ConfigError, match=message):
        RunSpec(**changes)


def test_every_recipe_is_a_valid_spec():
    for name, changes in spec.RECIPES.items():
        run_spec = RunSpec(**changes)
        assert run_spec.describe(), name


# ---------------------------------------------------------------------------------------------------------
# A run: progress, snapshots, threads
# ---------------------------------------------------------------------------------------------------------

def test_a_run_trains_and_keeps_every_step_and_its_snapshots(reversal_run):
    view = reversal_run.view()
    assert view.status == "finished" and not view.alive and view.steps_done == 24 and view.progress == 1.0
    assert list(view.history["step"]) == list(range(1, 25))
    assert all(len(values) == 24 for values in (*view.history.values(), *view.grad_norms.values()))
    assert list(view.grad_norms) == ["embedding", "blocks.0", "blocks.1", "head"]
    assert [s.step for s in view.snapshots] == [0, *sorted(snapshot_steps(24))]
    assert view.history["loss"][-5:].mean() < view.history["loss"][:5].mean()
    assert view.threads == 1 and view.steps_per_second > 0
    n = len(view.tokens)
    for snapshot in view.snapshots:
        assert snapshot.patterns.shape == (2, 2, n, n)
        np.testing.assert_allclose(snapshot.patterns.sum(-1), 1.0, atol=1e-5)
        assert np.all(snapshot.patterns[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0)  # causal
        np.testing.assert_array_equal(snapshot.masked, np.triu(np.ones((n, n), dtype=bool), 1))  # drawn grey
        expected = [[mirrored_score(snapshot.patterns[l, h], worker.PROBE_LENGTH) for h in range(2)] for l in range(2)]
        np.testing.assert_allclose(snapshot.scores, expected)
    assert view.snapshots[0].patterns.tolist() != view.snapshots[-1].patterns.tolist()  # the heads changed


def test_a_run_started_while_a_page_script_is_main_never_runs_that_script(tmp_path, monkeypatch):
    """Streamlit makes the page it ran last sys.modules["__main__"]; multiprocessing would import that file first in
    the training process (a page that cannot run bare then killed every run). The run must not see it."""
    page = tmp_path / "page_that_breaks.py"
    page.write_text("raise SystemExit('a page script ran in the training process')\n")
    fake_main = type(sys)("__main__")
    fake_main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    view = finished(RunSpec(steps=3, **TINY)).view()
    assert view.status == "finished", view.message
    assert sys.modules["__main__"] is fake_main  # put back for the server


def test_the_run_leaves_other_threads_torch_thread_count_alone(reversal_run):
    before = torch.get_num_threads()
    finished(RunSpec(steps=2, **TINY))
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert torch.get_num_threads() == before and seen == [before]


def test_stop_ends_the_run_after_the_step_under_way_with_a_last_snapshot():
    run = LiveRegistry().start(RunSpec(steps=20000, **TINY), "stopper")
    for _ in range(600):
        if run.view().steps_done >= 3:
            break
        run.join(0.1)
    run.stop("stopper")
    assert run.join(timeout=60)
    view = run.view()
    assert view.status == "stopped" and 3 <= view.steps_done < 20000
    assert view.snapshots[-1].step == view.steps_done
    assert list(view.history["step"]) == list(range(1, view.steps_done + 1))  # the steps trained, not the 20000
    assert all(len(values) == view.steps_done and np.isfinite(values).all()
               for values in (*view.history.values(), *view.grad_norms.values()))


def test_one_run_per_owner_and_a_bounded_number_per_server():
    runs = LiveRegistry(max_running=1, max_kept=2)
    first = runs.start(RunSpec(steps=20000, **TINY), "a")
    try:
        with pytest.raises(SessionBusyError, match="already training"):
            runs.start(RunSpec(**TINY), "a")
        with pytest.raises(ServerBusyError, match="server is busy"):
            runs.start(RunSpec(**TINY), "b")
        assert runs.running() == 1 and runs.runs_of("a") == [first] and runs.get(first.run_id) is first
    finally:
        first.stop("a")
        assert first.join(timeout=60)
    second = runs.start(RunSpec(steps=2, **TINY), "b")
    assert second.join(timeout=60)
    third = runs.start(RunSpec(steps=2, **TINY), "b")  # max_kept=2: the oldest ended run is dropped
    assert third.join(timeout=60)
    assert runs.get(first.run_id) is None and runs.runs_of("b") == [second, third]


def test_a_failing_run_reports_why_without_raising(monkeypatch):
    """train_run, what the training process runs, sends a failure as the run's end."""
    def broken(task, size):
        raise OSError("disk on fire")
    monkeypatch.setattr(worker, "shared_pool", broken)
    monkeypatch.setattr(worker, "lower_priority", lambda: worker.Priority(None, False))  # keeps its priority
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # and its threads
    sent = []
    worker.train_run(RunSpec(steps=2, **TINY), threading.Event(), SimpleNamespace(value=time.monotonic()), 60,
                   sent.append)
    assert isinstance(sent[0], worker.Started) and isinstance(sent[-1], worker.Ended)
    assert sent[-1].status == "failed" and "disk on fire" in sent[-1].message and sent[-1].weights is None


def test_a_training_process_that_dies_fails_its_run():
    run = started("owner")
    while run.view().status == "starting":
        run.join(0.05)
    run._process.kill()  # what the operating system does to a process out of memory
    assert run.join(timeout=30)
    view = run.view()
    assert view.status == "failed" and "ended unexpectedly" in view.message
    with pytest.raises(runs.RunStateError):
        run.save("dead", "owner")


def test_an_image_run_snapshots_the_cls_token_and_every_patch():
    spec = RunSpec(task="shapes", mask="none", steps=2, **TINY)
    n = spec.config().n_patches + 1  # 4 x 4 patches of 8 x 8 pixels, and CLS
    view = finished(spec).view()
    assert view.status == "finished" and view.tokens[0] == "CLS" and len(view.tokens) == n == 17
    assert view.snapshots[-1].patterns.shape == (2, 2, n, n) and view.snapshots[-1].scores is None
    np.testing.assert_allclose(view.snapshots[-1].patterns.sum(-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# Saving and loading back
# ---------------------------------------------------------------------------------------------------------

def test_a_saved_run_loads_back_like_a_bundled_model(reversal_run, user_dir):
    path = reversal_run.save("tiny-reversal", "test", reserved=["lm-rope"])
    assert path == user_dir / "tiny-reversal" / "tiny-reversal.json"
    assert sorted(p.name for p in user_dir.iterdir()) == ["tiny-reversal"]  # no temporary folder left
    assert reversal_run.view().saved_as == "tiny-reversal"
    model, card = load_checkpoint(registry.card_path("tiny-reversal", user_dir / "no-bundled-models-here"))
    assert registry.is_user_run(card) and card.task == "reversal" and card.training["steps_done"] == 24
    assert [c.name for c in registry.user_cards()] == ["tiny-reversal"]
    # the recorder reads the loaded model: its patterns are those of the run's last snapshot
    recording = record_text(model, worker.probe_text("reversal"))
    np.testing.assert_allclose(recording.patterns(), reversal_run.view().snapshots[-1].patterns, atol=1e-6)
    np.testing.assert_allclose(record_probe(model, "reversal").patterns(), recording.patterns())
    with zipfile.ZipFile(io.BytesIO(runs.archive(path))) as archive:
        assert sorted(archive.namelist()) == ["tiny-reversal/tiny-reversal.json",
                                              "tiny-reversal/tiny-reversal.safetensors"]
        assert archive.read("tiny-reversal/tiny-reversal.json") == path.read_bytes()


@pytest.mark.parametrize("name, reserved, message", [
    ("tiny-reversal", (), "already called"), ("lm-rope", ("lm-rope",), "bundled"), ("../escape", (), "name"),
    ("Upper", (), "name"), ("", (), "name")])
def test_saving_refuses_taken_and_bad_names(name, reserved, message):
    run = finished(RunSpec(steps=2, **TINY))
    if message == "already called":
        finished(RunSpec(steps=2, **TINY)).save(name, "test")
    with pytest.raises(ValueError, match=message):
        run.save(name, "test", reserved=reserved)
    assert run.view().saved_as is None


def test_a_run_still_training_cannot_be_saved():
    run = LiveRegistry().start(RunSpec(steps=20000, **TINY), "saver")
    try:
        with pytest.raises(RunStateError, match="finished or stopped"):
            run.save("too-early", "saver")
    finally:
        run.stop("saver")
        assert run.join(timeout=60)
    run.save("after-stopping", "saver")
    assert [c.name for c in registry.user_cards()] == ["after-stopping"]


# ---------------------------------------------------------------------------------------------------------
# A server one class can share (issue 15): ownership, saving once, no server paths, idle runs, budgets, quotas
# ---------------------------------------------------------------------------------------------------------

def started(owner: str = "owner", **registry_options) -> runs.LiveRun:
    """A long run under way (at least one step done)."""
    run = LiveRegistry(**registry_options).start(RunSpec(steps=20000, **TINY), owner)
    for _ in range(600):
        if run.view().steps_done >= 1 or not run.view().alive:
            break
        run.watch(owner)  # its page shows it while it starts
        run.join(0.1)
    return run


def test_only_the_browser_that_started_a_run_may_stop_or_save_it():
    run = started("owner")
    try:
        for stranger in ("someone-else", "", None):
            with pytest.raises(runs.NotOwnerError, match="only the browser that started this run can stop it"):
                run.stop(stranger)
        run.join(0.5)
        assert run.view().alive  # a stranger's stop did nothing
    finally:
        run.stop("owner")
        assert run.join(timeout=60)
    with pytest.raises(runs.NotOwnerError, match="save"):
        run.save("not-mine", "someone-else")
    assert run.view().saved_as is None and not registry.user_dir().joinpath("not-mine").exists()
    run.save("mine", "owner")
    assert run.view().saved_as == "mine"


def test_a_run_is_saved_once(user_dir):
    run = finished(RunSpec(steps=2, **TINY))
    run.save("first", "test")
    with pytest.raises(RunStateError, match="already saved, as 'first'"):
        run.save("second", "test")
    assert sorted(path.name for path in user_dir.iterdir()) == ["first"]


def test_two_saves_at_once_save_once(user_dir):
    run = finished(RunSpec(steps=2, **TINY))
    outcomes = []

    def save(name):
        try:
            run.save(name, "test")
            outcomes.append("saved")
        except RunStateError:
            outcomes.append("refused")
    threads = [threading.Thread(target=save, args=(f"race-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused"] * 3 + ["saved"]
    assert len(list(user_dir.iterdir())) == 1


def test_save_messages_name_the_run_never_a_server_folder(user_dir, monkeypatch):
    run = finished(RunSpec(steps=2, **TINY))

    def taken_meanwhile(model, card, folder):  # another session saves the same name while this one writes
        for written in (user_dir / card.name, folder):
            written.mkdir(parents=True)
            (written / f"{card.name}.json").write_text("{}")
    monkeypatch.setattr(runs, "save_checkpoint", taken_meanwhile)
    with pytest.raises(ValueError) as refused:
        run.save("raced", "test")
    assert "'raced'" in str(refused.value) and "just before yours" in str(refused.value)
    assert str(user_dir) not in str(refused.value) and "/" not in str(refused.value)
    assert not [path for path in user_dir.iterdir() if path.name.startswith(".")]  # no temporary folder left


def test_a_run_no_page_watches_stops_and_is_kept():
    run = started("owner", idle_seconds=0.5)
    assert run.join(timeout=60), "the unwatched run kept training"
    view = run.view()
    assert view.status == "stopped" and "no page had shown it for 0.5 s" in view.message
    assert view.snapshots[-1].step == view.steps_done
    run.save("kept", "owner")


def test_a_watched_run_keeps_training():
    run = started("owner", idle_seconds=3.0)  # a busy machine's pause between two watches stays well under it
    try:
        for _ in range(90):  # 9 s: three times the idle time
            run.watch("owner")
            run.join(0.1)
        assert run.view().alive
    finally:
        run.stop("owner")
        assert run.join(timeout=60)


def watch_until_it_stops(run, watcher: str) -> None:
    """`watcher`'s page shows the run, as the page's poll would, until the run ends (at most a minute)."""
    for _ in range(600):
        run.watch(watcher)
        if run.join(0.1):
            return


def test_another_browser_watching_a_run_keeps_nothing_alive():
    """A ?run= link watched by others (issue 36, finding 5): only the owner's page counts as watching."""
    run = started("owner", idle_seconds=0.5)
    watch_until_it_stops(run, "someone-else")
    view = run.view()
    assert view.status == "stopped" and "no page had shown it" in view.message


def test_a_run_stops_after_its_wall_time_whatever_its_steps():
    run = started("owner", max_seconds=1.0)
    watch_until_it_stops(run, "owner")
    view = run.view()
    assert view.status == "stopped" and "a run trains for at most" in view.message and view.steps_done < 20000
    assert view.seconds < 30  # stopped near 1 s, not after its 20,000 steps
    assert view.snapshots[-1].step == view.steps_done
    run.save("timed-out", "owner")


def test_a_run_is_capped_to_minutes_by_its_model_size():
    largest = dict(task="grammar-lm", n_layers=6, n_heads=8, d_model=128, batch_size=128)
    with pytest.raises(ConfigError, match="at most .* steps"):
        RunSpec(steps=20000, **largest)  # the run: 8 to 18 hours
    cap = spec.max_steps("grammar-lm", 6, 128, 128)
    assert RunSpec(steps=cap, **largest).steps == cap
    with pytest.raises(ConfigError):
        RunSpec(steps=cap + 1, **largest)
    assert cap * spec.step_work("grammar-lm", 6, 128, 128) <= spec.MAX_WORK
    # the default trains about 35 steps/s alone (RunSpec's docstring): the budget is minutes of it
    default = RunSpec()
    minutes = spec.MAX_WORK / spec.step_work(default.task, default.n_layers, default.d_model,
                                             default.batch_size) / 35 / 60
    assert 1 <= minutes <= 10


def test_the_default_recipe_learns_its_task_within_its_run():
    """The page's first demo ends with "Learned the task": the verdict result_note draws from the mean batch accuracy
    of the last 25 steps, here on the run the page's own worker trains (seed 0: learned after about 630 of its 1000
    steps; seeds 1 and 2 about 400: core/training/live/spec.py, DEFAULT_RECIPE). The tiny preset alone, learned
    positions, ended "partly" (0.50)."""
    assert next(iter(spec.RECIPES)) == spec.DEFAULT_RECIPE  # the page's first recipe and its widgets' defaults
    default = RunSpec(**spec.RECIPES[spec.DEFAULT_RECIPE])
    run = LiveRegistry(max_running=1, idle_seconds=math.inf).start(default, "test")  # as if a page watched it
    assert run.join(timeout=300), "the run did not end"
    view = run.view()
    assert view.status == "finished" and view.steps_done == default.steps
    assert spec.accuracy_guide("reversal").verdict(float(np.mean(view.history["accuracy"][-25:]))) == "learned"


def test_every_recipe_the_page_offers_fits_the_cap():
    for name, fields in spec.RECIPES.items():
        run_spec = RunSpec(**fields)  # ConfigError if a recipe trained more steps than its model may
        assert run_spec.steps <= run_spec.max_steps(), name


def test_training_runs_in_a_nicer_process_than_the_server(monkeypatch):
    """A process of its own (not a thread holding the server's interpreter lock), at a lower priority: nicer, and
    on Linux SCHED_IDLE, which gives way at once to a page's thread. (The other tests' runs keep the test's priority:
    conftest.py sets ATTENTION_LAB_TRAINING_PRIORITY=normal.)"""
    monkeypatch.delenv(worker.PRIORITY_VARIABLE)
    run = finished(RunSpec(steps=2, **TINY))
    assert run._process.pid != os.getpid()
    assert run.priority.niceness is not None and run.priority.niceness > os.getpriority(os.PRIO_PROCESS, 0)
    assert run.priority.idle == sys.platform.startswith("linux") and os.sched_getscheduler(0) != os.SCHED_IDLE
    assert run.view().threads == 1


def test_a_run_may_keep_the_servers_priority(monkeypatch):
    """ATTENTION_LAB_TRAINING_PRIORITY=normal: the run trains at the server's niceness, not SCHED_IDLE."""
    monkeypatch.setenv(worker.PRIORITY_VARIABLE, "normal")
    run = finished(RunSpec(steps=2, **TINY))
    assert run.priority == worker.Priority(os.getpriority(os.PRIO_PROCESS, 0), False)


def test_saved_runs_have_a_quota_per_browser_and_per_server(monkeypatch):
    monkeypatch.setattr(runs, "MAX_SAVED_PER_BROWSER", 2)
    monkeypatch.setattr(runs, "MAX_SAVED_RUNS", 3)
    for i in range(2):
        finished(RunSpec(steps=2, **TINY), "alice").save(f"alice-{i}", "alice")
    with pytest.raises(runs.QuotaError, match="this browser has saved 2 runs"):
        finished(RunSpec(steps=2, **TINY), "alice").save("alice-2", "alice")
    finished(RunSpec(steps=2, **TINY), "bob").save("bob-0", "bob")  # another browser still may
    with pytest.raises(runs.QuotaError, match="the server keeps 3 saved runs"):
        finished(RunSpec(steps=2, **TINY), "carol").save("carol-0", "carol")
    usage = runs.saved_usage("alice")
    assert (usage.runs, usage.runs_of_browser) == (3, 2) and usage.bytes > usage.bytes_of_browser > 0


def test_saved_runs_have_a_quota_in_bytes(monkeypatch):
    run = finished(RunSpec(steps=2, **TINY), "alice")
    run.save("alice-0", "alice")
    monkeypatch.setattr(runs, "MAX_SAVED_BYTES_PER_BROWSER", registry.run_bytes("alice-0"))
    with pytest.raises(runs.QuotaError, match="MB"):
        finished(RunSpec(steps=2, **TINY), "alice").save("alice-1", "alice")
    monkeypatch.setattr(runs, "MAX_SAVED_BYTES", registry.run_bytes("alice-0"))
    with pytest.raises(runs.QuotaError, match="the server keeps 1 saved runs"):
        finished(RunSpec(steps=2, **TINY), "bob").save("bob-0", "bob")


def test_saved_cards_are_read_once_and_again_when_a_run_is_saved(monkeypatch):
    finished(RunSpec(steps=2, **TINY)).save("one", "test")
    reads = []
    read_card = registry.read_card
    monkeypatch.setattr(registry, "read_card", lambda path: reads.append(path.name) or read_card(path))
    registry.forget_user_cards()
    assert [c.name for c in registry.user_cards()] == ["one"] and reads == ["one.json"]
    for _ in range(5):  # renders
        assert [c.name for c in registry.user_cards()] == ["one"]
    assert reads == ["one.json"]
    finished(RunSpec(steps=2, **TINY)).save("two", "test")
    assert [c.name for c in registry.user_cards()] == ["one", "two"]


def test_leftovers_of_killed_saves_are_removed_when_the_folder_is_first_read(user_dir):
    old, fresh = user_dir / ".killed.0123abcd.tmp", user_dir / ".under-way.4567cdef.tmp"
    for folder in (old, fresh):
        folder.mkdir(parents=True)
        (folder / "half.safetensors").write_bytes(b"0" * 10)
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    assert registry.user_cards() == []
    assert not old.exists() and fresh.exists()  # a save under way (maybe in another replica) is left alone


def test_half_written_runs_are_never_listed(user_dir):
    (user_dir / ".x.1234.tmp").mkdir(parents=True)
    (user_dir / "no-weights").mkdir()
    (user_dir / "no-weights" / "no-weights.json").write_text("{}")
    (user_dir / "broken").mkdir()
    (user_dir / "broken" / "broken.json").write_text("not json")
    (user_dir / "broken" / "broken.safetensors").write_bytes(b"")
    assert registry.user_cards() == []
    with pytest.raises(registry.UnknownModelError):
        registry.card_path("no-weights", user_dir)


def test_bundled_presets_are_untouched_by_the_new_options():
    preset = presets(tokenizer().vocab_size)["lm-rope"]
    assert (preset.schedule, preset.label_smoothing, preset.clip, preset.config.dropout) == ("cosine", 0.0, 1.0, 0.0)


# ---------------------------------------------------------------------------------------------------------
# Figures of a run (core/figures/training.py)
# ---------------------------------------------------------------------------------------------------------

def test_running_mean_is_the_trailing_window_mean():
    values = np.random.default_rng(0).normal(size=57)
    expected = [values[max(0, i - 9):i + 1].mean() for i in range(57)]
    np.testing.assert_allclose(running_mean(values, 10), expected)
    assert running_mean(np.array([]), 5).size == 0


PLOTLY_JS_DTYPES = ("i1", "u1", "i2", "u2", "i4", "u4", "f4", "f8")  # the typed arrays plotly.js reads


def decoded(array: dict) -> np.ndarray:
    """A trace's binary array ({dtype, bdata}: core.figures.attention.binary) as plotly.js reads it: plotly.py's
    validation takes any dict with these keys, so the dtype and the bytes are checked here."""
    assert set(array) == {"dtype", "bdata"} and array["dtype"] in PLOTLY_JS_DTYPES, array
    return np.frombuffer(base64.b64decode(array["bdata"], validate=True), np.dtype(array["dtype"]).newbyteorder("<"))


def assert_valid(figure: go.Figure) -> None:
    """Valid for plotly (lean figures are built unvalidated), with every trace's x and y readable and aligned."""
    go.Figure(figure.to_dict())  # raises on anything plotly would not accept
    for trace in figure.data:
        assert len(decoded(trace.x)) == len(decoded(trace.y)) > 0


def test_the_curves_draw_the_numbers_the_run_computed(reversal_run):
    view = reversal_run.view()
    other = {name: values * 2 for name, values in view.history.items()}
    fig = training_curves([("A", view.history), ("B", other)], clips=[1.0, 1.0])
    assert_valid(fig)
    raw = [trace for trace in fig.data if trace.name.endswith("(each step)")]
    assert [trace.name for trace in raw] == ["A (each step)"] * 3 + ["B (each step)"] * 3
    np.testing.assert_array_equal(decoded(raw[0].x), view.history["step"])
    np.testing.assert_array_equal(decoded(raw[0].y), view.history["loss"].astype(np.float32))
    np.testing.assert_array_equal(decoded(raw[2].y), view.history["grad_norm"].astype(np.float32))
    mean_loss = fig.data[1]  # the thick line over the raw loss
    assert (mean_loss.name, mean_loss.yaxis) == ("A", "y")
    np.testing.assert_allclose(decoded(mean_loss.y), running_mean(view.history["loss"], 25), rtol=1e-6)
    assert [shape.y0 for shape in fig.layout.shapes] == [1.0]  # one clipping line for the shared norm
    layers = gradient_norm_figure(view.history["step"], view.grad_norms)
    assert_valid(layers)
    assert [t.name for t in layers.data][::2] == [f"{g} (each step)" for g in view.grad_norms]
    for trace, values in zip(layers.data[::2], view.grad_norms.values()):
        np.testing.assert_array_equal(decoded(trace.y), values.astype(np.float32))


def test_long_runs_draw_each_stretch_lowest_and_highest_step_and_valid_figures():
    """Past MAX_POINTS steps a curve draws its first and last step and each stretch's extremes (so a spike shows),
    every point one the run computed, compactly (steps as 2-byte integers, values as float32); the figures, built
    from plain dicts for speed, are valid plotly figures."""
    from core.figures.training import MAX_POINTS, drawn_points
    rng = np.random.default_rng(0)
    values = rng.random(20000)
    values[:3] = 0.5, 0.0, 1.0  # the first step is neither the lowest nor the highest of its stretch
    values[12345] = 50.0  # one spike
    shown = drawn_points(values)
    assert len(shown) <= MAX_POINTS and shown[0] == 0 and shown[-1] == len(values) - 1 and 12345 in shown
    assert (np.diff(shown) > 0).all()
    assert values[shown].min() == values.min() and values[shown].max() == values.max()
    np.testing.assert_array_equal(drawn_points(values[:300]), np.arange(300))
    steps = np.arange(1, 20001)
    history = {"step": steps, "loss": values, "accuracy": values / 50, "learning_rate": np.full(20000, 1e-3),
               "grad_norm": values + 0.1}
    fig = training_curves([("A", history)], clips=[1.0])
    raw = [trace for trace in fig.data if trace.name.endswith("(each step)")][0]
    assert (raw.x["dtype"], raw.y["dtype"]) == ("u2", "f4")
    np.testing.assert_array_equal(decoded(raw.x), steps[shown])
    np.testing.assert_array_equal(decoded(raw.y), values[shown].astype(np.float32))
    layers = gradient_norm_figure(steps, {"embedding": values + 0.1})
    for figure in (fig, layers):
        assert_valid(figure)
        assert not figure.to_dict()["layout"]["template"]  # Streamlit themes it in the browser


def assert_ticks_written_in_full(axis) -> None:
    """Every tick label reads as its own value (no bare "5" standing for 0.5)."""
    assert axis.type == "log" and axis.ticktext
    for value, text in zip(axis.tickvals, axis.ticktext):
        assert float(text) == pytest.approx(value)


def test_log_axes_write_their_ticks_in_full_and_the_rate_axis_shows_the_rate():
    steps = np.arange(1, 201)
    history = {"step": steps, "loss": np.linspace(3, 1, 200), "accuracy": np.linspace(0.1, 0.9, 200),
               "learning_rate": np.full(200, 0.03), "grad_norm": np.geomspace(12, 0.15, 200)}
    fig = training_curves([("A", history)], clips=[1.0])
    assert_ticks_written_in_full(fig.layout.yaxis4)
    assert {"0.2", "0.5", "1", "2", "5", "10"} <= set(fig.layout.yaxis4.ticktext)
    assert fig.layout.yaxis3.range[0] == 0 and 0.03 < fig.layout.yaxis3.range[1] < 0.05  # the constant 0.03 shows
    layers = gradient_norm_figure(steps, {"embedding": np.geomspace(0.3, 0.01, 200), "head": np.full(200, 2.0)})
    assert_ticks_written_in_full(layers.layout.yaxis)
    assert {"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"} <= set(layers.layout.yaxis.ticktext)
    preview = lines_over_steps({"learning rate": (steps, np.full(200, 0.03))}, title="", y_title="rate",
                               from_zero=True)
    assert preview.layout.yaxis.range[0] == 0 and 0.03 < preview.layout.yaxis.range[1] < 0.05
    norms = lines_over_steps({"σ": ([0, 10], [0.4, 3.0])}, title="", y_title="σ", log=True)
    assert_ticks_written_in_full(norms.layout.yaxis)


def test_the_accuracy_guide_reads_a_run_by_its_task():
    reversal = spec.accuracy_guide("reversal")
    lengths = range(algorithmic.MIN_LENGTH, algorithmic.MAX_LENGTH + 1)
    assert reversal.guess == pytest.approx(np.mean([1 / n for n in lengths]))  # copying a random input symbol
    assert [reversal.verdict(a) for a in (0.1, 0.5, 0.99)] == ["not yet", "partly", "learned"]
    assert spec.accuracy_guide("shapes").guess == pytest.approx(1 / 7)  # six shapes and "nothing"
    language = spec.accuracy_guide("grammar-lm")
    assert language.verdict(0.4) == "" and "far below 1" in language.text


# ---------------------------------------------------------------------------------------------------------
# Saved runs a class shares (issue 36, finding 6): own runs in own menus, the teacher shares and deletes
# ---------------------------------------------------------------------------------------------------------

def test_a_browser_sees_its_own_runs_and_those_the_teacher_shares(capsys):
    finished(RunSpec(steps=2, **TINY), owner="alice").save("alices", "alice")
    finished(RunSpec(steps=2, **TINY), owner="bob").save("bobs", "bob")
    names = lambda owner: [card.name for card in runs.visible_runs(registry.user_cards(), owner)]  # noqa: E731
    assert names("alice") == ["alices"] and names("bob") == ["bobs"] and names("mallory") == []
    assert runs.main(["--share", "alices"]) == 0
    assert names("bob") == ["alices", "bobs"] and names("mallory") == ["alices"]
    runs.main(["--list"])
    assert "alices\t" in capsys.readouterr().out
    assert runs.main(["--unshare", "alices"]) == 0
    assert names("mallory") == []


def test_only_its_browser_or_the_teacher_may_delete_a_saved_run(user_dir):
    finished(RunSpec(steps=2, **TINY), owner="alice").save("alices", "alice")
    finished(RunSpec(steps=2, **TINY), owner="alice").save("another", "alice")
    with pytest.raises(runs.NotOwnerError, match="only the browser that started this run can delete it"):
        runs.delete_saved_run("alices", "mallory")
    with pytest.raises(ValueError, match="no saved run called 'nothing'"):
        runs.delete_saved_run("nothing", "alice")
    runs.delete_saved_run("alices", "alice")
    assert [card.name for card in registry.user_cards()] == ["another"]
    assert runs.saved_usage("alice").runs_of_browser == 1  # the quota counts what is left
    runs.registry.set_shared("another", True)
    assert runs.main(["--delete", "another"]) == 0  # the teacher, on the server
    assert registry.user_cards() == [] and registry.shared_run_names() == set()
    assert not [path.name for path in user_dir.iterdir() if path.name != registry.SHARED_FILE]
