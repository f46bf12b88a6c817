"""The canvas heatmap (assets/heatmap.js) as a Streamlit element, for the charts a toggle redraws at every size.

`heatmap(spec, key, filename)` draws a spec from core.figures.canvas. The chart is a custom component
(`st.components.v2`, in the page's own DOM, no iframe) that paints the weights it is sent as float32 bytes and
redraws in place when they change. A click on a cell can call back (a head's cell opens its score, taken apart).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.figures.canvas import head_heatmap_spec, pack
from pages._common import PRESENTER_SCALE

ASSET = Path(__file__).resolve().parent.parent / "assets" / "heatmap.js"
CSS = """
.al-heatmap { position: relative; width: 100%; }
.al-heatmap canvas { display: block; cursor: crosshair; }
.al-heatmap-png { position: absolute; top: 0; right: 0; z-index: 1; font: calc(12px * var(--al-scale, 1)) sans-serif;
  padding: 2px 8px;
  color: var(--st-text-color, #31333F); background: var(--st-background-color, #fff); opacity: 0.75;
  border: 1px solid rgba(128, 128, 128, 0.4); border-radius: 4px; cursor: pointer; }
.al-heatmap-png:hover { opacity: 1; }
.al-heatmap-tip { position: absolute; z-index: 2; pointer-events: none; white-space: pre; font: calc(12px * var(--al-scale, 1))/1.45
  var(--st-font, sans-serif); padding: 6px 9px; border-radius: 4px; color: #fff; background: rgba(38, 39, 48, 0.92);
  box-shadow: 0 2px 6px rgba(0, 0, 0, 0.25); }
"""

_component = st.components.v2.component("attention_lab.heatmap", js=ASSET.read_text(encoding="utf-8"), css=CSS,
                                        isolate_styles=False)


def heatmap(spec: dict, key: str, filename: str, on_cell=None, png_title: str = "") -> None:
    """Draw `spec` (core.figures.canvas) under `key`; its PNG button saves `filename`.png with `png_title` at the
    top (on the page that title sits above the chart). Presenter mode scales its type as it does the plotly charts'.
    A click on a cell calls `on_cell(cell)`, cell = {"query": q, "key": k}, as a Streamlit callback (before the
    rerun, so it may set widgets' state)."""

    def clicked() -> None:  # Streamlit keeps a component's clicks only for a callback
        if on_cell is not None:
            on_cell((st.session_state.get(key) or {}).get("cell"))

    scale = PRESENTER_SCALE if st.session_state.get("presenter") else 1
    _component(data=pack(spec, filename=filename, png_title=png_title, font_scale=scale), key=key,
               on_cell_change=clicked)


def head_chart(pattern, tokens, scores=None, *, key: str, filename: str, **options) -> None:
    """One head's pattern [N(query), N(key)] on the canvas chart, as every page draws a head: `options` are
    core.figures.canvas.head_heatmap_spec's (unknown, notation, title, masked, height, divider)."""
    heatmap(head_heatmap_spec(pattern, tokens, scores, **options), key=key, filename=filename)
