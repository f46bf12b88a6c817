"""Masks and generation: a classroom lesson on the sidebar model (seed 001 §4.1, seed 003 §6.1).

Sections: a mask editor (start from a preset, click cells to switch them) applied live to the model; the
incremental property (append a token: which earlier representations change?); generation step by step with a
key/value cache, greedy or sampled, each new row of attention as its token is read. The editor (with the incremental
property, which follows its mask) and generation are fragments: their own controls rerun only them.

URL parameters (all widgets are bound): model, presenter (sidebar); text, preset, width, stride, density, mask_seed,
causal, cells (the switched cells, "query:key" pairs), layer, head, predict_empty_row (mask); predict_incremental;
prompt, n_new, decoding, temperature, top_k, top_p, sample_seed, step, gen_layer, gen_head, predict_cache
(generation).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402
import torch  # noqa: E402

from core.figures.generation import (CELL_SELECTION, generation_spec, incremental_heatmap, mask_grid,  # noqa: E402
                                     next_token_bars)
from core.lessons.generation import CacheCheck, Generation, Sampling, cache_check, generate  # noqa: E402
from core.lessons.lens import stream_labels  # noqa: E402
from core.lessons.position_lab import ROUNDING, incremental_change  # noqa: E402
from core.lessons.predictions import cache_agreement, changed_count, empty_row  # noqa: E402
from core.model.masks import (MASK_PRESETS, MaskPreset, flip_cells, format_cells, fully_masked_rows,  # noqa: E402
                              parse_cells, sees_later_tokens)
from core.model.recording import Recording  # noqa: E402
from core.model.run import TextInputError, encode_text, length_refusal, record_text, text_tokenizer  # noqa: E402
from pages.ui.examples import ATTRACTOR  # noqa: E402
from pages.ui.heatmap import head_chart, heatmap  # noqa: E402
from pages.ui.lessons import predict_then_reveal, revealed, show_grade, until_revealed  # noqa: E402
from pages.ui.models import bundled_model_picker, get_model, models_dir  # noqa: E402
from pages.ui.presentation import chart, font_scale  # noqa: E402
from pages.ui.safety import literal, show_input_error  # noqa: E402
from pages.ui.store import shared_result  # noqa: E402
from pages.ui.text_input import DEFAULT_TEXT, shown_token  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range  # noqa: E402

MAX_EDIT_TOKENS = 32  # the editable grid stays clickable up to here
PRESET_HELP = ("causal: itself and earlier tokens · window: the w nearest · strided: the last s and every s-th · "
               "block-sparse: its own block of b and the last token of every block · random: itself and each other "
               "key with a probability · none: every key")
EMPTY_ROW_OPTIONS = ["uniform weights", "all zeros", "an error"]
INCREMENTAL_OPTIONS = ["none", "only the last few", "all of them"]
CACHE_OPTIONS = ["exactly the same", "the same up to rounding", "different"]
CACHE_TOLERANCE = 1e-4  # CacheCheck.passed's: float32 rounding of the two orders of summation

MaskRows = tuple[tuple[bool, ...], ...]  # a mask as a hashable cache key


def as_rows(allowed: torch.Tensor) -> MaskRows:
    return tuple(tuple(bool(v) for v in row) for row in allowed.tolist())


@shared_result
def masked_run(model_name: str, text: str, rows: MaskRows, directory: str) -> tuple[Recording, np.ndarray]:
    """The recording under this mask, and the incremental analysis under it ([M+1, N-1])."""
    model, card = get_model(model_name, directory)
    mask = torch.tensor(rows, dtype=torch.bool)
    recording = record_text(model, text, mask=mask, card=card)
    return recording, incremental_change(model, recording.meta["ids"], mask)


@st.cache_data(max_entries=32, show_spinner="Generating…")
def generation_run(model_name: str, prompt: str, n_new: int, sampling: Sampling, directory: str
                   ) -> tuple[Generation, CacheCheck, list[str]] | str:
    """The cached generation, its check against a full recomputation, and every token's text; or why it cannot run."""
    model, card = get_model(model_name, directory)
    tok = text_tokenizer(card)
    try:
        ids, tokens, _ = encode_text(prompt, model.cfg.max_len, tok)
        generation = generate(model, ids, n_new, sampling)
    except (TextInputError, ValueError) as error:
        return str(error)
    new_tokens = [tok.id_to_token(step.token) for step in generation.steps]
    return generation, cache_check(model, generation), tokens + new_tokens


