"""Unit tests of core/figures/attention.py: shapes, masked cells, the paper-notation transpose, labels."""

import json
import re
import time

import numpy as np
import plotly.graph_objects as go
import pytest

from core.figures.attention import (HEAD_COLORS, HEAD_VIEW_TOKENS, difference_heatmap, head_heatmap, head_lines,
                                    head_view_tokens, oriented, png_config, weight_outside, qk_products_bar, small_multiples,
                                    softmax_row_bar, token_label, token_labels)

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
    assert fig.layout.xaxis.automargin is False  # fixed margins: automargin re-laid the chart out for seconds
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 at the top, like a matrix


def test_z_is_compact_rounded_float32():
    pattern, scores = causal_pattern()
    z = np.asarray(weight_trace(head_heatmap(pattern, TOKENS, scores)).z)
    assert z.dtype == np.float32
    finite = np.isfinite(z)
    np.testing.assert_allclose(z[finite], np.round(pattern, 4)[finite], atol=1e-6)
    sent = sent_traces(head_heatmap(pattern, TOKENS, scores))
    assert "bdata" in sent[0]["z"]  # sent as a binary array


def sent_traces(fig: go.Figure) -> list[dict]:
    """The traces as the browser receives them (parsed JSON: binary arrays are {"dtype", "bdata", ...})."""
    return json.loads(fig.to_json())["data"]


def filled_cells(fig: go.Figure, n: int) -> np.ndarray:
    """The cells covered by the grey "masked" path shape, as [n, n] bool. Each rectangle must be drawn with
    absolute commands (M x0,y0 H x1 V y1 H x0 Z): plotly drops relative ones in data-referenced paths."""
    path = next(shape.path for shape in fig.layout.shapes if shape.name == "masked")
    assert re.fullmatch(r"(M-?[\d.]+,-?[\d.]+H-?[\d.]+V-?[\d.]+H-?[\d.]+Z)+", path), path[:80]
    covered = np.zeros((n, n), dtype=bool)
    for part in path.split("Z")[:-1]:
        x0, y0 = (float(v) for v in part[1:part.index("H")].split(","))
        x1, y1, x_back = (float(v) for v in re.split("[HV]", part[part.index("H") + 1:]))
        assert y1 == y0 + 1 and x_back == x0 and x1 > x0  # one row's run of cells
        covered[int(y0 + 0.5), int(x0 + 0.5):int(x1 + 0.5)] = True
    return covered


def test_masked_cells_are_drawn_grey_and_hatched_over_their_zero_weight():
    pattern, scores = causal_pattern()
    fig = head_heatmap(pattern, TOKENS, scores)
    z = np.asarray(weight_trace(fig).z)
    masked = np.isneginf(scores)
    assert (z[masked] == 0).all() and np.isfinite(z).all()  # the weight the model computed: exactly 0
    assert np.array_equal(filled_cells(fig, 4), masked)
    hatch = next(shape for shape in fig.layout.shapes if shape.name == "masked hatch")
    assert hatch.path.count("M") == masked.sum()  # one stroke per masked cell, all in one SVG path
    assert all(shape.layer == "above" for shape in fig.layout.shapes)  # over the heatmap; shapes take no hover
    custom = np.asarray(weight_trace(fig).customdata)
    assert custom.dtype == np.float32 and np.isneginf(custom[masked]).all()  # the hover says the score is -inf


