"""Plotly figures of the residual stream, the logit lens and TokenNorm: pure functions from arrays to figures.

No model maths and no Streamlit here: the numbers come from core/lessons/lens.py. Token labels are made safe for plotly
by core.figures.attention.token_labels (control characters visible, HTML escaped, unknown words marked ⟨…⟩?).

Layouts follow the recording (tokens down the rows, X is N x D); with notation="paper" the figure-5 view shows
X as the seed paper writes it, D x N with tokens across.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures.attention import HEAD_COLORS, plain_token_labels, token_labels

NORM_COLORSCALE = "Viridis"
VALUE_COLORSCALE = "RdBu_r"
PROB_COLORSCALE = "Blues"
HIGHLIGHT = "#e4572e"
EMBED_COLORS = {"embed": "#7f7f7f", "pos_embed": "#c7c7c7"}
ATTN_COLORS = ("#1f77b4", "#4a98c9", "#7fb8da", "#aed1e7", "#08519c", "#3182bd")
MLP_COLORS = ("#ff7f0e", "#fd9e4b", "#fdbb84", "#fdd0a2", "#d94801", "#f16913")


def _compact(z: np.ndarray, decimals: int = 4) -> np.ndarray:
    """Rounded and float32, so plotly sends a small binary array."""
    return np.round(np.asarray(z, dtype=np.float64), decimals).astype(np.float32)


def _numbered(tokens: Sequence[str], unknown: Sequence[bool] | None = None) -> list[str]:
    """Axis labels "n:token": positions keep repeated tokens apart (plotly merges equal category labels)."""
    return [f"{i}:{label}" for i, label in enumerate(token_labels(tokens, unknown))]


def _token_axis(n: int) -> dict:
    size = 12 if n <= 20 else 10 if n <= 40 else 8
    return dict(tickangle=-60 if n > 6 else 0, tickfont=dict(size=size), type="category")


def part_color(name: str) -> str:
    """A stable colour per residual part: greys for the embeddings, blues for attention, oranges for MLPs."""
    if name in EMBED_COLORS:
        return EMBED_COLORS[name]
    layer = int(name.split()[0][1:]) if name.startswith("L") else 0
    palette = ATTN_COLORS if name.endswith("attn") else MLP_COLORS
    return palette[layer % len(palette)]


# ---------------------------------------------------------------------------------------------------------
# Residual stream
# ---------------------------------------------------------------------------------------------------------

def residual_norm_heatmap(norms: np.ndarray, tokens: Sequence[str], point_labels: Sequence[str], *,
                          unknown: Sequence[bool] | None = None, title: str = "") -> go.Figure:
    """‖x_n^(m)‖ as a heatmap: stream points (embed, after L0, …) down the rows, tokens across. [M+1, N]."""
    norms = np.asarray(norms)
    x = _numbered(tokens, unknown)
    show_text = norms.shape[1] <= 24
    fig = go.Figure(go.Heatmap(
        z=_compact(norms, 3), x=x, y=list(point_labels), colorscale=NORM_COLORSCALE,
        colorbar=dict(title="‖x‖"), texttemplate="%{z:.1f}" if show_text else None,
        hovertemplate="token %{x}<br>stream %{y}<br>‖x‖ = %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title_text="residual stream at", type="category")
    fig.update_xaxes(title_text="token n", **_token_axis(len(x)))
    fig.update_layout(title_text=title, height=int(np.clip(70 * len(point_labels) + 190, 300, 640)),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    return fig


def contribution_bars(projections: Mapping[str, np.ndarray], stream_norm: np.ndarray, tokens: Sequence[str], *,
                      unknown: Sequence[bool] | None = None, title: str = "") -> go.Figure:
    """Each part's component along the final stream direction, stacked per token (positive up, negative down),
    with a marker at ‖x_n^(M)‖: the stacked bars add up to the marker exactly. projections: name -> [N]."""
    x = _numbered(tokens, unknown)
    fig = go.Figure()
    for name, values in projections.items():
        fig.add_trace(go.Bar(x=x, y=_compact(values), name=name, marker_color=part_color(name),
                             hovertemplate=f"{name}<br>token %{{x}}<br>%{{y:.3f}}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=_compact(stream_norm), mode="markers", name="‖final stream‖ (= sum)",
                             marker=dict(symbol="diamond", size=10, color="black", line=dict(color="white", width=1)),
                             hovertemplate="token %{x}<br>‖x^(M)‖ = %{y:.3f}<extra></extra>"))
    fig.update_layout(barmode="relative", title_text=title, height=460, legend=dict(traceorder="normal"),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    fig.update_xaxes(title_text="token n", **_token_axis(len(x)))
    fig.update_yaxes(title_text="component along the final stream direction", zeroline=True, zerolinecolor="#444")
    return fig


# ---------------------------------------------------------------------------------------------------------
# Logit lens and prediction
# ---------------------------------------------------------------------------------------------------------

LENS_FONT = 11  # a cell's guess, in px before presenter mode's scale
LENS_MIN_FONT = 8
LENS_PLOT_PX = 400  # the width the cells share in a 1024-pixel window, sidebar open, presenter mode (measured 412)
CHAR_EM = 0.6  # a character's width in font sizes, on the wide side (lower-case Source Sans is about 0.52)
CELL_PAD_PX = 6  # free space between two neighbouring guesses


def _fits(chars: int, size: float, cell_px: float) -> bool:
    """Whether `chars` characters of a font `size` px large fit a cell `cell_px` wide."""
    return chars * CHAR_EM * size + CELL_PAD_PX <= cell_px


def _lens_cells(guesses: list[str], cells_across: int, font_scale: float) -> tuple[list[str], int]:
    """The guesses as they fit cells sharing LENS_PLOT_PX, `cells_across` of them, and their font size: LENS_FONT,
    smaller down to LENS_MIN_FONT, and at that size a guess too long for its cell is cut short with "…" (the hover
    names it whole)."""
    cell_px = LENS_PLOT_PX / cells_across
    widest = max(map(len, guesses), default=1)
    size = LENS_FONT
    while size > LENS_MIN_FONT and not _fits(widest, size * font_scale, cell_px):
        size -= 1
    room = max(int((cell_px - CELL_PAD_PX) / (CHAR_EM * size * font_scale)), 2)
    shown = [guess if len(guess) <= room else guess[:room - 1] + "…" for guess in guesses]
    return [html.escape(guess, quote=False) for guess in shown], size


def logit_lens_heatmap(top_probs: np.ndarray, top_tokens: Sequence[Sequence[Sequence[str]]], tokens: Sequence[str],
                       point_labels: Sequence[str], *, unknown: Sequence[bool] | None = None,
                       title: str = "", reads: str = "next token", font_scale: float = 1.0) -> go.Figure:
    """The logit lens: at each stream point and position the likeliest guess written in the cell, coloured by its
    probability. top_probs [M+1, N, k]; top_tokens [M+1][N][k] (already readable strings). The hover lists all k
    guesses. Tokens run across (stream points down) while every guess fits its cell in the narrowest chart
    (LENS_PLOT_PX, type larger by `font_scale`, presenter mode's); otherwise, when there are more tokens than stream
    points, the figure is turned so that tokens run down the rows and the stream points share the width. Where even
    that is too narrow, the type is smaller, and then guesses are cut short."""
    top_probs = np.asarray(top_probs)
    n_points, n, k = top_probs.shape
    x = _numbered(tokens, unknown)
    plain = np.array([plain_token_labels([top_tokens[m][i][0] for i in range(n)]) for m in range(n_points)],
                     dtype=object).reshape(n_points, n)
    hover = np.array([["<br>".join(f"{token_labels([top_tokens[m][i][j]])[0]}  {top_probs[m, i, j]:.3f}"
                                   for j in range(k)) for i in range(n)] for m in range(n_points)], dtype=object)
    z = _compact(top_probs[..., 0], 3)
    widest = max((len(guess) for guess in plain.ravel()), default=1)
    across = n <= n_points or _fits(widest, LENS_FONT * font_scale, LENS_PLOT_PX / n)  # turned, no roomier
    shown, size = _lens_cells(plain.ravel().tolist(), n if across else n_points, font_scale)
    guesses = np.array(shown, dtype=object).reshape(n_points, n)
    common = dict(zmin=0, zmax=1, colorscale=PROB_COLORSCALE, colorbar=dict(title="p(top)"),
                  texttemplate="%{text}", textfont=dict(size=size))
    if across:
        fig = go.Figure(go.Heatmap(
            z=z, x=x, y=list(point_labels), text=guesses.tolist(), customdata=hover.tolist(), **common,
            hovertemplate=f"at token %{{x}}, stream %{{y}}<br>{reads} guesses:<br>%{{customdata}}<extra></extra>"))
        fig.update_yaxes(autorange="reversed", title_text="read from the stream at", type="category")
        fig.update_xaxes(title_text=f"position n (the model reads the {reads} here)", **_token_axis(n))
        height = int(np.clip(70 * n_points + 190, 300, 640))
    else:  # a short title up the side: a long one is taller than a few rows (the caption says what is read)
        fig = go.Figure(go.Heatmap(
            z=z.T, x=list(point_labels), y=x, text=guesses.T.tolist(), customdata=hover.T.tolist(), **common,
            hovertemplate=f"at token %{{y}}, stream %{{x}}<br>{reads} guesses:<br>%{{customdata}}<extra></extra>"))
        fig.update_yaxes(autorange="reversed", title_text="position n", type="category", tickfont=dict(size=10))
        fig.update_xaxes(title_text="read from the stream at", type="category", side="top")
        height = max(20 * n + 160, 300)
    fig.update_layout(title_text=title, height=height, margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    return fig


def prediction_bars(labels: Sequence[str], probs: np.ndarray, *, title: str = "") -> go.Figure:
    """Horizontal bars of the top-k tokens and their probabilities, likeliest on top."""
    shown = [f"{i + 1}. {label}" for i, label in enumerate(token_labels(labels))]
    fig = go.Figure(go.Bar(x=_compact(probs), y=shown, orientation="h", marker_color="#1f77b4",
                           text=[f"{p:.3f}" for p in probs], textposition="auto",
                           hovertemplate="%{y}: p = %{x:.4f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    top = float(np.max(probs)) if len(probs) else 1.0
    fig.update_xaxes(title_text="probability", range=[0, min(1.0, max(top * 1.25, 0.01))])
    fig.update_layout(title_text=title, height=int(np.clip(28 * len(shown) + 120, 220, 520)),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    return fig


# ---------------------------------------------------------------------------------------------------------
# TokenNorm
# ---------------------------------------------------------------------------------------------------------

def token_norm_bars(before: np.ndarray, standardized: np.ndarray, after: np.ndarray, mean: float, std: float,
                    gamma: np.ndarray, beta: np.ndarray, *, title: str = "") -> go.Figure:
    """One token through TokenNorm, feature by feature (d across): the vector before with its mean and mean ± std,
    the standardised vector (x - mean) / std with 0 and ±1, and the output z·γ + β with γ and β drawn over it.
    Okabe–Ito colours: purple standardised, green output, vermillion γ, black β (colour-blind safe)."""
    d = np.arange(len(before))
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=(
        f"before: x_n (mean {mean:.3f}, std {std:.3f})", "standardised: (x_n − mean) / std",
        "after: standardised · γ + β"))
    fig.add_trace(go.Bar(x=d, y=_compact(before), name="x before", marker_color="#7f7f7f",
                         hovertemplate="d=%{x}: %{y:.4f}<extra>before</extra>"), row=1, col=1)
    for value, dash, name in ((mean, "solid", "mean"), (mean + std, "dot", "mean ± std"), (mean - std, "dot", None)):
        fig.add_trace(go.Scatter(x=[d[0] - 0.5, d[-1] + 0.5], y=[value, value], mode="lines", name=name or "",
                                 showlegend=name is not None, legendgroup=name or "mean ± std",
                                 line=dict(color=HIGHLIGHT, dash=dash), hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Bar(x=d, y=_compact(standardized), name="standardised", marker_color=HEAD_COLORS[3],
                         hovertemplate="d=%{x}: %{y:.4f}<extra>standardised</extra>"), row=2, col=1)
    for value in (-1.0, 1.0):
        fig.add_hline(y=value, line=dict(color="#444", dash="dot", width=1), row=2, col=1)
    fig.add_trace(go.Bar(x=d, y=_compact(after), name="after", marker_color=HEAD_COLORS[2],
                         hovertemplate="d=%{x}: %{y:.4f}<extra>after</extra>"), row=3, col=1)
    fig.add_trace(go.Scatter(x=d, y=_compact(gamma), mode="markers", name="γ (scale)",
                             marker=dict(symbol="line-ew", size=9, line=dict(width=2, color=HEAD_COLORS[1])),
                             hovertemplate="d=%{x}: γ=%{y:.4f}<extra></extra>"), row=3, col=1)
    fig.add_trace(go.Scatter(x=d, y=_compact(beta), mode="markers", name="β (shift)",
                             marker=dict(symbol="circle", size=4, color=HEAD_COLORS[6]),
                             hovertemplate="d=%{x}: β=%{y:.4f}<extra></extra>"), row=3, col=1)
    fig.update_xaxes(title_text="feature d", row=3, col=1)
    fig.update_layout(title_text=title, height=640, bargap=0.1, margin=dict(l=10, r=10, t=70 if title else 40, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.04, x=1, xanchor="right"))
    return fig


def token_statistics_chart(mean: np.ndarray, std: np.ndarray, tokens: Sequence[str], *,
                           unknown: Sequence[bool] | None = None, selected: int | None = None,
                           title: str = "") -> go.Figure:
    """Per token n the mean and std TokenNorm removes and divides by (two panels, tokens across);
    the selected token's bars are outlined."""
    x = _numbered(tokens, unknown)
    outline = [2.5 if i == selected else 0 for i in range(len(x))]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.14,  # room for the lower title
                        subplot_titles=("mean(x_n) over the D features", "std(x_n) = sqrt(var(x_n) + eps)"))
    fig.add_trace(go.Bar(x=x, y=_compact(mean), name="mean", marker=dict(color="#ff7f0e",
                         line=dict(color="black", width=outline)),
                         hovertemplate="%{x}: mean %{y:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=_compact(std), name="std", marker=dict(color="#1f77b4",
                         line=dict(color="black", width=outline)),
                         hovertemplate="%{x}: std %{y:.4f}<extra></extra>"), row=2, col=1)
    fig.update_xaxes(**_token_axis(len(x)))
    fig.update_xaxes(title_text="token n", row=2, col=1)
    fig.update_layout(title_text=title, height=450, showlegend=False,
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10))
    return fig