# ---------------------------------------------------------------------------------------------------------
# The mask editor
# ---------------------------------------------------------------------------------------------------------

def switch_clicked_cell(chart_key: str) -> None:
    """on_select of the grid: add the clicked cell to the edits (or take it out), then draw a fresh grid (a new
    key), so the next click on the same cell is a new selection."""
    points = st.session_state[chart_key].selection.get(CELL_SELECTION, [])
    if points:
        try:
            cells = parse_cells(st.session_state.get("cells") or "")
        except ValueError:  # the box held a typo (shown as an error): start the edits afresh
            cells = set()
        st.session_state["cells"] = format_cells(cells ^ {(int(points[0]["query"]), int(points[0]["key"]))})
        st.session_state["grid_version"] = st.session_state.get("grid_version", 0) + 1


def preset_controls(cfg) -> MaskPreset:
    cols = st.columns([1.3, 1, 1, 1])
    kind = cols[0].selectbox("Start from a preset", MASK_PRESETS, key="preset", bind=BIND, help=PRESET_HELP) or "causal"
    width, stride, density, seed = 4, 4, 0.3, 0
    if kind in ("window", "block-sparse"):
        keep_in_range("width", 1, cfg.max_len, "Width")
        width = int(cols[1].number_input("Window width w" if kind == "window" else "Block size b", 1, cfg.max_len, 4,
                                         key="width", bind=BIND))
    if kind == "strided":
        keep_in_range("stride", 1, cfg.max_len, "Stride")
        stride = int(cols[1].number_input("Stride s", 1, cfg.max_len, 4, key="stride", bind=BIND))
    if kind == "random":
        density = float(cols[1].slider("Density", 0.0, 1.0, 0.3, 0.05, key="density", bind=BIND,
                                       help="The chance that a query sees each other key."))
        seed = int(cols[2].number_input("Seed", 0, 9999, 0, key="mask_seed", bind=BIND,
                                        help="The same seed draws the same mask."))
    causal = True
    if kind in ("window", "block-sparse", "random"):
        causal = bool(cols[3].toggle("Causal", value=True, key="causal", bind=BIND,
                                     help="Keep only keys at or before the query."))
    return MaskPreset(kind, width, stride, density, seed, causal)