def test_long_texts_are_grey_without_hatching_and_send_no_strings_per_cell():
    n = 100
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), 0.0, -np.inf)
    pattern = np.where(np.isneginf(scores), 0.0, 1.0) / np.arange(1, n + 1)[:, None]
    tokens = [f"w{i}" for i in range(n)]
    fig = head_heatmap(pattern, tokens, scores)
    assert [shape.name for shape in fig.layout.shapes] == ["masked"]
    assert np.array_equal(filled_cells(fig, n), np.isneginf(scores))
    assert fig.layout.shapes[0].path.count("Z") == n - 1  # one rectangle per row's run of masked keys
    trace = weight_trace(fig)
    assert np.asarray(trace.z).dtype == np.float32 and np.asarray(trace.customdata).dtype == np.float32
    assert len(trace.x) == len(trace.y) == n  # tokens travel once per axis, not once per cell
    longer = 200
    scores = np.where(np.tril(np.ones((longer, longer), dtype=bool)), 0.0, -np.inf)
    trace = weight_trace(head_heatmap(np.exp(scores) / np.arange(1, longer + 1)[:, None], [f"w{i}" for i in range(longer)], scores))
    assert trace.customdata is None and "score" not in trace.hovertemplate  # only the weight past 128 tokens


def test_no_masked_shapes_without_a_mask():
    pattern = np.full((4, 4), 0.25)
    fig = head_heatmap(pattern, TOKENS, np.zeros((4, 4)))
    assert [t.name for t in fig.data] == ["pattern"] and not fig.layout.shapes


def test_hover_names_query_and_key_tokens_weight_and_score():
    pattern, scores = causal_pattern()
    trace = weight_trace(head_heatmap(pattern, TOKENS, scores))
    assert list(trace.x) == list(trace.y) == ["0: [BOS]", "1: the", "2: keys", "3: are"]
    custom = np.asarray(trace.customdata)
    assert custom.shape == (4, 4)
    np.testing.assert_allclose(custom[2, 1], scores[2, 1], rtol=1e-6)  # common: row = query, column = key
    assert "query %{y}" in trace.hovertemplate and "key %{x}" in trace.hovertemplate
    for word in ("weight", "score"):
        assert word in trace.hovertemplate


def test_paper_notation_transposes_keys_down_queries_across():
    pattern, scores = causal_pattern()
    common = head_heatmap(pattern, TOKENS, scores, notation="common")
    paper = head_heatmap(pattern, TOKENS, scores, notation="paper")
    z_common, z_paper = np.asarray(weight_trace(common).z), np.asarray(weight_trace(paper).z)
    np.testing.assert_array_equal(z_paper, z_common.T)
    np.testing.assert_allclose(z_paper.sum(axis=0), 1, atol=1e-3)  # columns sum to 1
    np.testing.assert_allclose(z_common.sum(axis=1), 1, atol=1e-3)  # rows sum to 1
    custom = np.asarray(weight_trace(paper).customdata)
    np.testing.assert_allclose(custom[1, 2], scores[2, 1], rtol=1e-6)  # paper: column = query, row = key
    assert "query %{x}" in weight_trace(paper).hovertemplate
    assert "key" in paper.layout.yaxis.title.text and "query" in paper.layout.xaxis.title.text
    assert "query" in common.layout.yaxis.title.text and "key" in common.layout.xaxis.title.text
    assert np.array_equal(filled_cells(paper, 4), np.isneginf(scores).T)  # the mask moves with the transpose
    with pytest.raises(ValueError):
        oriented(pattern, "diagonal")


def test_small_multiples_past_max_cells_show_block_means_and_say_so():
    n = 10
    patterns = np.random.default_rng(2).dirichlet(np.ones(n), size=(1, 2, n))  # [M=1, H=2, N=10, N=10]
    masked = np.triu(np.ones((n, n), dtype=bool), 1)
    fig = small_multiples(patterns, masked=masked, max_cells=4)  # blocks of 3 tokens: 4 cells a side
    [trace] = fig.data
    z = np.asarray(trace.z)
    assert z.shape == (4, 8)
    assert z[0, 4 + 1] == np.rint(patterns[0, 1, 0:3, 3:6].mean() * 100)  # H1, queries 0-2 x keys 3-5
    assert z[3, 3] == np.rint(patterns[0, 0, 9, 9] * 100)  # the last block holds one token: its own weight
    assert trace.y[1] == "L0 · queries 3–5" and "mean weight of the 3×3 block" in trace.hovertemplate
    covered = filled_cells(fig, 8)[:4]
    assert covered[0, 1] and not covered[0, 0] and not covered[1, 1]  # masked only where the whole block is


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
    np.testing.assert_allclose(z, np.round(b - a, 4).T, atol=1e-6)
    np.testing.assert_allclose(np.asarray(trace.customdata)[..., 1], b.T, atol=1e-6)
    assert np.array_equal(filled_cells(fig, 4), masked.T)
    assert trace.zmid == 0 and trace.zmin == -trace.zmax
    with pytest.raises(ValueError):
        difference_heatmap(a, np.eye(3), TOKENS)


