"""The image page's drawing canvas (assets/web/drawing.js) and the link that reopens the drawing.

`drawing_canvas(side, start, ink, background)` shows the canvas and returns the grid it shows (True = ink). The
drawing travels in the URL as `drawing=<43 characters>` (core/serving/drawing_link.py), so a link reopens it; a link
without one starts from `start` (a template); a bad value gives a note and a blank grid, never a traceback.
`start_drawing(cells)` replaces the canvas's drawing (a template chosen); Undo on the canvas brings the old one back.
The canvas is a custom component (`st.components.v2`, in the page's DOM) loaded from assets/web as the heatmap is.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.serving.drawing_link import DrawingLinkError, decode_drawing, encode_drawing
from pages.ui.heatmap import WEB, loader_js, serve_web

PARAM = "drawing"  # the URL parameter
KEY = "drawing_canvas"
_CODE = "_drawing"  # the drawing as its link value: what the canvas last said it shows, or what the page gave it
_RESET = "_drawing_reset"  # counts the page's replacements of the canvas's drawing; the canvas takes a new count's
_NOTE = "_drawing_note"  # why a link's drawing was not used, shown until the drawing changes

_component = st.components.v2.component("attention_lab.drawing", js=loader_js(WEB / "drawing.js"),
                                        isolate_styles=False)


def start_drawing(cells: np.ndarray) -> None:
    """Give the canvas this drawing in place of its own (callable as a widget's callback)."""
    st.session_state[_CODE] = encode_drawing(cells)
    st.session_state[_RESET] = st.session_state.get(_RESET, 0) + 1
    st.session_state.pop(_NOTE, None)


def drop_drawing_link() -> None:
    """Take the drawing out of the URL (another image source is shown); the session keeps it for a return."""
    st.query_params.pop(PARAM, None)


def _from_link(side: int, start: np.ndarray) -> str:
    """The drawing a link gives (the template `start` when it gives none), as its link value; a note if it is bad."""
    value = st.query_params.get(PARAM)
    if value is None:
        return encode_drawing(start)
    try:
        decode_drawing(value, side)
        return value
    except DrawingLinkError as error:
        st.session_state[_NOTE] = f"This link's drawing can't be read ({error}), so the grid starts blank."
        return encode_drawing(np.zeros((side, side), dtype=bool))


def _drawn(side: int) -> None:
    """Callback: the canvas sent its drawing (a stroke, undo or clear ended); checked as a link's would be."""
    value = (st.session_state.get(KEY) or {}).get("cells")
    try:
        decode_drawing(value if isinstance(value, str) else "", side)
    except DrawingLinkError:
        return
    st.session_state[_CODE] = value
    st.session_state.pop(_NOTE, None)


def drawing_canvas(side: int, start: np.ndarray, ink: str, background: str) -> np.ndarray:
    """The canvas, drawing in `ink` on `background` on a side x side grid; the boolean grid it shows."""
    if _CODE not in st.session_state:
        st.session_state[_CODE] = _from_link(side, start)
    if _NOTE in st.session_state:
        st.warning(st.session_state[_NOTE], icon="⚠️")
    code = st.session_state[_CODE]
    serve_web()
    _component(data={"cells": code, "reset": st.session_state.get(_RESET, 0), "side": side, "ink": ink,
                     "background": background}, key=KEY, on_cells_change=lambda: _drawn(side))
    if st.query_params.get(PARAM) != code:
        st.query_params[PARAM] = code
    return decode_drawing(code, side)
