"""*One score, step by step*, a view of the text explorer: the query and key pickers, and the chosen cell's
pre-softmax score taken apart (core.lessons.analysis.qk_breakdown): the vectors, their products, the sum, the scaling,
the bias, the mask and the softmax, each checked against the recording. A click on a head's cell opens it here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.figures.attention import png_config, qk_products_bar, softmax_row_bar, token_labels
from core.lessons.analysis import QKBreakdown, qk_breakdown
from pages.ui.presentation import model_name, plotly_chart
from pages.ui.store import Recorded
from pages.ui.text_input import token_choices
from pages.ui.widgets import BIND, keep_in_range, keep_in_url


def _number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "—"
    if np.isneginf(value):
        return "−∞"
    return f"{value:.{digits}f}".replace("-", "−")


def breakdown_markdown(b: QKBreakdown, notation: str, encoding: str = "") -> str:
    """The chain from k·q to the weight, then the check against the recording, as markdown tables (numbers are
    only formatted here; qk_breakdown computed them)."""
    weight_name = "A_{n′,n}" if notation == "paper" else "A[n, n′]"
    k = b.head_dim
    rows = [("1 · dot product", f"k·q = Σ_i q_i k_i, over the K = {k} components", _number(b.dot)),
            ("2 · scaling", f"k·q × 1/√K = {_number(b.dot)} × {b.scale:.4f}", _number(b.scaled))]
    if b.bias is not None:
        rows.append(("3 · position bias", f"+ b = {_number(b.bias)}, this head's {encoding or 'position'} bias",
                     _number(b.scaled + b.bias)))
    else:
        rows.append(("3 · position bias", "none: no position encoding, no bias" if encoding == "none" else
                     f"none: {encoding or 'this encoding'} adds no bias to the scores", _number(b.scaled)))
    rows.append(("4 · mask", "allowed: the score s is kept" if b.allowed
                 else "**masked**: the key is hidden from the query, s = −∞", _number(b.score)))
    if b.allowed:
        softmax = (f"exp(s − m) / Σ_n″ exp(s_n″ − m) = {b.numerator:.4g} / {b.denominator:.4g}, "
                   f"m = {_number(b.row_max)} the row's largest score")
    else:
        softmax = "exp(−∞) = 0: a masked key gets no weight"
    rows.append((f"5 · softmax → {weight_name}", softmax, f"**{_number(b.weight)}**"))
    chain = "| step | computation | value |\n|:--|:--|--:|\n" + "\n".join(f"| {a} | {c} | {v} |" for a, c, v in rows)
    check = ("\n\n| | computed here | recorded by the model | |\n|:--|--:|--:|:--|\n"
             f"| score s | {_number(b.score, 6)} | {_number(b.recorded_score, 6)} `hook_attn_scores` | "
             f"{'✓ equal' if b.score_matches else '✗ differ'}, \\|Δ\\| = {b.score_error:.1e} |\n"
             f"| weight | {_number(b.weight, 6)} | {_number(b.recorded_weight, 6)} `hook_pattern` | "
             f"{'✓ equal' if b.weight_matches else '✗ differ'}, \\|Δ\\| = {b.weight_error:.1e} |")
    return chain + check


@st.fragment
def score_breakdown(recorded: Recorded, layer: int, head: int, notation: str, compared: bool = False) -> None:
    """Query and key pickers and the chosen score taken apart (core.lessons.analysis.qk_breakdown): the vectors, their
    products, the sum, the scaling, the bias, the mask, the softmax, checked against the recording."""
    recording = recorded.get()
    tokens, unknown = recording.meta["tokens"], recording.meta["unknown"]
    n = len(tokens)
    shown = token_labels(tokens, unknown)
    choices = token_choices(tokens, unknown)
    weights = recording.pattern(layer)[head]
    keep_in_url("qk_query", "qk_key")
    col_query, col_key = st.columns(2)
    # no default once a value is set (a click on the heatmap, a link): Streamlit warns of a default beside a set value
    with col_query:
        keep_in_range("qk_query", 0, n - 1, "Query token")
        query = st.selectbox("Query token n (the one attending)", list(range(n)),
                             index=None if "qk_query" in st.session_state else n - 1,
                             format_func=choices.__getitem__, key="qk_query", bind=BIND)
    query = n - 1 if query is None else int(query)
    heaviest = int(np.argmax(weights[query]))  # the key this head weighs most: its bar is the one that shows
    with col_key:
        keep_in_range("qk_key", 0, n - 1, "Key token")
        follow_heaviest_key(heaviest)
        key = st.selectbox("Key token n′ (the one attended to)", list(range(n)),
                           index=None if "qk_key" in st.session_state else heaviest,
                           format_func=choices.__getitem__, key="qk_key", bind=BIND)
    key = heaviest if key is None else int(key)
    b = qk_breakdown(recording, layer, head, query, key)
    where = f"layer {layer}, head {head}" + (" of B" if compared else "")
    vectors = ("the **rotated** vectors: this model runs RoPE, so the scores use q and k after the rotation "
               "(hook_rot_q, hook_rot_k), not hook_q, hook_k" if b.rotated
               else "q = U_q x_n and k = U_k x_n′ as recorded (hook_q, hook_k)")
    st.markdown(f"Query **{query}: {shown[query]}** and key **{key}: {shown[key]}** in {where} — seed 001 eqs. 5–6: "
                f"the score is k·q/√K (+ a position bias), and the softmax over all keys n″ of the row gives the "
                f"weight. q and k are {vectors}.")
    col_vec, col_chain = st.columns(2, gap="large")
    with col_vec:
        columns = {"i": np.arange(b.head_dim), "q_i": b.q, "k_i": b.k, "q_i k_i": b.products}
        if b.rotated:
            columns.update({"q_i before RoPE": b.q_unrotated, "k_i before RoPE": b.k_unrotated})
        st.dataframe(pd.DataFrame(columns).round(4), hide_index=True, height=min(35 * (b.head_dim + 1) + 3, 318),
                     key="qk_vectors",
                     column_config={"i": st.column_config.NumberColumn("i", help="component", width=40),
                                    **{name: st.column_config.NumberColumn(format="%.4f")
                                       for name in columns if name != "i"}})
        st.caption(f"Summing the q_i k_i column gives **k·q = {_number(b.dot)}**."
                   + (" RoPE rotates each pair of components by an angle that depends on the position, so the "
                      "rotated q and k differ from hook_q and hook_k." if b.rotated else ""))
    with col_chain:
        st.markdown(breakdown_markdown(b, notation, recording.meta.get("pe", "")))
        if not (b.score_matches and b.weight_matches):
            st.error("The recomputed value differs from the recorded one: the recording and this breakdown "
                     "disagree.", icon=":material/error:")
    col_products, col_row = st.columns(2, gap="large")
    with col_products:
        plotly_chart(qk_products_bar(b.q, b.k, rotated=b.rotated), key="qk_products_chart",
                        config=png_config(f"{model_name(recording)}_qk_L{layer}_H{head}_q{query}_k{key}", zoom=False))
    with col_row:
        plotly_chart(softmax_row_bar(b.row_weights, b.row_scores, tokens, key, unknown=unknown, query=query),
                        key="qk_row_chart",
                        config=png_config(f"{model_name(recording)}_softmax_L{layer}_H{head}_q{query}", zoom=False))
    st.caption("Left: each component's contribution q_i k_i; their sum is the dot product. Right: the weights of "
               "every key for this query (the chosen key in orange); they sum to 1 over the allowed keys. The "
               "check recomputes everything in float64 from the recorded vectors; the model ran in float32.")


HEAVIEST_KEY = "_qk_heaviest_key"  # the heaviest key when the key picker last followed it


def follow_heaviest_key(heaviest: int) -> None:
    """The key picker opens on the key the head weighs most for the query (the last key, [BOS], often weighs 0 or is
    masked, and its bar does not show), and follows it as the query, layer or head change, until a key is chosen."""
    previous = st.session_state.get(HEAVIEST_KEY)
    if previous is not None and previous != heaviest and st.session_state.get("qk_key") == previous:
        st.session_state["qk_key"] = heaviest
    st.session_state[HEAVIEST_KEY] = heaviest