def test_small_multiples_tile_every_head_in_one_heatmap_and_outline_the_selected():
    patterns = np.random.default_rng(1).dirichlet(np.ones(5), size=(2, 3, 5))  # [M=2, H=3, N=5, N=5]
    masked = np.triu(np.ones((5, 5), dtype=bool), 1)
    fig = small_multiples(patterns, selected=(1, 2), notation="paper", masked=masked, tokens=list("abcde"))
    [trace] = fig.data
    z = np.asarray(trace.z)
    assert z.shape == (2 * 5, 3 * 5) and z.dtype == np.uint8  # one byte a cell
    np.testing.assert_array_equal(z[5:10, 10:15], np.rint(patterns[1, 2].T * 100))  # L1 H2, transposed, in %
    assert "weight ≈ %{z}%" in trace.hovertemplate
    assert trace.y[5] == "L1 · key 0: a" and trace.x[10 + 3] == "H2 · query 3: d"  # hover names head and tokens
    outline = next(shape for shape in fig.layout.shapes if shape.name == "selected")
    assert (outline.x0, outline.y0, outline.x1, outline.y1) == (9.5, 4.5, 14.5, 9.5)
    covered = filled_cells(fig, 15)[:10]
    assert np.array_equal(covered, np.tile(masked.T, (2, 3)))
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2"] and list(fig.layout.yaxis.ticktext) == ["L0", "L1"]
    assert sent_traces(fig)[0]["z"]["dtype"] == "u1"  # sent as bytes, not a list of numbers


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


@pytest.mark.parametrize("notation", ["common", "paper"])
@pytest.mark.parametrize("n", [4, 200])
def test_lean_figures_pass_plotly_validation_in_full(notation, n):
    """head_heatmap, difference_heatmap and small_multiples skip plotly's validation on the way in
    (lean_figure, for speed): their output must still be a valid figure, property by property."""
    pattern, scores = causal_pattern(n)
    tokens = [f"w{i}" for i in range(n)]
    figures = [head_heatmap(pattern, tokens, scores, notation=notation),
               difference_heatmap(pattern, pattern.T, tokens, notation=notation, masked_a=np.isneginf(scores)),
               small_multiples(np.stack([np.stack([pattern, pattern])] * 2), notation=notation, selected=(1, 0),
                               masked=np.isneginf(scores), tokens=tokens)]
    for fig in figures:
        validated = go.Figure(fig.to_dict())  # raises ValueError on any unknown property or bad value
        sent, checked = json.loads(fig.to_json())["data"][0], json.loads(validated.to_json())["data"][0]
        for key in ("z", "x", "y", "customdata", "hovertemplate", "zmin", "zmax", "colorscale"):
            assert sent.get(key) == checked.get(key), key  # a scale spelled out: plotly.js's "Blues" runs dark to light
        shapes = [json.loads(f.to_json())["layout"].get("shapes", []) for f in (validated, fig)]
        assert shapes[0] == shapes[1]


def test_at_most_80_tick_labels_per_axis_and_the_hover_still_names_every_token():
    pattern, scores = causal_pattern(512)
    tokens = [f"w{i}" for i in range(512)]
    fig = head_heatmap(pattern, tokens, scores)
    assert len(fig.layout.xaxis.ticktext) <= 80 and len(fig.layout.yaxis.ticktext) <= 80
    assert list(fig.layout.xaxis.ticktext[:2]) == ["w0", "w7"]  # every 7th token
    assert len(fig.data[0].x) == len(fig.data[0].y) == 512
