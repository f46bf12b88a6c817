"""Live training: train a tiny transformer on the CPU and watch it learn (seed 003 §4: Adam, the warm-up schedule,
gradient clipping, dropout, label smoothing; seed 004: post-normalisation needs a warm-up; seed 001 §5: training
grows unstable, clipping and decaying rates help).

The run trains in a background thread of the server (core/training/live/); this page holds only its id (in the session and
in the URL, so a reload finds it again) and polls it with a fragment while it trains. Every number shown is one the
run computed: per-step loss, accuracy, rate and gradient norms, and snapshots of the model's own recording of one
held-out example.

URL parameters (all widgets are bound): notation, presenter (sidebar); tr_recipe and the run's settings tr_task,
tr_layers, tr_heads, tr_d, tr_pe, tr_mask, tr_norm, tr_lr, tr_schedule, tr_warmup, tr_clip, tr_smoothing,
tr_dropout, tr_steps, tr_batch, tr_seed; run (the run watched); tr_step, tr_head (the snapshot viewer);
tr_a, tr_b, tr_at (the comparison); the predictions. (The name a run is saved under is not bound.)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.canvas import overview_spec  # noqa: E402
from core.figures.training import gradient_norm_figure, lines_over_steps, run_color, training_curves  # noqa: E402
from core.lessons.analysis import best_head  # noqa: E402
from core.lessons.predictions import final_loss, growth_step, loss_comparison  # noqa: E402
from core.model import registry  # noqa: E402
from core.model.config import ConfigError  # noqa: E402
from core.training.live.runs import (RUNS, LiveRun, NotOwnerError, QuotaError, RunStateError,  # noqa: E402
                                     ServerBusyError, SessionBusyError, archive)
from core.training.live.spec import (DEFAULT_RECIPE, RECIPES, TASK_LABELS, TASKS, RunSpec,  # noqa: E402
                                     accuracy_guide, encodings_for, masks_for, rate_curve)
from core.training.live.worker import PATTERN_THRESHOLD, RunView, Snapshot  # noqa: E402
from core.training.train import SCHEDULES, noam_peak  # noqa: E402
from pages.ui.browser import browser_id, save_refusal  # noqa: E402
from pages.ui.heatmap import head_chart, heatmap  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import models_dir  # noqa: E402
from pages.ui.presentation import chart  # noqa: E402
from pages.ui.saved_runs import my_saved_runs  # noqa: E402
from pages.ui.safety import literal  # noqa: E402
from pages.ui.widgets import BIND, notation_switch  # noqa: E402

POLL_SECONDS = 2.0  # each poll redraws the curves: a heavier page would slow the training thread
STOP_WAIT_SECONDS = 5.0  # how long Stop waits for the run to end (a last snapshot), to show it stopped at once
DEFAULT = RunSpec(**RECIPES[DEFAULT_RECIPE])  # the recipe picker's first
LR_CHOICES = (1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-2)
CLIP_CHOICES = (0.0, 0.25, 0.5, 1.0, 2.0, 5.0)
D_CHOICES = (16, 32, 64, 128)
HEAD_CHOICES = (1, 2, 4, 8)
BATCH_CHOICES = (8, 16, 32, 64, 128)
SCHEDULE_LABELS = {"cosine": "linear warm-up, then cosine decay to a tenth",
                   "noam": "seed 003's warm-up: linear, then decay as 1/√step",
                   "constant": "linear warm-up, then constant"}
KEYS = {"task": "tr_task", "n_layers": "tr_layers", "n_heads": "tr_heads", "d_model": "tr_d",  # RunSpec field -> key
        "pos_encoding": "tr_pe", "mask": "tr_mask", "norm": "tr_norm", "learning_rate": "tr_lr",
        "schedule": "tr_schedule", "warmup": "tr_warmup", "clip": "tr_clip", "label_smoothing": "tr_smoothing",
        "dropout": "tr_dropout", "steps": "tr_steps", "batch_size": "tr_batch", "seed": "tr_seed"}
WARMUP_OPTIONS = ["the same", "fall more slowly, stall or jump up", "fall faster"]  # the predictions
STEP_OPTIONS = ["within 100 steps", "after 100 to 500 steps", "after more than 500 steps", "never"]
STEP_BOUNDS = (100, 500)  # the steps STEP_OPTIONS split at
SETUP_OPEN = "tr_setup_open"  # session state: a "Set up" button asked for the set-up panel, open until a run starts
WAS_ALIVE = "tr_was_alive"  # session state: the run trained at the panel's last draw (its end redraws the page)
STATUS = {"starting": "Starting", "training": "Training", "finished": "Finished", "stopped": "Stopped",
          "diverged": "Diverged", "failed": "Failed"}


# ---------------------------------------------------------------------------------------------------------
# Which run this session watches
# ---------------------------------------------------------------------------------------------------------

RUN_ID = re.compile(r"[0-9a-f]{12}")  # a live run's id (core/training/live/runs.py: uuid4's first 12 hex digits)
ECHO_CHARS = 200  # the most of a link's malformed run id the page repeats


def watched_run() -> tuple[LiveRun | None, str | None]:
    """The session's run, or the one the URL names (after a reload, or a shared link): the run, and the id asked
    for. Watching a run gives no control of it: only the browser that started it (its owner) may stop or save it."""
    run_id = st.session_state.get("live_run") or st.query_params.get("run")
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        # not an id this server makes: out of the URL, so that no poll of the page sends it back, and named in the
        # page's note at most ECHO_CHARS long (a 200 KB link was echoed 25 times a run: issue 36)
        del st.query_params["run"]
        return None, run_id[:ECHO_CHARS] + ("…" if len(run_id) > ECHO_CHARS else "")
    run = RUNS.get(run_id)
    if run is not None:
        st.session_state["live_run"] = run.run_id
        st.query_params["run"] = run.run_id
    return run, run_id


def read_only_note() -> None:
    """Says that a run another browser started is shown read-only."""
    st.info("**Read-only:** another browser started this run, so only it can stop or save it; you watch its "
            "progress. Set up and start a run of your own below.", icon=":material/visibility:")


def run_label(index: int, view: RunView) -> str:
    spec = view.spec
    warmup = f"warm-up {spec.warmup}" if spec.warmup else "no warm-up"
    return f"#{index + 1} {spec.task} · {spec.norm}-LN · lr {spec.learning_rate:g} {spec.schedule}, {warmup}"


# ---------------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------------

def apply_recipe() -> None:
    """Set every setting to the chosen recipe's (runs before the widgets are drawn)."""
    spec = RunSpec(**RECIPES[st.session_state["tr_recipe"]])
    for name, key in KEYS.items():
        st.session_state[key] = getattr(spec, name)