@st.fragment
def mask_section(card) -> None:
    """The editor, the model under its mask, and the incremental property under it."""
    st.header("1 · A mask editor")
    text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68,
                        help="Press Ctrl+Enter (or click outside) to run.")
    try:
        tokens = encode_text(text or "", card.config.max_len, text_tokenizer(card))[1]  # as masked_run reads it
    except TextInputError as error:
        show_input_error(str(error))
        return
    if len(tokens) > MAX_EDIT_TOKENS:
        show_input_error(f"the text has {len(tokens)} tokens (with [BOS]); the mask editor takes up to "
                         f"{MAX_EDIT_TOKENS}, so that every cell stays clickable: shorten it")
        return
    preset = preset_controls(card.config)
    written = st.text_input("Switched cells (query:key)", key="cells", bind=BIND,
                            placeholder="click the grid, or type 3:1 4:2",
                            help="The cells switched from the preset. Clicking a cell adds it here; clicking it again "
                                 "takes it out. Clear the box to go back to the preset.")
    try:
        cells = parse_cells(written or "")
    except ValueError as error:
        st.error(f"**Switched cells:** {literal(str(error))}", icon="⚠️")
        cells = set()
    allowed = flip_cells(preset.build(len(tokens)), cells)
    col_grid, col_pattern = st.columns([1.1, 1], gap="large")
    with col_grid:
        chart_key = f"mask_grid_{st.session_state.get('grid_version', 0)}"
        st.altair_chart(mask_grid(allowed.numpy(), tokens, font_scale=font_scale()),
                        key=chart_key, on_select=partial(switch_clicked_cell, chart_key),
                        selection_mode=CELL_SELECTION, width="content")
        st.caption("Click a cell to switch it: blue, the query (row) may attend to the key (column); grey, masked. "
                   f"{len(cells)} cell{'s' * (len(cells) != 1)} switched from the {preset.kind} preset.")
    empty = fully_masked_rows(allowed)
    if empty:
        st.warning(f"Query {', '.join(f'{i} ({shown_token(tokens[i])})' for i in empty)} may attend to **no key**"
                   + (": its attention row is all zeros, so nothing flows into it from attention (only its own "
                      "residual stream)." if revealed("predict_empty_row") else
                      ". What does its attention row become? Predict below, then reveal."),
                   icon=":material/warning:")
    if sees_later_tokens(allowed) and card.config.is_causal:
        st.info(f"This mask lets some tokens see **later** ones: {card.name} was trained causal, so it can now read "
                "the token it is meant to predict.", icon=":material/visibility:")
    recording, change = masked_run(card.name, text or "", as_rows(allowed), str(models_dir()))
    with col_pattern:
        cfg = card.config
        cols = st.columns(2)
        keep_in_range("layer", 0, cfg.n_layers - 1, "Layer")
        keep_in_range("head", 0, cfg.n_heads - 1, "Head")
        layer = cols[0].selectbox("Layer", range(cfg.n_layers), format_func=lambda i: f"L{i}", key="layer",
                                  bind=BIND) or 0
        head = cols[1].selectbox("Head", range(cfg.n_heads), format_func=lambda i: f"H{i}", key="head", bind=BIND) or 0
        if not empty or until_revealed("predict_empty_row", "The model's pattern under a mask with an empty row"):
            masked_pattern_chart(recording, tokens, layer, head, f"{card.name}_custom_mask_L{layer}_H{head}",
                                 "masked_pattern_chart")
            st.caption("The pattern the model computes with the mask on the left: grey hatched cells are masked "
                       "(weight exactly 0); every row with an allowed key sums to 1.")

    def reveal_empty(prediction: str | None) -> None:
        query = empty[0] if empty else len(tokens) - 1
        checked = recording
        if not empty:  # measure it: the same mask with every key of the last query switched off
            emptied = allowed.clone()
            emptied[query] = False
            checked = masked_run(card.name, text or "", as_rows(emptied), str(models_dir()))[0]
        rows = np.stack([checked.pattern(m)[:, query] for m in range(checked.n_layers)])  # [M, H, N]
        where = "in the mask above" if empty else "with every key switched off for this check"
        show_grade(prediction, empty_row(rows, EMPTY_ROW_OPTIONS),
                   f"query {query} ({shown_token(tokens[query])}), {where}, gets a row summing to "
                   f"**{np.nansum(rows, axis=-1).max():.3g}** in every layer and head (largest weight "
                   f"{np.nanmax(np.abs(rows)):.3g}, {int(np.isnan(rows).sum())} NaN)")
        st.markdown("The softmax has no allowed score to normalise, so the model gives that query no weight on any "
                    "key (not NaN): its attention output is 0 and the token keeps only its own residual stream.")
        if not empty:
            masked_pattern_chart(checked, tokens, layer, head, f"{card.name}_empty_row_L{layer}_H{head}",
                                 "empty_row_chart")

    predict_then_reveal("predict_empty_row", "If you mask every key of one query, what does its attention row "
                        "become?", EMPTY_ROW_OPTIONS, reveal_empty)
    incremental_section(recording, change, allowed)


def masked_pattern_chart(recording: Recording, tokens: list[str], layer: int, head: int, filename: str,
                         key: str) -> None:
    head_chart(recording.pattern(layer)[head], tokens, recording.scores(layer)[head],
               title=f"the model under this mask · L{layer} H{head}",
               height=int(np.clip(16 * len(tokens) + 300, 400, 620)), key=key, filename=filename)


