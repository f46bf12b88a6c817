"""How pages look in a classroom: the layout rules every page shares, presenter mode (large type for a projector)
and the plotly chart helpers that grow with it.
"""

from __future__ import annotations

import streamlit as st

from pages.ui.widgets import BIND

LAYOUT_CSS = """<style>
/* Columns stack when they would be too narrow to read, at any window width (Streamlit stacks them only below
   640 px): a column holding a chart keeps 22rem, one with a drop-down 12rem, any other 9rem; a row that cannot give them that wraps. */
[data-testid="stColumn"] { min-width: min(100%, 9rem); }
[data-testid="stColumn"]:has([data-testid="stSelectbox"]) { min-width: min(100%, 12rem); }
[data-testid="stColumn"]:has(.js-plotly-plot, .al-heatmap, [data-testid="stVegaLiteChart"]) {
  min-width: min(100%, 22rem); }
/* Labels, metric names and menu entries wrap onto a second line instead of ending in "…". */
[data-testid="stWidgetLabel"] [data-testid="stMarkdownContainer"], [data-testid="stWidgetLabel"] p,
[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"], [data-testid="stMetricLabel"] p,
[data-testid="stSidebarNavLink"] span { white-space: normal; overflow: visible; text-overflow: clip; }
[data-testid="stMetricValue"] > div { overflow: visible; text-overflow: clip; }
[data-testid="stMetricValue"] { overflow-wrap: anywhere; }
/* Tabs wrap onto a second row rather than scroll out of sight. */
[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; }
/* A laptop with the sidebar open: less empty margin beside the page, more room for its charts. */
@media (max-width: 1280px) {
  [data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; } }
/* The history script (pages/ui/history.py) draws nothing: no gap for it in the sidebar. */
.st-key-history_entries { display: none; }
</style>"""


PRESENTER_CSS = """<style>
html { font-size: 21px; }
[data-testid="stMain"] h1 { font-size: 2.6rem; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.15rem; line-height: 1.5; }
/* a column holding a fixed-size (Vega) chart, the mask grid at its presenter size, stacks rather than squeeze it */
[data-testid="stColumn"]:has([data-testid="stVegaLiteChart"]) { min-width: min(100%, 28rem); }
/* the sidebar's drop-downs are the presenter's, not the class's: at about their usual size their choice fits */
[data-testid="stSidebar"] [data-testid="stSelectbox"] input { font-size: 0.58rem !important; }
</style>"""
PRESENTER_FONT = 20  # chart font size in presenter mode (plotly's default is 12)
PRESENTER_SCALE = PRESENTER_FONT / 12  # every chart's type grows by this in presenter mode
PRESENTER_HEIGHT = 1.3  # and its height by at least this, so that its larger labels do not squeeze the plot
TABLE_ROW_PX = 36  # a st.dataframe row or header (Streamlit draws 35 px), with a pixel to spare


TABLE_MAX_ROWS = 24  # a sentence a class types fits whole; a pasted page of text scrolls instead of running on


def table_height(rows: int) -> int:
    """The height of a st.dataframe that shows its header and all `rows` rows (no inner scroll hides the last), up
    to TABLE_MAX_ROWS rows."""
    return TABLE_ROW_PX * (min(rows, TABLE_MAX_ROWS) + 1) + 3


def presenter_mode() -> bool:
    """The presenter-mode toggle (URL key `presenter`), drawn once by app.py at the top of the sidebar for every
    page (a widget of the entrypoint keeps its value from page to page): large type for a projector. Charts drawn
    with `plotly_chart`, `chart` or pages._heatmap grow with it (their colours are colour-blind-safe in either
    mode: Okabe-Ito categories, Blues / Viridis / red-blue scales). Also sets the layout rules every page shares."""
    on = bool(st.sidebar.toggle("Presenter mode", key="presenter", bind=BIND,
                                help="Large type for a projector or a big screen, on every page; the link keeps "
                                     "it on."))
    st.html(LAYOUT_CSS + (PRESENTER_CSS if on else ""))
    return on


def font_scale() -> float:
    """How much larger presenter mode draws type (PRESENTER_SCALE, else 1): for a figure that must fit its text to
    its cells, and for charts that presenter_figure does not scale (the canvas heatmap, Altair)."""
    return PRESENTER_SCALE if st.session_state.get("presenter") else 1.0


def _enlarge_fonts(node, factor: float) -> None:
    """Multiply every explicit font size in a figure's dict (titles, ticks, annotations, texts) by `factor`."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name.endswith("font") and isinstance(value, dict) and isinstance(value.get("size"), (int, float)):
                value["size"] = round(value["size"] * factor)
            _enlarge_fonts(value, factor)
    elif isinstance(node, list):
        for item in node:
            _enlarge_fonts(item, factor)


def presenter_figure(fig):
    """The figure as presenter mode shows it: every text and fixed margin larger by PRESENTER_SCALE, the figure
    taller (its plot keeps at least its height). Outside presenter mode the figure itself."""
    if not st.session_state.get("presenter"):
        return fig
    import plotly.graph_objects as go  # figures import plotly: only pages that draw pay for it

    spec = fig.to_dict()
    _enlarge_fonts(spec, PRESENTER_SCALE)
    layout = spec.setdefault("layout", {})
    layout.setdefault("font", {}).setdefault("size", PRESENTER_FONT)
    layout.setdefault("hoverlabel", {}).setdefault("font", {}).setdefault("size", PRESENTER_FONT)
    margin = layout.get("margin", {})
    for side in "lrtb":  # fixed margins (core/figures sizes them to the labels) grow with the labels' type
        if side in margin:
            margin[side] = round(margin[side] * PRESENTER_SCALE)
    if layout.get("height"):  # taller by at least what the larger margins above and below take
        grown = (margin.get("t", 0) + margin.get("b", 0)) * (1 - 1 / PRESENTER_SCALE)
        layout["height"] = round(max(layout["height"] * PRESENTER_HEIGHT, layout["height"] + grown))
    return go.Figure(spec)


def plotly_chart(fig, where=st, **kwargs):
    """st.plotly_chart (in `where`, a container or placeholder) with presenter mode's larger type."""
    return where.plotly_chart(presenter_figure(fig), **kwargs)


def chart(fig, key: str, filename: str, *, zoom: bool = True, **kwargs):
    """Draw a plotly figure with the app's toolbar (PNG download as `filename`.png) and, in presenter mode,
    large type. Returns what st.plotly_chart returns (the selection, with on_select)."""
    from core.figures.attention import png_config  # figures import plotly: only pages that draw pay for it

    return plotly_chart(fig, key=key, config=png_config(filename, zoom=zoom), **kwargs)


def model_name(recording) -> str:
    """The name a recording's downloads and PNG files start with: its model's."""
    return recording.meta.get("model") or "recording"