def keep_valid(key: str, options: tuple, default) -> None:
    """A setting whose options changed (another task) falls back to the default instead of an invalid value."""
    if st.session_state.get(key, default) not in options:
        st.session_state[key] = default if default in options else options[0]


def settings() -> RunSpec | str:
    """The settings widgets: a RunSpec, or the message saying why these settings cannot be trained."""
    st.selectbox("Start from a recipe", list(RECIPES), key="tr_recipe", bind=BIND, on_change=apply_recipe,
                 help="Sets every control below; change any of them afterwards.")
    col_task, col_model, col_more = st.columns(3)
    with col_task:
        task = st.selectbox("Task", TASKS, index=TASKS.index(DEFAULT.task), key=KEYS["task"], bind=BIND)
        st.caption(TASK_LABELS[task])
        steps = int(st.number_input("Steps", 10, 20000, DEFAULT.steps, step=50, key=KEYS["steps"], bind=BIND))
        batch = st.select_slider("Batch size", BATCH_CHOICES, value=DEFAULT.batch_size, key=KEYS["batch_size"],
                                 bind=BIND)
        seed = int(st.number_input("Seed", 0, 9999, DEFAULT.seed, key=KEYS["seed"], bind=BIND,
                                   help="Initial weights and the order of the batches."))
    with col_model:
        layers = int(st.number_input("Layers M", 1, 6, DEFAULT.n_layers, key=KEYS["n_layers"], bind=BIND))
        heads = st.select_slider("Heads H", HEAD_CHOICES, value=DEFAULT.n_heads, key=KEYS["n_heads"], bind=BIND)
        d_model = st.select_slider("Width D", D_CHOICES, value=DEFAULT.d_model, key=KEYS["d_model"], bind=BIND,
                                   help="Features per token; the MLP is 4D wide.")
        norm = st.segmented_control("TokenNorm placement", ("pre", "post"), default=DEFAULT.norm, required=True,
                                    key=KEYS["norm"], bind=BIND,
                                    help="pre-LN: X + MHSA(TokenNorm(X)); post-LN: TokenNorm(X + MHSA(X)) "
                                         "(seed 001 §2.3, figure 7).")
    with col_more:
        keep_valid(KEYS["pos_encoding"], encodings_for(task), DEFAULT.pos_encoding)
        encodings = encodings_for(task)
        pe = st.selectbox("Position encoding", encodings, key=KEYS["pos_encoding"], bind=BIND,
                          index=encodings.index(DEFAULT.pos_encoding) if DEFAULT.pos_encoding in encodings else 0)
        keep_valid(KEYS["mask"], masks_for(task), masks_for(task)[0])
        mask = st.selectbox("Mask", masks_for(task), key=KEYS["mask"], bind=BIND,
                            help="Text tasks predict the next token, so no token may see a later one; the image "
                                 "model's CLS token reads every patch (window: 8 on each side).")
        dropout = st.slider("Dropout", 0.0, 0.5, DEFAULT.dropout, step=0.05, key=KEYS["dropout"], bind=BIND,
                            help="On each sublayer's output while training (seed 003 §4.2).")
    st.markdown("**Optimiser** · AdamW, weight decay 0.01")
    col_rate, col_schedule, col_clip = st.columns(3)
    with col_rate:
        lr = st.select_slider("Learning rate (peak)", LR_CHOICES, value=DEFAULT.learning_rate,
                              key=KEYS["learning_rate"], bind=BIND, format_func=lambda v: f"{v:g}")
        smoothing = st.slider("Label smoothing ε", 0.0, 0.3, DEFAULT.label_smoothing, step=0.05,
                              key=KEYS["label_smoothing"], bind=BIND,
                              help="The target is (1 − ε) on the right token plus ε spread over all of them.")
    with col_schedule:
        schedule = st.selectbox("Schedule", SCHEDULES, key=KEYS["schedule"], bind=BIND)
        st.caption(SCHEDULE_LABELS[schedule])
        warmup = int(st.number_input("Warm-up steps (0: none)", 0, 5000, DEFAULT.warmup, step=10,
                                     key=KEYS["warmup"], bind=BIND))
    with col_clip:
        clip = st.select_slider("Gradient clipping: largest ‖g‖ (0: off)", CLIP_CHOICES, value=DEFAULT.clip,
                                key=KEYS["clip"], bind=BIND,
                                help="Rescale the gradient when its norm is larger (seed 001 §5).")
    try:
        return RunSpec(task=task, n_layers=layers, n_heads=heads, d_model=d_model, pos_encoding=pe, mask=mask,
                       norm=norm or DEFAULT.norm, learning_rate=lr, schedule=schedule, warmup=warmup, clip=clip,
                       label_smoothing=smoothing, dropout=dropout, steps=steps, batch_size=batch, seed=seed)
    except ConfigError as error:
        return str(error)


