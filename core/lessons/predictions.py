"""Grading the lessons' "predict, then reveal" prompts against what the model did in this run.

Each prompt offers a few options; a function here turns the run's measurement into the option it makes right, and
`grade` writes the one sentence every reveal opens with: the class's prediction next to the measured value
("You said **about ×4**; measured ×7.6 …"). Pure functions of numbers, no Streamlit: the pages pass what the run
measured and show the sentence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ROUNDING = 1e-5  # relative differences below this are float rounding


@dataclass(frozen=True)
class Grade:
    """A prediction (an option, or None when the class made none), the option the run makes right, and what was
    measured, in words with its numbers."""

    prediction: str | None
    answer: str | None  # None: the run has not measured it yet
    measured: str

    @property
    def right(self) -> bool:
        return self.prediction is not None and self.prediction == self.answer

    def sentence(self, escape: Callable[[str], str] = str) -> str:
        """Markdown: the prediction, the measurement and the verdict. `escape` makes the options literal markdown
        (they may be tokens of a typed text); `measured` is markdown the page wrote."""
        said = "No prediction was made" if self.prediction is None else f"You said **{escape(self.prediction)}**"
        if self.answer is None:
            return f"{said}; {self.measured}"
        if self.right:
            return f"{said}; measured: {self.measured}. **Right.**"
        return f"{said}; measured: {self.measured}, so the answer here is **{escape(self.answer)}**."


# ---------------------------------------------------------------------------------------------------------
# Which option a measurement makes right
# ---------------------------------------------------------------------------------------------------------

def nearest_factor(ratio: float, factors: Mapping[str, float]) -> str:
    """The option whose growth factor is nearest to the measured `ratio` on a log scale (×7.6 is nearer ×8 than
    ×4)."""
    return min(factors, key=lambda option: abs(math.log(ratio) - math.log(factors[option])))


def confident_factor(ratio: float, low: float, high: float, factors: Mapping[str, float]) -> tuple[str, bool]:
    """The option nearest the fitted `ratio` (nearest_factor), and whether the whole interval low…high around it
    points to that same option (False: the measurement is too noisy to grade confidently)."""
    option = nearest_factor(ratio, factors)
    return option, nearest_factor(low, factors) == option == nearest_factor(high, factors)


def closeness(relative_difference: float, options: Sequence[str], close: float) -> str:
    """options = (exactly the same, close, clearly different): up to float rounding, up to `close`, beyond."""
    return options[0 if relative_difference < ROUNDING else 1 if relative_difference <= close else 2]


def cache_agreement(logits_error: float, pattern_error: float, tolerance: float, options: Sequence[str]) -> str:
    """options = (exactly the same, the same up to rounding, different): bit for bit, within `tolerance`, beyond."""
    largest = max(logits_error, pattern_error)
    return options[0 if largest == 0 else 1 if largest <= tolerance else 2]


def changed_count(changed: int, total: int, options: Sequence[str]) -> str:
    """options = (none, some, all): how many of `total` earlier tokens changed."""
    return options[0 if changed == 0 else 2 if changed == total else 1]


def empty_row(rows: np.ndarray, options: Sequence[str]) -> str:
    """options = (uniform weights, all zeros, an error): what the model computed for a query with no allowed key,
    rows [..., N] its attention row in every layer and head. NaN or ±inf anywhere counts as an error."""
    rows = np.asarray(rows, dtype=np.float64)
    if not np.isfinite(rows).all():
        return options[2]
    if np.abs(rows).max(initial=0.0) == 0:
        return options[1]
    return options[0] if np.allclose(rows, 1 / rows.shape[-1], atol=1e-6) else options[2]


def standardised(means: np.ndarray, stds: np.ndarray, options: Sequence[str], expected_stds: np.ndarray | float = 1.0,
                 tolerance: float = 1e-3) -> str:
    """options = (mean 0 and std 1 for every token, they still differ, mean 0 but the std differs), from every
    token's mean and std after standardising. `expected_stds`: what std 1 comes to with ε, √var / √(var + ε) per
    token (a hair under 1, or visibly under it for a vector whose var is near ε)."""
    zero_mean = bool(np.all(np.abs(means) < tolerance))
    unit_std = bool(np.all(np.abs(np.asarray(stds) - expected_stds) < tolerance))
    return options[0] if zero_mean and unit_std else options[2] if zero_mean else options[1]


def similar_positions(row: np.ndarray, position: int, options: Sequence[str]) -> str:
    """options = (its neighbours, position 0, the furthest positions, all about equally), from one row of the
    positions' similarity e_n · e_m: where the most similar other position lies (the nearer half of the range
    counts as neighbours), or "all about equally" when the other positions are within 5 % of each other."""
    row = np.asarray(row, dtype=np.float64)
    others = np.delete(row, position)
    if np.ptp(others) <= 0.05 * np.abs(others).max(initial=0.0):
        return options[3]
    best = int(np.argmax(np.where(np.arange(len(row)) == position, -np.inf, row)))
    distance, furthest = abs(best - position), max(position, len(row) - 1 - position)
    if best == 0 and distance > 2:
        return options[1]
    return options[0] if distance < max(furthest / 2, 1) else options[2]


def length_change(before: np.ndarray, after: np.ndarray, options: Sequence[str]) -> str:
    """options = (longer, shorter, the same length): the arrows [N, 2] before and after, compared by length."""
    ratio = np.linalg.norm(after, axis=1) / np.maximum(np.linalg.norm(before, axis=1), 1e-30)
    if np.abs(ratio - 1).max() < ROUNDING:
        return options[2]
    return options[0] if np.mean(ratio) > 1 else options[1]


def growth_step(formed_step: int | None, finished: bool, bounds: Sequence[int], options: Sequence[str]) -> str | None:
    """options = (within bounds[0] steps, up to bounds[1], more, never): the step a pattern formed at; None while
    the run still trains without it (not decided yet)."""
    if formed_step is None:
        return options[-1] if finished else None
    return options[next((i for i, bound in enumerate(bounds) if formed_step <= bound), len(bounds))]


def final_loss(losses: Sequence[float], steps: int, last: int = 25) -> float:
    """The mean loss of the `last` steps up to step `steps` (comparing two runs over the steps both trained)."""
    losses = np.asarray(losses[:steps], dtype=np.float64)
    return float(losses[-last:].mean())


def loss_comparison(without: float, with_: float, options: Sequence[str], tolerance: float = 0.05) -> str:
    """options = (the same, worse: slower, stalled or up, better: faster), for the run without a warm-up against the
    one with: its final loss within `tolerance` (relative), higher, or lower."""
    if not (math.isfinite(without) and math.isfinite(with_)):
        return options[1] if not math.isfinite(without) else options[2]
    relative = (without - with_) / max(abs(with_), 1e-12)
    return options[0] if abs(relative) <= tolerance else options[1] if relative > 0 else options[2]
