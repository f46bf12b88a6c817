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


def cell_limits(spec: dict) -> dict[str, int]:
    """What a click on this chart sends (assets/web/heatmap.js): each field's name and the count its index is below.
    A head view's band or label: {"query"}; a tile of every head: {"layer", "head", row role, column role}; a cell:
    {row role, column role} ("query" and "key", swapped in paper notation; "row" and "column" on an image)."""
    if spec.get("kind") == "lines":
        return {"query": len(spec["labels"])}
    rows, cols = spec["arrays"]["masked"].shape
    tiles = spec.get("tiles")
    if tiles:
        rows = cols = tiles["size"]
    limits = {spec["row_role"]: rows, spec["col_role"]: cols}
    return limits | ({"layer": tiles["layers"], "head": tiles["heads"]} if tiles else {})


def valid_cell(cell, limits: dict[str, int]) -> dict[str, int] | None:
    """The click's cell when it is one this chart can send (cell_limits: those fields, each an integer index within
    its count), else None. The browser sends what it likes: a forged value (a string, -1, 10**9, a missing field)
    raised uncaught exceptions in the pages' callbacks and wrote tracebacks to the log (issue 36, finding 9)."""
    if not isinstance(cell, dict) or set(cell) != set(limits):
        return None
    ok = all(type(cell[name]) is int and 0 <= cell[name] < limit for name, limit in limits.items())
    return dict(cell) if ok else None


def heatmap(spec: dict, key: str, filename: str, on_cell=None, png_title: str = "") -> None:
    """Draw `spec` (core.figures.canvas) under `key`; its PNG button saves `filename`.png with `png_title` at the
    top (on the page that title sits above the chart). Presenter mode scales its type as it does the plotly charts'.
    A click on a cell calls `on_cell(cell)`, cell = {"query": q, "key": k}, as a Streamlit callback (before the
    rerun, so it may set widgets' state); a cell the chart cannot send (valid_cell) is ignored."""
    limits = cell_limits(spec)

    def clicked() -> None:  # Streamlit keeps a component's clicks only for a callback
        state = st.session_state.get(key)
        cell = valid_cell(state.get("cell") if isinstance(state, dict) else None, limits)
        if on_cell is not None and cell is not None:
            on_cell(cell)

    serve_web()
    _component(data=pack(spec, filename=filename, png_title=png_title, font_scale=font_scale()), key=key,
               on_cell_change=clicked)


def head_chart(pattern, tokens, scores=None, *, key: str, filename: str, **options) -> None:
    """One head's pattern [N(query), N(key)] on the canvas chart, as every page draws a head: `options` are
    core.figures.canvas.head_heatmap_spec's (unknown, notation, title, masked, height, divider)."""
    heatmap(head_heatmap_spec(pattern, tokens, scores, **options), key=key, filename=filename)
