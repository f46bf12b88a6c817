"""Unit tests of core/figures/attention.py: labels, the head view (drawn on the canvas chart: head_view_spec), the
rollout, the score breakdown, the toolbar (the heatmaps are the canvas chart's: tests/test_canvas.py)."""

import json
import time

import numpy as np
import pytest

from core.figures.attention import (HEAD_COLORS, HEAD_VIEW_TOKENS, head_view_tokens, plain_token_labels, png_config,
                                    qk_products_bar, softmax_row_bar, token_label, token_labels, weight_outside)
from core.figures.canvas import head_view_spec, pack, unpack


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


LINE_TOKENS = ["[BOS]", "the", "keys", "to", "the", "table"]


def head_view(*args, **options) -> dict:
    """The head view's spec as the browser reads it (packed and unpacked)."""
    return unpack(pack(head_view_spec(*args, **options)))


def bands_of(spec: dict, position: int) -> tuple[np.ndarray, np.ndarray]:
    """(ends [B, 4], band [B, 3]: query, key, weight) of the bands of the `position`-th head in spec["heads"]."""
    chosen = spec["arrays"]["head"] == position
    return spec["arrays"]["ends"][chosen].astype(np.float64), spec["arrays"]["band"][chosen].astype(np.float64)


@pytest.mark.parametrize("heads", [[0], [0, 2], [2, 1, 0]])
def test_head_view_has_the_selected_heads_in_their_colours(heads):
    spec = head_view(layer_patterns(), LINE_TOKENS, heads)
    assert [h["name"] for h in spec["heads"]] == [f"H{h}" for h in heads]
    assert [h["color"] for h in spec["heads"]] == [HEAD_COLORS[h] for h in heads]
    assert set(spec["arrays"]["head"]) == set(range(len(heads)))
    assert len(set(HEAD_COLORS)) == len(HEAD_COLORS)


def test_head_view_drops_weights_below_the_threshold_and_keeps_the_exact_rest():
    patterns = layer_patterns()
    spec = head_view(patterns, LINE_TOKENS, [0, 1, 2])
    for h in range(3):
        _, band = bands_of(spec, h)
        kept = int((patterns[h] >= 0.01).sum())
        assert kept < int((patterns[h] > 0).sum())  # the fixture has small weights to drop
        assert len(band) == kept and band[:, 2].min() >= 0.01
        query, key = band[:, 0].astype(int), band[:, 1].astype(int)
        np.testing.assert_array_equal(band[:, 2], patterns[h][query, key].astype(np.float32))  # the recorded weight
    assert len(head_view(patterns, LINE_TOKENS, [0], min_weight=0.0)["arrays"]["head"]) == 21  # all 6*7/2 causal


def test_head_view_thickness_is_the_weight_and_a_querys_bands_do_not_overlap():
    patterns = layer_patterns(h=2)
    ends, band = bands_of(head_view(patterns, LINE_TOKENS, [0, 1]), 1)
    lane = 0.84 / 2
    np.testing.assert_allclose(ends[:, 1] - ends[:, 0], band[:, 2] * lane, atol=1e-5)  # query end
    np.testing.assert_allclose(ends[:, 3] - ends[:, 2], band[:, 2] * lane, atol=1e-5)  # key end
    np.testing.assert_allclose((ends[:, 2] + ends[:, 3]) / 2 - band[:, 1], -0.42 + lane * 1.5, atol=1e-5)  # its lane
    for query in np.unique(band[:, 0]):
        mine = ends[band[:, 0] == query][:, :2]
        assert (mine[1:, 0] >= mine[:-1, 1] - 1e-5).all()  # stacked, not overlapping
        assert mine[0, 0] >= query - 0.42 - 1e-5 and mine[-1, 1] <= query + 0.42 + 1e-5  # inside the query's row


def test_head_view_isolates_one_query_and_marks_it():
    patterns = layer_patterns()
    spec = head_view(patterns, LINE_TOKENS, [0, 1], query=4)
    for h in range(2):
        _, band = bands_of(spec, h)
        assert (band[:, 0] == 4).all() and len(band) == int((patterns[h][4] >= 0.01).sum())
    assert spec["marked"] == 4 and head_view(patterns, LINE_TOKENS, [0])["marked"] is None


