"""Text explorer: type a sentence and see what every attention head of a bundled text model does with it.

URL parameters (all widgets are bound): model, notation (sidebar); text, mask, window, stride, pe, apply, compare,
layer, head (the chosen head), view (the open tab), qk_query, qk_key (the score taken apart), lines_layer,
lines_heads, lines_token, lines_from (the head view; its window on a long text), rollout_residual (the rollout).

Reruns are kept small, from the outside in: the sidebar reruns the page; the text box and everything below it are a
fragment, so typing reruns that part only; the toggles (mask, position encoding, compare) and everything below them
are a fragment inside it, so a toggle reruns less still; inside that the layer and head pickers and the tabs are
another, and the score breakdown, the head view and the rollout are fragments of their own. The views sit in lazy
tabs: only the open one runs and is drawn.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402
from streamlit.errors import StreamlitAPIException  # noqa: E402

from core.figures.attention import (HEAD_COLORS, HEAD_VIEW_TOKENS, MIN_LINE_WEIGHT, head_view_tokens,  # noqa: E402
                                    oriented, plain_token_labels, weight_outside)
from core.figures.canvas import (difference_heatmap_spec, head_heatmap_spec, head_view_spec,  # noqa: E402
                                 overview_spec, rollout_spec)
from core.lessons.analysis import head_summaries, rollout  # noqa: E402
from core.model.recording import Recording  # noqa: E402
from pages.ui.heatmap import heatmap  # noqa: E402
from pages.ui.models import any_text_model_picker, is_pretrained  # noqa: E402
from pages.ui.presentation import model_name  # noqa: E402
from pages.ui.safety import literal, show_input_error  # noqa: E402
from pages.ui.score import HEAVIEST_KEY, score_breakdown  # noqa: E402
from pages.ui.store import Recorded, Setting, get_recording, slow_note  # noqa: E402
from pages.ui.text_input import (DEFAULT_TEXT, offer_fitting_start, shown_token, text_help,  # noqa: E402
                                 token_choices, unknown_warning)
from pages.ui.toggles import (APPLY_LABELS, MASK_CHOICES, OWN, ablation_encodings, chosen_setting,  # noqa: E402
                              resend_on_model_change, trained_encodings)
from pages.ui.widgets import BIND, keep_in_range, keep_in_url, layer_head_picker, notation_switch  # noqa: E402

NOTATION_CAPTIONS = {
    "common": "Common notation: row n is query n (the token doing the attending), columns are the keys n′ it "
              "reads from; **each row sums to 1**.",
    "paper": "Paper notation (seed 001, eq. 1: y_n = Σ_n′ x_n′ A_n′,n): column n is query n, rows are the keys "
             "n′; **each column sums to 1**. This is the transpose of the common layout.",
}
MASKED_NOTE = "Grey hatched cells are **masked**: the query may not see that key, its weight is exactly 0."
SIDE_BY_SIDE_TOKENS = 24  # up to this many tokens the head's chart and its notes share a row
INLINE_TOKENS = 128  # up to this many tokens they are listed above the charts; more fold into an expander
OVERVIEW_NOTE = "*All heads* (the next tab) shows every layer and head at once."
HOVER_NOTE = ("Hover a cell for the query, key, weight and pre-softmax score; **click it** to take that score apart, "
              "step by step.")
PNG_NOTE = (":material/photo_camera: Every chart saves itself as a PNG image from its top right corner: the **⤓ PNG** "
            "button on the head's heatmaps, the camera (**Download plot as a PNG**) in the other charts' toolbars. "
            "It works offline, in the browser.")


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
    alone = is_pretrained(card)  # a user's pretrained model has no sibling trained with another choice
    resend_on_model_change(card, "mask", "pe")
    with col_apply:
        apply = st.radio("Apply a change as…", list(APPLY_LABELS), captions=list(APPLY_LABELS.values()),
                         key="apply", bind=BIND, horizontal=True, disabled=alone,
                         help="Ablation runs the same weights with another mask or encoding (the model was not "
                              "trained for it). The other choice loads the bundled model that was trained with it."
                              + (" A pretrained model has no such sibling: its changes are ablations." if alone else ""))
        apply = "ablation" if alone else apply
        compare = st.toggle("Compare with the model's own setting", key="compare", bind=BIND,
                            help="Show the model's own setting and the chosen one side by side, and their difference.")
    with col_mask:
        mask = st.selectbox("Mask", [OWN, *MASK_CHOICES], format_func=lambda k: mask_label(card, k), key="mask",
                            bind=BIND, help="Which keys each query may attend to. causal: itself and earlier "
                                            "tokens; window: the w nearest; strided: the last s and every s-th.")
        window, stride = cfg.window, cfg.stride
        if mask == "window":
            keep_in_range("window", 1, cfg.max_len, "Window width")
            window = int(st.number_input("Window width w", 1, cfg.max_len, cfg.window, key="window", bind=BIND))
        elif mask == "strided":
            keep_in_range("stride", 1, cfg.max_len, "Stride")
            stride = int(st.number_input("Stride s", 1, cfg.max_len, cfg.stride, key="stride", bind=BIND))
    with col_pe:
        encodings = ablation_encodings(card) if apply == "ablation" else trained_encodings(cards, card)
        pe = st.selectbox("Position encoding", [OWN, *encodings[1:]], format_func=lambda p: pe_label(card, p),
                          key="pe", bind=BIND,
                          help="Ablation offers the parameter-free encodings (any model can run them); "
                               "'switch' offers the encodings some bundled model was trained with.")
    mask_choice = None if mask in (OWN, None) else mask
    chosen, note = chosen_setting(cards, card, mask_choice, None if pe in (OWN, None) else pe, window, stride,
                                  apply == "trained model")
    notes = [note] if note else []
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


def downloads(recorded: Recorded, layer: int, head: int, notation: str) -> None:
    """The .npz and .csv download buttons, side by side while they fit, full labels (wrapped, never cut). Their
    files are made on click, from the handle: Streamlit keeps a session's download callables as long as the session,
    and callables holding the recording kept it alive (issue 36)."""
    with st.container(horizontal=True, gap="small"):
        st.download_button("⬇ Download the recording (.npz)", lambda: npz_bytes(recorded.get()),
                           file_name=f"{model_name(recorded.get())}.npz", mime="application/octet-stream",
                           on_click="ignore", key="download_npz", wrap=True,
                           help="Every recorded array under its TransformerLens-style hook name, plus a JSON `meta`.")
        st.download_button(f"⬇ Download this pattern, L{layer} H{head} (.csv)",
                           lambda: pattern_csv(recorded.get(), layer, head, notation),  # on click: 0.4 s at 512 tokens
                           file_name=f"pattern_L{layer}_H{head}_{notation}.csv", mime="text/csv",
                           on_click="ignore", key="download_csv", wrap=True,
                           help="The weights of the chosen head as a table, laid out as in the chart "
                                "(the notation switch decides which way).")


def head_pickers(recording: Recording, baseline: Recording | None) -> tuple[int, int]:
    """The layer and head radios (URL keys `layer`, `head`), over the heads both recordings have."""
    n_layers = recording.n_layers if baseline is None else min(recording.n_layers, baseline.n_layers)
    n_heads = recording.config.n_heads if baseline is None else min(recording.config.n_heads, baseline.config.n_heads)
    return layer_head_picker(n_layers, n_heads)


def head_notes(recorded: Recorded, layer: int, head: int, notation: str) -> None:
    """How to read the chosen head's chart (notation, masked cells, hover, where all heads are, its PNG) in one
    caption, and its downloads: each element a toggle redraws costs the browser about 2 ms."""
    st.caption(" ".join((NOTATION_CAPTIONS[notation], MASKED_NOTE, HOVER_NOTE, OVERVIEW_NOTE)) + "\n\n" + PNG_NOTE)
    downloads(recorded, layer, head, notation)


def titled_heatmap(title: str, spec: dict, key: str, filename: str, choices: list[str]) -> None:
    """A head's heatmap under its title (markdown on the page, plain text at the top of the PNG); a click on a cell
    takes its score apart."""
    st.markdown(title)
    heatmap(spec, key=key, filename=filename, on_cell=functools.partial(_open_score, choices=choices),
            png_title=title.replace("**", ""))


def head_section(recorded: Recorded, baseline: Recording | None, labels: tuple[str, str], notation: str,
                 layer: int, head: int, untrained: tuple[int | None, int | None] = (None, None)) -> None:
    """The chosen head's heatmap (and, comparing, the baseline and the difference), all heads, downloads.
    `untrained`: where each model's training length ended (A, B), a dashed line on its chart; None: not reached."""
    recording = recorded.get()
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    name = model_name(recording)
    choices = token_choices(tokens, unknown)  # a click writes its query and key to the URL by these labels
    if baseline is None:
        wide = len(tokens) > SIDE_BY_SIDE_TOKENS  # a long text needs the full width to keep its labels readable
        # wide: one under the other, straight into the tab (no containers: two more elements to redraw)
        col_main, col_notes = (contextlib.nullcontext(),) * 2 if wide else st.columns([3, 2], gap="large")
        with col_main:
            titled_heatmap(f"**Layer {layer}, head {head}** · {labels[1]}",
                           head_heatmap_spec(recording.pattern(layer)[head], tokens, recording.scores(layer)[head],
                                             unknown=unknown, notation=notation, divider=untrained[1]),
                           "head_chart", f"{name}_pattern_L{layer}_H{head}_{notation}", choices)
        with col_notes:
            head_notes(recorded, layer, head, notation)
    else:
        height = int(np.clip(22 * len(tokens) + 200, 420, 720))
        where = f"L{layer}_H{head}_{notation}"
        col_a, col_b, col_d = st.columns(3, vertical_alignment="bottom")  # charts level, whatever their titles
        with col_a:
            titled_heatmap(f"**A** · layer {layer}, head {head} · {labels[0]}",
                           head_heatmap_spec(baseline.pattern(layer)[head], tokens, baseline.scores(layer)[head],
                                             unknown=unknown, notation=notation, height=height,
                                             divider=untrained[0]),
                           "head_chart_a", f"{model_name(baseline)}_A_pattern_{where}", choices)
        with col_b:
            titled_heatmap(f"**B** · layer {layer}, head {head} · {labels[1]}",
                           head_heatmap_spec(recording.pattern(layer)[head], tokens, recording.scores(layer)[head],
                                             unknown=unknown, notation=notation, height=height,
                                             divider=untrained[1]),
                           "head_chart", f"{name}_B_pattern_{where}", choices)
        with col_d:
            titled_heatmap("**B − A** · red: B attends more, blue: A attends more",
                           difference_heatmap_spec(baseline.pattern(layer)[head], recording.pattern(layer)[head],
                                                   tokens, unknown=unknown, notation=notation,
                                                   masked_a=masked_of(baseline, layer),
                                                   masked_b=masked_of(recording, layer), labels_ab=("A", "B"),
                                                   height=height),
                           "diff_chart", f"{name}_B_minus_A_{where}", choices)
        if baseline.meta.get("model") != recording.meta.get("model"):
            st.caption("A and B are different trained models: their heads with the same number need not do the "
                       "same job.")
        head_notes(recorded, layer, head, notation)