def schedule_preview(spec: RunSpec) -> None:
    rates = rate_curve(spec)
    fig = lines_over_steps({"learning rate": (np.arange(1, spec.steps + 1), rates)}, title="", y_title="rate",
                           colors=[run_color(0)], height=180, markers=False,
                           from_zero=True)
    chart(fig, "tr_schedule_chart", "learning_rate_schedule", zoom=False)
    note = f"Peak {rates.max():.3g} at step {int(np.argmax(rates)) + 1}, last step {rates[-1]:.3g}."
    if spec.schedule == "noam":
        note += (f" Seed 003's own formula, lr = D^-0.5 · min(s^-0.5, s · w^-1.5), peaks at (D·w)^-0.5 = "
                 f"{noam_peak(spec.d_model, spec.warmup):.3g} for D = {spec.d_model}, w = {max(spec.warmup, 1)}; "
                 "here the same curve is scaled to the peak you chose.")
    st.caption(note)


def budget_note(spec: RunSpec | str) -> str:
    """What one run may cost on this server: steps for this model, runs at once, and when an unwatched run stops."""
    cap = "" if isinstance(spec, str) else (f"With this model and batch a run may take at most "
                                            f"**{spec.max_steps():,} steps**, so that it ends in minutes. ")
    cap += f"Any run stops after **{RUNS.max_seconds / 60:g} minutes** of training, kept. "
    return (f"{cap}Runs train in the background and survive a reload; one at a time per browser, at most "
            f"{RUNS.max_running} at once on this server ({RUNS.running()} now). A run that its browser has not shown "
            f"for {RUNS.idle_seconds:.0f} s (its tab closed, another page open) stops, and is kept: save it then; "
            "others watching its link do not keep it going.")