def test_a_long_text_draws_a_window_quickly_with_each_band_named_by_its_own_tokens():
    n = 460
    patterns = layer_patterns(h=4, n=n)
    tokens = [f"w{i}" for i in range(n)]
    shown = head_view_tokens(n, start=200)
    assert shown == [0, *range(200, 200 + HEAD_VIEW_TOKENS)]
    started = time.perf_counter()
    spec = head_view(patterns, tokens, [0, 1, 2, 3], shown=shown, query=230)
    assert time.perf_counter() - started < 0.5
    assert spec["tokens"] == shown and spec["labels"][1] == "200: w200" and len(spec["labels"]) == len(shown)
    assert spec["marked"] == shown.index(230)
    index = np.array(shown)
    for h in range(4):
        _, band = bands_of(spec, h)
        query, key = band[:, 0].astype(int), band[:, 1].astype(int)  # by the tokens' own index
        assert set(query) == {230} and set(key) <= set(shown)
        assert len(band) == int((patterns[h][230, index] >= 0.01).sum())
        np.testing.assert_array_equal(band[:, 2], patterns[h][query, key].astype(np.float32))
    expected = 1 - np.mean([patterns[h][np.ix_(index, index)].sum(-1).mean() for h in range(4)])
    assert weight_outside(patterns, [0, 1, 2, 3], shown) == pytest.approx(expected)
    assert head_view_tokens(n, start=1, query=300)[1:] == list(range(276, 276 + HEAD_VIEW_TOKENS))  # follows it
    assert head_view_tokens(n, start=n) == [0, *range(n - HEAD_VIEW_TOKENS, n)]  # clamped to the text
    assert head_view_tokens(30, start=9) == list(range(30))  # a short text is drawn whole
    with pytest.raises(ValueError, match="shown"):
        head_view_spec(patterns, tokens, [0], query=5, shown=shown)


def test_head_view_sides_follow_the_notation_and_input_is_checked():
    patterns = layer_patterns()
    common = head_view(patterns, LINE_TOKENS, [0], layer=2)
    paper = head_view(patterns, LINE_TOKENS, [0], notation="paper")
    assert common["query_side"] == "left" and paper["query_side"] == "right"
    assert common["title"].startswith("layer 2 · ") and "query" in common["title"].split("⟶")[0]
    assert "key" in paper["title"].split("⟶")[0]
    assert common["labels"] == [f"{i}: {t}" for i, t in enumerate(LINE_TOKENS)]
    assert head_view(layer_patterns(n=2), ["<b>", "a\u202e"], [0])["labels"] == [
        "0: <b>", "1: " + plain_token_labels(["a\u202e"])[0]]  # drawn as text, never as markup
    assert "\u202e" not in plain_token_labels(["a\u202e"])[0]  # a bidi override made visible
    empty = head_view(patterns, LINE_TOKENS, [])
    assert empty["heads"] == [] and empty["arrays"]["ends"].shape == (0, 4)
    for bad in (dict(heads=[3]), dict(heads=[0], query=6), dict(heads=[0], notation="maths")):
        with pytest.raises(ValueError):
            head_view_spec(patterns, LINE_TOKENS, **bad)
    with pytest.raises(ValueError):
        head_view_spec(patterns[0], LINE_TOKENS, [0])


def test_head_view_is_sent_compactly():
    n = 100
    patterns = layer_patterns(h=4, n=n)
    kept = sum(int((p >= 0.01).sum()) for p in patterns)
    assert len(pack(head_view_spec(patterns, [f"t{i}" for i in range(n)], [0, 1, 2, 3]))) < 29 * kept + 4_000


def test_the_rollout_chart_rows_sum_to_one_and_transposes_in_paper_notation():
    from core.figures.canvas import rollout_spec
    from core.lessons.analysis import rollout
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
