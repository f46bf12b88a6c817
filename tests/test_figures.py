"""Unit tests of core/figures/attention.py: labels, the head view, the rollout, the score breakdown, the toolbar
(the heatmaps are the canvas chart's: tests/test_canvas.py)."""

import json
import time

import numpy as np
import plotly.graph_objects as go
import pytest

from core.figures.attention import (HEAD_COLORS, HEAD_VIEW_TOKENS, head_lines, head_view_tokens, png_config,
                                    qk_products_bar, softmax_row_bar, token_label, token_labels, weight_outside)

def test_token_labels_mark_unknown_and_make_odd_characters_visible_and_safe():
    assert token_labels(["the", "zzq"], [False, True]) == ["the", "⟨zzq⟩?"]
    assert token_label("<br>") == "&lt;br&gt;"  # plotly would read it as a line break
    assert token_label("a\x07") == "a\\x07" and token_label("") == "∅"
    assert token_label("שלום") == "שלום" and token_label("🐶", True) == "⟨🐶⟩?"
    assert len(token_label("x" * 100)) <= 14
    json.dumps(token_labels(["\u202e", "\u200b", "\ud800"]))  # bidi override, zero width, lone surrogate


# ---------------------------------------------------------------------------------------------------------
# Head view, rollout, score breakdown charts, PNG config
# ---------------------------------------------------------------------------------------------------------

