"""What does this head do? Attention weights show where a head looks; changing the head and running the model again
shows what it does. Every change is a new forward pass (core.model.interventions), measured by
core.lessons.interventions: each head's effect on the logit difference of two candidate tokens, and each part's
direct logit attribution.

URL parameters (all widgets are bound): model (sidebar); text, target, other, contrast, subject (the token looked
at), change (how a head is changed), intervene (the head changed), layer, head (the pattern shown), predict_head.
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.canvas import difference_heatmap_spec  # noqa: E402
from core.figures.interventions import HEAD_SELECTION, attention_effect_scatter, head_grid, part_bars  # noqa: E402
from core.lessons import interventions as lesson  # noqa: E402
from core.model.interventions import Head, InterventionError  # noqa: E402
from core.model.run import length_refusal, record_intervened, text_tokenizer  # noqa: E402
from core.model.transformer import Transformer  # noqa: E402
from pages.ui.examples import AGREEMENT  # noqa: E402
from pages.ui.heatmap import heatmap  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import any_text_model_picker, get_model, models_dir  # noqa: E402
from pages.ui.presentation import font_scale  # noqa: E402
from pages.ui.safety import literal, show_input_error  # noqa: E402
from pages.ui.store import Setting, get_recording, record_in_turn, shared_result  # noqa: E402
from pages.ui.text_input import shown_token, token_choices, unknown_warning  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range, layer_head_picker  # noqa: E402

CHANGES = {
    "mean": "set to its mean output (mean-ablate)",
    "zero": "set to zero (zero-ablate)",
    "patch": "patched from the contrasting text",
    "attend": "made to read only the subject",
}
NO_HEAD = "none"
MAX_RADIO_HEADS = 24  # up to this many heads the prediction is a row of options; a GPT-2's 144 are typed


@st.cache_resource(max_entries=4, show_spinner="Averaging each head's output over reference texts…")
def head_means(name: str, directory: str):
    """Each head's mean output over the reference texts (core.lessons.interventions.reference_texts)."""
    model, card = get_model(name, directory)
    tok = text_tokenizer(card)
    return lesson.head_means(model, tok, lesson.reference_texts(tok))


def means_if(change: str, name: str) -> dict | None:
    return head_means(name, str(models_dir())) if change == "mean" else None


@shared_result
def effects_of(name: str, text: str, contrast: str, target: str, other: str, change: str, subject: int,
               directory: str):
    """(candidates, each head's effect [M, H]) or the message saying why they cannot be measured."""
    try:
        model, card = get_model(name, directory)
        base, source = recording_of(name, text), recording_of(name, contrast) if change == "patch" else None
        chosen = lesson.candidates(model, base, text_tokenizer(card), target, other)
        effects = record_in_turn(lambda: lesson.ablation_effects(model, base.meta["ids"], chosen, change,
                                                                 means_if(change, name), source, subject),
                                 model.cfg, text)
        return chosen, effects
    except InterventionError as error:
        return str(error)


@shared_result
def intervened(name: str, text: str, contrast: str, head: str, change: str, subject: int, position: int,
               directory: str):
    """The recording with `head` changed, or the message saying why it cannot be."""
    try:
        model, card = get_model(name, directory)
        source = recording_of(name, contrast) if change == "patch" else None
        intervention = lesson.intervention_for(Head.parse(head), change, query=position, key=subject)
        return record_in_turn(lambda: record_intervened(model, text, intervention, source=source,
                                                        means=means_if(change, name), card=card), model.cfg, text)
    except InterventionError as error:
        return str(error)


def recording_of(name: str, text: str):
    """The model's own recording of a text, or InterventionError with the reason it cannot be run."""
    recording = get_recording(Setting(name), text)
    if isinstance(recording, str):
        raise InterventionError(f"the text {text[:60]!r} cannot be run: {recording}")
    return recording


