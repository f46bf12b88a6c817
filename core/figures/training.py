"""Plotly figures of a training run (core/training/live/): curves over steps, one run or two overlaid. Pure functions from
arrays to figures; no model maths, no Streamlit.

Every curve draws the per-step values the run computed as a thin line; a thick line over it is their running
mean over the last `window` steps (labelled so), which is easier to read than the raw batch-to-batch noise.
Runs are told apart by Okabe-Ito colour and, for the second run, a dashed line; layers by a Viridis ramp.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from core.figures.attention import HEAD_COLORS, binary, grid_axes, lean_figure

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


@functools.lru_cache(maxsize=16)  # plotly looks the scale up among all its named ones: 1.3 ms a call
def layer_colors(n: int) -> tuple[str, ...]:
    """n colours from the Viridis ramp in depth order (its pale yellow end left out: too faint on white)."""
    return tuple(sample_colorscale("Viridis", list(np.linspace(0.0, 0.85, n)) if n > 1 else [0.0]))


MAX_POINTS = 1000  # per curve: about two a pixel of a panel; more cost a poll time and bytes, and show nothing more


def drawn_points(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """The indices of the steps a curve draws: every step up to max_points; past that, the first and the last step
    (the curve spans the run) and the lowest and the highest value of each of (max_points - 2) / 2 equal stretches
    of steps. Every point drawn is one the run computed, and a spike stays visible."""
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    stretches = (max_points - 2) // 2
    size = -(-n // stretches)  # steps per stretch, rounded up
    finite = np.where(np.isfinite(values), values, 0.0)
    grid = np.concatenate([finite, np.full(size * stretches - n, finite[-1])]).reshape(stretches, size)
    starts = np.arange(stretches) * size
    chosen = np.zeros(n, dtype=bool)  # a mask, not np.unique: its sort took most of the time
    for extreme in (grid.argmin(axis=1), grid.argmax(axis=1)):
        chosen[np.minimum(starts + extreme, n - 1)] = True
    chosen[[0, -1]] = True
    return np.flatnonzero(chosen)


def _line(steps: np.ndarray, values: np.ndarray, name: str, color: str, dash: str, *, width: float = 2.5,
          opacity: float = 1.0, legend: bool = False, group: str = "", hover: str = "", axes: int = 1) -> dict:
    """One line trace (a plain dict: see lean_figure) on subplot `axes` (1: x/y, 2: x2/y2, …). Binary arrays: the
    steps as the smallest unsigned integers that hold them, the values as float32 (the hover shows 4 digits)."""
    suffix = "" if axes == 1 else str(axes)
    steps = np.asarray(steps)
    return dict(type="scatter", mode="lines", x=binary(steps, np.min_scalar_type(int(steps.max(initial=0)))),
                y=binary(values, np.float32), name=name, legendgroup=group or name,
                showlegend=legend, opacity=opacity, line=dict(color=color, width=width, dash=dash),
                hovertemplate=hover or f"{name}<br>step %{{x}}<br>%{{y:.4g}}<extra></extra>",
                xaxis=f"x{suffix}", yaxis=f"y{suffix}")


def _raw_and_mean(steps: np.ndarray, values: np.ndarray, name: str, color: str, dash: str, window: int,
                  axes: int = 1, legend: bool = True) -> list[dict]:
    """The per-step values, thin and pale, and their running mean over `window` steps, thick."""
    values = np.asarray(values, dtype=np.float64)
    shown = drawn_points(values)
    steps = np.asarray(steps)[shown]
    return [_line(steps, values[shown], f"{name} (each step)", color, dash, width=1, opacity=RAW_OPACITY,
                  group=name, axes=axes),
            _line(steps, running_mean(values, window)[shown], name, color, dash, legend=legend, axes=axes,
                  hover=f"{name}<br>step %{{x}}<br>mean of last {window}: %{{y:.4g}}<extra></extra>")]


def training_curves(runs: Sequence[tuple[str, Mapping[str, np.ndarray]]], *, clips: Sequence[float] = (),
                    window: int = 25, height: int = 520) -> go.Figure:
    """Loss, accuracy, learning rate and gradient norm over steps, 2 x 2, for one run or several overlaid.

    runs: (label, history) with history[name] a per-step array for "step" and each name of CURVES. clips: the runs'
    clipping norms (0: none), each drawn once as a dotted line on the gradient-norm panel. Built from plain dicts
    (lean_figure): it is redrawn at every poll of a run that trains."""
    traces = []
    for index, (label, history) in enumerate(runs):
        color, dash = run_color(index), DASHES[index % len(DASHES)]
        for panel, (name, _) in enumerate(CURVES):
            if name == "learning_rate":  # exact, no noise: one line
                shown = drawn_points(history[name])
                traces.append(_line(np.asarray(history["step"])[shown], np.asarray(history[name])[shown], label,
                                    color, dash, width=2, axes=panel + 1,
                                    hover=f"{label}<br>step %{{x}}<br>rate %{{y:.3g}}<extra></extra>"))
            else:
                traces += _raw_and_mean(history["step"], history[name], label, color, dash, window, panel + 1,
                                        legend=panel == 0)
    axes, annotations = grid_axes([title for _, title in CURVES], 2, gap_x=0.08, gap_y=0.14)
    shapes = []
    for clip in sorted({clip for clip in clips if clip > 0}):  # one line per clipping norm, shared or not
        shapes.append(dict(type="line", xref="x4 domain", x0=0, x1=1, yref="y4", y0=clip, y1=clip,
                           line=dict(color=THRESHOLD_COLOR, dash="dot", width=1)))
        annotations.append(dict(text=f"clip {clip:g}", xref="x4 domain", x=0, yref="y4", y=clip, showarrow=False,
                                xanchor="left", yanchor="bottom", font=dict(color=THRESHOLD_COLOR)))
    axes["yaxis4"].update(log_axis([history["grad_norm"] for _, history in runs] + [list(clips)]))
    axes["yaxis3"].update(rate_axis([history["learning_rate"] for _, history in runs]))
    axes["yaxis2"].update(range=[0, 1.02])
    for name in ("xaxis3", "xaxis4"):
        axes[name]["title"] = dict(text="step")
    return lean_figure(traces, dict(**axes, annotations=annotations, shapes=shapes, height=height,
                                    margin=dict(l=10, r=10, t=40, b=10), hovermode="x unified",
                                    legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0)))


def gradient_norm_figure(steps: np.ndarray, grad_norms: Mapping[str, np.ndarray], *, window: int = 25,
                         height: int = 340, title: str = "Gradient norm of each layer, before clipping") -> go.Figure:
    """The gradient norm of each parameter group over steps (log scale), groups in depth order
    (embedding, blocks.0, …, head), coloured from dark (input) to light (output). Plain dicts, as training_curves."""
    traces = [trace for (group, values), color in zip(grad_norms.items(), layer_colors(len(grad_norms)))
              for trace in _raw_and_mean(steps, values, group, color, "solid", window)]
    return lean_figure(traces, dict(
        title=dict(text=title), height=height, margin=dict(l=10, r=10, t=50, b=10), hovermode="x unified",
        xaxis=dict(title=dict(text="step")),
        yaxis=dict(**log_axis(grad_norms.values()), title=dict(text="‖gradient‖")),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right")))


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
