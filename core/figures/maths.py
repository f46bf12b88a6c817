"""Plotly figures of the two lesson pages: matrices in the paper's layout (core/lessons/maths.py) and the cost of softmax
vs linear attention (core/lessons/linear_attention.py). Pure functions from arrays to figures: no model maths, no Streamlit.

Colours are colour-blind safe: a red–blue diverging scale centred on 0 for signed numbers, Okabe–Ito for the
two methods (HEAD_COLORS)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures.attention import HEAD_COLORS, MASKED_FILL, numbered_labels, token_labels

SIGNED_COLORSCALE = "RdBu_r"  # red positive, blue negative
METHOD_COLORS = {"softmax": HEAD_COLORS[1], "linear": HEAD_COLORS[0]}  # vermillion, blue
REFERENCE_COLOR = "#7f7f7f"
HIGHLIGHT = "#000000"


def _rounded(z: np.ndarray) -> np.ndarray:
    """Rounded to 4 decimals, float32 (a small binary array for plotly); −∞ (masked) becomes a gap."""
    z = np.asarray(z, dtype=np.float64)
    return np.round(np.where(np.isfinite(z), z, np.nan), 4).astype(np.float32)


def _dense_ticks(count: int) -> dict:
    """Smaller tick labels on a crowded axis (10 px, still readable); otherwise the figure's font size (large in
    presenter mode)."""
    return dict(size=10) if count > 24 else {}


def _row_ticks(rows: int) -> dict:
    """Every row labelled while they fit (a 12×12 score matrix named only every other key), else about 16 labels."""
    return dict(dtick=1) if rows <= 32 else dict(nticks=17)


def matrix_heatmap(matrix: np.ndarray, column_labels: Sequence[str], row_labels: Sequence[str] | None = None, *,
                   title: str = "", row_title: str = "feature d", column_title: str = "token n",
                   highlight: int | None = None, height: int | None = None, colorbar_title: str = "value",
                   text: bool | None = None) -> go.Figure:
    """A matrix of the paper's layout as a heatmap: rows (features d, or keys n′) down, columns (tokens n) across,
    a red–blue scale centred on 0. −∞ entries (masked scores) are left as grey gaps and named in the hover.
    `highlight` outlines one column (the token picked on the page). Values are written in the cells when there are
    few enough (text=None: at most 16×16)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(column_labels):
        raise ValueError(f"matrix must be 2-D with one column per label; got {matrix.shape}, "
                         f"{len(column_labels)} labels")
    rows, cols = matrix.shape
    row_labels = [str(i) for i in range(rows)] if row_labels is None else list(row_labels)
    if len(row_labels) != rows:
        raise ValueError(f"{rows} rows but {len(row_labels)} row labels")
    finite = matrix[np.isfinite(matrix)]
    limit = float(max(np.abs(finite).max(initial=0.0), 1e-9))
    masked = np.isneginf(matrix)
    hover = np.where(masked, "−∞ (masked)", np.char.mod("%.5f", np.where(masked, 0.0, matrix))).astype(object)
    show_text = rows <= 16 and cols <= 16 if text is None else text
    heatmap = go.Heatmap(
        z=_rounded(matrix), x=list(column_labels), y=row_labels, zmin=-limit, zmax=limit, zmid=0,
        colorscale=SIGNED_COLORSCALE, customdata=hover, hoverongaps=False,
        texttemplate="%{z:.2f}" if show_text else None, textfont=dict(size=10),
        colorbar=dict(title=dict(text=colorbar_title, side="right"), thickness=12),
        hovertemplate=f"{row_title} %{{y}}<br>{column_title} %{{x}}<br>%{{customdata}}<extra></extra>")
    outline = ([dict(type="rect", x0=highlight - 0.5, x1=highlight + 0.5, y0=-0.5, y1=rows - 0.5,
                     line=dict(color=HIGHLIGHT, width=2.5), xref="x", yref="y")]
               if highlight is not None and 0 <= highlight < cols else [])
    layout = dict(  # one dict: plotly validates it once (update_* calls would each pay again)
        title=dict(text=title, x=0), plot_bgcolor=MASKED_FILL if masked.any() else "white",
        shapes=outline,
        height=height or int(np.clip(22 * rows + 170, 260, 620)), margin=dict(l=10, r=10, t=45 if title else 20, b=10),
        xaxis=dict(title=dict(text=column_title), type="category", tickangle=-60 if cols > 6 else 0,
                   tickfont=_dense_ticks(cols), showgrid=False),
        yaxis=dict(title=dict(text=row_title), type="category", autorange="reversed", showgrid=False,
                   tickfont=_dense_ticks(rows), **_row_ticks(rows)))
    return go.Figure(heatmap, layout)