def start(spec: RunSpec) -> None:
    try:
        run = RUNS.start(spec, st.session_state["live_owner"])
    except ServerBusyError as error:
        st.warning(f"**{error}**", icon=":material/hourglass_top:")
        return
    except SessionBusyError as error:
        st.info(str(error), icon=":material/info:")
        return
    st.session_state["live_run"] = run.run_id
    st.session_state.pop(SETUP_OPEN, None)  # folded while the run trains, as the first run's panel
    st.query_params["run"] = run.run_id
    st.rerun()


# ---------------------------------------------------------------------------------------------------------
# The run, live
# ---------------------------------------------------------------------------------------------------------

def progress_line(view: RunView) -> str:
    return (f"{STATUS[view.status]}: step {view.steps_done} of {view.spec.steps} · {view.steps_per_second:.1f} "
            f"steps/s · {view.seconds:.0f} s · {view.threads or 1} CPU thread")


def pattern_note(view: RunView) -> None:
    pattern = view.pattern
    if pattern is None or not view.snapshots:
        return
    if not until_revealed("tr_predict_step", "When the task's pattern forms"):
        return
    formed = view.pattern_formed()
    if formed is not None:
        st.success(f"The **{pattern.name}** pattern formed at step **{formed.step}**, {formed.seconds:.0f} s after "
                   f"the start: a head scores {formed.best_score:.2f} ≥ {PATTERN_THRESHOLD} ({pattern.description}).",
                   icon=":material/check_circle:")
    else:
        st.caption(f"Watching for the **{pattern.name}** pattern: {pattern.description}. Best head after "
                   f"{view.snapshots[-1].step} steps: {view.snapshots[-1].best_score:.2f} (formed at ≥ "
                   f"{PATTERN_THRESHOLD}).")


def result_note(view: RunView) -> None:
    """The run's accuracy and loss now (mean of the last 25 steps), and what they mean for its task: the level of
    a model that learned only the easy part, and the level of one that learned the task (core.training.live.accuracy_guide).
    When the run has ended, a verdict."""
    guide = accuracy_guide(view.spec.task)
    accuracy, loss = (float(np.mean(view.history[name][-25:])) for name in ("accuracy", "loss"))
    line = f"Batch accuracy **{accuracy:.2f}**, loss **{loss:.2f}** (means of the last 25 steps). {guide.text}"
    verdict = guide.verdict(accuracy) if not view.alive else ""
    if verdict == "learned":
        st.success(f"**Learned the task.** {line}", icon=":material/check_circle:")
    elif verdict == "partly":
        st.warning(f"**Partly learned:** above the guessing level, short of {guide.learned:g}. {line} More steps, "
                   "another seed or relative positions (the default recipe's) may finish the job.",
                   icon=":material/trending_up:")
    elif verdict == "not yet":
        st.warning(f"**Not learned:** still near the guessing level. {line}", icon=":material/trending_flat:")
    else:
        st.caption(line)


def curves(view: RunView) -> None:
    if view.steps_done == 0:
        st.info("Building the data and the model…", icon=":material/hourglass_top:")
        return
    result_note(view)
    chart(training_curves([(f"run {view.run_id[:6]}", view.history)], clips=[view.spec.clip]), "tr_curves",
          "training_curves")
    chart(gradient_norm_figure(view.history["step"], view.grad_norms), "tr_grad_layers", "gradient_norm_per_layer")
    st.caption("Thin lines: every step's value; thick: the mean of the last 25 steps. The gradient norm is measured "
               "before clipping; per layer, 'embedding' holds the token (or patch) and position embeddings, "
               "'blocks.l' layer l's attention, MLP and TokenNorms, 'head' the final TokenNorm and unembedding.")


def probe_caption(view: RunView) -> None:
    shown = (f"a generated image: CLS + {len(view.tokens) - 1} patches" if view.spec.task == "shapes"
             else " ".join(view.tokens))
    st.caption(f"Every snapshot runs the model on one held-out example it never trains on: `{shown}`")


