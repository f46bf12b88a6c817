"""Plotly figures of attention patterns: pure functions from arrays to figures, no model maths, no Streamlit.

Inputs are in the common layout of the recording, [N(query), N(key)] with rows summing to 1. With
notation="paper" the figure shows the seed paper's A_{n',n} instead: the transpose, keys n' down the rows and
queries n across the columns, so each column sums to 1 (seed 001 §2.1).

Masked cells (pre-softmax score -inf, weight exactly 0) are drawn grey and hatched, never as a dark or pale
colour that could be mistaken for a small weight.
"""

from __future__ import annotations

import base64
import functools
import html
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from core.serving.visible import escaped, is_invisible

NOTATIONS = ("common", "paper")
# Scales spelled out as plotly.py's validator would: plotly.js has scales of the same names that run the other way
# (its "Blues" goes from dark to light), and lean_figure sends names to the browser unvalidated.
WEIGHT_COLORSCALE = get_colorscale("Blues")
DIFF_COLORSCALE = get_colorscale("RdBu_r")  # red: B attends more, blue: A attends more
ROLLOUT_COLORSCALE = get_colorscale("Purples")  # the rollout (core.figures.canvas.rollout_spec)
MASKED_FILL = "#d4d4d4"
MASKED_HATCH = "#8c8c8c"
MAX_LABEL_CHARS = 14


# ---------------------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1 << 16)  # a page labels every token of the text at every run: 15 ms at 512 tokens
def token_label(token: str, unknown: bool = False) -> str:
    """A token as an axis label: control and invisible characters made visible, long ones shortened,
    unknown tokens marked ⟨word⟩?, and HTML-escaped (plotly reads <br>, <b>... in labels as markup)."""
    shown = []
    for char in token:
        category = unicodedata.category(char)
        if char == " ":
            shown.append("␣")
        elif is_invisible(char):  # control, format, surrogate, unassigned
            shown.append(escaped(char))
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
    return [token_label(token, flag) for token, flag in zip(tokens, _flags(tokens, unknown))]


def _flags(tokens: Sequence[str], unknown: Sequence[bool] | None) -> list[bool]:
    return [bool(flag) for flag in unknown] if unknown is not None else [False] * len(tokens)


def plain_token_labels(tokens: Sequence[str], unknown: Sequence[bool] | None = None) -> list[str]:
    """token_labels as plain text, for whatever draws text as it is (the canvas heatmap, widgets, Altair)."""
    return [_plain_label(token, flag) for token, flag in zip(tokens, _flags(tokens, unknown))]


@functools.lru_cache(maxsize=1 << 16)
def _plain_label(token: str, unknown: bool) -> str:
    return html.unescape(token_label(token, unknown))


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


MAX_TICK_LABELS = 80  # per axis: at 512 tokens every other label was 3.7 px apart, unreadable, and half the draw time


