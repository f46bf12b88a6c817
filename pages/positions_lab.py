"""Position encodings: a classroom lesson on the sidebar model (seed 001 §3, seed 003 §7).

Sections: each encoding as a table (position × feature) and the similarity of positions; RoPE turning one query/key
feature pair; ALiBi and relative biases per head; the permutation demonstration ("herbivores eat plants").
Every number is computed by core/lessons/position_lab.py from the model or a run of it. Each section is a fragment: its own
controls rerun only it.

URL parameters (all widgets are bound): model, presenter (sidebar); encoding, positions, similar_to, predict_similar
(tables); text, rope_layer, rope_head, rope_pair, rope_which, predict_length (RoPE); bias, bias_layer,
bias_positions (biases); perm_a, perm_b, predict_no_mask, predict_causal (permutation).
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402

from core.figures.positions import (bias_heatmaps, bias_offset_lines, encoding_heatmap, length_loss_lines,  # noqa: E402
                                    permutation_grid, rope_pair_figure, similarity_colours, similarity_heatmap,
                                    similarity_profile)
from core.lessons import length_lab  # noqa: E402
from core.lessons import position_lab as lab  # noqa: E402
from core.lessons.lens import stream_labels  # noqa: E402
from core.lessons.predictions import length_change, similar_positions  # noqa: E402
from core.model.positions import alibi_slopes  # noqa: E402
from core.model.run import TextInputError, encode_text, length_refusal, text_tokenizer, tokenizer  # noqa: E402
from pages.ui.examples import PERMUTED  # noqa: E402
from pages.ui.heatmap import head_chart  # noqa: E402
from pages.ui.lessons import predict_then_reveal, show_grade, until_revealed  # noqa: E402
from pages.ui.models import bundled_model_picker, get_model, models_dir, text_cards  # noqa: E402
from pages.ui.presentation import chart, font_scale  # noqa: E402
from pages.ui.safety import show_input_error  # noqa: E402
from pages.ui.store import Setting, get_recording  # noqa: E402
from pages.ui.text_input import DEFAULT_TEXT  # noqa: E402
from pages.ui.toggles import trained_alternative  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range  # noqa: E402

TABLE_CAPTIONS = {
    "sinusoidal": "e_n[2i] = sin(n / 10000^(2i/D)), e_n[2i+1] = cos(n / 10000^(2i/D)) (Vaswani et al.): the vector "
                  "added to token n. Left columns turn fast, right ones slowly, like the hands of a clock.",
    "learned": "The model's trained position embedding e_n, one free vector per position (seed 001 footnote 19).",
    "rope": "RoPE adds nothing to the tokens: it turns each feature pair (2i, 2i+1) of the queries and keys by the "
            "angle n·θ_i. Shown: where the unit vector (1, 0) of every pair lands at position n, "
            "(cos nθ_i, sin nθ_i).",
}
SIMILAR_OPTIONS = ["its neighbours", "position 0", "the furthest positions", "all about equally"]
LENGTH_OPTIONS = ["longer", "shorter", "the same length"]
NO_MASK_OPTIONS = ["yes, the same", "no, different"]
CAUSAL_OPTIONS = ["no, the mask is not about order", "yes, the representations differ"]


@st.cache_data(max_entries=16, show_spinner=False)
def permutation_runs(model_name: str, text_a: str, text_b: str, directory: str
                     ) -> tuple[list[str], list[lab.PermutationResult]] | str:
    """Text B's tokens and the four runs of the demonstration (no mask / causal × no encoding / an encoding), or
    why they cannot run."""
    model, card = get_model(model_name, directory)
    tok = text_tokenizer(card)
    try:
        ids_a = encode_text(text_a, model.cfg.max_len, tok)[0]
        ids_b, tokens_b, _ = encode_text(text_b, model.cfg.max_len, tok)
        return tokens_b, [lab.permutation_test(model, ids_a, ids_b, mask, pe)
                          for mask in ("none", "causal") for pe in ("none", with_encoding(card))]
    except (TextInputError, ValueError) as error:
        return str(error)


def with_encoding(card) -> str:
    """The encoding the demonstration switches on: the model's own, or sinusoidal for a model trained without one."""
    return card.config.pos_encoding if card.config.pos_encoding != "none" else "sinusoidal"


# ---------------------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------------------