def first_choice(snapshot: Snapshot) -> tuple[int, int]:
    """The head to show first: the best-scoring one on the task's pattern, else L0 H0."""
    return best_head(snapshot.scores)[:2] if snapshot.scores is not None else (0, 0)


def head_and_all_heads(snap: Snapshot, tokens: list[str], layer: int, head: int, notation: str, key: str) -> None:
    col_head, col_all = st.columns([3, 2])
    with col_head:
        head_chart(snap.patterns[layer, head], tokens, notation=notation, masked=snap.masked,
                   title=f"L{layer} H{head} after {snap.step} steps", key=f"{key}_pattern", filename="pattern_at_step")
    with col_all:
        heatmap(overview_spec(snap.patterns, tokens, notation=notation, selected=(layer, head), masked=snap.masked,
                              tile_px=110),
                key=f"{key}_all_heads", filename="all_heads_at_step")


def latest_snapshot(view: RunView, notation: str) -> None:
    """While training: the newest snapshot, its best head large (the scrubber comes when the run ends)."""
    st.subheader("Attention as it forms")
    probe_caption(view)
    snap = view.snapshots[-1]
    head_and_all_heads(snap, list(view.tokens), *first_choice(snap), notation, "tr_live")
    st.caption("The newest snapshot, updated as the run trains. Stop the run, or let it finish, to scrub through "
               "every snapshot, head by head.")


def snapshots(view: RunView, notation: str) -> None:
    """The scrubber over training steps: one head's pattern on the probe, all heads, and their trends."""
    st.subheader("Attention as it formed")
    probe_caption(view)
    options = [s.step for s in view.snapshots]
    step = st.select_slider("Training step", options, value=options[-1], key="tr_step", bind=BIND,
                            help="The steps after which a snapshot was taken: drag back to watch the pattern form.")
    snap = view.snapshot_at(int(step))
    m, h = snap.patterns.shape[:2]
    heads = [f"L{layer} H{head}" for layer in range(m) for head in range(h)]
    layer, head = first_choice(view.snapshots[-1])
    choice = st.selectbox("Head", heads, index=layer * h + head, key="tr_head", bind=BIND,
                          help="The head with the best task score at the end is chosen first.")
    layer, head = divmod(heads.index(choice) if choice in heads else layer * h + head, h)
    head_and_all_heads(snap, list(view.tokens), layer, head, notation, "tr_scrub")
    steps = [s.step for s in view.snapshots]

    def over_steps(values_of) -> tuple[list[int], list[float]]:
        return steps, [values_of(s) for s in view.snapshots]

    col_score, col_norm, col_resid = st.columns(3)
    with col_score:
        if view.pattern is not None and until_revealed("tr_predict_step", "Each head's pattern score over the steps"):
            series = {name: over_steps(lambda s, i=i: s.scores.reshape(-1)[i]) for i, name in enumerate(heads)}
            chart(lines_over_steps(series, title=f"{view.pattern.name} score", y_title="score of each head",
                                   threshold=PATTERN_THRESHOLD, marker=snap.step),
                  "tr_scores", "pattern_scores", zoom=False)
        elif view.pattern is None:
            st.caption("No single textbook pattern is followed on this task: scrub through the snapshots above.")
    with col_norm:
        names = list(snap.norm_scale)
        chart(lines_over_steps({name: over_steps(lambda s, name=name: s.norm_scale[name]) for name in names},
                               title="TokenNorm σ", y_title="mean σ it divides by", marker=snap.step, log=True),
              "tr_norms", "tokennorm_scale", zoom=False)
    with col_resid:
        names = ["input"] + [f"after block {layer}" for layer in range(m)]
        chart(lines_over_steps({name: over_steps(lambda s, i=i: s.resid_norm[i]) for i, name in enumerate(names)},
                               title="Residual stream", y_title="mean ‖x_n‖", marker=snap.step, log=True),
              "tr_resid", "residual_norms", zoom=False)
    st.caption("σ is the standard deviation of a token's features that TokenNorm divides by (seed 001 §2.3), "
               "averaged over the example's tokens. Pre-LN lets the residual stream grow layer by layer; post-LN "
               "normalises the stream itself after every sublayer.")


