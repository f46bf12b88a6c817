"""Plotly figures of a training run (core/live.py): curves over steps, one run or two overlaid. Pure functions from
arrays to figures; no model maths, no Streamlit.

Every curve draws the per-step values the run computed as a thin line; a thick line over it is their running
mean over the last `window` steps (labelled so), which is easier to read than the raw batch-to-batch noise.
Runs are told apart by Okabe-Ito colour and, for the second run, a dashed line; layers by a Viridis ramp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from core.figures.attention import HEAD_COLORS

CURVES = (("loss", "loss (cross-entropy)"), ("accuracy", "accuracy on the batch"),
          ("learning_rate", "learning rate"), ("grad_norm", "gradient norm, before clipping"))
DASHES = ("solid", "dash", "dot", "dashdot")
RAW_OPACITY = 0.3
THRESHOLD_COLOR = "#7f7f7f"


def running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of the last `window` values at each step (fewer at the start): a trailing moving average."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    sums = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, values.size + 1), window)
    return (sums[1:] - sums[np.arange(1, values.size + 1) - counts]) / counts


def log_axis(values: Iterable[Sequence[float]]) -> dict:
    """A log axis whose ticks are written in full: 1, 2, 5 in every decade the values span (only the powers of ten
    past 4 decades), labelled 0.5 and 0.2 below 1 (plotly's own log ticks write a bare 5 and 2 there)."""
    flat = np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in values] or [np.zeros(0)])
    flat = flat[np.isfinite(flat) & (flat > 0)]
    if flat.size == 0:
        return dict(type="log")
    low, high = math.floor(math.log10(flat.min())), math.ceil(math.log10(flat.max()))
    mantissas = (1, 2, 5) if high - low <= 4 else (1,)
    ticks = [float(f"{m * 10.0 ** e:.1g}") for e in range(low, max(high, low + 1) + 1) for m in mantissas]
    return dict(type="log", tickmode="array", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


def rate_axis(rates: Iterable[Sequence[float]]) -> dict:
    """A learning-rate axis from 0 to just above the largest rate: a constant rate is drawn at its height, not
    flat in the middle of plotly's default ±1 range around it."""
    top = max((float(np.nanmax(r)) for r in rates if len(r)), default=0.0)
    return dict(range=[0, top * 1.2 if top > 0 else 1], tickformat="~g")


def run_color(index: int) -> str:
    return HEAD_COLORS[index % len(HEAD_COLORS)]


def layer_colors(n: int) -> list[str]:
    """n colours from the Viridis ramp in depth order (its pale yellow end left out: too faint on white)."""
    return sample_colorscale("Viridis", list(np.linspace(0.0, 0.85, n))) if n > 1 else [sample_colorscale(
        "Viridis", [0.0])[0]]


def _raw_and_mean(fig: go.Figure, steps: np.ndarray, values: np.ndarray, name: str, color: str, dash: str,
                  window: int, row: int | None = None, col: int | None = None, legend: bool = True) -> None:
    where = dict(row=row, col=col) if row is not None else {}
    fig.add_trace(go.Scatter(x=steps, y=values, mode="lines", line=dict(color=color, width=1, dash=dash),
                             opacity=RAW_OPACITY, name=f"{name} (each step)", legendgroup=name, showlegend=False,
                             hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>"), **where)
    fig.add_trace(go.Scatter(x=steps, y=running_mean(values, window), mode="lines",
                             line=dict(color=color, width=2.5, dash=dash), name=name, legendgroup=name,
                             showlegend=legend,
                             hovertemplate=f"{name}<br>step %{{x}}<br>mean of last {window}: %{{y:.4g}}<extra></extra>"),
                  **where)


def training_curves(runs: Sequence[tuple[str, Mapping[str, np.ndarray]]], *, clips: Sequence[float] = (),
                    window: int = 25, height: int = 520) -> go.Figure:
    """Loss, accuracy, learning rate and gradient norm over steps, 2 x 2, for one run or several overlaid.

    runs: (label, history) with history[name] a per-step array for "step" and each name of CURVES. clips: the runs'
    clipping norms (0: none), each drawn once as a dotted line on the gradient-norm panel."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[title for _, title in CURVES], horizontal_spacing=0.08,
                        vertical_spacing=0.14)
    for index, (label, history) in enumerate(runs):
        color, dash = run_color(index), DASHES[index % len(DASHES)]
        for panel, (name, _) in enumerate(CURVES):
            row, col = panel // 2 + 1, panel % 2 + 1
            if name == "learning_rate":  # exact, no noise: one line
                fig.add_trace(go.Scatter(x=history["step"], y=history[name], mode="lines", name=label,
                                         legendgroup=label, showlegend=False, line=dict(color=color, dash=dash),
                                         hovertemplate=f"{label}<br>step %{{x}}<br>rate %{{y:.3g}}<extra></extra>"),
                              row=row, col=col)
            else:
                _raw_and_mean(fig, history["step"], history[name], label, color, dash, window, row, col,
                              legend=panel == 0)
    for clip in sorted({clip for clip in clips if clip > 0}):  # one line per clipping norm, shared or not
        fig.add_hline(y=clip, line=dict(color=THRESHOLD_COLOR, dash="dot", width=1), row=2, col=2,
                      annotation_text=f"clip {clip:g}", annotation_position="top left",
                      annotation_font_color=THRESHOLD_COLOR)
    fig.update_yaxes(log_axis([history["grad_norm"] for _, history in runs] + [list(clips)]), row=2, col=2)
    fig.update_yaxes(rate_axis([history["learning_rate"] for _, history in runs]), row=2, col=1)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_xaxes(title_text="step", row=2)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), hovermode="x unified",
                      legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0, title_text=""))
    return fig


def gradient_norm_figure(steps: np.ndarray, grad_norms: Mapping[str, np.ndarray], *, window: int = 25,
                         height: int = 340, title: str = "Gradient norm of each layer, before clipping") -> go.Figure:
    """The gradient norm of each parameter group over steps (log scale), groups in depth order
    (embedding, blocks.0, …, head), coloured from dark (input) to light (output)."""
    fig = go.Figure()
    for (group, values), color in zip(grad_norms.items(), layer_colors(len(grad_norms))):
        _raw_and_mean(fig, steps, values, group, color, "solid", window)
    fig.update_yaxes(log_axis(grad_norms.values()), title_text="‖gradient‖")
    fig.update_xaxes(title_text="step")
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=50, b=10), hovermode="x unified",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
    return fig


def lines_over_steps(series: Mapping[str, tuple[Sequence[int], Sequence[float]]], *, title: str, y_title: str,
                     colors: Sequence[str] | None = None, dashes: Sequence[str] | None = None,
                     threshold: float | None = None, marker: int | None = None, height: int = 360,
                     log: bool = False, markers: bool = True, from_zero: bool = False) -> go.Figure:
    """One line per series, name -> (steps, values), e.g. a statistic of every snapshot. threshold: a dotted
    horizontal line; marker: a vertical line at this step (the scrubber's); markers: a dot at every point;
    log: a log axis (log_axis); from_zero: a linear axis from 0 to just above the largest value (rate_axis)."""
    colors = list(colors) if colors is not None else layer_colors(len(series))
    fig = go.Figure()
    for index, (name, (steps, values)) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=list(steps), y=list(values), mode="lines+markers" if markers else "lines",
                                 name=name, marker=dict(size=4),
                                 line=dict(color=colors[index % len(colors)], dash=dashes[index] if dashes else "solid"),
                                 hovertemplate=f"{name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>"))
    if threshold is not None:
        fig.add_hline(y=threshold, line=dict(color=THRESHOLD_COLOR, dash="dot"), annotation_text=f"{threshold:g}",
                      annotation_position="bottom right")
    if marker is not None:
        fig.add_vline(x=marker, line=dict(color=THRESHOLD_COLOR, width=1))
    fig.update_xaxes(title_text="step")
    values = [values for _, values in series.values()]
    fig.update_yaxes(log_axis(values) if log else rate_axis(values) if from_zero else dict(type="linear"),
                     title_text=y_title)
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40 if title else 10, b=10),
                      showlegend=len(series) > 1, legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return fig