def _open_score(cell: dict | None, choices: list[str]) -> None:
    """Callback: a click on a cell of a head's heatmap takes that score apart in *One score, step by step*.
    `choices`: the token pickers' options, the labels their values have in the URL."""
    if cell:
        query, key = int(cell["query"]), int(cell["key"])
        st.session_state["qk_query"], st.session_state["qk_key"] = query, key
        for param, value in (("qk_query", query), ("qk_key", key)):
            try:
                # Streamlit writes a value set in session state to the URL only for a widget drawn in the last
                # run: the pickers, in a closed tab, were not, so the link would lack them. Written here instead.
                st.query_params[param] = choices[value]
            except StreamlitAPIException:
                pass  # still bound: the pickers were drawn (a fragment kept them), Streamlit writes the values
        st.session_state.pop(HEAVIEST_KEY, None)  # a key chosen: the picker stops following the heaviest
        st.session_state["view"] = VIEWS[2]


def _open_head(source: str) -> None:
    """Callback: open the head picked in the overview or the summary table in *Attention pattern* (sets the layer
    and head pickers and the tab)."""
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
    st.session_state["layer"], st.session_state["head"], st.session_state["view"] = layer, head, VIEWS[0]


def _open_tile(cell: dict | None) -> None:
    """Callback: a click on a head's tile in the overview opens that head in *Attention pattern*."""
    if cell is not None:
        st.session_state["layer"], st.session_state["head"] = int(cell["layer"]), int(cell["head"])
        st.session_state["view"] = VIEWS[0]