def live_panel(run: LiveRun, notation: str) -> None:
    """Progress, stop button, curves and snapshots; polled every POLL_SECONDS while the run trains."""
    run.watch(st.session_state["live_owner"])  # its owner's page shows it: it keeps training
    view = run.view()
    was_alive = st.session_state.get(WAS_ALIVE, False)
    st.session_state[WAS_ALIVE] = view.alive
    if was_alive and not view.alive:
        st.rerun()  # the whole page: saving and comparing appear, polling stops
    col_bar, col_stop = st.columns([5, 1])
    with col_bar:
        st.progress(min(view.progress, 1.0), text=progress_line(view))
    with col_stop:
        if view.alive and run.owned_by(st.session_state["live_owner"]) and st.button(
                "Stop", key="tr_stop", icon=":material/stop_circle:", type="primary"):
            stop(run)
    if view.status in ("diverged", "failed"):
        st.error(f"**The run {view.status}:** {view.message}", icon="⚠️")
    elif view.message:
        st.info(view.message, icon=":material/pause_circle:")
    pattern_note(view)
    curves(view)
    if view.alive and view.snapshots:
        latest_snapshot(view, notation)


def stop(run: LiveRun) -> None:
    """Stop the run and, once it has ended, redraw the whole page stopped (saving and comparing appear): the click's
    effect shows at once, not at a later poll, which a busy server or a throttled background tab can delay."""
    try:
        run.stop(st.session_state["live_owner"])
    except NotOwnerError as error:  # the button is drawn for the owner only; core checks again
        st.warning(f"**Can't stop:** {error}", icon=":material/lock:")
        return
    if run.join(timeout=STOP_WAIT_SECONDS):
        st.session_state[WAS_ALIVE] = False  # live_panel's own rerun on the run's end: done here
        st.rerun()
    st.caption("Stopping after the step under way…")


def live(run: LiveRun, notation: str) -> None:
    """live_panel as a fragment that reruns on its own every POLL_SECONDS while the run trains."""
    st.fragment(live_panel, run_every=POLL_SECONDS if run.view().alive else None)(run, notation)


# ---------------------------------------------------------------------------------------------------------
# Comparing and saving
# ---------------------------------------------------------------------------------------------------------

def compare(views: list[RunView], notation: str) -> None:
    st.header("Compare two runs")
    if len(views) < 2:
        st.info("Train a second run to compare it with this one here: for example the recipe **post-LN, no "
                "warm-up**, then **post-LN, with warm-up**; or **pre-LN, no warm-up** against **post-LN, no "
                "warm-up**.", icon=":material/compare:")
        return
    labels = [run_label(i, view) for i, view in enumerate(views)]
    col_a, col_b = st.columns(2)
    a = col_a.selectbox("Run A", labels, index=len(labels) - 2, key="tr_a", bind=BIND)
    b = col_b.selectbox("Run B", labels, index=len(labels) - 1, key="tr_b", bind=BIND)
    first, second = views[labels.index(a) if a in labels else -2], views[labels.index(b) if b in labels else -1]
    if (warmup_pair([first, second]) is not None
            and not until_revealed("tr_predict_warmup", "These two runs answer the warm-up prediction above")):
        return
    chart(training_curves([("A", first.history), ("B", second.history)], clips=[first.spec.clip, second.spec.clip]),
          "tr_compare_curves", "compare_training_curves")
    options = sorted({s.step for view in (first, second) for s in view.snapshots})
    at = st.select_slider("Patterns after step", options, value=options[-1], key="tr_at", bind=BIND)
    for column, name, view in zip(st.columns(2), "AB", (first, second)):
        with column:
            snap = view.snapshot_at(int(at))
            st.markdown(f"**{name}** · {view.spec.describe()}")
            heatmap(overview_spec(snap.patterns, list(view.tokens), notation=notation, masked=snap.masked,
                                  tile_px=110),
                    key=f"tr_compare_{name}", filename=f"run_{name}_heads")
            st.caption(f"after {snap.step} steps; loss (mean of the last 25 steps) "
                       f"{np.mean(view.history['loss'][-25:]):.3f}" if view.steps_done else "no step yet")
    if (first.pattern is not None and second.pattern is not None
            and until_revealed("tr_predict_step", "The best head's pattern score of each run")):
        series = {f"{name}: best head": ([s.step for s in view.snapshots], [s.best_score for s in view.snapshots])
                  for name, view in (("A", first), ("B", second))}
        chart(lines_over_steps(series, title="Best head's pattern score", y_title="score",
                               colors=[run_color(0), run_color(1)], dashes=["solid", "dash"],
                               threshold=PATTERN_THRESHOLD, marker=int(at), height=280),
              "tr_compare_scores", "compare_pattern_scores")


