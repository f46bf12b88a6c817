"""core/lessons/predictions.py: the grade sentence, and which option each kind of measurement makes right."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.lessons import predictions as p
from core.lessons.linear_attention import CostMeasurement, CostPoint
from core.lessons.position_lab import position_similarity
from core.model.positions import sinusoidal_table

GROWTH = {"about ×1": 1, "about ×2": 2, "about ×4": 4, "about ×8": 8}
SAME = ["exactly the same", "close", "clearly different"]
THREE = ["none", "some", "all"]


def test_the_sentence_names_the_prediction_the_measurement_and_the_verdict():
    assert p.Grade("about ×4", "about ×8", "×7.6").sentence() == \
        "You said **about ×4**; measured: ×7.6, so the answer here is **about ×8**."
    assert p.Grade("about ×8", "about ×8", "×7.6").sentence() == "You said **about ×8**; measured: ×7.6. **Right.**"
    assert p.Grade(None, "about ×8", "×7.6").sentence().startswith("No prediction was made; measured: ×7.6")
    pending = p.Grade("about ×4", None, "nothing is measured yet")
    assert not pending.right and pending.sentence() == "You said **about ×4**; nothing is measured yet"
    assert p.Grade("a*b", "c", "x").sentence(lambda s: s.replace("*", r"\*")).startswith(r"You said **a\*b**")


@pytest.mark.parametrize("ratio, option", [(1.1, "about ×1"), (1.5, "about ×2"), (3.1, "about ×4"),
                                           (5.9, "about ×8"), (7.6, "about ×8"), (40.0, "about ×8")])
def test_growth_is_the_nearest_factor_on_a_log_scale(ratio, option):
    assert p.nearest_factor(ratio, GROWTH) == option


def test_closeness_and_the_cache():
    assert [p.closeness(d, SAME, 0.1) for d in (0.0, 3e-6, 0.05, 0.1, 0.4)] == \
        ["exactly the same", "exactly the same", "close", "close", "clearly different"]
    options = ["exact", "rounding", "different"]
    assert [p.cache_agreement(a, b, 1e-4, options) for a, b in ((0, 0), (2e-7, 0), (0, 3e-5), (1e-3, 0))] == \
        ["exact", "rounding", "rounding", "different"]


def test_changed_count():
    assert [p.changed_count(c, 11, THREE) for c in (0, 1, 10, 11)] == ["none", "some", "some", "all"]


def test_an_empty_row_is_read_from_the_weights():
    options = ["uniform", "zeros", "error"]
    assert p.empty_row(np.zeros((2, 4, 12)), options) == "zeros"
    assert p.empty_row(np.full((2, 4, 12), 1 / 12), options) == "uniform"
    assert p.empty_row(np.full((1, 1, 3), np.nan), options) == "error"
    assert p.empty_row(np.array([[[0.5, 0.5, 0.0]]]), options) == "error"  # neither: not what a softmax row should be


def test_standardised_statistics():
    options = ["0 and 1", "differ", "0, std differs"]
    rng = np.random.default_rng(0)
    x = rng.normal(3, 5, (6, 32))
    z = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    assert p.standardised(z.mean(1), z.std(1), options, np.sqrt(x.var(1) / (x.var(1) + 1e-5))) == "0 and 1"
    small = x * 1e-3  # a variance near ε: the std after standardising falls visibly short of 1, as ε predicts
    z = (small - small.mean(1, keepdims=True)) / np.sqrt(small.var(1, keepdims=True) + 1e-5)
    assert p.standardised(z.mean(1), z.std(1), options) == "0, std differs"
    assert p.standardised(z.mean(1), z.std(1), options, np.sqrt(small.var(1) / (small.var(1) + 1e-5))) == "0 and 1"
    assert p.standardised(x.mean(1), x.std(1), options) == "differ"
    centred = x - x.mean(1, keepdims=True)
    assert p.standardised(centred.mean(1), centred.std(1), options) == "0, std differs"


def test_sinusoidal_positions_are_most_like_their_neighbours():
    options = ["neighbours", "position 0", "furthest", "equally"]
    similarity = position_similarity(sinusoidal_table(64, 32).numpy())
    assert all(p.similar_positions(similarity[n], n, options) == "neighbours" for n in (0, 10, 63))
    assert p.similar_positions(np.ones(8), 3, options) == "equally"
    assert p.similar_positions(np.array([5.0, 0, 0, 1, 0, 0, 0, 0]), 5, options) == "position 0"
    assert p.similar_positions(np.array([0, 0, 1, 0, 0, 0, 0, 5.0]), 1, options) == "furthest"


def test_a_rotation_keeps_lengths_and_a_scaling_does_not():
    options = ["longer", "shorter", "same"]
    rng = np.random.default_rng(1)
    before = rng.normal(size=(10, 2))
    angle = np.arange(10) * 0.3
    rotated = np.stack([before[:, 0] * np.cos(angle) - before[:, 1] * np.sin(angle),
                        before[:, 0] * np.sin(angle) + before[:, 1] * np.cos(angle)], axis=1)
    assert p.length_change(before, rotated, options) == "same"
    assert p.length_change(before, 1.1 * rotated, options) == "longer"
    assert p.length_change(before, 0.9 * rotated, options) == "shorter"


def test_the_step_a_pattern_formed_at():
    options = ["≤100", "≤500", ">500", "never"]
    assert [p.growth_step(s, True, (100, 500), options) for s in (40, 100, 101, 690)] == \
        ["≤100", "≤100", "≤500", ">500"]
    assert p.growth_step(None, True, (100, 500), options) == "never"
    assert p.growth_step(None, False, (100, 500), options) is None  # still training: not decided


def test_losses_compared():
    options = ["same", "worse", "better"]
    assert p.final_loss([5, 4, 3, 2, 1, 0], 4, last=2) == 2.5  # steps 3 and 4 of the first 4
    assert [p.loss_comparison(a, 3.7, options) for a in (3.75, 4.7, 3.0)] == ["same", "worse", "better"]
    assert p.loss_comparison(math.nan, 3.7, options) == "worse"  # diverged


# ---------------------------------------------------------------------------------------------------------
# Cost of attention: the growth per doubling of N, fitted over every run, graded
# ---------------------------------------------------------------------------------------------------------

NS = (64, 128, 256, 512, 1024, 2048)
SPREAD = (0.94, 0.97, 1.0, 1.03, 1.08)  # five runs at each N around the median, as a shared machine gives them


def measured(milliseconds: dict[int, float]) -> CostMeasurement:
    """Softmax attention timed at each N (median ms), five runs spread around the median."""
    return CostMeasurement([CostPoint("softmax", n, ms / 1e3, 4 * n * n, len(SPREAD),
                                      tuple(ms / 1e3 * s for s in SPREAD)) for n, ms in milliseconds.items()])


def growth_grade(measurement: CostMeasurement, prediction: str) -> tuple[p.Grade, bool]:
    """As the page grades it: the option nearest the fitted growth, and whether its interval agrees."""
    fit = measurement.time_growth("softmax")
    answer, confident = p.confident_factor(fit.per_doubling, *fit.per_doubling_range, GROWTH)
    return p.Grade(prediction, answer, f"×{fit.per_doubling:.1f}"), confident


def test_the_reported_noisy_measurement_is_graded_about_x4():
    """The report: 8.9 ms at N = 512, 7.7 ms at 1024, 119 ms at 2048. The last doubling alone reads ×15.4 (graded
    "about ×8"); the fit over every size and run reads about ×4, and "about ×4" is right."""
    noisy = measured({64: 0.16, 128: 0.5, 256: 2.0, 512: 8.9, 1024: 7.7, 2048: 119.0})
    assert noisy.doubling_ratio("softmax") == pytest.approx(15.45, abs=0.01)
    assert 3.2 < noisy.time_growth("softmax").per_doubling < 4.8
    grade, confident = growth_grade(noisy, "about ×4")
    assert grade.right and confident
    assert not growth_grade(noisy, "about ×8")[0].right


@pytest.mark.parametrize("exponent, answer", [(2, "about ×4"), (1, "about ×2")])
def test_a_clean_quadratic_is_graded_x4_and_a_linear_one_x2(exponent, answer):
    clean = measured({n: 1e-4 * n ** exponent for n in NS})
    fit = clean.time_growth("softmax")
    assert fit.slope == pytest.approx(exponent) and fit.low <= exponent <= fit.high
    grade, confident = growth_grade(clean, answer)
    assert grade.right and confident


def test_a_measurement_too_noisy_to_grade_says_so():
    """Times that wander ×3 either way between sizes: the interval reaches two options, so the grade is not sure."""
    erratic = measured({64: 0.1, 128: 0.9, 256: 0.3, 512: 6.0, 1024: 2.0, 2048: 30.0})
    assert not growth_grade(erratic, "about ×4")[1]


def test_a_fit_needs_two_sizes():
    assert measured({512: 8.9}).time_growth("softmax") is None
    assert measured({512: 8.9}).time_growth("linear") is None