def pick_clicked_head(chart_key: str) -> None:
    """on_select of a head chart: the clicked head becomes the one changed; a fresh chart (a new key) follows, so
    clicking the same head again is a new selection."""
    points = st.session_state[chart_key].selection.get(HEAD_SELECTION, [])
    if points:
        st.session_state["intervene"] = str(Head(int(points[0]["layer"]), int(points[0]["head"])))
        st.session_state["head_chart_version"] = st.session_state.get("head_chart_version", 0) + 1


def clickable(chart, name: str) -> None:
    key = f"{name}_{st.session_state.get('head_chart_version', 0)}"
    st.altair_chart(chart, key=key, on_select=partial(pick_clicked_head, key), selection_mode=HEAD_SELECTION,
                    width="content")


def prediction_line(chosen: lesson.Candidates, logits: np.ndarray, vocab_of) -> str:
    """"ℓ(are) − ℓ(is) = 6.75 · p(are) 61% · p(is) 1% · likeliest: green" (markdown, candidates escaped)."""
    predicted = lesson.prediction(logits, chosen)
    a, b = literal(chosen.target), literal(chosen.other)
    return (f"ℓ({a}) − ℓ({b}) = **{predicted.difference:+.2f}** · p({a}) {predicted.p_target:.1%} · "
            f"p({b}) {predicted.p_other:.1%} · likeliest: **{shown_token(vocab_of(predicted.likeliest))}**")


def candidate_inputs(model: Transformer):
    text_default, contrast_default = AGREEMENT[model.cfg.head]
    col_text, col_a, col_b = st.columns([3, 1, 1])
    text = col_text.text_area("Text", text_default, key="text", bind=BIND, height=68,
                              help="The model predicts after its last token (a masked-token model: at its [MASK]).")
    target = col_a.text_input("First candidate", "are", key="target", bind=BIND)
    other = col_b.text_input("Second candidate", "is", key="other", bind=BIND)
    contrast = st.text_input("Contrasting text (what a head is patched from)", contrast_default, key="contrast",
                             bind=BIND,
                             help="The same sentence with the subject's number changed, token for token.")
    return text or "", target or "", other or "", contrast or ""


def subject_picker(tokens, unknown, contrast_tokens) -> int:
    """The token whose attention the grid shows (URL key `subject`): by default the first one the contrasting text
    changes."""
    differs = [i for i, (a, b) in enumerate(zip(tokens, contrast_tokens)) if a != b]
    default = differs[0] if differs else min(1, len(tokens) - 1)
    keep_in_range("subject", 0, len(tokens) - 1, "Token")
    labels = token_choices(tokens, unknown)
    subject = st.selectbox("The subject (the token whose attention is shown)", list(range(len(tokens))),
                           index=default, format_func=lambda i: labels[i], key="subject", bind=BIND)
    return default if subject is None else min(int(subject), len(tokens) - 1)


def graded_reveal(effects: np.ndarray, chosen: lesson.Candidates, change: str, prediction: str | None) -> None:
    try:
        said = str(Head.parse(prediction)) if prediction else None
    except InterventionError:
        said = prediction
    answer = lesson.graded_head(effects, said)
    strongest = lesson.strongest(effects, 3)
    a, b = literal(chosen.target), literal(chosen.other)
    measured = (f"with each head {CHANGES[change].split(' (')[0]}, **{strongest[0][0]}** lowers ℓ({a}) − ℓ({b}) the "
                f"most ({strongest[0][1]:+.2f}); next " + ", ".join(f"{head} ({value:+.2f})"
                                                                      for head, value in strongest[1:]))
    show_grade(said, str(answer), measured)


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("What does this head do?")
st.caption("An attention weight says where a head *looks*, not what it *does*. Here you change one head, run the "
           "model again, and measure how the prediction moves: ablation and activation patching, as "
           "interpretability research does it. Every change is a new forward pass of the model.")