def save(run: LiveRun, view: RunView) -> None:
    """The owner's save box, and once saved the run's name and its download (no server path: the run's name)."""
    st.subheader("Save this run")
    if view.saved_as is None:
        suggestion = f"{view.spec.task}-{view.spec.norm}ln-{view.run_id[:6]}"
        col_name, col_button = st.columns([3, 1], vertical_alignment="bottom")
        name = col_name.text_input("Name", value=suggestion, key=f"tr_name_{view.run_id}", max_chars=48,
                                   help="Lowercase letters, digits, - and _. The run is kept on this server under "
                                        "this name and never overwrites another.")
        if col_button.button("Save", key="tr_save", icon=":material/save:"):
            bundled = [card.name for card in registry.list_cards(models_dir())]
            try:
                if refusal := save_refusal():
                    raise QuotaError(refusal)
                run.save((name or "").strip(), st.session_state["live_owner"], reserved=bundled)
            except (ValueError, RunStateError, NotOwnerError, QuotaError) as error:
                st.error(f"**Can't save:** {literal(str(error))}", icon="⚠️")
                return
            view = run.view()
    if view.saved_as is not None and not registry.user_card_path(view.saved_as).is_file():
        st.caption(f"Saved as **{view.saved_as}**, since deleted.")
    elif view.saved_as is not None:
        st.success(f"Saved as **{view.saved_as}**: pick it in the model menu of every other page (marked “your "
                   "run”).", icon=":material/check_circle:")
        st.download_button("Download (.zip: weights + card)", archive(registry.user_card_path(view.saved_as)),
                           file_name=f"{view.saved_as}.zip", mime="application/zip", key="tr_download",
                           icon=":material/download:")


def warmup_pair(views: list[RunView]) -> tuple[RunView, RunView] | None:
    """The latest post-LN run without a warm-up and the latest with one (both trained a step), or None."""
    post = {bool(v.spec.warmup): v for v in views if v.spec.norm == "post" and v.steps_done}
    return (post[False], post[True]) if len(post) == 2 else None


def set_recipe(name: str) -> None:
    """A "Set up" button: the recipe's settings, and the set-up panel open on its Start button (after a first run
    the panel is folded)."""
    st.session_state["tr_recipe"] = name
    st.session_state[SETUP_OPEN] = True
    apply_recipe()


def reveal_warmup(prediction: str | None) -> None:
    pair = warmup_pair([r.view() for r in RUNS.runs_of(st.session_state["live_owner"])])
    if pair is None:
        show_grade(prediction, None, "this is measured on your own runs, and they are not trained yet: train the "
                   "recipes **post-LN, no warm-up** and **post-LN, with warm-up** (set them up here, then press "
                   "**Start training** in the panel below), and your prediction is graded here when both have trained.")
        with st.container(horizontal=True):
            for recipe in ("post-LN, no warm-up", "post-LN, with warm-up"):
                st.button(f"Set up: {recipe}", key=f"tr_setup_{recipe}", on_click=set_recipe, args=(recipe,),
                          icon=":material/tune:")
        return
    without, with_ = pair
    steps = min(without.steps_done, with_.steps_done)
    loss_without, loss_with = final_loss(without.history["loss"], steps), final_loss(with_.history["loss"], steps)
    accuracies = [final_loss(view.history["accuracy"], steps) for view in pair]  # the same mean, of the accuracy
    show_grade(prediction, loss_comparison(loss_without, loss_with, WARMUP_OPTIONS),
               f"after {steps} steps your post-LN run without a warm-up is at loss **{loss_without:.2f}**, the one "
               f"with {with_.spec.warmup} warm-up steps at **{loss_with:.2f}** (mean of the last 25 steps; lr "
               f"{without.spec.learning_rate:g} and {with_.spec.learning_rate:g}; batch accuracy "
               f"{accuracies[0]:.0%} and {accuracies[1]:.0%})")
    st.markdown("Why: Adam's first updates move every weight by about the learning rate, whatever the size of its "
                "gradient, until its running averages settle. Post-LN puts a TokenNorm after every residual addition, "
                "so no path from the output back to the input is left untouched, and such large early steps can "
                "throw it into a state it recovers from slowly or never: the loss stalls. A warm-up grows the rate "
                "from 0 while the averages settle (seed 004: post-normalisation needs a warm-up). Pre-LN leaves the "
                "residual path free of TokenNorms and usually copes without one.")
    chart(training_curves([("post-LN, no warm-up", without.history), ("post-LN, warm-up", with_.history)],
                          clips=[without.spec.clip, with_.spec.clip], height=420),
          "tr_reveal_curves", "post_ln_warmup")