@st.fragment
def tables_section(model) -> None:
    st.header("1 · Each encoding as a table")
    encodings = lab.table_encodings(model)
    col_encoding, col_positions = st.columns(2)
    with col_encoding:
        encoding = st.radio("Encoding", encodings, key="encoding", bind=BIND, horizontal=True,
                            help="learned appears for a model trained with learned position embeddings.")
    with col_positions:
        keep_in_range("positions", 4, model.cfg.max_len, "Positions")
        n = int(st.slider("Positions", 4, model.cfg.max_len, min(64, model.cfg.max_len), key="positions", bind=BIND))
    encoding = encoding or encodings[0]
    table = lab.encoding_table(model, encoding, n)
    similarity = lab.position_similarity(table)
    col_table, col_similarity = st.columns(2)
    feature = "feature pair index 2i, 2i+1" if encoding == "rope" else "feature d"
    with col_table:
        chart(encoding_heatmap(table, title=f"{encoding}: position × feature", feature_title=feature),
              key="table_chart", filename=f"{encoding}_table")
        st.caption(TABLE_CAPTIONS[encoding])
    keep_in_range("similar_to", 0, n - 1, "Position n")
    position = int(st.slider("Position n to compare", 0, n - 1, min(10, n - 1), key="similar_to", bind=BIND))

    def reveal(prediction: str | None) -> None:
        nearest = lab.most_similar(similarity, position)
        row = similarity[position]
        show_grade(prediction, similar_positions(row, position, SIMILAR_OPTIONS),
                   f"the positions most like **{position}** are **{', '.join(map(str, nearest))}** (e_{position} · "
                   f"e_m = {', '.join(f'{row[m]:.3g}' for m in nearest)}; position 0: {row[0]:.3g}, the furthest, "
                   f"{furthest(position, n)}: {row[furthest(position, n)]:.3g})")
        chart(similarity_profile(similarity, position, title=f"row {position}: e_{position} · e_m"),
              key="profile_chart", filename=f"{encoding}_similarity_row_{position}", zoom=False)

    predict_then_reveal("predict_similar", f"In the {encoding} table, which positions have an encoding most like "
                        f"position {position}'s?", SIMILAR_OPTIONS, reveal)
    with col_similarity:
        if until_revealed("predict_similar", "How alike every two positions are"):
            chart(similarity_heatmap(similarity, title="e_n · e_m: how alike two positions are"),
                  key="similarity_chart", filename=f"{encoding}_similarity")
            st.caption("Row n, column m: how alike positions n and m look to a dot product, which is what attention "
                       f"computes. {similarity_colours(similarity)[1]}")


def furthest(position: int, n: int) -> int:
    """The position furthest from `position` among 0 … n − 1."""
    return 0 if position >= n - 1 - position else n - 1


