"""Text explorer: type a sentence and see what every attention head of a bundled text model does with it.

URL parameters (all widgets are bound): model, notation (sidebar); text, mask, window, stride, pe, apply, compare,
layer, head.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from core.analysis import head_summaries  # noqa: E402
from core.figures.attention import (difference_heatmap, head_heatmap, oriented, small_multiples,  # noqa: E402
                                    token_labels)
from core.recording import Recording  # noqa: E402
from pages._common import (APPLY_LABELS, BIND, MASK_CHOICES, OWN, Setting, ablation_encodings,  # noqa: E402
                           get_recording, model_picker, notation_switch, show_input_error, text_cards,
                           trained_alternative, trained_encodings)

DEFAULT_TEXT = "the keys to the old cabinet are on the table ."
NOTATION_CAPTIONS = {
    "common": "Common notation: row n is query n (the token doing the attending), columns are the keys n′ it "
              "reads from; **each row sums to 1**.",
    "paper": "Paper notation (seed 001, eq. 1: y_n = Σ_n′ x_n′ A_n′,n): column n is query n, rows are the keys "
             "n′; **each column sums to 1**. This is the transpose of the common layout.",
}
MASKED_NOTE = "Grey hatched cells are **masked**: the query may not see that key, its weight is exactly 0."


def mask_label(card, kind: str) -> str:
    return f"model's own ({card.config.mask})" if kind == OWN else kind


def pe_label(card, pe: str) -> str:
    return f"model's own ({card.config.pos_encoding})" if pe == OWN else pe


# ---------------------------------------------------------------------------------------------------------
# Toggles
# ---------------------------------------------------------------------------------------------------------

def toggles(card, cards) -> tuple[Setting, Setting, bool, list[str]]:
    """The widgets for mask, position encoding, how to apply them and compare mode.

    Returns (the model's own setting, the chosen setting, compare on?, notes to show)."""
    cfg = card.config
    own = Setting(card.name, window=cfg.window, stride=cfg.stride)
    col_mask, col_pe, col_apply = st.columns([1.2, 1, 1.3])
    with col_apply:
        apply = st.radio("Apply a change as…", list(APPLY_LABELS), captions=list(APPLY_LABELS.values()),
                         key="apply", bind=BIND, horizontal=True,
                         help="Ablation runs the same weights with another mask or encoding (the model was not "
                              "trained for it). The other choice loads the bundled model that was trained with it.")
        compare = st.toggle("Compare with the model's own setting", key="compare", bind=BIND,
                            help="Show the model's own setting and the chosen one side by side, and their difference.")
    with col_mask:
        mask = st.selectbox("Mask", [OWN, *MASK_CHOICES], format_func=lambda k: mask_label(card, k), key="mask",
                            bind=BIND, help="Which keys each query may attend to. causal: itself and earlier "
                                            "tokens; window: the w nearest; strided: the last s and every s-th.")
        window, stride = cfg.window, cfg.stride
        if mask == "window":
            window = int(st.number_input("Window width w", 1, cfg.max_len, cfg.window, key="window", bind=BIND))
        elif mask == "strided":
            stride = int(st.number_input("Stride s", 1, cfg.max_len, cfg.stride, key="stride", bind=BIND))
    with col_pe:
        encodings = ablation_encodings(card) if apply == "ablation" else trained_encodings(cards, card)
        pe = st.selectbox("Position encoding", [OWN, *encodings[1:]], format_func=lambda p: pe_label(card, p),
                          key="pe", bind=BIND,
                          help="Ablation offers the parameter-free encodings (any model can run them); "
                               "'switch' offers the encodings some bundled model was trained with.")
    mask_choice = None if mask in (OWN, None) or mask == cfg.mask and mask not in ("window", "strided") else mask
    pe_choice = None if pe in (OWN, None) or pe == cfg.pos_encoding else pe
    notes = []
    chosen = Setting(card.name, mask_choice, window, stride, pe_choice)
    if apply == "trained model" and (mask_choice or pe_choice):
        alternative = trained_alternative(cards, card, pe=pe_choice, mask=mask_choice)
        if alternative is None:
            notes.append("No bundled model was trained with this choice, so it is applied to the current model "
                         "as an ablation instead.")
        else:
            chosen = Setting(alternative.name, window=alternative.config.window, stride=alternative.config.stride)
            acfg = alternative.config
            notes.append(f"Showing **{alternative.name}**, the bundled model trained with mask {acfg.mask} and "
                         f"encoding {acfg.pos_encoding} (the sidebar model is {card.name}).")
    if mask_choice == "window":
        notes.append(f"Window mask: each query sees {'the w most recent tokens' if cfg.is_causal else 'keys less than w away'}"
                     f" (w = {window}).")
    return own, chosen, bool(compare), notes


# ---------------------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------------------

def masked_of(recording: Recording, layer: int) -> np.ndarray:
    """Which cells are masked, read from the recording (scores are -inf there); the same for every head."""
    return np.isneginf(recording.scores(layer)[0])


def pattern_csv(recording: Recording, layer: int, head: int, notation: str) -> str:
    tokens = [f"{i}:{token}" for i, token in enumerate(recording.meta["tokens"])]
    shown = oriented(recording.pattern(layer)[head], notation)
    rows, cols = ("key", "query") if notation == "paper" else ("query", "key")
    frame = pd.DataFrame(np.round(shown, 6), index=tokens, columns=tokens)
    frame.index.name = f"{rows} \\ {cols}"
    return frame.to_csv()


def npz_bytes(recording: Recording) -> bytes:
    buffer = io.BytesIO()
    recording.save_npz(buffer)
    return buffer.getvalue()


@st.fragment
def head_view(recording: Recording, baseline: Recording | None, labels: tuple[str, str], notation: str) -> None:
    """Layer and head pickers, the chosen head's heatmap (and, comparing, the baseline and the difference),
    downloads. A fragment: changing layer or head reruns only this part."""
    n_layers = recording.n_layers if baseline is None else min(recording.n_layers, baseline.n_layers)
    n_heads = recording.config.n_heads if baseline is None else min(recording.config.n_heads, baseline.config.n_heads)
    col_layer, col_head = st.columns(2)
    with col_layer:
        layer = st.radio("Layer", list(range(n_layers)), format_func=lambda i: f"L{i}", key="layer", bind=BIND,
                         horizontal=True)
    with col_head:
        head = st.radio("Head", list(range(n_heads)), format_func=lambda i: f"H{i}", key="head", bind=BIND,
                        horizontal=True)
    layer = 0 if layer is None else min(int(layer), n_layers - 1)
    head = 0 if head is None else min(int(head), n_heads - 1)
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    chart_config = {"displaylogo": False}
    if baseline is None:
        st.markdown(f"**Layer {layer}, head {head}** · {labels[1]}")
        st.plotly_chart(head_heatmap(recording.pattern(layer)[head], tokens, recording.scores(layer)[head],
                                     unknown=unknown, notation=notation),
                        key="head_chart", config=chart_config)
    else:
        height = int(np.clip(22 * len(tokens) + 200, 420, 720))
        col_a, col_b, col_d = st.columns(3)
        with col_a:
            st.markdown(f"**A** · layer {layer}, head {head} · {labels[0]}")
            st.plotly_chart(head_heatmap(baseline.pattern(layer)[head], tokens, baseline.scores(layer)[head],
                                         unknown=unknown, notation=notation, height=height),
                            key="head_chart_a", config=chart_config)
        with col_b:
            st.markdown(f"**B** · layer {layer}, head {head} · {labels[1]}")
            st.plotly_chart(head_heatmap(recording.pattern(layer)[head], tokens, recording.scores(layer)[head],
                                         unknown=unknown, notation=notation, height=height),
                            key="head_chart", config=chart_config)
        with col_d:
            st.markdown("**B − A** · red: B attends more, blue: A attends more")
            st.plotly_chart(difference_heatmap(baseline.pattern(layer)[head], recording.pattern(layer)[head],
                                               tokens, unknown=unknown, notation=notation,
                                               masked_a=masked_of(baseline, layer),
                                               masked_b=masked_of(recording, layer), labels_ab=("A", "B"),
                                               height=height),
                            key="diff_chart", config=chart_config)
        if baseline.meta.get("model") != recording.meta.get("model"):
            st.caption("A and B are different trained models: their heads with the same number need not do the "
                       "same job.")
    st.caption(NOTATION_CAPTIONS[notation] + " " + MASKED_NOTE + " Hover a cell for the query, key, weight and "
               "pre-softmax score.")
    col_npz, col_csv = st.columns(2)
    col_npz.download_button("⬇ recording (.npz)", lambda: npz_bytes(recording),
                            file_name=f"{recording.meta.get('model') or 'recording'}.npz",
                            mime="application/octet-stream", on_click="ignore", key="download_npz",
                            help="Every recorded array under its TransformerLens-style hook name, plus a JSON `meta`.")
    col_csv.download_button("⬇ this pattern (.csv)", pattern_csv(recording, layer, head, notation),
                            file_name=f"pattern_L{layer}_H{head}_{notation}.csv", mime="text/csv",
                            on_click="ignore", key="download_csv")


def _open_head(source: str) -> None:
    """Callback: open the head picked in the overview or the summary table (sets the layer and head pickers)."""
    if source == "pills":
        picked = st.session_state.get("open_head")
        st.session_state["open_head"] = None
        if not picked:
            return
        layer, head = (int(part[1:]) for part in picked.split())
    else:
        state = st.session_state.get("summary_table")
        rows = state.selection.rows if state is not None else []
        if not rows:
            return
        layer, head = divmod(int(rows[0]), st.session_state["_n_heads"])
    st.session_state["layer"], st.session_state["head"] = layer, head


def overview(recording: Recording, notation: str) -> None:
    """Every layer x head as small multiples, with buttons that open one."""
    m, h = recording.n_layers, recording.config.n_heads
    selected = (st.session_state.get("layer"), st.session_state.get("head"))
    selected = tuple(int(v) for v in selected) if None not in selected else (0, 0)
    st.plotly_chart(small_multiples(recording.patterns(), notation=notation, selected=selected,
                                    masked=masked_of(recording, 0), cell_px=int(np.clip(520 / h, 80, 150))),
                    key="overview_chart", config={"displaylogo": False, "displayModeBar": False})
    st.pills("Open a head", [f"L{layer} H{head}" for layer in range(m) for head in range(h)], key="open_head",
             on_change=_open_head, args=("pills",), help="Shows it in full size.", wrap=True)


def summaries_table(recording: Recording) -> None:
    """One row per head: entropy, mean distance, previous-token, first-token and self attention."""
    summaries = head_summaries(recording.patterns())
    m, h = recording.n_layers, recording.config.n_heads
    st.session_state["_n_heads"] = h
    frame = pd.DataFrame({"head": [f"L{layer} H{head}" for layer in range(m) for head in range(h)],
                          **{name: np.round(values.reshape(-1), 3) for name, values in summaries.items()}})
    fraction = dict(min_value=0.0, max_value=1.0, format="%.2f")
    st.dataframe(
        frame, hide_index=True, height=min(36 * (len(frame) + 1) + 3, 640), key="summary_table", on_select=lambda: _open_head("table"),
        selection_mode="single-row",
        column_config={
            "head": st.column_config.TextColumn("head", help="layer L, head H"),
            "entropy (bits)": st.column_config.NumberColumn(
                help="How spread out each query's attention is: 0 = one key, log2(k) = evenly over k keys",
                format="%.2f"),
            "mean distance (tokens)": st.column_config.NumberColumn(
                help="How far back (or ahead) the attended keys are on average", format="%.2f"),
            "previous token": st.column_config.ProgressColumn(
                help="Mean weight on the token just before the query", **fraction),
            "first token": st.column_config.ProgressColumn(
                help="Mean weight on the first token, [BOS] (often a 'no-op' resting place)", **fraction),
            "self": st.column_config.ProgressColumn(help="Mean weight on the query's own token", **fraction),
        })
    st.caption("Sort by a column to find heads by behaviour; select a row to open that head above. "
               "Averages over the queries of this text.")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Text explorer")
st.caption("Type a sentence and see where each attention head of a small trained transformer looks.")
cards = text_cards()
card = model_picker(cards)
notation = notation_switch()
text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68,
                    help="Lowercase words from the grammar work best; unknown words are shown as ⟨word⟩?. "
                         "Press Ctrl+Enter (or click outside) to run.")