cards, card = any_text_model_picker()
model, _ = get_model(card.name, str(models_dir()))
tok = text_tokenizer(card)
text, target, other, contrast = candidate_inputs(model)
refusal = length_refusal(text, contrast)
base = refusal or get_recording(Setting(card.name), text)
if isinstance(base, str):
    show_input_error(base)
    st.stop()
tokens, unknown = base.meta["tokens"], base.meta["unknown"]
unknown_warning(tokens, unknown, card)
try:
    chosen = lesson.candidates(model, base, tok, target, other)
except InterventionError as error:
    show_input_error(str(error))
    if model.cfg.head == "masked_token":
        st.button("Use the example with a [MASK]", key="use_mask_example",
                  on_click=lambda: st.session_state.update(text=AGREEMENT["masked_token"][0],
                                                           contrast=AGREEMENT["masked_token"][1]))
    st.stop()
contrast_run = get_recording(Setting(card.name), contrast)
contrast_tokens = contrast_run.meta["tokens"] if not isinstance(contrast_run, str) else []
reads = f"after {shown_token(tokens[chosen.position])}" if model.cfg.head == "next_token" else "at the mask"
st.markdown(f"**The model's prediction {reads}:** " + prediction_line(chosen, base["logits"], tok.id_to_token))

cfg = model.cfg
head_names = [str(Head(layer, head)) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
st.subheader("1 · Where each head looks")
subject = subject_picker(tokens, unknown, contrast_tokens)
attention = lesson.attention_on(base, chosen.position, subject)
col_grid, col_note = st.columns([1.4, 1], gap="large")
with col_grid:
    clickable(head_grid(attention, f"weight on token {subject}", chosen=st.session_state.get("intervene"),
                        font_scale=font_scale()), "attention_grid")
with col_note:
    st.caption(f"Each cell: how much that head's query at token {chosen.position} "
               f"({shown_token(tokens[chosen.position])}) reads token {subject} ({shown_token(tokens[subject])}), its "
               "attention weight. **Click a head** to change it in step 3.")

st.subheader("2 · Predict")
change = st.radio("How a head is changed", list(CHANGES), captions=list(CHANGES.values()), key="change",
                  bind=BIND, horizontal=True, help="mean: the head's output z at every token replaced by its average over "
                                        "reference texts (the usual choice: the rest of the model sees a typical "
                                        "value); zero: by 0; patch: by its output on the contrasting text; only the "
                                        "subject: its attention row at the predicting token puts all its weight on "
                                        "the subject.") or "mean"
measured = effects_of(card.name, text, contrast, target, other, change, subject, str(models_dir()))
asked = (f"Which head carries the subject's number to the verb? Which one, {CHANGES[change].split(' (')[0]}, "
         f"lowers ℓ({literal(chosen.target)}) − ℓ({literal(chosen.other)}) the most?")
options = head_names if len(head_names) <= MAX_RADIO_HEADS else None
revealed = predict_then_reveal(
    "predict_head", asked, options, about=f"{card.name}\n{text}\n{contrast}\n{target}\n{other}\n{subject}",
    reveal=lambda said: (show_input_error(measured) if isinstance(measured, str)
                         else graded_reveal(measured[1], chosen, change, said)))

st.subheader("3 · Change one head and run again")
if st.session_state.get("intervene") not in (None, NO_HEAD, *head_names):  # another model's head, or a bad link
    st.session_state["intervene"] = NO_HEAD
picked = st.selectbox("The head changed", [NO_HEAD, *head_names], key="intervene", bind=BIND,
                      help="Or click a head on a chart.") or NO_HEAD
if picked == NO_HEAD:
    st.caption("Pick a head, or click one in step 1, to see the prediction and every later pattern change.")
else:
    after = intervened(card.name, text, contrast, picked, change, subject, chosen.position, str(models_dir()))
    if isinstance(after, str):
        show_input_error(after)
    else:
        st.markdown(f"**{picked} {CHANGES[change].split(' (')[0]}:** " + prediction_line(chosen, after["logits"],
                                                                                       tok.id_to_token)
                    + "  \n**As run:** " + prediction_line(chosen, base["logits"], tok.id_to_token))
        moved = lesson.pattern_shift(base, after)  # [M, H]
        col_moved, col_pattern = st.columns([1, 1.4], gap="large")
        with col_moved:
            clickable(head_grid(moved, "largest change of a weight", chosen=picked, font_scale=font_scale()),
                      "moved_grid")
            st.caption(f"How far each head's pattern moved (the largest change of any weight). Heads before "
                       f"L{Head.parse(picked).layer} cannot move: they run before the change.")
        with col_pattern:
            layer, head = layer_head_picker(cfg.n_layers, cfg.n_heads)
            heatmap(difference_heatmap_spec(base.pattern(layer)[head], after.pattern(layer)[head], tokens,
                                            unknown=unknown, labels_ab=("as run", "changed"),
                                            title=f"L{layer}H{head}: changed − as run"),
                    key="changed_pattern", filename=f"L{layer}H{head}_changed")

st.subheader("4 · What every head does")
if until_revealed("predict_head", "Each head's measured effect"):
    if isinstance(measured, str):
        show_input_error(measured)
        st.stop()
    _, effects = measured
    a, b = literal(chosen.target), literal(chosen.other)
    col_effect, col_scatter = st.columns([1, 1.3], gap="large")
    with col_effect:
        clickable(head_grid(effects, f"Δ ℓ({chosen.target}) − ℓ({chosen.other})", diverging=True, chosen=picked,
                            font_scale=font_scale()), "effect_grid")
        st.caption(f"Each cell: how ℓ({a}) − ℓ({b}) moves when that head alone is {CHANGES[change].split(' (')[0]} "
                   "(one forward pass per head). Red lowers it: the head was pushing towards the first candidate.")
    with col_scatter:
        clickable(attention_effect_scatter(attention, effects, attention_title=f"weight on token {subject}",
                                           effect_title="effect of changing the head", chosen=picked,
                                           font_scale=font_scale()), "scatter")
        st.caption("Looking is not doing: a head can read the subject heavily and matter little, or read it hardly "
                   "at all and matter a lot (it may read a token that already carries the subject's number).")
    st.markdown("**Direct logit attribution** (TransformerLens's definition)")
    refusal = lesson.attribution_refusal(model)
    if refusal:
        st.info(refusal, icon="ℹ️")
    else:
        attribution = lesson.direct_logit_attribution(model, base, chosen)
        col_heads, col_parts = st.columns([1, 1.3], gap="large")
        with col_heads:
            clickable(head_grid(attribution.heads, "direct attribution", diverging=True, chosen=picked,
                                font_scale=font_scale()), "dla_grid")
        with col_parts:
            others = [label for label in attribution.labels if not label.startswith("L") or " " in label]
            st.altair_chart(part_bars(others, [attribution.value(label) for label in others], "direct attribution",
                                      font_scale=font_scale()), width="content")
        st.caption(f"What each part writes straight into ℓ({a}) − ℓ({b}): its output through the final TokenNorm with "
                   "that token's scale σ frozen at its value in this pass (so TokenNorm is linear), then the "
                   f"unembedding. The parts add up to the logit difference: {attribution.total:+.4f} against "
                   f"{attribution.logit_difference:+.4f} computed. An effect counts what a head changes downstream "
                   "too; an attribution only its own direct write.")
    frame = pd.DataFrame({"head": head_names, "attention on subject": attention.ravel(), "effect": effects.ravel()})
    st.download_button("Download the per-head numbers (.csv)", f"# {card.name}, text: {text!r}, change: {change}\n"
                       + frame.to_csv(index=False, float_format="%.6g"), file_name="head_effects.csv",
                       mime="text/csv", on_click="ignore", key="download_effects")