def step_question(run: LiveRun | None) -> str:
    """The pattern prompt's question, naming the run: a new run asks it afresh."""
    which = f"run {run.run_id[:6]}" if run is not None else "your next run"
    return (f"When will the task's pattern (the reversal's anti-diagonal, the induction head) first score "
            f"{PATTERN_THRESHOLD} in {which}?")


def reveal_pattern_step(prediction: str | None, view: RunView | None) -> None:
    if view is None:
        show_grade(prediction, None, "no run yet: start one below, and your prediction is graded here when its "
                   "pattern forms or the run ends.")
        return
    if view.pattern is None:
        show_grade(prediction, None, f"the {view.spec.task} task has no single textbook pattern to wait for: try "
                   "the reversal or copy task.")
        return
    formed = view.pattern_formed()
    answer = growth_step(None if formed is None else formed.step, not view.alive, STEP_BOUNDS, STEP_OPTIONS)
    if formed is not None:
        loss = np.mean(view.history["loss"][max(0, formed.step - 25):max(formed.step, 1)])
        measured = (f"a head first scored **{formed.best_score:.2f}** ≥ {PATTERN_THRESHOLD} after **{formed.step}** "
                    f"steps ({formed.seconds:.0f} s), at a loss of {loss:.2f}")
    elif view.snapshots:
        last = view.snapshots[-1]
        measured = (f"{'in this run' if answer else 'not yet'}: the best head scores {last.best_score:.2f} after "
                    f"{last.step} steps (it counts at ≥ {PATTERN_THRESHOLD})")
    else:
        measured = "not yet: no snapshot taken"
    show_grade(prediction, answer, measured if answer else measured + "; graded when it forms or the run ends.")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Live training")
notation = notation_switch()
st.caption("Train a tiny transformer here, on this computer's CPU, and watch it learn: the loss and accuracy, the "
           "learning rate of the schedule, the gradient of every layer, and its attention heads forming. Training "
           "uses Adam with a learning-rate schedule, gradient clipping, dropout and label smoothing (seed 003 §4); "
           "it can grow unstable (seed 001 §5).")
owner = st.session_state["live_owner"] = browser_id()
run, asked = watched_run()
view = run.view() if run is not None else None
mine = run is not None and run.owned_by(owner)
if run is not None and not mine:
    read_only_note()
if run is None and asked:
    st.info(f"The run {literal(asked)} is no longer in this server's memory (the server restarted, or it was one of "
            "the oldest runs). Saved runs are in every page's model menu.", icon=":material/info:")

predict_then_reveal("tr_predict_warmup", "A post-LN model (4 layers) trained at a constant learning rate with **no "
                    "warm-up**: what will its loss do, compared with the same model with a warm-up?", WARMUP_OPTIONS,
                    reveal_warmup)

with st.expander("Set up a run", expanded=view is None or st.session_state.get(SETUP_OPEN, False),
                 icon=":material/tune:"):
    spec = settings()
    if isinstance(spec, str):
        st.error(f"**Can't train this:** {spec}", icon="⚠️")
    else:
        schedule_preview(spec)
    busy = RUNS.training_of(owner) is not None
    if st.button("Start training", key="tr_start", type="primary", icon=":material/play_arrow:",
                 disabled=isinstance(spec, str) or busy,
                 help="One run at a time per browser; stop yours first." if busy else None):
        start(spec)
    st.caption(budget_note(spec))

predict_then_reveal("tr_predict_step", step_question(run), STEP_OPTIONS,
                    lambda prediction: reveal_pattern_step(prediction, None if run is None else run.view()))
if run is not None:
    live(run, notation)
    current = run.view()  # after the fragment: what it drew, or newer
    if not current.alive and current.snapshots:
        snapshots(current, notation)
    if current.status in ("finished", "stopped") and mine:
        save(run, current)
    compare([v for v in (r.view() for r in RUNS.runs_of(run.owner)) if v.snapshots], notation)
my_saved_runs(owner)