def token_axis_labels(tokens: Sequence[str], unknown: Sequence[bool] | None = None) -> list[str]:
    """"n: token" labels: unique, so repeated words stay separate columns."""
    return numbered_labels(token_labels(tokens, unknown))


# ---------------------------------------------------------------------------------------------------------
# The cost of attention
# ---------------------------------------------------------------------------------------------------------

def _reference(ns: np.ndarray, anchor_n: float, anchor_value: float, slope: int) -> np.ndarray:
    """c · N^slope through (anchor_n, anchor_value)."""
    return anchor_value * (ns / anchor_n) ** slope


def cost_figure(points: Sequence, *, title: str = "") -> go.Figure:
    """Time (left) and largest tensor (right) against N on log–log axes, one line per method, with grey dashed
    reference lines of slope 1 (∝ N) and 2 (∝ N²) through each method's largest measured N. points: CostPoint."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("time per call (median)", "largest tensor created"))
    methods = [m for m in METHOD_COLORS if any(p.method == m for p in points)]
    for col, (attribute, unit, scale) in enumerate((("seconds", "ms", 1e3), ("largest_bytes", "MB", 1e-6)), start=1):
        for method in methods:
            chosen = sorted((p for p in points if p.method == method), key=lambda p: p.n)
            ns = np.array([p.n for p in chosen], dtype=float)
            values = np.array([getattr(p, attribute) for p in chosen]) * scale
            fig.add_trace(go.Scatter(
                x=ns, y=values, mode="lines+markers", name=method, legendgroup=method, showlegend=col == 1,
                line=dict(color=METHOD_COLORS[method], width=3), marker=dict(size=8),
                hovertemplate=f"{method}<br>N = %{{x}}<br>%{{y:.4g}} {unit}<extra></extra>"), row=1, col=col)
        all_ns = np.array(sorted({p.n for p in points}), dtype=float)
        for slope, dash in ((1, "dot"), (2, "dash")):
            anchor = max((p for p in points if p.method == ("linear" if slope == 1 else "softmax")),
                         key=lambda p: p.n, default=None)
            if anchor is None or len(all_ns) < 2:
                continue
            fig.add_trace(go.Scatter(
                x=all_ns, y=_reference(all_ns, anchor.n, getattr(anchor, attribute) * scale, slope), mode="lines",
                name=f"slope {slope} (∝ N{'²' if slope == 2 else ''})", legendgroup=f"slope{slope}",
                showlegend=col == 1, line=dict(color=REFERENCE_COLOR, dash=dash, width=1.5), hoverinfo="skip"),
                row=1, col=col)
        fig.update_xaxes(type="log", title_text="tokens N (log)", tickvals=all_ns,
                         ticktext=[str(int(n)) for n in all_ns], row=1, col=col)
        fig.update_yaxes(type="log", title_text=f"{unit} (log)", dtick=1, row=1, col=col)  # a label per power of 10
    fig.update_layout(title=dict(text=title, x=0), height=480, plot_bgcolor="white",
                      legend=dict(orientation="h", y=-0.22, x=0), margin=dict(l=10, r=10, t=90 if title else 70, b=10))
    fig.update_xaxes(gridcolor="#eee")
    fig.update_yaxes(gridcolor="#eee")
    return fig


def token_agreement_bars(cosine: np.ndarray, tokens: Sequence[str], *, unknown: Sequence[bool] | None = None,
                         title: str = "") -> go.Figure:
    """Per token, the cosine between the softmax and the linear attention outputs (1: the same direction)."""
    cosine = np.asarray(cosine, dtype=np.float64)
    if cosine.shape != (len(tokens),):
        raise ValueError(f"one cosine per token: got {cosine.shape} for {len(tokens)} tokens")
    labels = token_axis_labels(tokens, unknown)
    fig = go.Figure(go.Bar(x=labels, y=np.round(cosine, 4), marker_color=METHOD_COLORS["linear"],
                           hovertemplate="token %{x}<br>cosine %{y:.4f}<extra></extra>"))
    fig.add_hline(y=1, line=dict(color=REFERENCE_COLOR, dash="dash"))
    fig.update_layout(title=dict(text=title, x=0), height=320, plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=45 if title else 20, b=10))
    fig.update_xaxes(type="category", tickangle=-60 if len(labels) > 6 else 0, title_text="token n")
    fig.update_yaxes(range=[min(-0.05, float(cosine.min(initial=0)) - 0.05), 1.05], gridcolor="#eee",
                     title_text="cos(softmax out, linear out)")
    return fig