def overview(recording: Recording, notation: str, selected: tuple[int, int]) -> None:
    """Every layer x head as small multiples on the canvas chart (the selected one outlined): a click on a tile,
    or a button, opens that head. The tiles share about 720 px of width, so the grid is not shrunk into a tall,
    mostly empty chart."""
    m, h = recording.n_layers, recording.config.n_heads
    heatmap(overview_spec(recording.patterns(), recording.meta["tokens"], notation=notation, selected=selected,
                          masked=masked_of(recording, 0), tile_px=int(np.clip(720 / h, 50, 180))),
            key="overview_chart", filename=f"{model_name(recording)}_all_heads_{notation}", on_cell=_open_tile,
            png_title="Every head of every layer")
    st.pills("Open a head", [f"L{layer} H{head}" for layer in range(m) for head in range(h)], key="open_head",
             on_change=_open_head, args=("pills",), help="Shows it in full size, in *Attention pattern*.", wrap=True)


def lines_window_start(n: int) -> int:
    """The head view's window slider (URL key `lines_from`), shown only for texts longer than the window: the
    first token after [BOS] that the view draws."""
    if n <= HEAD_VIEW_TOKENS + 1:
        return 1
    return int(st.slider("Window: first token shown", 1, n - HEAD_VIEW_TOKENS, 1, key="lines_from", bind=BIND,
                         help=f"The head view draws [BOS] and {HEAD_VIEW_TOKENS} tokens from here.") or 1)


