"""Plotly figures of the encoder–decoder: the cross-attention alignment matrix. Pure functions, no Streamlit.

The encoder's and the decoder's self-attention are square and drawn by the canvas chart (core.figures.canvas); the
cross-attention is target steps × source tokens: row t is decoder step t (it reads one target token and predicts
the next), column s a source token, rows summing to 1. With notation="paper" it is transposed (source tokens down
the rows, steps across, columns summing to 1), as seed 001 writes A.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.attention import (HEAD_COLORS, WEIGHT_COLORSCALE, _colorbar, _compact, _label_px, _tick_font_size,
                                    _ticks, oriented, token_label, token_labels)

ALIGNMENT_COLOR = HEAD_COLORS[1]  # Okabe-Ito vermillion: stands out on the Blues scale
CELL_PX = 26  # the largest cell: with square cells the figure is as tall as its rows need


def step_labels(reads: Sequence[str], writes: Sequence[str]) -> list[str]:
    """One label per decoder step: "t: read → written" (HTML-escaped, like every token label)."""
    return [f"{t}: {token_label(r)} → {token_label(w)}" for t, (r, w) in enumerate(zip(reads, writes))]


def cross_attention_heatmap(pattern: np.ndarray, source: Sequence[str], steps: Sequence[str], *,
                            alignment: Sequence[int | None] | None = None, unknown: Sequence[bool] | None = None,
                            notation: str = "common", title: str = "", height: int | None = None,
                            width_px: int = 460) -> go.Figure:
    """One head's cross-attention [T(step), S(source)] as a heatmap, source tokens across and decoder steps
    (labelled by `steps`, e.g. from step_labels) down. `alignment`: per step the source index its target word
    comes from (None where unknown), drawn as open squares over the cells it names; `unknown`: the source tokens
    read as [UNK], marked ⟨word⟩? as on every page. Hover: step, source, weight.
    The height fits square cells in a chart about `width_px` wide (half the page's width)."""
    pattern = np.asarray(pattern)
    t_count, s_count = pattern.shape if pattern.ndim == 2 else (0, 0)
    if pattern.ndim != 2 or len(source) != s_count or len(steps) != t_count:
        raise ValueError(f"pattern must be [T, S] with T = len(steps), S = len(source); got {pattern.shape}, "
                         f"{len(steps)} steps, {len(source)} source tokens")
    paper = notation == "paper"
    source_labels = [f"{s}: {label}" for s, label in enumerate(token_labels(source, unknown))]
    step_of = np.broadcast_to(np.array(steps, dtype=object)[:, None], (t_count, s_count))
    source_of = np.broadcast_to(np.array(source_labels, dtype=object)[None, :], (t_count, s_count))
    custom = np.stack([oriented(step_of, notation), oriented(source_of, notation)], axis=-1)
    fig = go.Figure(go.Heatmap(
        z=_compact(oriented(pattern, notation)), zmin=0, zmax=1, colorscale=WEIGHT_COLORSCALE, customdata=custom,
        name="cross-attention", colorbar=_colorbar("weight (0 … 1)"),
        hovertemplate="step %{customdata[0]}<br>source %{customdata[1]}<br>weight %{z:.4f}<extra></extra>"))
    source_title, step_title = "source token s (key)", "decoder step t (query)"
    x_labels, y_labels = (list(steps), source_labels) if paper else (source_labels, list(steps))
    x_title, y_title = ((step_title + " · columns sum to 1", source_title) if paper
                        else (source_title, step_title + " · rows sum to 1"))
    fig.update_xaxes(title_text=x_title, tickangle=-60, constrain="domain", **_ticks(x_labels))
    fig.update_yaxes(title_text=y_title, autorange="reversed", scaleanchor="x", constrain="domain",
                     constraintoward="top", **_ticks(y_labels))
    left = _label_px(y_labels, _tick_font_size(len(y_labels))) + 30  # fixed margins that fit the tick labels
    bottom = int(_label_px(x_labels, _tick_font_size(len(x_labels))) * 0.87) + 36 + 30 * (alignment is not None)
    top = 105 if title else 60
    cell = min(CELL_PX, (width_px - left - 10) / len(x_labels))  # square cells across the chart's width
    if alignment is not None:
        rows = [t for t, s in enumerate(alignment) if s is not None]
        cols = [alignment[t] for t in rows]
        fig.add_trace(go.Scatter(x=rows if paper else cols, y=cols if paper else rows, mode="markers",
                                 name="true alignment (from the rules)", hoverinfo="skip",
                                 marker=dict(symbol="square-open", size=max(6, int(cell * 0.7)), color=ALIGNMENT_COLOR,
                                             line=dict(width=2.5, color=ALIGNMENT_COLOR))))
    fig.update_layout(title=dict(text=title, x=0, font=dict(size=14)), plot_bgcolor="white",
                      height=height or top + bottom + int(cell * len(y_labels)) + 10,
                      margin=dict(l=left, r=10, t=top, b=bottom), showlegend=alignment is not None,
                      legend=dict(orientation="h", x=0, y=0, yanchor="bottom", xanchor="left", yref="container"))
    return fig
