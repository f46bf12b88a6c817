"""Figures of "What does “it” refer to?": the pronoun's row of attention in one head, a bar per token, the two
candidate nouns coloured. Pure functions from arrays to charts; no Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from core.figures.interventions import CHOSEN_COLOUR, OTHER_COLOUR, _sized

CANDIDATE_COLOURS = (OTHER_COLOUR, CHOSEN_COLOUR)  # the first candidate blue, the second vermilion
REST_COLOUR = "#BBBBBB"


def pronoun_row(tokens: Sequence[str], weights: np.ndarray, candidates: tuple[int, int], title: str, *,
                width_px: int = 520, font_scale: float = 1.0) -> alt.Chart:
    """One bar per token (position and text down the side): the pronoun's attention weight on it, the candidates in
    their colours, the rest grey. weights [N]: one row of A, summing to 1."""
    labels = [f"{i} {token!r}" for i, token in enumerate(tokens)]
    role = ["other"] * len(tokens)
    role[candidates[0]], role[candidates[1]] = "first candidate", "second candidate"
    frame = pd.DataFrame({"token": labels, "weight": np.asarray(weights, dtype=np.float64), "role": role})
    bars = alt.Chart(frame, title=title).mark_bar().encode(
        y=alt.Y("token:N", sort=labels, title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("weight:Q", title="attention weight", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("role:N", title=None, legend=alt.Legend(orient="top"),
                        scale=alt.Scale(domain=["first candidate", "second candidate", "other"],
                                        range=[*CANDIDATE_COLOURS, REST_COLOUR])),
        tooltip=["token:N", alt.Tooltip("weight:Q", format=".4f")],
    )
    return _sized(bars.properties(width=width_px, height=alt.Step(round(20 * font_scale))), font_scale)