@st.fragment
def lines_section(recorded: Recorded, notation: str, compared: bool = False) -> None:
    """The head view: a layer, some of its heads and optionally one token; lines from queries to keys."""
    recording = recorded.get()
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    n, m, h = len(tokens), recording.n_layers, recording.config.n_heads
    choices = token_choices(tokens, unknown)
    col_chart, col_controls = st.columns([3, 2], gap="large")
    with col_controls:
        keep_in_range("lines_layer", 0, m - 1, "Layer")
        layer = st.radio("Layer", list(range(m)), format_func=lambda i: f"L{i}", key="lines_layer", bind=BIND,
                         horizontal=True)
        heads = st.multiselect("Heads (one colour each)", list(range(h)), default=list(range(h)),
                               format_func=lambda i: f"H{i}", key="lines_heads", bind=BIND,
                               help="Colours from the Okabe–Ito palette, told apart by colour-blind readers too.")
        keep_in_range("lines_token", 0, n - 1, "Token")
        token = st.selectbox("Show the lines of one query token", [None, *range(n)],
                             format_func=lambda i: "all tokens" if i is None else choices[i],
                             key="lines_token", bind=BIND, help="Isolates the keys that this token attends to.")
        layer = 0 if layer is None else min(int(layer), m - 1)
        heads = sorted({int(x) for x in heads or [] if 0 <= int(x) < h})
        token = None if token is None or not 0 <= int(token) < n else int(token)
        shown = head_view_tokens(n, lines_window_start(n), token)
        side = ("queries n (the tokens attending) on the left, keys n′ on the right" if notation == "common" else
                "keys n′ (the x_{n′} being mixed) on the left, queries n (y_n = Σ_n′ x_n′ A_n′,n) on the right")
        swatches = " ".join(f"<span style='color:{HEAD_COLORS[x % len(HEAD_COLORS)]}'>■ H{x}</span>" for x in heads)
        st.markdown(f"Each band joins a query to a key it reads; **its thickness is the weight** (weights under "
                    f"{MIN_LINE_WEIGHT} are left out). Here: {side}. {swatches}", unsafe_allow_html=True)
        st.caption("Hover a band for its weight; click a band or a query's label to show that query's bands alone "
                   "(click again for all). Click a head in the key above the bands to hide it, double-click to show "
                   "it alone." + (" Showing B, the chosen setting." if compared else ""))
        if len(shown) < n:
            outside = weight_outside(recording.pattern(layer), heads, shown)
            st.caption(f"**A window of the text:** [BOS] and tokens {shown[1]}–{shown[-1]} of {n - 1}; hundreds of "
                       f"rows of bands are a tangle. Bands to tokens outside the window are not drawn: they hold "
                       f"{outside:.0%} of these queries' weight (mean over the chosen heads). Move the window, or "
                       "pick one query token above: the window follows it.")
    with col_chart:
        if not heads:
            st.info("Pick at least one head.", icon="ℹ️")
            return
        heatmap(head_view_spec(recording.pattern(layer), tokens, heads, unknown=unknown, query=token,
                               notation=notation, layer=layer, shown=shown),
                key="lines_chart", filename=f"{model_name(recording)}_head_view_L{layer}_{notation}",
                on_cell=_isolate_query)