def incremental_section(recording: Recording, change: np.ndarray, allowed: torch.Tensor) -> None:
    st.header("2 · Append a token: what changes?")
    tokens = recording.meta["tokens"]
    st.markdown(f"Seed 001 §4.1: run the model on the first {len(tokens) - 1} tokens, then append "
                f"**{shown_token(tokens[-1])}** and run it again, with the mask above. Which earlier tokens' "
                "representations change?")

    def reveal(prediction: str | None) -> None:
        changed, total = int((change[-1] > ROUNDING).sum()), change.shape[1]
        show_grade(prediction, changed_count(changed, total, INCREMENTAL_OPTIONS),
                   f"under this mask **{changed} of the {total} earlier tokens** change at the last layer (largest "
                   f"relative change {change.max():.2g}; below {ROUNDING:g} is float rounding)")
        st.markdown("No query sees a later key, so nothing earlier can change: the incremental property, which lets "
                    "a causal model generate with a key/value cache." if not sees_later_tokens(allowed) else
                    "Some queries see later keys, so appending a token reaches back into them.")
        chart(incremental_heatmap(change, tokens[:-1], stream_labels(recording.n_layers),
                                  title=f"relative change of each earlier token when '{tokens[-1]}' is appended"),
              key="incremental_chart", filename="incremental_property")
        st.caption("Try the causal preset, then none: the seed's claim is none under a causal mask, all without.")

    predict_then_reveal("predict_incremental", "Which earlier representations change when the last token is "
                        "appended, under the mask above?", INCREMENTAL_OPTIONS, reveal)


# ---------------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------------

def sampling_controls() -> tuple[Sampling, int]:
    cols = st.columns([1.4, 1, 1, 1, 1, 1])
    n_new = int(cols[0].slider("New tokens", 1, 30, 12, key="n_new", bind=BIND))
    decoding = cols[1].radio("Decoding", ["greedy", "sampled"], key="decoding", bind=BIND,
                             help="Greedy takes the likeliest token; sampled draws one.")
    sampled = decoding == "sampled"
    temperature = float(cols[2].slider("Temperature T", 0.1, 2.0, 1.0, 0.05, key="temperature", bind=BIND,
                                       disabled=not sampled, help="softmax(logits / T): low T sharpens, high T "
                                                                  "flattens the distribution."))
    top_k = int(cols[3].number_input("Top-k (0: off)", 0, 200, 0, key="top_k", bind=BIND, disabled=not sampled,
                                     help="Sample only among the k likeliest tokens."))
    top_p = float(cols[4].slider("Top-p", 0.05, 1.0, 1.0, 0.05, key="top_p", bind=BIND, disabled=not sampled,
                                 help="Sample only among the fewest likeliest tokens whose probabilities reach p."))
    seed = int(cols[5].number_input("Seed", 0, 9999, 0, key="sample_seed", bind=BIND, disabled=not sampled))
    if not sampled:
        return Sampling(temperature=0.0), n_new
    return Sampling(temperature, top_k, top_p, seed), n_new


