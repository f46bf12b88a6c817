"""Plotly figures of attention patterns: pure functions from arrays to figures, no model maths, no Streamlit.

Inputs are in the common layout of the recording, [N(query), N(key)] with rows summing to 1. With
notation="paper" the figure shows the seed paper's A_{n',n} instead: the transpose, keys n' down the rows and
queries n across the columns, so each column sums to 1 (seed 001 §2.1).

Masked cells (pre-softmax score -inf, weight exactly 0) are drawn grey and hatched, never as a dark or pale
colour that could be mistaken for a small weight.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

NOTATIONS = ("common", "paper")
WEIGHT_COLORSCALE = "Blues"
DIFF_COLORSCALE = "RdBu_r"  # red: B attends more, blue: A attends more
MASKED_FILL = "#d4d4d4"
MASKED_HATCH = "#8c8c8c"
MAX_LABEL_CHARS = 14


# ---------------------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------------------

def token_label(token: str, unknown: bool = False) -> str:
    """A token as an axis label: control and invisible characters made visible, long ones shortened,
    unknown tokens marked ⟨word⟩?, and HTML-escaped (plotly reads <br>, <b>... in labels as markup)."""
    shown = []
    for char in token:
        category = unicodedata.category(char)
        if char == " ":
            shown.append("␣")
        elif category[0] == "C" or category in ("Zl", "Zp"):  # control, format, surrogate, unassigned
            shown.append(f"\\u{ord(char):04x}" if ord(char) > 0xFF else f"\\x{ord(char):02x}")
        elif category == "Zs":
            shown.append("␣")
        else:
            shown.append(char)
    text = "".join(shown) or "∅"
    if len(text) > MAX_LABEL_CHARS:
        text = text[: MAX_LABEL_CHARS - 1] + "…"
    if unknown:
        text = f"⟨{text}⟩?"
    return html.escape(text, quote=False)


def token_labels(tokens: Sequence[str], unknown: Sequence[bool] | None = None) -> list[str]:
    """token_label of every token (unknown flags optional)."""
    flags = list(unknown) if unknown is not None else [False] * len(tokens)
    return [token_label(token, flag) for token, flag in zip(tokens, flags)]


def axis_titles(notation: str) -> tuple[str, str]:
    """(x title, y title) of a pattern shown in this notation."""
    if notation == "paper":
        return "query n · columns sum to 1", "key n′ (attended to)"
    return "key n′ (attended to)", "query n · rows sum to 1"


def _check_notation(notation: str) -> None:
    if notation not in NOTATIONS:
        raise ValueError(f"notation must be one of {', '.join(NOTATIONS)}, got {notation!r}")


def oriented(matrix: np.ndarray, notation: str) -> np.ndarray:
    """A [N(query), N(key)] matrix as it is shown: unchanged in common notation, transposed in paper notation."""
    _check_notation(notation)
    return matrix.T if notation == "paper" else matrix


def _compact(z: np.ndarray) -> np.ndarray:
    """Rounded to 4 decimals and float32, so plotly sends it as a small binary array."""
    return np.round(np.asarray(z, dtype=np.float64), 4).astype(np.float32)


def _tick_font_size(n: int) -> int:
    return 13 if n <= 16 else 11 if n <= 32 else 9 if n <= 64 else 7


def _ticks(labels: list[str]) -> dict:
    n = len(labels)
    step = 1 if n <= 80 else 2
    values = list(range(0, n, step))
    return dict(tickmode="array", tickvals=values, ticktext=[labels[i] for i in values],
                tickfont=dict(size=_tick_font_size(n)), showgrid=False, zeroline=False)


def _square_axes(fig: go.Figure, labels: list[str], notation: str, row=None, col=None) -> None:
    x_title, y_title = axis_titles(notation)
    fig.update_xaxes(title_text=x_title, tickangle=-60 if len(labels) > 6 else 0, side="bottom",
                     constrain="domain", **_ticks(labels), row=row, col=col)
    fig.update_yaxes(title_text=y_title, autorange="reversed", scaleanchor="x", constrain="domain",
                     constraintoward="top",
                     **_ticks(labels), row=row, col=col)


def _masked_traces(masked: np.ndarray, n: int, size_px: float) -> list[go.BaseTraceType]:
    """Grey fill and diagonal hatching on masked cells (already oriented). Neither takes the hover."""
    if not masked.any():
        return []
    fill = go.Heatmap(z=np.where(masked, 1.0, np.nan).astype(np.float32), zmin=0, zmax=1, showscale=False,
                      colorscale=[[0, MASKED_FILL], [1, MASKED_FILL]], hoverinfo="skip", name="masked")
    rows, cols = np.nonzero(masked)
    marker_size = float(np.clip(size_px / max(n, 1) * 0.8, 3, 22))
    hatch = go.Scatter(x=cols.astype(np.int32), y=rows.astype(np.int32), mode="markers", hoverinfo="skip",
                       showlegend=False, name="masked hatch",
                       marker=dict(symbol="line-ne", size=marker_size, line=dict(width=1, color=MASKED_HATCH)))
    return [fill, hatch]


def _colorbar(title: str) -> dict:
    """A thin horizontal colour bar above the plot, so narrow columns keep their width for the matrix."""
    return dict(orientation="h", x=0.5, xanchor="center", y=1.01, yanchor="bottom", len=0.7, thickness=10,
                title=dict(text=title, side="top"), tickfont=dict(size=10))


def _figure_size(n: int) -> int:
    return int(np.clip(28 * n + 240, 480, 940))


# ---------------------------------------------------------------------------------------------------------
# One head
# ---------------------------------------------------------------------------------------------------------

def head_heatmap(pattern: np.ndarray, tokens: Sequence[str], scores: np.ndarray | None = None, *,
                 unknown: Sequence[bool] | None = None, notation: str = "common", title: str = "",
                 masked: np.ndarray | None = None, height: int | None = None) -> go.Figure:
    """One head's attention pattern [N(query), N(key)] as a heatmap with tokens on both axes.

    Hover shows the query token, the key token, the weight and the pre-softmax score. Masked cells come
    from `masked` ([N, N] bool, True where the key is hidden from the query) or, when it is None, from the
    scores being -inf; they are drawn grey and hatched."""
    pattern = np.asarray(pattern)
    n = pattern.shape[-1]
    if pattern.shape != (n, n) or len(tokens) != n:
        raise ValueError(f"pattern must be [N, N] with N = len(tokens); got {pattern.shape} and {len(tokens)} tokens")
    if masked is None:
        masked = np.isneginf(scores) if scores is not None else np.zeros((n, n), dtype=bool)
    labels = token_labels(tokens, unknown)
    numbered = [f"{i}: {label}" for i, label in enumerate(labels)]
    query_of = np.broadcast_to(np.array(numbered, dtype=object)[:, None], (n, n))
    key_of = np.broadcast_to(np.array(numbered, dtype=object)[None, :], (n, n))
    if scores is None:
        score_text = np.full((n, n), "not recorded", dtype=object)
    else:
        score_text = np.array([["−∞ (masked)" if np.isneginf(s) else f"{s:.3f}" for s in row] for row in scores],
                              dtype=object)
    weight_text = np.where(masked, "0 (masked)", np.char.mod("%.4f", pattern).astype(object))
    custom = np.stack([oriented(query_of, notation), oriented(key_of, notation),
                       oriented(weight_text, notation), oriented(score_text, notation)], axis=-1)
    z = np.where(masked, np.nan, pattern)
    size = height or _figure_size(n)
    fig = go.Figure()
    for trace in _masked_traces(oriented(masked, notation), n, size - 240):
        fig.add_trace(trace)
    fig.add_trace(go.Heatmap(
        z=_compact(oriented(z, notation)), zmin=0, zmax=1, colorscale=WEIGHT_COLORSCALE, customdata=custom,
        hoverongaps=True, name="pattern",
        colorbar=_colorbar("weight (0 … 1)"),
        hovertemplate=("query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{customdata[2]}"
                       "<br>score %{customdata[3]}<extra></extra>")))
    fig.update_layout(title=dict(text=title, x=0, font=dict(size=14)), height=size, plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=105 if title else 60, b=10), showlegend=False)
    _square_axes(fig, labels, notation)
    return fig


def difference_heatmap(pattern_a: np.ndarray, pattern_b: np.ndarray, tokens: Sequence[str], *,
                       unknown: Sequence[bool] | None = None, notation: str = "common", title: str = "",
                       masked_a: np.ndarray | None = None, masked_b: np.ndarray | None = None,
                       labels_ab: tuple[str, str] = ("A", "B"), height: int | None = None) -> go.Figure:
    """B − A of two patterns [N(query), N(key)] over the same tokens, a diverging scale centred on 0.

    Cells masked in both are grey and hatched; hover shows both weights and the difference."""
    a, b = np.asarray(pattern_a), np.asarray(pattern_b)
    if a.shape != b.shape:
        raise ValueError(f"the two patterns differ in shape: {a.shape} and {b.shape}")
    n = a.shape[-1]
    none = np.zeros((n, n), dtype=bool)
    both_masked = (none if masked_a is None else masked_a) & (none if masked_b is None else masked_b)
    labels = token_labels(tokens, unknown)
    numbered = np.array([f"{i}: {label}" for i, label in enumerate(labels)], dtype=object)
    diff = b - a
    custom = np.stack([oriented(np.broadcast_to(numbered[:, None], (n, n)), notation),
                       oriented(np.broadcast_to(numbered[None, :], (n, n)), notation),
                       oriented(np.char.mod("%.4f", a).astype(object), notation),
                       oriented(np.char.mod("%.4f", b).astype(object), notation)], axis=-1)
    limit = float(max(np.abs(diff).max(initial=0.0), 1e-6))
    size = height or _figure_size(n)
    fig = go.Figure()
    for trace in _masked_traces(oriented(both_masked, notation), n, size - 240):
        fig.add_trace(trace)
    name_a, name_b = labels_ab
    fig.add_trace(go.Heatmap(
        z=_compact(oriented(np.where(both_masked, np.nan, diff), notation)), zmid=0, zmin=-limit, zmax=limit,
        colorscale=DIFF_COLORSCALE, customdata=custom, hoverongaps=False, name="difference",
        colorbar=_colorbar(f"{name_b} − {name_a}"),
        hovertemplate=(f"query %{{customdata[0]}}<br>key %{{customdata[1]}}<br>{name_a} %{{customdata[2]}}"
                       f"<br>{name_b} %{{customdata[3]}}<br>{name_b} − {name_a} %{{z:.4f}}<extra></extra>")))
    fig.update_layout(title=dict(text=title, x=0, font=dict(size=14)), height=size, plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=105 if title else 60, b=10), showlegend=False)
    _square_axes(fig, labels, notation)
    return fig


# ---------------------------------------------------------------------------------------------------------
# All heads
# ---------------------------------------------------------------------------------------------------------

def small_multiples(patterns: np.ndarray, *, notation: str = "common", selected: tuple[int, int] | None = None,
                    masked: np.ndarray | None = None, cell_px: int = 130) -> go.Figure:
    """Every head of every layer, patterns [M, H, N(query), N(key)], as an M x H grid of small heatmaps on one
    colour scale (0..1). Rows are layers, columns heads; the selected (layer, head) is outlined in red.
    `masked` [N, N] (True where hidden, the same for every head) is drawn grey."""
    patterns = np.asarray(patterns)
    if patterns.ndim != 4 or patterns.shape[-1] != patterns.shape[-2]:
        raise ValueError(f"patterns must be [M, H, N, N], got {patterns.shape}")
    m, h, n, _ = patterns.shape
    height = int(cell_px * m + 40)
    fig = make_subplots(rows=m, cols=h, horizontal_spacing=min(0.03, 0.5 / max(h - 1, 1)),
                        vertical_spacing=min(24 / height, 0.5 / max(m - 1, 1)),
                        subplot_titles=[f"L{layer} H{head}" for layer in range(m) for head in range(h)])
    shown_mask = oriented(masked, notation) if masked is not None else None
    for layer in range(m):
        for head in range(h):
            z = oriented(patterns[layer, head], notation)
            if shown_mask is not None:
                z = np.where(shown_mask, np.nan, z)
            fig.add_trace(go.Heatmap(
                z=_compact(z), zmin=0, zmax=1, colorscale=WEIGHT_COLORSCALE, showscale=False,
                hoverongaps=False, name=f"L{layer} H{head}",
                hovertemplate=(f"L{layer} H{head}<br>" +
                               ("key %{y} ← query %{x}" if notation == "paper" else "query %{y} → key %{x}") +
                               "<br>weight %{z:.3f}<extra></extra>")),
                row=layer + 1, col=head + 1)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed", constrain="domain")
    for index in range(1, m * h + 1):  # square cells: every y axis anchored to its own x axis
        fig.update_layout({f"yaxis{'' if index == 1 else index}": dict(scaleanchor=f"x{'' if index == 1 else index}")})
    if selected is not None:
        layer, head = selected
        if 0 <= layer < m and 0 <= head < h:
            fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=-0.5, y1=n - 0.5, line=dict(color="#d62728", width=3),
                          row=layer + 1, col=head + 1)
    fig.update_annotations(font=dict(size=11))
    fig.update_layout(height=height, margin=dict(l=5, r=5, t=25, b=5), plot_bgcolor=MASKED_FILL,
                      showlegend=False)
    return fig
