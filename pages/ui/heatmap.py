"""The canvas heatmap (assets/web/heatmap.js) as a Streamlit element, for the charts a toggle redraws at every size.

`heatmap(spec, key, filename)` draws a spec from core.figures.canvas. The chart is a custom component
(`st.components.v2`, in the page's own DOM, no iframe) that paints the weights it is sent as float32 bytes and
redraws in place when they change. A click on a cell can call back (a head's cell opens its score, taken apart).

Its code travels once, not with every chart: Streamlit sends a v2 component's inline JS and CSS in each of its
messages (20 kB, five times the weights of a 16-token overview), so the inline JS is a loader of a few lines that
imports assets/web/heatmap.js (its style sheet in it) by URL. The server serves that folder as a (v1) component's
files, at /component/<name>/heatmap.js; the browser fetches the module once per page load; its version is in the URL.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

from core.figures.canvas import head_heatmap_spec, pack
from pages.ui.presentation import font_scale

WEB = Path(__file__).resolve().parents[2] / "assets" / "web"
ASSET = WEB / "heatmap.js"


def serve_web() -> str:
    """Register assets/web as a (v1) component's folder, which the server then serves (the component is never
    drawn); its name. Called for every chart: registering needs a running script, and again is a dict write."""
    return components.declare_component("web", path=str(WEB)).name


def loader_js(asset: Path = ASSET) -> str:
    """A component's inline JS: import `asset` (a module of assets/web) from where the server serves that folder
    (under the app's base URL path; the file's hash in the query, so a browser never runs an old copy), then draw
    with it."""
    served = serve_web()
    base = st.get_option("server.baseUrlPath").strip("/")
    version = hashlib.sha256(asset.read_bytes()).hexdigest()[:12]
    url = f"{'/' + base if base else ''}/component/{served}/{asset.name}?v={version}"
    # the inline module runs from a blob: URL, against which a path does not resolve: the page's origin does
    return (f"const loaded = import(new URL({json.dumps(url)}, window.location.origin).href);\n"
            "export default function (component) { return loaded.then(module => module.default(component)); }\n")


_component = st.components.v2.component("attention_lab.heatmap", js=loader_js(), isolate_styles=False)


def heatmap(spec: dict, key: str, filename: str, on_cell=None, png_title: str = "") -> None:
    """Draw `spec` (core.figures.canvas) under `key`; its PNG button saves `filename`.png with `png_title` at the
    top (on the page that title sits above the chart). Presenter mode scales its type as it does the plotly charts'.
    A click on a cell calls `on_cell(cell)`, cell = {"query": q, "key": k}, as a Streamlit callback (before the
    rerun, so it may set widgets' state)."""

    def clicked() -> None:  # Streamlit keeps a component's clicks only for a callback
        if on_cell is not None:
            on_cell((st.session_state.get(key) or {}).get("cell"))

    serve_web()
    _component(data=pack(spec, filename=filename, png_title=png_title, font_scale=font_scale()), key=key,
               on_cell_change=clicked)


def head_chart(pattern, tokens, scores=None, *, key: str, filename: str, **options) -> None:
    """One head's pattern [N(query), N(key)] on the canvas chart, as every page draws a head: `options` are
    core.figures.canvas.head_heatmap_spec's (unknown, notation, title, masked, height, divider)."""
    heatmap(head_heatmap_spec(pattern, tokens, scores, **options), key=key, filename=filename)