def norm_axes_figure(token_normalized: np.ndarray, batch_normalized: np.ndarray, token_mean: np.ndarray,
                     batch_mean: np.ndarray, tokens: Sequence[str], *, unknown: Sequence[bool] | None = None,
                     selected_token: int = 0, selected_feature: int = 0, notation: str = "common",
                     clip: float = 3.0) -> go.Figure:
    """Seed 001 figure 5 on real activations: the same X normalised two ways.

    Left, TokenNorm: one mean and std per token (computed over that token's D features, outlined for the selected
    token); right, BatchNorm: one per feature (over the N tokens, outlined for the selected feature). Below each,
    the means it removed. Common notation shows X as N x D (token rows); paper notation as D x N (token columns).
    Values are clipped to ±clip for the colour scale (hover shows the true value)."""
    if notation not in ("common", "paper"):
        raise ValueError(f"notation must be common or paper, got {notation!r}")
    n, d = token_normalized.shape
    labels = _numbered(tokens, unknown)
    paper = notation == "paper"
    height = int(np.clip(22 * (d if paper else n) + 420, 620, 1040))
    gap_px = 190 if paper else 130  # room for the heatmaps' tick labels and x title, and the lower titles
    fig = make_subplots(rows=2, cols=2, row_heights=[0.76, 0.24], vertical_spacing=gap_px / height,
                        horizontal_spacing=0.05,
                        subplot_titles=(
                            "TokenNorm: each token normalised over its D features",
                            "BatchNorm: each feature normalised over the N tokens",
                            "TokenNorm removes one mean per token", "BatchNorm removes one mean per feature"))
    features = list(range(d))
    for col, values in ((1, token_normalized), (2, batch_normalized)):
        z = values.T if paper else values
        fig.add_trace(go.Heatmap(
            z=_compact(np.clip(z, -clip, clip), 3), customdata=_compact(z, 4),
            x=labels if paper else features, y=features if paper else labels,
            zmid=0, zmin=-clip, zmax=clip, colorscale=VALUE_COLORSCALE, showscale=col == 2,
            colorbar=dict(title="normalised", len=0.7, y=0.62),
            hovertemplate=("feature %{y}, token %{x}" if paper else "token %{y}, feature %{x}")
            + "<br>%{customdata:.3f}<extra></extra>"), row=1, col=col)
    # outline the set each normalisation averages over
    t, f = int(np.clip(selected_token, 0, n - 1)), int(np.clip(selected_feature, 0, d - 1))
    token_box = (dict(x0=t - 0.5, x1=t + 0.5, y0=-0.5, y1=d - 0.5) if paper
                 else dict(x0=-0.5, x1=d - 0.5, y0=t - 0.5, y1=t + 0.5))
    feature_box = (dict(x0=-0.5, x1=n - 0.5, y0=f - 0.5, y1=f + 0.5) if paper
                   else dict(x0=f - 0.5, x1=f + 0.5, y0=-0.5, y1=n - 0.5))
    for col, box in ((1, token_box), (2, feature_box)):
        fig.add_shape(type="rect", line=dict(color=HIGHLIGHT, width=3), fillcolor="rgba(0,0,0,0)",
                      row=1, col=col, **box)
    fig.add_trace(go.Bar(x=labels, y=_compact(token_mean), marker_color=["#e4572e" if i == t else "#ff9f80"
                                                                          for i in range(n)],
                         hovertemplate="token %{x}: mean %{y:.4f}<extra></extra>", showlegend=False), row=2, col=1)
    fig.add_trace(go.Bar(x=features, y=_compact(batch_mean), marker_color=["#e4572e" if i == f else "#ff9f80"
                                                                            for i in range(d)],
                         hovertemplate="feature %{x}: mean %{y:.4f}<extra></extra>", showlegend=False), row=2, col=2)
    for col in (1, 2):  # the right heatmap shares the left one's rows: no second set of row labels
        if paper:
            fig.update_xaxes(title_text="token n", row=1, col=col, **_token_axis(n))
            fig.update_yaxes(title_text="feature d" if col == 1 else None, autorange="reversed", row=1, col=col,
                             showticklabels=col == 1)
        else:
            fig.update_xaxes(title_text="feature d", row=1, col=col)
            fig.update_yaxes(title_text="token n" if col == 1 else None, autorange="reversed", row=1, col=col,
                             type="category", tickfont=dict(size=10 if n <= 30 else 7), showticklabels=col == 1)
    fig.update_xaxes(title_text="token n", row=2, col=1, **_token_axis(n))
    fig.update_xaxes(title_text="feature d", row=2, col=2)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10))
    return fig
