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


def _masked_traces(masked: np.ndarray, n: int, size_px: float = 0) -> list[go.BaseTraceType]:
    """Grey fill and diagonal hatching on masked cells (already oriented). Neither takes the hover."""
    if not masked.any():
        return []
    fill = go.Heatmap(z=np.where(masked, 1.0, np.nan).astype(np.float32), zmin=0, zmax=1, showscale=False,
                      colorscale=[[0, MASKED_FILL], [1, MASKED_FILL]], hoverinfo="skip", name="masked")
    rows, cols = np.nonzero(masked)
    # one diagonal stroke per masked cell, all in one line trace (one SVG path: thousands of marker symbols
    # made the browser slow to redraw at 64+ tokens)
    gap = np.full(len(rows), np.nan)
    xs = np.stack([cols - 0.35, cols + 0.35, gap], axis=1).reshape(-1).astype(np.float32)
    ys = np.stack([rows + 0.35, rows - 0.35, gap], axis=1).reshape(-1).astype(np.float32)
    hatch = go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False, name="masked hatch",
                       line=dict(width=1, color=MASKED_HATCH))
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
    fig.update_layout(height=height + 20, margin=dict(l=5, r=5, t=45, b=5), plot_bgcolor=MASKED_FILL,
                      showlegend=False)
    return fig


# ---------------------------------------------------------------------------------------------------------
# Head view: lines from each query to the keys it reads (bertviz-like)
# ---------------------------------------------------------------------------------------------------------

# Okabe & Ito's colour-blind-safe palette, in an order that keeps neighbours apart (yellow, weak on white, last)
HEAD_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MIN_LINE_WEIGHT = 0.01


def head_color(head: int) -> str:
    """The colour of head `head` in the head view (the palette repeats after eight heads)."""
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def head_lines(patterns: np.ndarray, tokens: Sequence[str], heads: Sequence[int], *,
               unknown: Sequence[bool] | None = None, query: int | None = None, notation: str = "common",
               min_weight: float = MIN_LINE_WEIGHT, layer: int | None = None) -> go.Figure:
    """The head view: tokens in two columns, a band from query n to key n′ for every weight A[n, n′] of the
    chosen heads, its thickness proportional to the weight; one colour per head (HEAD_COLORS).

    patterns: one layer's [H, N(query), N(key)]. Bands of weight < `min_weight` are dropped; with `query` set,
    only that query's bands are drawn. Common notation puts the queries on the left (the token that attends,
    as bertviz does) and the keys on the right; paper notation puts the keys n′ (the x_{n′} that are mixed) on
    the left and the queries n (y_n = Σ_{n′} x_{n′} A_{n′,n}) on the right.

    Compact: one filled scatter trace per head, each band a quadrilateral, bands separated by NaN gaps, as
    binary arrays (x uint8, y float32, hover data int16); hover on a band's corners gives query, key and the
    weight in per cent."""
    _check_notation(notation)
    patterns = np.asarray(patterns)
    if patterns.ndim != 3 or patterns.shape[-1] != patterns.shape[-2] or patterns.shape[-1] != len(tokens):
        raise ValueError(f"patterns must be [H, N, N] with N = len(tokens); got {patterns.shape}, {len(tokens)} tokens")
    h_count, n, _ = patterns.shape
    if any(not 0 <= h < h_count for h in heads):
        raise ValueError(f"heads must be in 0..{h_count - 1}, got {list(heads)}")
    if query is not None and not 0 <= query < n:
        raise ValueError(f"query must be in 0..{n - 1}, got {query}")
    labels = token_labels(tokens, unknown)
    numbered = [f"{i}: {label}" for i, label in enumerate(labels)]
    query_x, key_x = (0, 1) if notation == "common" else (1, 0)
    lane = 0.84 / max(len(heads), 1)  # each row is split into one lane per head; weight 1 fills a lane
    fig = go.Figure()
    for j, h in enumerate(heads):
        pattern = patterns[h]
        rows, cols = np.nonzero((pattern >= min_weight) & (pattern > 0))  # by query, then key; never masked
        if query is not None:
            keep = rows == query
            rows, cols = rows[keep], cols[keep]
        w = pattern[rows, cols].astype(np.float64)
        centre = -0.42 + lane * (j + 0.5)
        # query end: a query's bands stacked in key order across its lane (its weights sum to at most 1, so
        # they never overlap); key end: centred on the key's lane
        before = np.cumsum(w) - w
        _, first = np.unique(rows, return_index=True)
        start = before - np.repeat(before[first], np.diff(np.append(first, len(w))))
        q0 = rows + centre - lane / 2 + start * lane
        q1 = q0 + w * lane
        k0, k1 = cols + centre - w * lane / 2, cols + centre + w * lane / 2
        # a quadrilateral per band, then a gap (y = NaN, so x can be a byte); hover data (query, key, weight
        # in %) as int16
        xs = np.tile(np.array([query_x, query_x, key_x, key_x, 0], dtype=np.uint8), len(w))
        ys = np.stack([q0, q1, k1, k0, np.full(len(w), np.nan)], axis=1)
        custom = np.repeat(np.stack([rows, cols, np.rint(w * 100)], axis=1)[:, None, :], 5, axis=1)
        fig.add_trace(go.Scatter(
            x=xs, y=np.round(ys.reshape(-1), 3).astype(np.float32),
            customdata=custom.reshape(-1, 3).astype(np.int16), mode="lines", fill="toself",
            fillcolor=head_color(h), line=dict(width=0, color=head_color(h)), opacity=0.7,
            hoveron="points", name=f"H{h}", legendgroup=f"H{h}",
            hovertemplate=(f"H{h}<br>query %{{customdata[0]}} → key %{{customdata[1]}}"
                           "<br>weight ≈ %{customdata[2]}%<extra></extra>")))
    row_px = 26 if n <= 32 else 16 if n <= 64 else 12
    height = int(max(300, row_px * n + 110))
    marked = [f"<b>▶ {label}</b>" if i == query else label for i, label in enumerate(numbered)]
    left, right = (marked, numbered) if notation == "common" else (numbered, marked)
    font_size = _tick_font_size(n) + 1
    query_title, key_title = "query n (attends)", "key n′ (attended to)"
    left_title, right_title = (query_title, key_title) if notation == "common" else (key_title, query_title)
    # The left column is the y axis' tick labels; the right one annotations (an axis with no trace on it is not
    # drawn, and an extra trace would break "one trace per head")
    annotations = [dict(x=1.0, y=i, xref="x", yref="y", text=label, showarrow=False, xanchor="left", xshift=6,
                        font=dict(size=font_size)) for i, label in enumerate(right)]  # set at once: add_annotation one by one is quadratic
    right_px = int(min(max(len(html.unescape(label)) for label in right), MAX_LABEL_CHARS + 8) * font_size * 0.62) + 16
    fig.update_layout(
        height=height, plot_bgcolor="white", margin=dict(l=10, r=right_px, t=70, b=10), hovermode="closest",
        annotations=annotations,
        xaxis=dict(range=[-0.01, 1.01], showticklabels=False, showgrid=False, zeroline=False, fixedrange=True),
        yaxis=dict(tickmode="array", tickvals=list(range(n)), ticktext=left, showgrid=False, zeroline=False,
                   range=[n - 0.5, -0.5], tickfont=dict(size=font_size), fixedrange=True, ticks=""),
        legend=dict(orientation="h", x=0.5, xanchor="center", y=1.0, yanchor="bottom", title_text="head",
                    itemclick="toggle"),
        title=dict(text=(f"layer {layer} · " if layer is not None else "") + f"{left_title}  ⟶  {right_title}",
                   x=0.5, xanchor="center", y=0.995, yanchor="top", font=dict(size=13)),
        showlegend=True)
    return fig


