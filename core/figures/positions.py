"""Plotly figures of the position-encoding lesson: pure functions from arrays (core/lessons/position_lab.py) to figures.

Colour-blind-safe scales only: RdBu for signed values centred on 0, Blues for changes from 0 up (and for values
all on one side of 0), Viridis for
position order, Okabe-Ito (HEAD_COLORS) for heads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures.attention import HEAD_COLORS, token_labels

SIGNED_COLORSCALE = "RdBu_r"  # red positive, blue negative, white 0
CHANGE_COLORSCALE = "Blues"
ORDER_COLORSCALE = "Viridis"
BEFORE_COLOUR = "#999999"


def _rounded(z: np.ndarray, decimals: int = 4) -> np.ndarray:
    return np.round(np.asarray(z, dtype=np.float64), decimals).astype(np.float32)


def _limit(z: np.ndarray) -> float:
    """The half-range of a diverging scale centred on 0."""
    return float(max(np.nanmax(np.abs(z), initial=0.0), 1e-9))


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(title=dict(text=title, x=0, font=dict(size=14)), height=height, plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=60, b=10))
    return fig


# ---------------------------------------------------------------------------------------------------------
# Tables and similarity
# ---------------------------------------------------------------------------------------------------------

def encoding_heatmap(table: np.ndarray, *, title: str = "", feature_title: str = "feature d") -> go.Figure:
    """An encoding table [N(position), F(feature)]: positions down the rows, features across, signed colours."""
    table = np.asarray(table)
    limit = _limit(table)
    fig = go.Figure(go.Heatmap(
        z=_rounded(table), zmin=-limit, zmax=limit, colorscale=SIGNED_COLORSCALE, name="encoding",
        colorbar=dict(title=dict(text="value", side="right"), thickness=12),
        hovertemplate=f"position %{{y}}<br>{feature_title.split()[0]} %{{x}}<br>value %{{z:.4f}}<extra></extra>"))
    fig.update_xaxes(title_text=feature_title, showgrid=False, zeroline=False)
    fig.update_yaxes(title_text="position n", autorange="reversed", showgrid=False, zeroline=False)
    return _layout(fig, title, int(np.clip(8 * len(table) + 200, 360, 620)))


def similarity_colours(similarity: np.ndarray) -> tuple[dict, str]:
    """The colour scale of S and the sentence that reads it. Values on both sides of 0: red-blue centred on 0
    (red alike, blue opposed); all on one side: a sequential scale over their own range (darker: more alike),
    since a diverging scale would leave one of its colours unused and centre on a value nothing takes."""
    similarity = np.asarray(similarity, dtype=np.float64)
    low, high = float(np.nanmin(similarity)), float(np.nanmax(similarity))
    if low < 0 < high:
        limit = max(-low, high)
        return (dict(zmin=-limit, zmax=limit, zmid=0.0, colorscale=SIGNED_COLORSCALE),
                f"Red: alike (positive), blue: opposed (negative), white: 0; from {low:.3g} to {high:.3g}.")
    sign = "positive" if low >= 0 else "negative"
    return (dict(zmin=low, zmax=max(high, low + 1e-9), colorscale=CHANGE_COLORSCALE),
            f"Darker blue: more alike. Every value here is {sign}, from {low:.3g} to {high:.3g}, so the scale "
            "spans just that range.")


def similarity_heatmap(similarity: np.ndarray, *, title: str = "", selected: int | None = None) -> go.Figure:
    """S[n, m] = e_n · e_m, [N, N], coloured by similarity_colours; the row of position `selected` is outlined.
    The plot fills the chart's height, so the colour bar beside it is as tall as it."""
    similarity = np.asarray(similarity)
    n = len(similarity)
    scale, _ = similarity_colours(similarity)
    fig = go.Figure(go.Heatmap(
        z=_rounded(similarity), **scale, name="similarity",
        colorbar=dict(title=dict(text="e_n · e_m", side="right"), thickness=12),
        hovertemplate="position n = %{y}<br>position m = %{x}<br>e_n · e_m = %{z:.3f}<extra></extra>"))
    if selected is not None and 0 <= selected < n:
        fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=selected - 0.5, y1=selected + 0.5,
                      line=dict(color="#000000", width=2))
    fig.update_xaxes(title_text="position m", showgrid=False, zeroline=False)
    fig.update_yaxes(title_text="position n", autorange="reversed", showgrid=False, zeroline=False)
    return _layout(fig, title, int(np.clip(6 * n + 300, 420, 620)))


