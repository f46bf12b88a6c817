"""The "What does this head do?" page under AppTest, on tiny random models: the effects stay hidden until Reveal and
are graded against this run, a link reproduces an intervention with the numbers core computes, and bad input is a
clear message."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ok

from core.lessons import interventions as lesson
from core.model.interventions import Head
from core.model.registry import load_model
from core.model.run import record_intervened, record_text, tokenizer
from pages.ui.examples import AGREEMENT

PAGE = "../pages/head_effects.py"
TEXT, CONTRAST = AGREEMENT["next_token"]  # the page's defaults for a language model


def altair_keys(at) -> list[str]:
    return [getattr(element, "key", None) or "" for element in at._tree if element.type == "vega_lite_chart"]


def shown(at) -> str:
    return "\n".join(element.value for element in at.markdown)


def test_the_effects_appear_only_after_reveal_and_the_grade_is_this_runs(app):
    at = app(PAGE, model="lm-rope")
    ok(at)
    assert not any("effect_grid" in key or "scatter" in key for key in altair_keys(at))
    assert "the most (" not in shown(at) and "measured" not in shown(at)
    at.radio(key="predict_head").set_value("L1H1").run()
    at.button(key="predict_head__reveal").click().run()
    ok(at)
    assert any("effect_grid" in key for key in altair_keys(at)) and any("scatter" in key for key in altair_keys(at))
    model, _ = load_model("lm-rope", at_models(at))
    recording = record_text(model, TEXT)
    chosen = lesson.candidates(model, recording, tokenizer(), "are", "is")
    means = lesson.head_means(model, tokenizer(), lesson.reference_texts(tokenizer()))
    effects = lesson.ablation_effects(model, recording.meta["ids"], chosen, "mean", means=means)
    answer = lesson.graded_head(effects, "L1H1")
    grade = next(m.value for m in at.markdown if m.value.startswith("You said"))
    assert f"**{answer}**" in grade and (grade.endswith("**Right.**") == (str(answer) == "L1H1"))


def at_models(at):
    import os
    from pathlib import Path

    return Path(os.environ["ATTENTION_LAB_MODELS_DIR"])


@pytest.mark.parametrize("change", ["mean", "zero", "patch", "attend"])
def test_a_link_with_an_intervention_shows_the_prediction_core_computes(app, change):
    at = app(PAGE, model="lm-rope", intervene="L1H0", change=change)
    ok(at)
    model, card = load_model("lm-rope", at_models(at))
    chosen = lesson.candidates(model, record_text(model, TEXT), tokenizer(), "are", "is")
    intervention = lesson.intervention_for(Head(1, 0), change, query=chosen.position, key=2)
    after = record_intervened(model, TEXT, intervention, source=record_text(model, CONTRAST),
                              means=lesson.head_means(model, tokenizer(), lesson.reference_texts(tokenizer())))
    line = next(m.value for m in at.markdown if m.value.startswith("**L1H0"))
    assert f"= **{chosen.difference(after['logits']):+.2f}**" in line.split("As run")[0]
    assert any("moved_grid" in key for key in altair_keys(at))


@pytest.mark.parametrize("params, message", [
    (dict(target="xylophone"), "not one token"),
    (dict(target="is"), "same token"),
    (dict(other="two words"), "one word"),
    (dict(text=""), "empty"),
    (dict(text="the cat " * 6000), "characters"),
])
def test_bad_input_is_a_clear_message(app, params, message):
    at = app(PAGE, model="lm-rope", **params)
    assert not at.exception
    assert message in at.error[0].value


def test_a_patch_between_texts_of_other_lengths_says_why_and_the_rest_of_the_page_stays(app):
    at = app(PAGE, model="lm-rope", intervene="L0H1", change="patch", contrast="The key to the old box")
    assert not at.exception
    assert "as many tokens" in at.error[0].value
    assert any("attention_grid" in key for key in altair_keys(at))


def test_a_bad_head_in_a_link_falls_back_to_none(app):
    at = app(PAGE, model="lm-rope", intervene="L99H7")
    ok(at)
    assert at.selectbox(key="intervene").value == "none"


def test_a_masked_model_predicts_at_its_mask_and_offers_the_example(app):
    at = app(PAGE, model="mlm-learned", text=TEXT)
    assert "[MASK]" in at.error[0].value.replace("\\", "")
    at.button(key="use_mask_example").click().run()
    ok(at)
    assert "at the mask" in shown(at)
    assert (at.text_area(key="text").value, at.text_input(key="contrast").value) == AGREEMENT["masked_token"]


def test_the_grade_accepts_a_near_tie_and_names_the_strongest_otherwise():
    effects = np.array([[-10.0, -9.5], [-2.0, 0.3]])
    assert lesson.graded_head(effects, "L0H1") == Head(0, 1)  # within 10 % of the strongest
    assert lesson.graded_head(effects, "L1H0") == Head(0, 0)
    assert lesson.graded_head(effects, None) == Head(0, 0)
    assert lesson.graded_head(effects, "nonsense") == Head(0, 0)


def test_a_subword_token_is_shown_with_its_space_visible(monkeypatch):
    """The bundled English default reads " student" and predicts pieces like " were": the page writes their space as
    ␣ (as the charts do), so bold around a piece still renders (markdown ignores "** were**") and no space vanishes."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("ATTENTION_LAB_MODELS_DIR", raising=False)
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    ok(at)
    line = next(m.value for m in at.markdown if m.value.startswith("**The model's prediction"))
    assert "after ␣student" in line
    likeliest = line.split("likeliest: ")[1]
    assert likeliest.startswith("**") and not likeliest.startswith("** ") and " **" not in likeliest.rstrip()