# ---------------------------------------------------------------------------------------------------------
# Attention rollout
# ---------------------------------------------------------------------------------------------------------

def rollout_heatmap(matrix: np.ndarray, tokens: Sequence[str], *, unknown: Sequence[bool] | None = None,
                    notation: str = "common", height: int | None = None) -> go.Figure:
    """Attention rollout [N(output token), N(input token)] (core.analysis.rollout, rows sum to 1) as a heatmap;
    in paper notation transposed, inputs n′ down the rows and outputs n across, columns summing to 1."""
    matrix = np.asarray(matrix)
    n = matrix.shape[-1]
    if matrix.shape != (n, n) or len(tokens) != n:
        raise ValueError(f"rollout must be [N, N] with N = len(tokens); got {matrix.shape} and {len(tokens)} tokens")
    labels = token_labels(tokens, unknown)
    # no per-cell strings in the hover (N² strings made the browser take seconds to draw at 64 tokens): the
    # hover names the positions, the axes the tokens
    output, source = ("x", "y") if notation == "paper" else ("y", "x")
    fig = go.Figure(go.Heatmap(
        z=_compact(oriented(matrix, notation)), zmin=0, zmax=float(max(matrix.max(initial=0.0), 1e-6)),
        colorscale="Purples", name="rollout", colorbar=_colorbar("share of the input token"),
        hovertemplate=(f"output token %{{{output}}}<br>input token %{{{source}}}"
                       "<br>rollout %{z:.4f}<extra></extra>")))
    size = height or _figure_size(n)
    fig.update_layout(height=size, plot_bgcolor="white", margin=dict(l=10, r=10, t=60, b=10), showlegend=False)
    x_title, y_title = (("output token n · columns sum to 1", "input token n′") if notation == "paper"
                        else ("input token n′", "output token n · rows sum to 1"))
    fig.update_xaxes(title_text=x_title, tickangle=-60 if n > 6 else 0, constrain="domain", **_ticks(labels))
    fig.update_yaxes(title_text=y_title, autorange="reversed", scaleanchor="x", constrain="domain",
                     constraintoward="top", **_ticks(labels))
    return fig


# ---------------------------------------------------------------------------------------------------------
# Plotly config: the modebar with a PNG download
# ---------------------------------------------------------------------------------------------------------