def similarity_profile(similarity: np.ndarray, position: int, *, title: str = "") -> go.Figure:
    """Row `position` of S: how alike position n's encoding is to every other position's."""
    row = np.asarray(similarity)[position]
    m = np.arange(len(row))
    fig = go.Figure(go.Scatter(x=m, y=_rounded(row), mode="lines+markers", name=f"e_{position} · e_m",
                               line=dict(color=HEAD_COLORS[0]), marker=dict(size=5),
                               hovertemplate="m = %{x}<br>e_n · e_m = %{y:.3f}<extra></extra>"))
    fig.add_vline(x=position, line=dict(color=HEAD_COLORS[1], dash="dash"),
                  annotation_text=f"n = {position}", annotation_position="top right")
    fig.update_xaxes(title_text="position m", gridcolor="#eee")
    fig.update_yaxes(title_text=f"e_{position} · e_m", zeroline=True, zerolinecolor="#888", gridcolor="#eee")
    return _layout(fig, title, 320)


# ---------------------------------------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------------------------------------

def rope_pair_figure(before: np.ndarray, after: np.ndarray, angle: np.ndarray, tokens: Sequence[str], *,
                     title: str = "") -> go.Figure:
    """One feature pair of every token as an arrow from the origin in its 2-D plane: before RoPE (grey, dashed)
    and after (coloured by position, Viridis): token n is turned by n θ, its length unchanged."""
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    n = len(tokens)
    labels = [f"{i}: {label}" for i, label in enumerate(token_labels(tokens))]
    gaps = np.full(n, np.nan)

    def arrows(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xs = np.stack([np.zeros(n), points[:, 0], gaps], axis=1).reshape(-1)
        ys = np.stack([np.zeros(n), points[:, 1], gaps], axis=1).reshape(-1)
        return _rounded(xs), _rounded(ys)

    fig = go.Figure()
    xs, ys = arrows(before)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=BEFORE_COLOUR, dash="dot", width=1),
                             name="before (q as computed)", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=_rounded(before[:, 0]), y=_rounded(before[:, 1]), mode="markers+text",
                             text=[str(i) for i in range(n)], textposition="bottom center",
                             textfont=dict(color=BEFORE_COLOUR, size=10),
                             marker=dict(color=BEFORE_COLOUR, size=7, symbol="circle-open"), name="before",
                             customdata=labels, showlegend=False,
                             hovertemplate="%{customdata}<br>before rotation (%{x:.3f}, %{y:.3f})<extra></extra>"))
    xs, ys = arrows(after)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="#555555", width=1), name="after (rotated)",
                             hoverinfo="skip"))
    degrees = np.degrees(angle)
    fig.add_trace(go.Scatter(
        x=_rounded(after[:, 0]), y=_rounded(after[:, 1]), mode="markers+text", text=[str(i) for i in range(n)],
        textposition="top center", name="after", showlegend=False,
        marker=dict(color=np.arange(n), colorscale=ORDER_COLORSCALE, size=10, showscale=True,
                    colorbar=dict(title=dict(text="position n", side="right"), thickness=12)),
        customdata=np.stack([np.array(labels, dtype=object), np.round(degrees, 1)], axis=1),
        hovertemplate="%{customdata[0]}<br>after rotation (%{x:.3f}, %{y:.3f})"
                      "<br>turned by n·θ = %{customdata[1]}°<extra></extra>"))
    reach = float(max(np.abs(before).max(initial=0), np.abs(after).max(initial=0), 1e-6)) * 1.15
    fig.update_xaxes(range=[-reach, reach], zeroline=True, zerolinecolor="#888", gridcolor="#eee",
                     title_text="feature 2i")
    fig.update_yaxes(range=[-reach, reach], zeroline=True, zerolinecolor="#888", gridcolor="#eee",
                     scaleanchor="x", title_text="feature 2i+1")
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.15))
    return _layout(fig, title, 560)


# ---------------------------------------------------------------------------------------------------------
# Biases per head
# ---------------------------------------------------------------------------------------------------------

