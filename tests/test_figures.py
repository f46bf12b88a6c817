"""Unit tests of core/figures/attention.py: shapes, masked cells, the paper-notation transpose, labels."""

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from core.figures.attention import (difference_heatmap, head_heatmap, oriented, small_multiples,
                                    token_label, token_labels)

TOKENS = ["[BOS]", "the", "keys", "are"]


def causal_pattern(n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A causal pattern with distinct entries and its scores (-inf above the diagonal)."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(n, n))
    scores[np.triu_indices(n, 1)] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True), scores


def weight_trace(fig: go.Figure) -> go.Heatmap:
    return next(t for t in fig.data if t.name in ("pattern", "difference"))


def test_head_heatmap_is_n_by_n_with_tokens_on_both_axes():
    pattern, scores = causal_pattern()
    fig = head_heatmap(pattern, TOKENS, scores)
    z = np.asarray(weight_trace(fig).z)
    assert z.shape == (4, 4)
    assert list(fig.layout.xaxis.ticktext) == TOKENS and list(fig.layout.yaxis.ticktext) == TOKENS
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 at the top, like a matrix


def test_z_is_compact_rounded_float32():
    pattern, scores = causal_pattern()
    z = np.asarray(weight_trace(head_heatmap(pattern, TOKENS, scores)).z)
    assert z.dtype == np.float32
    finite = np.isfinite(z)
    np.testing.assert_allclose(z[finite], np.round(pattern, 4)[finite], atol=1e-6)
    assert "bdata" in fig_json(head_heatmap(pattern, TOKENS, scores))  # sent as a binary array


def fig_json(fig: go.Figure) -> str:
    return fig.to_json()


def test_masked_cells_are_gaps_drawn_grey_and_hatched_not_small_weights():
    pattern, scores = causal_pattern()
    fig = head_heatmap(pattern, TOKENS, scores)
    z = np.asarray(weight_trace(fig).z)
    masked = np.isneginf(scores)
    assert np.isnan(z[masked]).all() and np.isfinite(z[~masked]).all()
    fill = next(t for t in fig.data if t.name == "masked")
    assert np.array_equal(np.isfinite(np.asarray(fill.z, dtype=float)), masked)
    hatch = next(t for t in fig.data if t.name == "masked hatch")
    assert len(hatch.x) == masked.sum() and hatch.marker.symbol == "line-ne"
    assert hatch.hoverinfo == "skip" and fill.hoverinfo == "skip"
    custom = np.asarray(weight_trace(fig).customdata)
    assert custom[0, 3, 3] == "−∞ (masked)" and custom[0, 3, 2] == "0 (masked)"


def test_no_masked_traces_without_a_mask():
    pattern = np.full((4, 4), 0.25)
    fig = head_heatmap(pattern, TOKENS, np.zeros((4, 4)))
    assert [t.name for t in fig.data] == ["pattern"]


def test_hover_names_query_and_key_tokens_weight_and_score():
    pattern, scores = causal_pattern()
    trace = weight_trace(head_heatmap(pattern, TOKENS, scores))
    custom = np.asarray(trace.customdata)
    assert custom.shape == (4, 4, 4)
    assert custom[2, 1, 0] == "2: keys" and custom[2, 1, 1] == "1: the"  # common: row = query, column = key
    assert custom[2, 1, 3] == f"{scores[2, 1]:.3f}"
    for word in ("query", "key", "weight", "score"):
        assert word in trace.hovertemplate


def test_paper_notation_transposes_keys_down_queries_across():
    pattern, scores = causal_pattern()
    common = head_heatmap(pattern, TOKENS, scores, notation="common")
    paper = head_heatmap(pattern, TOKENS, scores, notation="paper")
    z_common, z_paper = np.asarray(weight_trace(common).z), np.asarray(weight_trace(paper).z)
    np.testing.assert_array_equal(np.nan_to_num(z_paper, nan=-1), np.nan_to_num(z_common.T, nan=-1))
    np.testing.assert_allclose(np.nansum(z_paper, axis=0), 1, atol=1e-3)  # columns sum to 1
    np.testing.assert_allclose(np.nansum(z_common, axis=1), 1, atol=1e-3)  # rows sum to 1
    custom = np.asarray(weight_trace(paper).customdata)
    assert custom[1, 2, 0] == "2: keys" and custom[1, 2, 1] == "1: the"  # paper: column = query, row = key
    assert "key" in paper.layout.yaxis.title.text and "query" in paper.layout.xaxis.title.text
    assert "query" in common.layout.yaxis.title.text and "key" in common.layout.xaxis.title.text
    paper_fill = np.isfinite(np.asarray(next(t for t in paper.data if t.name == "masked").z, dtype=float))
    assert np.array_equal(paper_fill, np.isneginf(scores).T)  # the mask moves with the transpose
    with pytest.raises(ValueError):
        oriented(pattern, "diagonal")


def test_head_heatmap_rejects_mismatched_tokens():
    with pytest.raises(ValueError):
        head_heatmap(np.eye(3), TOKENS)


def test_difference_heatmap_is_b_minus_a_centred_on_zero():
    a, scores = causal_pattern()
    b = np.tril(np.ones((4, 4)))
    b = b / b.sum(axis=1, keepdims=True)
    masked = np.isneginf(scores)
    fig = difference_heatmap(a, b, TOKENS, masked_a=masked, masked_b=masked, notation="paper")
    trace = weight_trace(fig)
    z = np.asarray(trace.z)
    expected = np.where(masked, np.nan, b - a).T
    np.testing.assert_allclose(z[np.isfinite(z)], np.round(expected, 4)[np.isfinite(expected)], atol=1e-6)
    assert trace.zmid == 0 and trace.zmin == -trace.zmax
    with pytest.raises(ValueError):
        difference_heatmap(a, np.eye(3), TOKENS)


def test_small_multiples_grid_has_one_heatmap_per_head_and_outlines_the_selected():
    patterns = np.random.default_rng(1).dirichlet(np.ones(5), size=(2, 3, 5))  # [M=2, H=3, N=5, N=5]
    fig = small_multiples(patterns, selected=(1, 2), notation="paper")
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heatmaps) == 6
    np.testing.assert_allclose(np.asarray(heatmaps[5].z), np.round(patterns[1, 2].T, 4), atol=1e-6)
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].xref == "x6"
    assert [a.text for a in fig.layout.annotations][:3] == ["L0 H0", "L0 H1", "L0 H2"]
    with pytest.raises(ValueError):
        small_multiples(patterns[0])


def test_token_labels_mark_unknown_and_make_odd_characters_visible_and_safe():
    assert token_labels(["the", "zzq"], [False, True]) == ["the", "⟨zzq⟩?"]
    assert token_label("<br>") == "&lt;br&gt;"  # plotly would read it as a line break
    assert token_label("a\x07") == "a\\x07" and token_label("") == "∅"
    assert token_label("שלום") == "שלום" and token_label("🐶", True) == "⟨🐶⟩?"
    assert len(token_label("x" * 100)) <= 14
    json.dumps(token_labels(["\u202e", "\u200b", "\ud800"]))  # bidi override, zero width, lone surrogate