def _isolate_query(cell: dict | None) -> None:
    """Callback: a click on a band or a query's label in the head view shows that query's bands alone; on the query
    already alone, every query's again."""
    if cell and cell.get("query") is not None:
        query = int(cell["query"])
        st.session_state["lines_token"] = None if st.session_state.get("lines_token") == query else query


@st.fragment
def rollout_section(recorded: Recorded, notation: str, compared: bool = False) -> None:
    """Attention rollout over all layers, with the residual share as its one control."""
    recording = recorded.get()
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    col_chart, col_text = st.columns([3, 2], gap="large")
    with col_text:
        residual = st.slider("Residual share w", 0.0, 0.9, 0.5, 0.05, key="rollout_residual", bind=BIND,
                             help="How much of each layer's mixing is the residual connection (identity). "
                                  "Abnar & Zuidema use 0.5.")
        residual = 0.5 if residual is None else float(residual)
        matrix = rollout(recording.patterns(), residual_weight=residual)
        sums = matrix.sum(axis=1)
        along = "column" if notation == "paper" else "row"
        m = recording.n_layers
        product = (" ".join(f"Â_{i}" for i in reversed(range(m))) if m <= 3 else f"Â_{m - 1} ⋯ Â_1 Â_0")
        st.markdown(
            "**Attention rollout** (Abnar & Zuidema, 2020) follows attention through every layer: each layer's "
            f"heads are averaged, Â_l = rows normalised ((1 − w) mean_h A_l,h + w I), the identity standing for "
            f"the residual connection, and the layers are multiplied, {product}. Entry (n, n′) says how much "
            f"output token n draws on input token n′ through attention alone.")
        st.caption(f"**Each {along} sums to 1**: here the {along} sums run from {sums.min():.6f} to "
                   f"{sums.max():.6f}. " + ("Paper notation: column n is output token n, rows are the inputs n′."
                                            if notation == "paper" else
                                            "Common notation: row n is output token n, columns are the inputs n′.")
                   + (" Showing B, the chosen setting." if compared else ""))
    with col_chart:
        heatmap(rollout_spec(matrix, tokens, unknown=unknown, notation=notation), key="rollout_chart",
                filename=f"{model_name(recording)}_rollout_{notation}", png_title="Attention rollout")


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
    st.caption("Sort by a column to find heads by behaviour; select a row to open that head in *Attention pattern*. "
               "Averages over the queries of this text.")


NOT_THE_PICKERS = ("The Layer and Head pickers above choose the head of *Attention pattern*, *All heads* and *One "
                   "score, step by step*; they do not change this view.")
VIEWS = ("Attention pattern", "All heads", "One score, step by step", "Head view", "Rollout", "Head summaries")


@st.fragment
def views(recorded: Recorded, compared_with: Recorded | None, labels: tuple[str, str], notation: str,
          untrained: tuple[int | None, int | None] = (None, None)) -> None:
    """The layer and head pickers, then one tab per view (URL key `view`). Tabs are lazy: only the open one runs
    and is drawn, so a toggle redraws what is on screen (one chart by default: each chart costs the browser about
    twice a plotly draw); a fragment, so picking a head or a tab reruns only this part. `compared_with`: the
    model's own setting's recording, in compare mode."""
    recording, baseline = recorded.get(), compared_with and compared_with.get()
    keep_in_url("layer", "head", "view")  # in the URL whatever the timing of the clicks that set them
    layer, head = head_pickers(recording, baseline)
    compared = baseline is not None
    tabs = dict(zip(VIEWS, st.tabs(VIEWS, key="view", bind=BIND)))
    if tabs["Attention pattern"].open:
        with tabs["Attention pattern"]:
            head_section(recorded, baseline, labels, notation, layer, head, untrained)
    if tabs["All heads"].open:
        with tabs["All heads"]:
            st.caption(f"Every layer (rows) and head (columns){' of B, the chosen setting' if compared else ''}, "
                       "on one colour scale; the head chosen above is outlined in red. Hover a cell for its layer, "
                       "head, query, key and weight; click a head's tile, or its button below, to see it in full.")
            overview(recording, notation, (layer, head))
    if tabs["One score, step by step"].open:
        with tabs["One score, step by step"]:
            st.markdown("**q · k → weight**: one entry of the chosen head's pattern, taken apart.")
            score_breakdown(recorded, layer, head, notation, compared=compared)
    if tabs["Head view"].open:
        with tabs["Head view"]:
            st.caption(f"{NOT_THE_PICKERS} Choose this view's layer and heads on the right.")
            lines_section(recorded, notation, compared=compared)
    if tabs["Rollout"].open:
        with tabs["Rollout"]:
            st.caption(f"{NOT_THE_PICKERS} Rollout combines every layer and head.")
            rollout_section(recorded, notation, compared=compared)
    if tabs["Head summaries"].open:
        with tabs["Head summaries"]:
            st.caption(f"{NOT_THE_PICKERS} One row per head of every layer.")
            summaries_table(recording)


