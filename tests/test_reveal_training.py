"""The live-training page's two "predict, then reveal" prompts under AppTest, on tiny runs: before Reveal nothing
on the page answers them (the intro, the pattern's step, the runs compared); a reveal before the runs exist says
what to train and grades nothing; after the runs, the grade names the prediction and what the runs measured."""

from __future__ import annotations

import numpy as np
from conftest import ok
from streamlit.testing.v1 import AppTest
from test_training_page import models_dir, new_page, start, stop_runs, texts, tiny, user_dir  # noqa: F401 (fixtures)

from core.training.live import runs, worker


def chart_keys(at: AppTest) -> set[str]:
    return {chart.proto.id.rsplit("-", 1)[-1] for chart in at.get("plotly_chart")}


def grade(at: AppTest) -> str:
    return next((m.value for m in at.markdown if m.value.startswith(("You said ", "No prediction"))), "")


def reveal(at: AppTest, key: str, prediction: str) -> None:
    at.radio(key=key).set_value(prediction).run()
    at.button(key=f"{key}__reveal").click().run()
    ok(at)


def train(at: AppTest, recipe: str, warmup: int) -> runs.LiveRun:
    at.selectbox(key="tr_recipe").set_value(recipe).run()
    tiny(at)
    at.number_input(key="tr_warmup").set_value(warmup)
    at.run()
    run = start(at)
    assert run.join(timeout=120)
    at.run()
    ok(at)
    return run


def final_loss(run: runs.LiveRun, steps: int) -> float:
    return float(np.mean(run.view().history["loss"][steps - 25:steps]))


def test_the_warm_up_prompt_is_graded_on_the_two_post_ln_runs(new_page):
    at = new_page()
    assert "warm-up" not in at.caption[0].value  # the intro no longer says that post-LN needs one
    reveal(at, "tr_predict_warmup", "the same")
    assert grade(at).startswith("You said **the same**; this is measured on your own runs, and they are not "
                                "trained yet")
    assert {b.key for b in at.button} >= {"tr_setup_post-LN, no warm-up", "tr_setup_post-LN, with warm-up"}
    at.button(key="tr_setup_post-LN, no warm-up").click().run()
    assert at.segmented_control(key="tr_norm").value == "post" and at.number_input(key="tr_warmup").value == 0


def test_the_compared_warm_up_runs_wait_for_the_reveal(new_page):
    at = new_page()
    without = train(at, "post-LN, no warm-up", 0)
    with_ = train(at, "post-LN, with warm-up", 10)
    assert "tr_compare_curves" not in chart_keys(at)  # the two runs side by side would answer the prompt
    assert "These two runs answer the warm-up prediction above" in texts(at)
    reveal(at, "tr_predict_warmup", "fall faster")
    assert {"tr_compare_curves", "tr_reveal_curves"} <= chart_keys(at)
    sentence = grade(at)
    assert sentence.startswith("You said **fall faster**; measured: after 30 steps your post-LN run without a "
                               "warm-up is at loss "), sentence
    assert f"**{final_loss(without, 30):.2f}**" in sentence and f"**{final_loss(with_, 30):.2f}**" in sentence


def test_the_pattern_prompt_hides_when_it_formed_and_grades_the_run(new_page):
    at = new_page()
    assert "in your next run?" in texts(at)
    reveal(at, "tr_predict_step", "never")
    assert grade(at).startswith("You said **never**; no run yet")
    tiny(at)
    at.run()
    run = start(at)
    assert run.join(timeout=120)
    at.run()
    ok(at)
    assert f"in run {run.run_id[:6]}?" in texts(at)  # a new question: hidden again
    assert "tr_scores" not in chart_keys(at) and "Watching for the" not in texts(at)
    reveal(at, "tr_predict_step", "never")
    assert {"tr_scores"} <= chart_keys(at) and "Watching for the" in texts(at)
    last = run.view().snapshots[-1]
    assert grade(at) == (f"You said **never**; measured: in this run: the best head scores {last.best_score:.2f} "
                         f"after {last.step} steps (it counts at ≥ {worker.PATTERN_THRESHOLD}). **Right.**")


def setup_panel_open(at: AppTest) -> bool:
    return next(e for e in at.expander if e.label == "Set up a run").proto.expanded


def test_a_set_up_button_opens_the_panel_with_start_after_a_first_run(new_page):
    """The prompt says to set the second recipe up and press Start: after the first run the set-up panel was folded,
    Start hidden inside it."""
    at = new_page()
    assert setup_panel_open(at)  # no run yet
    reveal(at, "tr_predict_warmup", "the same")
    train(at, "post-LN, no warm-up", 0)
    assert not setup_panel_open(at)  # a run to watch: the panel folds
    at.button(key="tr_setup_post-LN, with warm-up").click().run()
    ok(at)
    assert setup_panel_open(at) and at.number_input(key="tr_warmup").value == 300
    assert not at.button(key="tr_start").disabled and "Start training** in the panel below" in grade(at)
    tiny(at)
    at.run()
    start(at)
    assert not setup_panel_open(at)  # the new run trains: folded again