def _ticks(labels: list[str], categories: list[str] | None = None) -> dict:
    """Tick labels at every cell up to MAX_TICK_LABELS tokens, then at every k-th (the hover names every cell); on
    a category axis the tick values are the `categories` (the numbered labels the hover shows) and the text the
    bare token."""
    n = len(labels)
    step = -(-n // MAX_TICK_LABELS)
    values = list(range(0, n, step))
    return dict(tickmode="array", tickvals=[categories[i] for i in values] if categories else values,
                ticktext=[labels[i] for i in values], tickfont=dict(size=_tick_font_size(n)), showgrid=False,
                zeroline=False, automargin=False)


def _label_px(labels: Sequence[str], font_size: int) -> int:
    """About how wide the longest label is drawn, in pixels (fixed margins: plotly's automargin re-lays the
    figure out until its labels fit, which took up to seconds per chart at 64 tokens)."""
    longest = max((len(html.unescape(label)) for label in labels), default=1)
    return int(longest * font_size * 0.62) + 8


def _square_margins(labels: list[str], title: str = "", colorbar: bool = True) -> dict:
    """Margins that fit the tick labels (x rotated by 60°), the axis titles and the colour bar above. Fixed: the
    colour bar must not push them (autoexpand), which made plotly lay the chart out and draw it a second time."""
    label = _label_px(labels, _tick_font_size(len(labels)))
    bottom = int(label * 0.87) + 36 if len(labels) > 6 else 48
    return dict(l=label + 30, r=10, t=(135 if title else 95) if colorbar else (40 if title else 10), b=bottom,
                autoexpand=False)


def lean_figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, not validated property by property on the way in: plotly's validation took most
    of the time a rerun spent building these charts (9 of 10 ms for one head at 64 tokens, more under load).
    tests/test_figures.py validates every builder's output in full instead. No template in the figure: Streamlit
    applies its theme in the browser (plotly's default template was about 7 kB a chart)."""
    return go.Figure({"data": data, "layout": {"template": {}, **layout}}, _validate=False)


def binary(values, dtype) -> dict:
    """An array for a lean_figure trace in plotly.js's binary form ({dtype, bdata}: its little-endian bytes in
    base64), as `dtype` (float32, or the smallest unsigned integer that holds it: fewer bytes to send). Given a NumPy
    array, plotly.py converts it itself at each copy of the figure (building it, and again in st.plotly_chart): over
    a third of the time the live-training curves took."""
    array = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    return {"dtype": array.dtype.str[1:], "bdata": base64.b64encode(array).decode("ascii")}


def grid_axes(titles: Sequence[str], cols: int, gap_x: float, gap_y: float, title_size: int = 16,
              **axis) -> tuple[dict, list[dict]]:
    """make_subplots' grid, as plain dicts for lean_figure: panels row by row, `cols` a row, one per title. Returns
    the layout's axes (xaxis, yaxis, xaxis2, …; each also given `axis`) and the titles as annotations. Trace i
    draws on panel i with xaxis=f"x{i + 1}" (plain "x" for the first), yaxis likewise."""
    rows = -(-len(titles) // cols)
    width, height = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    axes, annotations = {}, []
    for panel, title in enumerate(titles):
        row, col = divmod(panel, cols)
        x0, y1 = round(col * (width + gap_x), 6), round(1 - row * (height + gap_y), 6)
        suffix = "" if panel == 0 else str(panel + 1)
        axes[f"xaxis{suffix}"] = dict(domain=[x0, min(1.0, round(x0 + width, 6))], anchor=f"y{suffix}", **axis)
        axes[f"yaxis{suffix}"] = dict(domain=[max(0.0, round(y1 - height, 6)), y1], anchor=f"x{suffix}", **axis)
        annotations.append(dict(text=title, x=x0 + width / 2, y=y1, xref="paper", yref="paper", showarrow=False,
                                xanchor="center", yanchor="bottom", font=dict(size=title_size)))
    return axes, annotations


def numbered_labels(labels: Sequence[str], indices: Sequence[int] | None = None) -> list[str]:
    """"i: token" for each label (i: its index, or the token's own from `indices`): unique, so they can be the
    categories of an axis and name a cell in the hover."""
    return [f"{i}: {label}" for i, label in zip(range(len(labels)) if indices is None else indices, labels)]


MAX_HATCHED = 64  # past this many tokens cells are too small for hatching to show; grey alone marks them


def _colorbar(title: str) -> dict:
    """A thin horizontal colour bar above the plot, so narrow columns keep their width for the matrix."""
    return dict(orientation="h", x=0.5, xanchor="center", y=1.01, yanchor="bottom", len=0.7, thickness=10,
                title=dict(text=title, side="top"), tickfont=dict(size=10))


def _figure_size(n: int) -> int:
    return int(np.clip(28 * n + 240, 480, 940))


def _masked_of(scores: np.ndarray | None, masked: np.ndarray | None, n: int) -> np.ndarray:
    if masked is not None:
        return np.asarray(masked, dtype=bool)
    return np.isneginf(scores) if scores is not None else np.zeros((n, n), dtype=bool)


# ---------------------------------------------------------------------------------------------------------
# All heads
# ---------------------------------------------------------------------------------------------------------

def _block_mean(matrices: np.ndarray, block: int) -> np.ndarray:
    """The mean of each block×block block of the last two axes; blocks at the edges average only the cells
    that exist."""
    if block == 1:
        return matrices
    n = matrices.shape[-1]
    size = -(-n // block) * block
    if size != n:  # zeros past the edge, left out of the edge blocks' counts below
        matrices = np.pad(matrices, [(0, 0)] * (matrices.ndim - 2) + [(0, size - n), (0, size - n)])
    total = matrices.reshape(*matrices.shape[:-2], size // block, block, size // block, block).sum(axis=(-3, -1))
    per_axis = _block_sizes(n, block)
    return total / np.outer(per_axis, per_axis)


def _block_sizes(n: int, block: int) -> np.ndarray:
    """The cells of each block along one axis of n cells: `block`, fewer in the last one."""
    return np.minimum(block, n - np.arange(0, n, block))


def _block_share(matrices: np.ndarray, block: int, key_axis: int) -> np.ndarray:
    """Each block of b queries × b keys of attention matrices [..., N, N]: the weight on its keys, summed over
    them, averaged over its queries (the block's mean times its number of keys, along `key_axis`, -1 or -2)."""
    if block == 1:
        return matrices
    keys = _block_sizes(matrices.shape[-1], block)
    return _block_mean(matrices, block) * (keys if key_axis == -1 else keys[:, None])


@dataclass
class OverviewGrid:
    """What the all-heads overview (core.figures.canvas.overview_spec) shows: every head's pattern as one tile of
    an M x H grid, on one colour scale (0..1).

    Compact, as an overview should be: the weights are sent as whole per cents in one byte each (colour shows no
    finer steps; the hover says "≈"); the chosen head's own chart has the exact weights. Past `max_cells` tokens
    a cell covers a block of b queries × b keys (b = ⌈N / max_cells⌉; a tile is ~130 pixels wide, so the screen
    could not show more): the weight the queries put on those keys, summed over the keys and averaged over the
    queries, so a tile's rows still sum to 1 and a sharp head stays as dark at 1024 tokens as at 64 (a mean over
    the block would fade it b times). Masked only where the whole block is; the hover says what a cell is."""

    percent: np.ndarray  # [M·n, H·n] uint8: each weight (or block mean) in whole per cents, tiles side by side
    masked: np.ndarray | None  # [n, n] True where hidden for every head (a block: only where all of it is)
    spans: list[str]  # what each of a tile's n rows (and columns) covers: "i: token", or "i–j" for a block
    row_word: str  # what a row of a tile is: "query" or "key" ("queries", "keys" for blocks)
    col_word: str
    what: str  # "weight", or what a block's cell is (see the class)
    layers: int
    heads: int
    size: int  # n, a tile's cells a side: N, or ceil(N / b) for blocks of b tokens


def overview_grid(patterns: np.ndarray, notation: str = "common", masked: np.ndarray | None = None,
                  tokens: Sequence[str] | None = None, max_cells: int = 128) -> OverviewGrid:
    """patterns [M, H, N(query), N(key)] as the overview tiles them (see OverviewGrid), the tokens named in plain
    text (the canvas chart draws text as it is)."""
    patterns = np.asarray(patterns)
    if patterns.ndim != 4 or patterns.shape[-1] != patterns.shape[-2]:
        raise ValueError(f"patterns must be [M, H, N, N], got {patterns.shape}")
    m, h, n_tokens, _ = patterns.shape
    _check_notation(notation)
    shown = patterns.swapaxes(-1, -2) if notation == "paper" else patterns  # [M, H, N(row), N(col)]
    block = -(-n_tokens // max_cells)  # tokens per cell: 1 up to max_cells tokens, then blocks of tokens
    shown = _block_share(shown, block, key_axis=-2 if notation == "paper" else -1)  # [M, H, n, n], n = ⌈N / b⌉
    n = shown.shape[-1]
    percent = np.rint(shown.transpose(0, 2, 1, 3).reshape(m * n, h * n) * 100).astype(np.uint8)  # [M·n, H·n]
    names = plain_token_labels(tokens) if tokens is not None else [str(i) for i in range(n_tokens)]
    spans = [f"{i}: {names[i]}" if block == 1 else f"{i}–{min(i + block, n_tokens) - 1}"
             for i in range(0, n_tokens, block)]
    row_word, col_word = ("key", "query") if notation == "paper" else ("query", "key")
    if block > 1:
        plural = {"key": "keys", "query": "queries"}
        row_word, col_word = plural[row_word], plural[col_word]
    if masked is not None:
        masked = _block_mean(oriented(np.asarray(masked, bool), notation).astype(np.float64), block) == 1
    what = "weight" if block == 1 else f"weight on these {block} keys (summed; mean of the queries)"
    return OverviewGrid(percent, masked, spans, row_word, col_word, what, m, h, n)


# ---------------------------------------------------------------------------------------------------------
# Head view: which tokens it draws, in which colours (core.figures.canvas.head_view_spec draws it)
# ---------------------------------------------------------------------------------------------------------

# Okabe & Ito's colour-blind-safe palette, in an order that keeps neighbours apart (yellow, weak on white, last)
HEAD_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MIN_LINE_WEIGHT = 0.01


HEAD_VIEW_TOKENS = 48  # past this many tokens (after [BOS]) the head view draws a window of them


def head_view_tokens(n: int, start: int = 1, query: int | None = None, size: int = HEAD_VIEW_TOKENS) -> list[int]:
    """The tokens the head view draws: every token of a short text; of a longer one [BOS] (where many heads put
    their weight) and `size` consecutive tokens from `start`, moved to hold `query` when it is given. Hundreds of
    rows of bands are a tangle nobody can follow, and seconds of drawing."""
    if n <= size + 1:
        return list(range(n))
    if query is not None and query > 0 and not start <= query < start + size:
        start = query - size // 2
    start = min(max(start, 1), n - size)
    return [0, *range(start, start + size)]


def weight_outside(patterns: np.ndarray, heads: Sequence[int], shown: Sequence[int]) -> float:
    """The mean weight the shown queries of these heads give to keys the head view leaves out (0: none)."""
    if not len(heads):
        return 0.0
    drawn = np.asarray(patterns, dtype=np.float64)[np.ix_(list(heads), list(shown), list(shown))]
    return float(max(1.0 - drawn.sum(axis=-1).mean(), 0.0))


def head_color(head: int) -> str:
    """The colour of head `head` in the head view (the palette repeats after eight heads)."""
    return HEAD_COLORS[head % len(HEAD_COLORS)]


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
# One score taken apart (core.lessons.analysis.qk_breakdown)
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
    numbered = numbered_labels(labels)
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
    fig.update_layout(height=height, plot_bgcolor="white", margin={**_square_margins(labels, colorbar=False),
                                                                    "l": 60, "t": 40},
                      showlegend=False,
                      title=dict(text=title + " · × masked" * bool(masked.any()), x=0, font=dict(size=13)),
                      bargap=0.15)
    fig.update_xaxes(title_text="key n′", **{**_ticks(labels), "tickfont": dict(size=_tick_font_size(n))},
                     tickangle=-60 if n > 6 else 0)
    fig.update_yaxes(title_text="weight", range=[0, max(1.0, float(weights.max(initial=0)))], gridcolor="#eee")
    return fig
