"""Figures of the masks-and-generation lesson: the clickable mask grid (Altair, whose point selections report the
clicked cell), the incremental property, attention growing row by row, and the next-token distribution.

Pure functions from arrays to charts; no model maths, no Streamlit. Colour-blind-safe: Okabe-Ito blue for allowed
cells, grey for masked ones, orange for a query left with no key; Blues for changes from 0 up.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.figures.attention import plain_token_labels, token_labels
from core.figures.canvas import head_heatmap_spec
from core.lessons.generation import Sampling

ALLOWED_COLOUR, MASKED_COLOUR, EMPTY_ROW_COLOUR = "#0072B2", "#d4d4d4", "#E69F00"
MODEL_COLOUR, KEPT_COLOUR, CHOSEN_COLOUR = "#56B4E9", "#0072B2", "#D55E00"
PROMPT_LINE_COLOUR = "#000000"  # the dashed line after the prompt
CELL_SELECTION = "cell"  # the name of the mask grid's point selection
VISIBLE_CHANGE = 0.01  # the change scale reaches at least 1 %, so float rounding (~1e-7) stays white


def _plain_labels(tokens: Sequence[str]) -> list[str]:
    """"n: token" labels for Altair, which draws text as it is (no HTML escaping wanted)."""
    return [f"{i}: {label}" for i, label in enumerate(plain_token_labels(tokens))]


# ---------------------------------------------------------------------------------------------------------
# The mask editor
# ---------------------------------------------------------------------------------------------------------

GRID_SHARE = 0.7  # about how much of the mask grid's width its cells take (the labels take the rest)
MIN_LABEL_PX = 7  # below this a label cannot be read at all: past ~45 tokens they overlap again


def mask_grid(allowed: np.ndarray, tokens: Sequence[str], *, size_px: int = 440, font_scale: float = 1.0) -> alt.Chart:
    """The [N(query), N(key)] allowed-matrix as a grid of cells: blue allowed, grey masked, orange the cells of a
    query that may attend to nothing. Clicking a cell selects it (selection "cell", fields query and key).
    size_px: the chart's width and height, labels included (Vega fits the grid inside). font_scale: type larger by
    this (presenter mode's), the chart by its square root, so that larger labels leave the cells room."""
    allowed = np.asarray(allowed, dtype=bool)
    n = len(tokens)
    if allowed.shape != (n, n):
        raise ValueError(f"the mask must be [N, N] with N = len(tokens); got {allowed.shape} and {n} tokens")
    labels = _plain_labels(tokens)
    query, key = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    empty_row = ~allowed.any(axis=1)
    state = np.where(allowed, "allowed", np.where(empty_row[:, None], "row with no key", "masked"))
    frame = pd.DataFrame({"query": query.ravel(), "key": key.ravel(), "state": state.ravel(),
                          "query token": np.array(labels)[query.ravel()], "key token": np.array(labels)[key.ravel()]})
    selection = alt.selection_point(name=CELL_SELECTION, fields=["query", "key"], on="click")
    size = round(size_px * font_scale ** 0.5)
    # A label no taller than its row: presenter mode's type on 30 rows ran the labels into each other.
    row_px = GRID_SHARE * size / n
    label_px = max(MIN_LABEL_PX, min(round(12 * font_scale), round(0.9 * row_px)))
    text = dict(labelFontSize=label_px, titleFontSize=round(13 * font_scale), labelLimit=round(120 * font_scale))
    return alt.Chart(frame).mark_rect(stroke="white", strokeWidth=1, cursor="pointer").encode(
        x=alt.X("key token:O", sort=labels, title="key n′ (attended to)",
                axis=alt.Axis(labelAngle=-60, orient="top", labelOverlap=False, **text)),
        y=alt.Y("query token:O", sort=labels, title="query n", axis=alt.Axis(labelOverlap=False, **text)),
        color=alt.Color("state:N", title=None,
                        legend=alt.Legend(orient="top", labelLimit=400, labelFontSize=round(12 * font_scale),
                                          symbolSize=round(100 * font_scale ** 2)),
                        scale=alt.Scale(domain=["allowed", "masked", "row with no key"],
                                        range=[ALLOWED_COLOUR, MASKED_COLOUR, EMPTY_ROW_COLOUR])),
        opacity=alt.condition(selection, alt.value(1.0), alt.value(0.85)),
        tooltip=["query token", "key token", "state"],
    ).add_params(selection).properties(width=size, height=size)


# ---------------------------------------------------------------------------------------------------------
# The incremental property
# ---------------------------------------------------------------------------------------------------------

def incremental_heatmap(change: np.ndarray, tokens: Sequence[str], point_labels: Sequence[str], *,
                        title: str = "") -> go.Figure:
    """change [M+1, N-1]: the relative change of each earlier token's stream when the last token is appended;
    stream points down, earlier tokens across, each cell's value written in it (exact zeros as 0)."""
    change = np.asarray(change, dtype=np.float64)
    x = [f"{i}:{label}" for i, label in enumerate(token_labels(tokens))]
    text = [["0" if value == 0 else f"{value:.1e}" if value < 1e-3 else f"{value:.2f}" for value in row]
            for row in change]
    fig = go.Figure(go.Heatmap(
        z=change, x=x, y=list(point_labels), zmin=0, zmax=float(max(change.max(initial=0.0), VISIBLE_CHANGE)),
        colorscale="Blues", text=text, texttemplate="%{text}" if change.shape[1] <= 20 else None,
        textfont=dict(size=11), colorbar=dict(title=dict(text="relative change", side="right"), thickness=12),
        hovertemplate="token %{x}<br>stream %{y}<br>‖Δx‖ / ‖x‖ = %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", title_text="residual stream at")
    fig.update_xaxes(type="category", tickangle=-45, title_text="earlier token n")
    fig.update_layout(title=dict(text=title, x=0, font=dict(size=14)), plot_bgcolor="white",
                      height=int(np.clip(55 * len(point_labels) + 200, 300, 560)), margin=dict(l=10, r=10, t=60, b=10))
    return fig


# ---------------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------------

def generation_spec(pattern: np.ndarray, scores: np.ndarray, tokens: Sequence[str], prompt_length: int, *,
                    title: str = "", notation: str = "common", height: int | None = None) -> dict:
    """One head's attention while generating, [n, n] (rows are queries as the model read them), for the canvas
    chart: the pattern of core.figures.canvas.head_heatmap_spec, a dashed line after the prompt, and the newest
    row (or column, in paper notation) outlined: the row the model computed when it read the last token."""
    n = len(tokens)
    spec = head_heatmap_spec(pattern, tokens, scores, notation=notation, title=title, height=height,
                             divider=prompt_length if 0 < prompt_length < n else None)
    if "divider" in spec:
        spec["divider"]["color"] = PROMPT_LINE_COLOUR
    if n > prompt_length:
        spec["outline"] = {"axis": "col" if notation == "paper" else "row", "at": n - 1, "color": CHOSEN_COLOUR}
    return spec


def sampling_legend(sampling: Sampling) -> tuple[str, str | None]:
    """The bars' legend names: the model's distribution, and the one the token was drawn from (None when greedy
    decoding drew nothing: it took the argmax)."""
    if sampling.greedy:
        return "the model's p = softmax(logits)<br>greedy: ▶ is the argmax, taken (nothing sampled)", None
    cuts = [f"top-k {sampling.top_k}"] * bool(sampling.top_k) + [f"top-p {sampling.top_p:g}"] * (sampling.top_p < 1)
    drawn = f"p cut to {' and '.join(cuts)}, renormalised" if cuts else "p itself (no top-k or top-p cut)"
    return f"the model's p = softmax(logits / {sampling.temperature:g})", f"sampled from: {drawn}"


def next_token_bars(labels: Sequence[str], probs: np.ndarray, kept: np.ndarray, chosen: int, sampling: Sampling, *,
                    title: str = "") -> go.Figure:
    """The candidates for one step, likeliest first: the model's softmax(logits / T) (light) and, when sampled,
    the distribution drawn from after top-k and top-p (dark); the chosen token's bars outlined in vermillion and
    marked ▶. The legend says which decoding chose it (sampling_legend)."""
    shown = [("▶ " if i == chosen else "") + label for i, label in enumerate(token_labels(labels))]
    outline = dict(color=CHOSEN_COLOUR, width=[3 if i == chosen else 0 for i in range(len(labels))])
    model_name, drawn_name = sampling_legend(sampling)
    bars = [(model_name, probs, MODEL_COLOUR)] + ([(drawn_name, kept, KEPT_COLOUR)] if drawn_name else [])
    fig = go.Figure()
    for name, values, colour in bars:
        fig.add_trace(go.Bar(x=shown, y=np.round(np.asarray(values, dtype=np.float64), 5), name=name,
                             marker=dict(color=colour, line=outline), showlegend=True,
                             hovertemplate="%{x}<br>" + name + " = %{y:.4f}<extra></extra>"))
    fig.update_layout(barmode="group", title=dict(text=title, x=0, font=dict(size=14)), height=400,
                      plot_bgcolor="white", margin=dict(l=10, r=10, t=60 if title else 30, b=10),
                      legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"))
    fig.update_xaxes(type="category", tickangle=-45)
    top = float(max(np.max(probs, initial=0.0), np.max(kept, initial=0.0), 1e-6))
    fig.update_yaxes(title_text="probability", range=[0, min(1.02, top * 1.15)], gridcolor="#eee")
    return fig