own, chosen, compare, notes = toggles(card, cards)
for note in notes:
    st.info(note, icon="ℹ️")

recording = get_recording(chosen, text or "")
baseline = None
if compare:
    if chosen.normalised() == own.normalised():
        st.info("Compare mode: choose a different mask or position encoding above to compare it with the model's "
                "own setting.", icon="ℹ️")
    else:
        baseline = get_recording(own, text or "")
problem = next((r for r in (recording, baseline) if isinstance(r, str)), None)
if problem is not None:
    show_input_error(problem)
    st.stop()

tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
shown_tokens = " ".join(token_labels(tokens, unknown)).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
st.markdown(f"**{len(tokens)} tokens** (with [BOS]): `{shown_tokens}`")
if any(unknown):
    st.warning(f"{sum(unknown)} token(s) are not in the model's vocabulary and are read as [UNK] "
               "(marked ⟨…⟩?).", icon="❓")
chosen_card = next((c for c in cards if c.name == chosen.model), card)
labels = (own.describe(card), chosen.describe(chosen_card))
st.caption(f"Running: {labels[1]} — mask {recording.meta.get('mask')}, encoding {recording.meta.get('pe')}")

if baseline is None:
    col_head, col_all = st.columns([3, 2], gap="large")
    with col_head:
        head_view(recording, None, labels, notation)
    with col_all:
        st.subheader("All heads")
        overview(recording, notation)
else:
    head_view(recording, baseline, labels, notation)
    st.subheader("All heads (B)")
    overview(recording, notation)
st.subheader("Head summaries")
summaries_table(recording)