@st.fragment
def explorer(card, cards, text: str, notation: str) -> None:
    """The toggles, the recording(s) they ask for and the views. A fragment: a toggle reruns this part only, not
    the sidebar, the title and the text box (typing reruns text_and_views, around it)."""
    own, chosen, compare, notes = toggles(card, cards)
    for note in notes:
        st.info(note, icon="ℹ️")
    recording = get_recording(chosen, text)
    baseline = None
    if compare:
        if chosen.normalised() == own.normalised():
            st.info("Compare mode: choose a different mask or position encoding above to compare it with the "
                    "model's own setting.", icon="ℹ️")
        else:
            baseline = get_recording(own, text)
    problem = next((r for r in (recording, baseline) if isinstance(r, str)), None)
    chosen_card = next((c for c in cards if c.name == chosen.model), card)
    if problem is not None:
        show_input_error(problem)
        offer_fitting_start(text, [card, chosen_card])
        return
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    shown_tokens = " ".join(plain_token_labels(tokens, unknown))
    counted = f"**{len(tokens)} tokens** (with {shown_token(tokens[0])} first)"
    if len(tokens) <= INLINE_TOKENS:
        st.markdown(f"{counted}: {literal(shown_tokens)}")
    else:  # a long text's tokens would push the charts a screen down
        st.markdown(f"{counted}, listed under *The tokens*.")
        with st.expander("The tokens", icon=":material/notes:"):
            st.markdown(literal(shown_tokens))
    unknown_warning(tokens, unknown, card)
    labels = (own.describe(card), chosen.describe(chosen_card))
    st.caption(f"Running: {labels[1]}")
    slow_note(recording)
    untrained = (card.untrained_from(len(tokens)), chosen_card.untrained_from(len(tokens)))
    untrained_note(chosen_card, untrained[1])
    views(Recorded(chosen, text, recording), baseline and Recorded(own, text, baseline), labels, notation, untrained)


@st.fragment
def text_and_views(card, cards, notation: str) -> None:
    """The text box and everything it feeds. A fragment too: typing reruns this part only, not the sidebar and the
    title, so the browser redraws fewer elements (typing at 512 tokens cost 1.8-2.2x the trivial page as a full
    rerun)."""
    text = st.text_area("Text", value=DEFAULT_TEXT, key="text", bind=BIND, height=68, help=text_help(card))
    explorer(card, cards, text or "", notation)


def untrained_note(card, untrained: int | None) -> None:
    """Says where the text passes the longest text the model trained on (lm-rope-long: 512 of its 1024 tokens)."""
    if untrained is not None:
        st.info(f"{literal(card.name)} was trained on texts of {untrained} tokens and reads up to "
                f"{card.config.max_len}: tokens from n = {untrained} on are at positions it **never saw in "
                f"training** (its {card.config.pos_encoding} encoding has no table of positions, so it can still read "
                "them). The dashed line on the head's chart marks where training ended; *Position encodings* § 5 "
                "measures what happens past it.", icon=":material/straighten:")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Text explorer")
st.caption("Type a sentence and see where each attention head of a small trained transformer looks.")
cards, card = any_text_model_picker()
text_and_views(card, cards, notation_switch())