def png_config(filename: str, scale: int = 2, zoom: bool = True) -> dict:
    """The plotly config of every chart: no logo, the modebar always shown, its camera button ("Download plot
    as png") saving `filename`.png at `scale`× resolution, in the browser and offline. zoom=False leaves only
    the camera (for small charts where zooming helps nobody and the buttons would cover the title)."""
    remove = ["select2d", "lasso2d", "autoScale2d"]
    if not zoom:
        remove += ["zoom2d", "pan2d", "zoomIn2d", "zoomOut2d", "resetScale2d"]
    return {"displaylogo": False, "displayModeBar": True,
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": scale},
            "modeBarButtonsToRemove": remove}


# ---------------------------------------------------------------------------------------------------------
# One score taken apart (core.analysis.qk_breakdown)
# ---------------------------------------------------------------------------------------------------------

POSITIVE, NEGATIVE, CHOSEN, OTHER = "#0072B2", "#D55E00", "#D55E00", "#9ecae1"


def qk_products_bar(q: np.ndarray, k: np.ndarray, *, rotated: bool = False, height: int = 300) -> go.Figure:
    """The K elementwise products q_i k_i as bars (blue positive, orange negative); their sum is k·q.
    Hover gives q_i, k_i and the product."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if q.shape != k.shape or q.ndim != 1:
        raise ValueError(f"q and k must be vectors of one length, got {q.shape} and {k.shape}")
    products = q * k
    i = np.arange(len(q))
    fig = go.Figure(go.Bar(
        x=i, y=np.round(products, 5), marker_color=np.where(products >= 0, POSITIVE, NEGATIVE).tolist(),
        customdata=np.round(np.stack([q, k], axis=1), 5), name="q_i k_i",
        hovertemplate="i = %{x}<br>q_i = %{customdata[0]:.4f}<br>k_i = %{customdata[1]:.4f}"
                      "<br>q_i k_i = %{y:.4f}<extra></extra>"))
    word = " (rotated q, k)" if rotated else ""
    fig.update_layout(height=height, plot_bgcolor="white", margin=dict(l=10, r=10, t=40, b=10), showlegend=False,
                      title=dict(text=f"q_i k_i{word}: Σ = k·q = {products.sum():.4f}", x=0, font=dict(size=13)),
                      bargap=0.15)
    fig.update_xaxes(title_text="component i", showgrid=False, zeroline=False, dtick=max(1, len(q) // 16))
    fig.update_yaxes(title_text="q_i k_i", zeroline=True, zerolinecolor="#888", gridcolor="#eee")
    return fig


def softmax_row_bar(row_weights: np.ndarray, row_scores: np.ndarray, tokens: Sequence[str], key: int, *,
                    unknown: Sequence[bool] | None = None, query: int | None = None, height: int = 300) -> go.Figure:
    """One query's softmax row: the weight on every key (bars), the chosen key in orange, masked keys marked
    with × (score −∞, weight 0). Hover gives the key, its score and its weight."""
    weights, scores = np.asarray(row_weights, dtype=np.float64), np.asarray(row_scores, dtype=np.float64)
    n = len(tokens)
    if weights.shape != (n,) or scores.shape != (n,) or not 0 <= key < n:
        raise ValueError("row_weights and row_scores must be [N] with N = len(tokens) and 0 <= key < N")
    labels = token_labels(tokens, unknown)
    numbered = [f"{i}: {label}" for i, label in enumerate(labels)]
    masked = np.isneginf(scores)
    score_text = ["−∞ (masked)" if m else f"{s:.4f}" for s, m in zip(scores, masked)]
    colors = [CHOSEN if i == key else OTHER for i in range(n)]
    fig = go.Figure(go.Bar(
        x=list(range(n)), y=np.round(weights, 5), marker_color=colors, customdata=np.array(
            [[label, text] for label, text in zip(numbered, score_text)], dtype=object), name="weight",
        hovertemplate="key %{customdata[0]}<br>score %{customdata[1]}<br>weight %{y:.4f}<extra></extra>"))
    if masked.any():
        fig.add_trace(go.Scatter(x=np.nonzero(masked)[0], y=np.zeros(int(masked.sum())), mode="markers",
                                 marker=dict(symbol="x-thin", size=8, line=dict(width=1.5, color="#888")),
                                 name="masked", hoverinfo="skip"))
    title = "softmax of the row" + (f" of query {numbered[query]}" if query is not None else "")
    fig.update_layout(height=height, plot_bgcolor="white", margin=dict(l=10, r=10, t=40, b=10), showlegend=False,
                      title=dict(text=title + " · × masked" * bool(masked.any()), x=0, font=dict(size=13)),
                      bargap=0.15)
    fig.update_xaxes(title_text="key n′", **{**_ticks(labels), "tickfont": dict(size=_tick_font_size(n))},
                     tickangle=-60 if n > 6 else 0)
    fig.update_yaxes(title_text="weight", range=[0, max(1.0, float(weights.max(initial=0)))], gridcolor="#eee")
    return fig
