"""The sidebar's and pages' small shared widgets: the notation switch, the layer and head picker, and the two
helpers every URL-bound input needs (kept in the URL, kept in range). Every widget is bound to the URL
(`bind=BIND`) under a stable key, so a view can be shared as a link. URL parameters used here:
  notation  "common" (A is N x N, row = query, rows sum to 1) or "paper" (seed 001: A_{n',n}, columns sum to 1)
  layer, head
"""

from __future__ import annotations

import re

import streamlit as st

BIND = "query-params"
NOTATION_LABELS = {  # option (also the URL value) -> caption
    "common": "A is N×N, row = query, rows sum to 1",
    "paper": "seed 001: A_{n′,n}, column = query, columns sum to 1",
}


def notation_switch() -> str:
    """The sidebar notation switch (URL key `notation`): "common" or "paper"."""
    notation = st.sidebar.radio(
        "Notation", list(NOTATION_LABELS), captions=list(NOTATION_LABELS.values()), key="notation", bind=BIND,
        help="The seed paper writes X as D×N (tokens across) and A_{n′,n} normalised over columns; most code "
             "writes X as N×D and A with rows summing to 1. Paper notation shows A transposed.")
    return notation or "common"


def keep_in_url(*keys: str) -> None:
    """Call before drawing these URL-bound widgets: their values are stated again, so that Streamlit writes to the
    URL any it lacks. A run that changes the URL (a click's callback, a replaced value) sends the whole query string
    as its request carried it: a widget changed in the browser while that run was in flight (L2 picked just after a
    click on a cell) is dropped from the URL, though the page still shows it. The next run puts it back."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def keep_in_range(key: str, low: int, high: int, what: str) -> None:
    """Call just before drawing the URL-bound input `key` whose values, low…high, depend on the model or the text
    (a slider, a number input, a picker of layers, heads, tokens, positions): a value out of range, left by
    another model or given by a link, is replaced by the nearest valid one, with a note. Streamlit would raise
    on a slider's stale value ("The value 99 is greater than the max_value 32") and drop a link's silently."""
    resync = f"_{key}__replaced"
    if st.session_state.pop(resync, False) and key in st.session_state:
        # Streamlit leaves a value replaced before its widget (re)appears out of the URL; set again once the widget
        # exists, it is written there
        st.session_state[key] = st.session_state[key]
    if key in st.session_state:
        value = st.session_state[key]
    else:
        found = re.search(r"-?\d+", st.query_params.get(key, ""))  # a link's value: "7", or a label, "L7", "7: dog"
        value = found.group() if found else None
    try:
        value = int(value)
    except (TypeError, ValueError):
        return  # nothing chosen yet (None), or not a number: the widget handles it
    if low <= value <= high:
        return
    st.session_state[key] = min(max(value, low), high)
    st.session_state[resync] = True
    st.info(f"{what} {value} is out of range for this model and text ({low} to {high}): showing "
            f"{st.session_state[key]} instead.", icon=":material/straighten:")


def layer_head_picker(n_layers: int, n_heads: int) -> tuple[int, int]:
    """Two horizontal radios side by side, "L0…" and "H0…" (URL keys `layer`, `head`); the chosen (layer, head),
    kept in range when the model changes under a shared link."""
    col_layer, col_head = st.columns(2)
    with col_layer:
        keep_in_range("layer", 0, n_layers - 1, "Layer")
        layer = st.radio("Layer", list(range(n_layers)), format_func=lambda i: f"L{i}", key="layer", bind=BIND,
                         horizontal=True, help="Which transformer block (the seed paper's m, counted from 0).")
    with col_head:
        keep_in_range("head", 0, n_heads - 1, "Head")
        head = st.radio("Head", list(range(n_heads)), format_func=lambda i: f"H{i}", key="head", bind=BIND,
                        horizontal=True, help="Which of the block's H attention heads.")
    return (0 if layer is None else min(int(layer), n_layers - 1),
            0 if head is None else min(int(head), n_heads - 1))