def layer_patterns(h: int = 3, n: int = 6, seed: int = 2) -> np.ndarray:
    """[H, N, N] causal patterns with some tiny weights (< 0.01) to be dropped."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=3.0, size=(h, n, n))
    scores[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = -np.inf
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def bands(trace) -> int:
    """Number of quadrilaterals in a head-view trace (5 points each: 4 corners and a NaN gap)."""
    y = np.asarray(trace.y)
    assert len(y) % 5 == 0 and np.isnan(y[4::5]).all()
    return len(y) // 5


LINE_TOKENS = ["[BOS]", "the", "keys", "to", "the", "table"]


@pytest.mark.parametrize("heads", [[0], [0, 2], [2, 1, 0]])
def test_head_lines_has_one_trace_per_selected_head_in_its_colour(heads):
    fig = head_lines(layer_patterns(), LINE_TOKENS, heads)
    go.Figure(fig.to_dict())  # built unvalidated (lean_figure): raises on anything plotly would not accept
    assert len(fig.data) == len(heads)
    assert [t.name for t in fig.data] == [f"H{h}" for h in heads]
    assert [t.fillcolor for t in fig.data] == [HEAD_COLORS[h] for h in heads]
    assert len(set(HEAD_COLORS)) == len(HEAD_COLORS)


def test_head_lines_drops_weights_below_the_threshold_and_keeps_the_rest():
    patterns = layer_patterns()
    fig = head_lines(patterns, LINE_TOKENS, [0, 1, 2])
    for h, trace in enumerate(fig.data):
        kept = int((patterns[h] >= 0.01).sum())
        assert kept < int((patterns[h] > 0).sum())  # the fixture has small weights to drop
        assert bands(trace) == kept
        custom = np.asarray(trace.customdata)
        assert custom.dtype == np.int16 and custom[:, 2].min() >= 1  # weights in %, all >= 1 %
        query, key = custom[0::5, 0], custom[0::5, 1]
        np.testing.assert_allclose(custom[0::5, 2], np.rint(patterns[h][query, key] * 100))
    assert len(head_lines(patterns, LINE_TOKENS, [0], min_weight=0.0).data[0].y) // 5 == 21  # all 6*7/2 causal


def test_head_lines_thickness_is_the_weight_and_a_querys_bands_do_not_overlap():
    patterns = layer_patterns(h=2)
    trace = head_lines(patterns, LINE_TOKENS, [0, 1]).data[1]
    y = np.asarray(trace.y, dtype=np.float64).reshape(-1, 5)
    custom = np.asarray(trace.customdata).reshape(-1, 5, 3)[:, 0]
    lane = 0.84 / 2
    weights = patterns[1][custom[:, 0], custom[:, 1]]
    np.testing.assert_allclose(y[:, 1] - y[:, 0], weights * lane, atol=2e-3)  # query end
    np.testing.assert_allclose(y[:, 2] - y[:, 3], weights * lane, atol=2e-3)  # key end
    for query in np.unique(custom[:, 0]):
        ends = y[custom[:, 0] == query][:, :2]
        assert (ends[1:, 0] >= ends[:-1, 1] - 1e-3).all()  # stacked, not overlapping


def test_head_lines_isolates_one_query_and_marks_it():
    patterns = layer_patterns()
    fig = head_lines(patterns, LINE_TOKENS, [0, 1], query=4)
    for h, trace in enumerate(fig.data):
        custom = np.asarray(trace.customdata)
        assert (custom[:, 0] == 4).all() and bands(trace) == int((patterns[h][4] >= 0.01).sum())
    assert "<b>" in fig.layout.yaxis.ticktext[4] and "<b>" not in fig.layout.yaxis.ticktext[3]


def test_a_long_text_draws_a_window_quickly_with_each_band_named_by_its_own_tokens():
    n = 460
    patterns = layer_patterns(h=4, n=n)
    tokens = [f"w{i}" for i in range(n)]
    shown = head_view_tokens(n, start=200)
    assert shown == [0, *range(200, 200 + HEAD_VIEW_TOKENS)]
    started = time.perf_counter()
    fig = head_lines(patterns, tokens, [0, 1, 2, 3], shown=shown)
    assert time.perf_counter() - started < 0.5
    assert fig.layout.height < 1200 and len(fig.layout.yaxis.ticktext) == len(shown)
    assert fig.layout.yaxis.ticktext[1] == "200: w200"
    index = np.array(shown)
    for h, trace in enumerate(fig.data):
        custom = np.asarray(trace.customdata)[::5]  # query, key, weight % of each band, by the tokens' own index
        assert set(custom[:, 0]) <= set(shown) and set(custom[:, 1]) <= set(shown)
        drawn = patterns[h][np.ix_(index, index)]
        assert bands(trace) == int((drawn >= 0.01).sum())
        np.testing.assert_array_equal(custom[:, 2], np.rint(patterns[h][custom[:, 0], custom[:, 1]] * 100))
    expected = 1 - np.mean([patterns[h][np.ix_(index, index)].sum(-1).mean() for h in range(4)])
    assert weight_outside(patterns, [0, 1, 2, 3], shown) == pytest.approx(expected)
    assert head_view_tokens(n, start=1, query=300)[1:] == list(range(276, 276 + HEAD_VIEW_TOKENS))  # follows it
    assert head_view_tokens(n, start=n) == [0, *range(n - HEAD_VIEW_TOKENS, n)]  # clamped to the text
    assert head_view_tokens(30, start=9) == list(range(30))  # a short text is drawn whole
    with pytest.raises(ValueError, match="shown"):
        head_lines(patterns, tokens, [0], query=5, shown=shown)


def test_head_lines_sides_follow_the_notation_and_input_is_checked():
    patterns = layer_patterns()
    common, paper = head_lines(patterns, LINE_TOKENS, [0]), head_lines(patterns, LINE_TOKENS, [0], notation="paper")
    assert np.asarray(common.data[0].x)[0] == 0 and np.asarray(paper.data[0].x)[0] == 1  # query end's side
    assert "query" in common.layout.title.text.split("⟶")[0] and "key" in paper.layout.title.text.split("⟶")[0]
    assert [a.text for a in common.layout.annotations] == [f"{i}: {t}" for i, t in enumerate(LINE_TOKENS)]
    assert len(head_lines(patterns, LINE_TOKENS, []).data) == 0
    for bad in (dict(heads=[3]), dict(heads=[0], query=6)):
        with pytest.raises(ValueError):
            head_lines(patterns, LINE_TOKENS, **bad)
    with pytest.raises(ValueError):
        head_lines(patterns[0], LINE_TOKENS, [0])


def test_head_lines_is_sent_compactly():
    n = 100
    patterns = layer_patterns(h=4, n=n)
    fig = head_lines(patterns, [f"t{i}" for i in range(n)], [0, 1, 2, 3])
    text = fig.to_json()
    assert text.count("bdata") == 12  # x, y, customdata of each head as binary arrays
    assert len(text) < 90 * sum(int((p >= 0.01).sum()) for p in patterns) + 40_000


def test_the_rollout_chart_rows_sum_to_one_and_transposes_in_paper_notation():
    from core.analysis import rollout
    from core.figures.canvas import rollout_spec
    patterns = np.stack([layer_patterns(seed=s) for s in range(2)])  # [M=2, H=3, N, N]
    matrix = rollout(patterns)
    common = rollout_spec(matrix, LINE_TOKENS)
    paper = rollout_spec(matrix, LINE_TOKENS, notation="paper")
    np.testing.assert_allclose(common["arrays"]["rollout"].sum(axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(paper["arrays"]["rollout"].sum(axis=0), 1, atol=1e-6)
    assert "rows sum to 1" in common["y_title"] and "columns sum to 1" in paper["x_title"]
    with pytest.raises(ValueError):
        rollout_spec(matrix, LINE_TOKENS[:3])


def test_breakdown_charts():
    q, k = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.0, -4.0])
    bars = qk_products_bar(q, k, rotated=True)
    np.testing.assert_allclose(bars.data[0].y, q * k)
    assert "-3.5000" in bars.layout.title.text and "rotated" in bars.layout.title.text
    scores = np.array([0.2, 1.0, -np.inf])
    weights = np.array([0.3, 0.7, 0.0])
    row = softmax_row_bar(weights, scores, ["[BOS]", "a", "b"], key=1)
    assert row.data[0].marker.color[1] != row.data[0].marker.color[0]  # the chosen key stands out
    assert list(row.data[1].x) == [2] and "masked" in row.data[0].customdata[2][1]
    with pytest.raises(ValueError):
        softmax_row_bar(weights, scores, ["[BOS]", "a"], key=1)


def test_png_config_shows_the_modebar_with_a_png_download():
    config = png_config("lm-rope_pattern")
    assert config["displayModeBar"] is True and config["displaylogo"] is False
    assert config["toImageButtonOptions"] == {"format": "png", "filename": "lm-rope_pattern", "scale": 2}
    assert "toImage" not in config["modeBarButtonsToRemove"]
    assert "zoom2d" in png_config("x", zoom=False)["modeBarButtonsToRemove"]