def bias_heatmaps(bias: np.ndarray, *, title: str = "", cols: int | None = None) -> go.Figure:
    """b[h, i, j] of every head [H, N, N] on one scale centred on 0, `cols` panels a row (all in one row by
    default; presenter mode's large type asks for 2, so that each panel stays readable on a projector). NaN cells
    (keys the model's mask hides, where the bias is never used) are left blank."""
    bias = np.asarray(bias)
    h, n, _ = bias.shape
    cols = min(cols or h, h)
    rows = -(-h // cols)
    limit = _limit(bias)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {i}" for i in range(h)],
                        horizontal_spacing=min(0.03, 0.5 / max(cols - 1, 1)),  # no tick labels between
                        vertical_spacing=0.12 if rows > 1 else None)
    for head in range(h):
        fig.add_trace(go.Heatmap(
            z=_rounded(bias[head]), zmin=-limit, zmax=limit, colorscale=SIGNED_COLORSCALE, showscale=head == h - 1,
            hoverongaps=False, name=f"head {head}",
            colorbar=dict(title=dict(text="bias b", side="right"), thickness=12),
            hovertemplate=f"head {head}<br>query i = %{{y}}<br>key j = %{{x}}<br>b = %{{z:.3f}}<extra></extra>"),
            row=head // cols + 1, col=head % cols + 1)
    fig.update_xaxes(showgrid=False, zeroline=False, constrain="domain")
    fig.update_yaxes(showgrid=False, zeroline=False, autorange="reversed", constrain="domain")
    for head in range(h):
        row, col, index = head // cols + 1, head % cols + 1, "" if head == 0 else head + 1
        fig.update_xaxes(title_text="key j" if head + cols >= h else None, row=row, col=col)
        # the same queries as the row's first panel: no labels crowding the panel before
        fig.update_yaxes(title_text="query i" if col == 1 else None, showticklabels=col == 1, row=row, col=col)
        fig.update_layout({f"yaxis{index}": dict(scaleanchor=f"x{index}")})  # square cells
    fig.update_annotations(font=dict(size=12))
    return _layout(fig, title, 330 + 270 * (rows - 1))


def bias_offset_lines(offsets: np.ndarray, values: np.ndarray, *, title: str = "") -> go.Figure:
    """The bias as a function of the offset j - i, one line per head (Okabe-Ito colours). values [H, offsets]."""
    fig = go.Figure()
    for head, row in enumerate(np.asarray(values)):
        fig.add_trace(go.Scatter(x=offsets, y=_rounded(row), mode="lines+markers", name=f"head {head}",
                                 line=dict(color=HEAD_COLORS[head % len(HEAD_COLORS)]), marker=dict(size=4),
                                 hovertemplate=f"head {head}<br>j − i = %{{x}}<br>b = %{{y:.3f}}<extra></extra>"))
    fig.update_xaxes(title_text="offset j − i (negative: the key is earlier)", zeroline=True, zerolinecolor="#888",
                     gridcolor="#eee")
    fig.update_yaxes(title_text="bias added to the score", zeroline=True, zerolinecolor="#888", gridcolor="#eee")
    fig.update_layout(legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))
    return _layout(fig, title, 360)


# ---------------------------------------------------------------------------------------------------------
# The permutation demonstration
# ---------------------------------------------------------------------------------------------------------

def permutation_grid(changes: Sequence[np.ndarray], titles: Sequence[str], tokens: Sequence[str],
                     point_labels: Sequence[str], *, cols: int = 2) -> go.Figure:
    """One heatmap per condition: stream points down, the tokens of the permuted text across, coloured by the
    relative change ‖x_b[n] − x_a[perm n]‖ / ‖x_a[perm n]‖ on one shared scale (white: the same)."""
    rows = -(-len(changes) // cols)
    top = float(max(max(float(np.max(c)) for c in changes), 1e-6))
    x = [f"{i}:{label}" for i, label in enumerate(token_labels(tokens))]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles), vertical_spacing=0.22,
                        horizontal_spacing=0.08)
    for index, change in enumerate(changes):
        fig.add_trace(go.Heatmap(
            z=np.asarray(change, dtype=np.float64), x=x, y=list(point_labels), zmin=0, zmax=top,
            colorscale=CHANGE_COLORSCALE, showscale=index == 0, name=titles[index],
            colorbar=dict(title=dict(text="relative change", side="right"), thickness=12),
            hovertemplate="token %{x}<br>stream %{y}<br>relative change %{z:.2e}<extra></extra>"),
            row=index // cols + 1, col=index % cols + 1)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickangle=-45)
    fig.update_annotations(font=dict(size=13))
    return _layout(fig, "", 280 * rows + 80)


# ---------------------------------------------------------------------------------------------------------
# Past the training length
# ---------------------------------------------------------------------------------------------------------

def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of each `window` consecutive values (fewer at the start), so one noisy position does not hide the
    trend; the same length as `values`."""
    sums = np.cumsum(np.concatenate([[0.0], np.asarray(values, dtype=np.float64)]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def length_loss_lines(losses: dict[str, np.ndarray], trained_length: int, *, window: int = 8,
                      title: str = "") -> go.Figure:
    """The next-token loss at each position, one line per encoding (Okabe-Ito colours), averaged over `window`
    positions; the positions never seen in training shaded, from trained_length on. losses: name -> [n-1], the loss
    at position p at index p-1."""
    fig = go.Figure()
    for index, (name, loss) in enumerate(losses.items()):
        positions = np.arange(1, len(loss) + 1)
        fig.add_trace(go.Scatter(x=positions, y=_rounded(moving_average(loss, window)), mode="lines", name=name,
                                 line=dict(color=HEAD_COLORS[index % len(HEAD_COLORS)], width=2.5),
                                 hovertemplate=f"{name}<br>position %{{x}}<br>loss %{{y:.3f}} nats"
                                               f"<extra></extra>"))
    longest = max(len(loss) for loss in losses.values())
    fig.add_vrect(x0=trained_length - 0.5, x1=longest + 0.5, fillcolor="#999", opacity=0.15, line_width=0,
                  annotation_text="never seen in training", annotation_position="top left")
    fig.update_xaxes(title_text="position in the text", gridcolor="#eee", range=[0, longest + 1])
    fig.update_yaxes(title_text=f"next-token loss (nats, mean of {window} positions)", gridcolor="#eee")
    fig.update_layout(legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))
    return _layout(fig, title, 420)