@st.fragment
def generation_section(card) -> None:
    st.header("3 · Generating, one token at a time")
    if card.config.head != "next_token":
        st.info(f"{card.name} fills in masked tokens; it does not generate. Pick a language model (lm-…) in the "
                "sidebar.", icon=":material/info:")
        return
    st.markdown("Each step the model turns the last token's stream into p(next token), one token is chosen and "
                "appended, and the model **reads only that token**: its keys and values are added to a **key/value "
                "cache**, and its query attends over every cached key. That is one new row of attention per token. "
                f"(With the model's own {card.config.mask} mask; the editor above does not apply here.)")
    prompt = st.text_input("Prompt", ATTRACTOR, key="prompt", bind=BIND)
    sampling, n_new = sampling_controls()
    result = (length_refusal(prompt or "")  # before the cache, which would keep the text
              or generation_run(card.name, prompt or "", n_new, sampling, str(models_dir())))
    if isinstance(result, str):
        show_input_error(result)
        return
    generation, check, tokens = result
    p = len(generation.prompt_ids)
    keep_in_range("step", 0, len(generation.steps), "Step")
    step = int(st.slider("Show the model after step", 0, len(generation.steps), len(generation.steps), key="step",
                         bind=BIND, help="0: the prompt only; s: after the s-th generated token was read."))
    words = [f"**:orange[{t}]**" if i == p + step - 1 and step else (f":blue[{t}]" if i >= p else t)
             for i, t in enumerate(map(shown_token, tokens[: p + step]))]
    st.markdown("Text so far: " + " ".join(words) + (" " + "·" * 3 if step < len(generation.steps) else ""))
    cfg = card.config
    col_attention, col_choice = st.columns([1.5, 1], gap="large")
    with col_attention:
        cols = st.columns(2)
        keep_in_range("gen_layer", 0, cfg.n_layers - 1, "Layer")
        keep_in_range("gen_head", 0, cfg.n_heads - 1, "Head")
        layer = cols[0].radio("Layer", range(cfg.n_layers), format_func=lambda i: f"L{i}", key="gen_layer", bind=BIND,
                              horizontal=True) or 0
        head = cols[1].radio("Head", range(cfg.n_heads), format_func=lambda i: f"H{i}", key="gen_head", bind=BIND,
                             horizontal=True) or 0
        pattern, scores = generation.attention(step)
        heatmap(generation_spec(pattern[layer, head], scores[layer, head], tokens[: p + step], p,
                                title=f"attention so far · L{layer} H{head}",
                                height=int(np.clip(22 * (p + step) + 260, 460, 640))),
                key="generation_chart", filename=f"{card.name}_generation_L{layer}_H{head}_step{step}")
        st.caption("Rows above the dashed line: the prompt, read at once. Each row below it was computed from the "
                   "cache when its token was read; the newest is outlined. Masked cells (later keys) are hatched.")
    with col_choice:
        if step == 0:
            st.info("Move the step slider to see how each token was chosen.", icon=":material/touch_app:")
        else:
            choice = generation.steps[step - 1].choice
            ids = choice.candidates(10)
            labels = [text_tokenizer(card).id_to_token(int(i)) for i in ids]
            rule = "greedy: the argmax" if sampling.greedy else (
                f"T = {sampling.temperature:g}, top-k {sampling.top_k or 'off'}, top-p {sampling.top_p:g}, "
                f"seed {sampling.seed}")
            st.markdown(f"**Step {step}:** after *{shown_token(tokens[p + step - 2])}*, chose "
                        f"**{shown_token(tokens[p + step - 1])}** ({rule})")
            chart(next_token_bars(labels, choice.probs[ids], choice.kept[ids], list(ids).index(choice.token),
                                  sampling),
                  key="choice_chart", filename=f"{card.name}_step{step}_choice", zoom=False)

    def reveal(prediction: str | None) -> None:
        show_grade(prediction, cache_agreement(check.logits_error, check.pattern_error, CACHE_TOLERANCE, CACHE_OPTIONS),
                   f"over the {len(generation.steps)} generated tokens the cached run and one full pass without a "
                   f"cache differ by at most **{check.logits_error:.1e}** in the logits and "
                   f"**{check.pattern_error:.1e}** in an attention weight")
        cols = st.columns(3)
        cols[0].metric("max |Δ logits|", f"{check.logits_error:.1e}")
        cols[1].metric("max |Δ attention weight|", f"{check.pattern_error:.1e}")
        cols[2].metric("same greedy tokens", "yes" if check.same_greedy_tokens else "no")
        if check.passed(CACHE_TOLERANCE):
            st.markdown("Under a causal mask the earlier tokens' keys and values never change, so storing them loses "
                        "nothing; the two runs add the same numbers in another order, hence float rounding rather "
                        "than bit-for-bit equality.")
        else:
            st.error("The cached run and the full recomputation differ: this is a bug in the cache.", icon="⚠️")

    predict_then_reveal("predict_cache", "The cache lets the model compute only the new token's row. Are its numbers "
                        "the same as recomputing the whole text from scratch?", CACHE_OPTIONS, reveal)


# ---------------------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------------------

card = bundled_model_picker("its mask editor and its generation read the text with our own tokenizers, and your "
                            "model reads its own subword pieces")
st.title("Masks & generation")
st.markdown("A mask decides which keys each query may attend to: the allowed-matrix A is zero wherever the mask "
            "says no (seed 001 §4.1; seed 003 §6.1 on sparse patterns). Edit one, watch the model under it, then "
            "see why the causal mask makes generation cheap.")
mask_section(card)
generation_section(card)
