"""Figures of "What does this head do?": a value per head on a layer × head grid, attention against effect per head,
and each part's direct contribution to the logit difference. Altair, whose point selections report the clicked head
(selection HEAD_SELECTION, fields layer and head). Pure functions from arrays to charts; no Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

HEAD_SELECTION = "head"
CHOSEN_COLOUR, OTHER_COLOUR = "#D55E00", "#0072B2"  # Okabe-Ito vermilion and blue
POSITIVE_COLOUR, NEGATIVE_COLOUR = "#0072B2", "#D55E00"
LABEL_FONT, TITLE_FONT = 11, 12  # Vega's own sizes, grown by font_scale in presenter mode


def _sized(chart, font_scale: float):
    """The chart with its axes' and legend's type `font_scale` times Vega's own (presenter mode)."""
    label, title = round(LABEL_FONT * font_scale), round(TITLE_FONT * font_scale)
    return chart.configure_axis(labelFontSize=label, titleFontSize=title).configure_legend(
        labelFontSize=label, titleFontSize=title)


def _head_frame(**values: np.ndarray) -> pd.DataFrame:
    """One row per head: layer, head, its name "L1H2", and each [M, H] array of `values` under its name."""
    first = np.asarray(next(iter(values.values())))
    layer, head = np.meshgrid(np.arange(first.shape[0]), np.arange(first.shape[1]), indexing="ij")
    frame = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel()})
    frame["name"] = [f"L{m}H{h}" for m, h in zip(frame["layer"], frame["head"], strict=True)]
    for name, array in values.items():
        frame[name] = np.asarray(array, dtype=np.float64).ravel()
    return frame


def head_grid(values: np.ndarray, what: str, *, diverging: bool = False, chosen: str | None = None,
              size_px: int = 52, font_scale: float = 1.0) -> alt.Chart:
    """values [M, H] on a grid, layers down, heads across, each cell's value written in it; `diverging` centres the
    colours on 0 (an effect, an attribution), else 0 … max (an attention weight). The `chosen` head ("L1H2") is
    outlined. Clicking a cell selects its head. `font_scale` grows the type and the cells (presenter mode)."""
    values = np.asarray(values, dtype=np.float64)
    frame = _head_frame(value=values)
    frame["label"] = [f"{v:.2f}" for v in frame["value"]]
    frame["chosen"] = frame["name"] == chosen
    limit = float(max(np.abs(values).max(initial=0.0), 1e-6))
    scale = (alt.Scale(scheme="redblue", domain=[-limit, limit]) if diverging
             else alt.Scale(scheme="blues", domain=[0, max(limit, 1e-6)]))
    selection = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click")
    heads = values.shape[1]
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="head", axis=alt.Axis(labelExpr="'H' + datum.value", orient="top", labelAngle=0)),
        y=alt.Y("layer:O", title="layer", axis=alt.Axis(labelExpr="'L' + datum.value")))
    cells = base.mark_rect(cursor="pointer").encode(
        color=alt.Color("value:Q", title=what, scale=scale, legend=alt.Legend(orient="bottom", gradientLength=160)),
        stroke=alt.condition("datum.chosen", alt.value(CHOSEN_COLOUR), alt.value("white")),
        strokeWidth=alt.condition("datum.chosen", alt.value(3), alt.value(1)),
        tooltip=[alt.Tooltip("name:N", title="head"), alt.Tooltip("value:Q", title=what, format=".4f")],
    ).add_params(selection)
    text = base.mark_text(fontSize=round((11 if heads <= 12 else 8) * font_scale)).encode(
        text="label:N", color=alt.value("black"))
    shown = (cells + text) if heads <= 16 else cells  # a GPT-2's 12 × 12 cells are too small for numbers
    # a band's size as a Step: Streamlit draws a discrete axis's fixed width or height far smaller than asked
    size = round(size_px * font_scale)
    return _sized(shown.properties(width=alt.Step(size), height=alt.Step(min(size, round(36 * font_scale)))),
                  font_scale)


def attention_effect_scatter(attention: np.ndarray, effect: np.ndarray, *, attention_title: str, effect_title: str,
                             chosen: str | None = None, size_px: int = 420, font_scale: float = 1.0) -> alt.Chart:
    """One point per head: how much it reads a token (x) against what changing it does (y). Clicking a point
    selects its head; the `chosen` head is drawn in vermilion."""
    frame = _head_frame(attention=attention, effect=effect)
    frame["chosen"] = np.where(frame["name"] == chosen, "the head changed", "other heads")
    selection = alt.selection_point(name=HEAD_SELECTION, fields=["layer", "head"], on="click")
    points = alt.Chart(frame).mark_circle(size=110, cursor="pointer", opacity=0.85).encode(
        x=alt.X("attention:Q", title=attention_title, scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("effect:Q", title=effect_title),
        color=alt.Color("chosen:N", title=None, legend=alt.Legend(orient="top"),
                        scale=alt.Scale(domain=["the head changed", "other heads"],
                                        range=[CHOSEN_COLOUR, OTHER_COLOUR])),
        tooltip=[alt.Tooltip("name:N", title="head"), alt.Tooltip("attention:Q", format=".3f"),
                 alt.Tooltip("effect:Q", format=".3f")],
    ).add_params(selection)
    labels = alt.Chart(frame).mark_text(dx=14, fontSize=round(LABEL_FONT * font_scale), align="left").encode(
        x="attention:Q", y="effect:Q", text="name:N")
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(strokeDash=[4, 4], color="grey").encode(y="y:Q")
    return _sized((zero + points + labels).properties(width=size_px, height=int(size_px * 0.75)), font_scale)


def part_bars(labels: Sequence[str], values: np.ndarray, what: str, *, width_px: int = 420,
              font_scale: float = 1.0) -> alt.Chart:
    """Each part's value as a horizontal bar (blue favours the first candidate, vermilion the second), in the
    order given."""
    frame = pd.DataFrame({"part": list(labels), "value": np.asarray(values, dtype=np.float64)})
    frame["favours"] = np.where(frame["value"] >= 0, "first candidate", "second candidate")
    bars = alt.Chart(frame).mark_bar().encode(
        y=alt.Y("part:N", sort=list(labels), title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("value:Q", title=what),
        color=alt.Color("favours:N", title=None, legend=alt.Legend(orient="top"),
                        scale=alt.Scale(domain=["first candidate", "second candidate"],
                                        range=[POSITIVE_COLOUR, NEGATIVE_COLOUR])),
        tooltip=["part:N", alt.Tooltip("value:Q", format=".4f")],
    )
    return _sized(bars.properties(width=width_px, height=alt.Step(round(22 * font_scale))), font_scale)