@st.fragment
def rope_section(card) -> None:
    st.header("2 · RoPE: rotating query and key pairs")
    text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68,
                        help="Press Ctrl+Enter (or click outside) to run.")
    own = card.config.pos_encoding == "rope"
    recording = get_recording(Setting(card.name, pe=None if own else "rope"), text or "")
    if isinstance(recording, str):
        show_input_error(recording)
        return
    if not own:
        st.info(f"{card.name} was trained with **{card.config.pos_encoding}**: this section runs it with RoPE "
                "switched on instead (an ablation), so you see the rotation, not a trained use of it.",
                icon=":material/info:")
    cfg = recording.config
    cols = st.columns(4)
    for key, high, what in (("rope_layer", cfg.n_layers - 1, "Layer"), ("rope_head", cfg.n_heads - 1, "Head"),
                            ("rope_pair", cfg.head_dim // 2 - 1, "Feature pair")):
        keep_in_range(key, 0, high, what)
    layer = cols[0].selectbox("Layer", range(cfg.n_layers), format_func=lambda i: f"L{i}", key="rope_layer", bind=BIND)
    head = cols[1].selectbox("Head", range(cfg.n_heads), format_func=lambda i: f"H{i}", key="rope_head", bind=BIND)
    pair = cols[2].slider("Feature pair i", 0, cfg.head_dim // 2 - 1, 0, key="rope_pair", bind=BIND,
                          help="Pair i is turned by θ_i = base^(−2i/K) per position: pair 0 fastest.")
    which = cols[3].radio("Vectors", ["q", "k"], format_func=lambda w: {"q": "queries", "k": "keys"}[w],
                          key="rope_which", bind=BIND, horizontal=True)
    rotation = lab.rope_pair(recording, int(layer or 0), int(head or 0), int(pair), which or "q")
    tokens = recording.meta["tokens"]

    def reveal(prediction: str | None) -> None:
        lengths = np.linalg.norm(rotation.before, axis=1)
        show_grade(prediction, length_change(rotation.before, rotation.after, LENGTH_OPTIONS),
                   f"the largest change of any of the {len(tokens)} arrows' lengths is "
                   f"**{rotation.length_change:.1e}** (they are {lengths.min():.3g} to {lengths.max():.3g} long)")
        st.markdown("A rotation keeps lengths: below 1e-5 is float rounding. Only the direction carries the position.")

    predict_then_reveal("predict_length", f"Does RoPE make a token's arrow (layer {layer}, head {head}, pair {pair} "
                        f"of the {'queries' if which == 'q' else 'keys'}) longer, shorter, or keep its length?",
                        LENGTH_OPTIONS, reveal, about=f"{card.name}\n{text}")
    if not until_revealed("predict_length", "The arrows before and after RoPE"):
        return
    col_figure, col_notes = st.columns([3, 2])
    with col_figure:
        chart(rope_pair_figure(rotation.before, rotation.after, rotation.angle, tokens,
                               title=f"L{layer} H{head}, pair {pair}: θ = {rotation.theta:.4g} rad per position"),
              key="rope_chart", filename=f"rope_L{layer}_H{head}_pair{pair}_{which}")
    with col_notes:
        st.markdown(
            "Each grey dotted arrow is the pair (2i, 2i+1) of one token's "
            f"{'query' if which == 'q' else 'key'} as the model computed it; the coloured arrow is the same pair "
            "after RoPE turned it by **n·θ** (seed 003 §7.3):\n\n"
            "(x₁, x₂) ↦ (x₁ cos nθ − x₂ sin nθ, x₁ sin nθ + x₂ cos nθ).\n\n"
            "A query turned by nθ and a key turned by mθ meet at the angle (n − m)θ, so their score depends on "
            "how far apart they are, not on where they are.")
        st.caption(f"Check against the recording: max |R(nθ)·before − after| = {rotation.max_error:.1e}.")


@st.fragment
def bias_section(card, cards) -> None:
    st.header("3 · ALiBi and relative biases, head by head")
    st.markdown("These encodings add nothing to the tokens either: they add a bias b[h, i, j] to the score of query "
                "i and key j in head h, before the softmax. Both depend on the offset j − i alone.")
    cols = st.columns(3)
    kind = cols[0].radio("Bias", list(lab.BIAS_ENCODINGS), key="bias", bind=BIND, horizontal=True,
                         captions=["fixed slopes (Press et al.)", "learned per bucket (T5)"])
    n = int(cols[2].slider("Positions", 4, 32, 16, key="bias_positions", bind=BIND))
    source = card if kind != "relative" else trained_alternative(cards, card, pe="relative")
    if source is None:
        cols[1].empty()
        st.info("No bundled model was trained with relative position biases.", icon=":material/info:")
        return
    model, _ = get_model(source.name, str(models_dir()))
    keep_in_range("bias_layer", 0, model.cfg.n_layers - 1, "Layer")
    layer = cols[1].selectbox("Layer", range(model.cfg.n_layers), format_func=lambda i: f"L{i}", key="bias_layer",
                              bind=BIND, disabled=kind == "alibi",
                              help="ALiBi is the same in every layer; each layer learns its own relative biases.")
    layer = int(layer or 0) if kind == "relative" else 0
    bias = lab.attention_bias(model, kind or "alibi", n, layer)
    offsets, values = lab.bias_by_offset(bias)
    if kind == "relative":
        st.caption(f"The trained biases of **{source.name}**, layer {layer}"
                   + ("" if source.name == card.name else f" (the sidebar model, {card.name}, has none)") + ".")
    else:
        slopes = ", ".join(f"m_{h} = {m:.4g}" for h, m in enumerate(alibi_slopes(model.cfg.n_heads).tolist()))
        st.caption(f"ALiBi (Press et al.): b[h, i, j] = −m_h |i − j|, slopes {slopes}. The same for every model "
                   "with this many heads; blank cells are keys the model's mask hides, where no bias is used.")
    chart(bias_heatmaps(bias, title=f"{kind}: bias per head, query i × key j", cols=2 if font_scale() > 1 else None),
          key="bias_chart",
          filename=f"{kind}_bias_L{layer}")
    chart(bias_offset_lines(offsets, values, title="the same biases against the offset j − i"),
          key="bias_offset_chart", filename=f"{kind}_bias_by_offset_L{layer}")


@st.fragment
def permutation_section(card) -> None:
    st.header("4 · Does the model know the order? The permutation test")
    st.markdown("Seed 001 §3: *'herbivores eat plants' should not have the same representation (up to permutation) "
                "as 'plants eat herbivores'.* Type two texts with the same words in another order; the model runs "
                "on both, and we compare each token's residual stream in one text with the same token's in the "
                "other.")
    col_a, col_b = st.columns(2)
    text_a = col_a.text_input("Text A", PERMUTED[0], key="perm_a", bind=BIND)
    text_b = col_b.text_input("Text B: the same tokens, reordered", PERMUTED[1], key="perm_b", bind=BIND)
    result = (length_refusal(text_a or "", text_b or "")  # before the cache, which would keep the texts
              or permutation_runs(card.name, text_a or "", text_b or "", str(models_dir())))
    if isinstance(result, str):
        show_input_error(result)
        return
    tokens, runs = result
    encoding = with_encoding(card)
    trained = "" if encoding == card.config.pos_encoding else " (switched on: not trained with it)"
    switched_on = f"its own {encoding} encoding" if not trained else f"{encoding} switched on"
    titles = [f"{'no mask' if run.mask == 'none' else 'causal mask'} · "
              f"{'no position encoding' if run.pe == 'none' else run.pe + trained}: "
              f"{'same up to permutation' if run.equivariant() else 'differs'} (max {run.max_change:.2g})"
              for run in runs]
    by_condition = {(run.mask, run.pe != "none"): run for run in runs}

    def verdict(run: lab.PermutationResult) -> str:
        if run.equivariant():
            return f"the same up to permutation (largest relative change {run.max_change:.2g}: float rounding)"
        return f"different (largest relative change of a token {run.max_change:.2g})"

    def grid(conditions: list[str], key: str) -> None:
        """The changes of the runs with these masks, token by token through the stream."""
        chosen = [i for i, run in enumerate(runs) if run.mask in conditions]
        chart(permutation_grid([runs[i].change for i in chosen], [titles[i] for i in chosen], tokens,
                               stream_labels(card.config.n_layers)), key=key, filename=f"{key}_test")
        st.caption("Each cell: ‖x_B[n] − x_A[π(n)]‖ / ‖x_A[π(n)]‖, token n of text B against the same token of "
                   "text A, at every point of the residual stream. White: the same.")

    def reveal_no_mask(prediction: str | None) -> None:
        plain = by_condition[("none", False)]
        show_grade(prediction, NO_MASK_OPTIONS[0 if plain.equivariant() else 1],
                   f"without a position encoding and without a mask the two texts are {verdict(plain)}")
        st.markdown("Attention is a weighted sum over a *set* of tokens, so it cannot tell the orders apart. With "
                    f"{switched_on} they are {verdict(by_condition[('none', True)])}.")
        grid(["none"], "permutation_no_mask_chart")

    predict_then_reveal("predict_no_mask", "With no position encoding and no mask, does each token of text B get the "
                        "same representation as the same token of text A?", NO_MASK_OPTIONS, reveal_no_mask,
                        about=f"{card.name}\n{text_a}\n{text_b}")

    def reveal_causal(prediction: str | None) -> None:
        causal = by_condition[("causal", False)]
        show_grade(prediction, CAUSAL_OPTIONS[0 if causal.equivariant() else 1],
                   f"with a causal mask and no position encoding the two texts are {verdict(causal)}"
                   + (" — these two texts are in the same order" if causal.equivariant() else ""))
        st.markdown("Token n attends only to tokens 0…n, so *which* tokens it sees depends on the order: the mask "
                    "itself leaks position. The first tokens, before the texts differ, stay the same. That is why a "
                    "causal language model trained without any position encoding (lm-none) still learns word order.")
        grid(["causal"], "permutation_chart")

    predict_then_reveal("predict_causal", "No position encoding, but a causal mask: does the mask alone tell the model "
                        "about order?", CAUSAL_OPTIONS, reveal_causal,
                        about=f"{card.name}\n{text_a}\n{text_b}")


def short_text_models(cards) -> dict[str, object]:
    """One causal language model per encoding that can run past its training length, trained on one document at a
    time (not on packed long texts), by encoding."""
    models = {}
    for c in cards:
        if c.task == "grammar-lm" and not c.training.get("pack") and length_lab.any_length(c.config.pos_encoding):
            models.setdefault(c.config.pos_encoding, c)
    return models


@st.cache_data(max_entries=4, show_spinner="Reading texts 4× longer than any seen in training…")
def length_runs(names: tuple[str, ...], directory: str) -> list[length_lab.LengthRun]:
    length = length_lab.trained_length()
    return [length_lab.measure(name, get_model(name, directory)[0], length) for name in names]


@st.fragment
def length_section(cards) -> None:
    st.header("5 · Past the training length")
    models = short_text_models(cards)
    if not models:
        st.info("This needs a causal language model trained on single documents (lm-none, lm-rope, …).")
        return
    length = length_lab.trained_length()
    st.markdown(f"The language models were trained on one document at a time: at most **{length} tokens**. Here "
                f"they read held-out documents packed one after another into texts of "
                f"**{length_lab.LONGER * length} tokens**, and we measure how well each predicts the next token "
                f"at every position. Positions from {length} on were never seen in training. *learned* positions "
                "are left out: their table holds one trained vector per position up to the model's context, and "
                "the vectors past the training length were never trained, so there is nothing to extrapolate.")
    names = tuple(card.name for card in models.values())

    def reveal(prediction) -> None:
        runs = length_runs(names, str(models_dir()))
        show_grade(prediction, length_lab.least_rise(runs), length_lab.measured_rise(runs))
        chart(length_loss_lines({f"{run.encoding} ({run.name})": run.loss for run in runs}, length),
              key="length_chart", filename="past_the_training_length")
        st.caption(f"Each line: the next-token loss at each position (lower is better), the mean over "
                   f"{length_lab.TEXTS} held-out texts and 8 neighbouring positions. These models never saw two "
                   "documents in one text, so every line already rises inside the training length, where the second "
                   f"document begins (about position 25); the ratios compare the loss past position {length} with "
                   f"the loss at positions {length // 2}–{length - 1}, where every text is already past that.")
        attention_past_the_length(models, length)

    predict_then_reveal("predict_extrapolation", f"Past position {length}, which encoding's loss will rise least?",
                        list(models), reveal)


def attention_past_the_length(models: dict, length: int) -> None:
    """One head's attention on one long text, with positions never seen in training marked."""
    st.subheader("Attention at positions never seen in training")
    col_encoding, col_layer, col_head = st.columns(3)
    encoding = col_encoding.radio("Model", list(models), key="long_encoding", bind=BIND, horizontal=True)
    card = models.get(encoding) or next(iter(models.values()))
    model = get_model(card.name, str(models_dir()))[0]
    keep_in_range("long_layer", 0, model.cfg.n_layers - 1, "Layer")
    keep_in_range("long_head", 0, model.cfg.n_heads - 1, "Head")
    layer = col_layer.radio("Layer", list(range(model.cfg.n_layers)), key="long_layer", bind=BIND, horizontal=True,
                            format_func=lambda i: f"L{i}") or 0
    head = col_head.radio("Head", list(range(model.cfg.n_heads)), key="long_head", bind=BIND, horizontal=True,
                          format_func=lambda i: f"H{i}") or 0
    ids = length_lab.long_texts(length_lab.LONGER * length, 1)[0]
    pattern = length_lab.long_pattern(model, ids, min(layer, model.cfg.n_layers - 1), min(head, model.cfg.n_heads - 1))
    head_chart(pattern, [tokenizer().id_to_token(i) for i in ids.tolist()], divider=length,
               title=f"{card.name} · L{layer} H{head} · {len(ids)} tokens; from position {length} on, never seen "
                     "in training", key="long_pattern_chart", filename=f"{card.name}_L{layer}H{head}_long")
    st.caption(f"Rows: queries; columns: keys (common notation). The dashed lines mark position {length}: below and "
               "right of them, queries and keys at positions no training text reached.")


# ---------------------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------------------

cards = text_cards()
card = bundled_model_picker("it compares our models trained alike but for their position encoding (lm-learned, "
                            "lm-rope, lm-alibi, …) and reads its examples with our own tokenizers, and your model "
                            "reads its own subword pieces")
model, _ = get_model(card.name, str(models_dir()))
st.title("Position encodings")
st.markdown("Attention scores each query against each key with q·k (seed 001 §3). A position encoding tells the "
            "model where each token stands, either **added to each token** (sinusoidal, learned) or **inside "
            "attention** (RoPE turns queries and keys, ALiBi and relative encodings bias the scores).")
tables_section(model)
rope_section(card)
bias_section(card, cards)
permutation_section(card)
length_section(cards)
