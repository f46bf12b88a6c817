"""The canvas heatmap's specs and bytes (core/figures/canvas.py): what the browser is sent is exactly what the model
computed, oriented by the notation, and the bytes read back as they were packed."""

import numpy as np
import pytest

from core.figures.attention import MAX_HATCHED, MAX_TICK_LABELS, axis_titles
from core.figures.canvas import difference_heatmap_spec, head_heatmap_spec, overview_spec, pack, rollout_spec, unpack


def causal_head(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A causal head's (pattern, scores) [N, N]: scores -inf above the diagonal, rows of the pattern sum to 1."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n, n)).astype(np.float32)
    scores[np.triu_indices(n, 1)] = -np.inf
    pattern = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (pattern / pattern.sum(axis=1, keepdims=True)).astype(np.float32), scores


@pytest.mark.parametrize("n", [1, 5, 9, 130])  # odd sizes: the uint8 mask leaves the float32 arrays unaligned
def test_pack_and_unpack_give_back_every_number(n):
    pattern, scores = causal_head(n)
    spec = head_heatmap_spec(pattern, [f"t{i}" for i in range(n)], scores)
    payload = pack(spec, filename="x", font_scale=1)
    back = unpack(payload)
    for name, array in spec["arrays"].items():
        np.testing.assert_array_equal(back["arrays"][name], array)
    assert back["filename"] == "x" and back["labels"] == spec["labels"]
    assert len(payload) % 4 == 0  # every part padded to 4 bytes


def test_a_masked_head_sends_its_open_cells_only_and_reads_back_whole():
    """Under a causal mask the weights and scores travel at the open cells only (unpack, like heatmap.js, puts the
    masked cells' 0 and −∞ back); a head with nothing masked, or whose masked cells are not 0 and −∞, sends all."""
    n = 64
    pattern, scores = causal_head(n)
    tokens = [f"t{i}" for i in range(n)]
    open_cells = n * (n + 1) // 2
    for notation in ("common", "paper"):
        spec = head_heatmap_spec(pattern, tokens, scores, notation=notation)
        assert spec["at_open_cells"] == {"weight": "0", "score": "-Infinity"}
        back = unpack(pack(spec))
        for name, array in spec["arrays"].items():
            np.testing.assert_array_equal(back["arrays"][name], array)
        assert {entry["name"]: entry["sent"] for entry in unpack_header(pack(spec))} == {
            "masked": n * n, "weight": open_cells, "score": open_cells}
    unmasked = head_heatmap_spec(np.full((n, n), 1 / n, np.float32), tokens, np.zeros((n, n), np.float32))
    leaky = pattern.copy()
    leaky[0, 1] = 1e-9  # a masked cell that is not 0: sent as it is
    for spec in (unmasked, head_heatmap_spec(leaky, tokens, scores)):
        assert "at_open_cells" not in spec
        assert {entry["sent"] for entry in unpack_header(pack(spec))} == {n * n}
        np.testing.assert_array_equal(unpack(pack(spec))["arrays"]["weight"], spec["arrays"]["weight"])


def unpack_header(payload: bytes) -> list[dict]:
    """The JSON header's array entries: names, shapes and how many values were sent."""
    import json
    import struct

    (length,) = struct.unpack_from("<I", payload)
    return json.loads(payload[4:4 + length])["arrays"]


def test_head_spec_orients_by_notation_and_marks_masked_cells():
    pattern, scores = causal_head(6)
    tokens = ["[BOS]", "the", "cat", "sat", "on", "."]
    common = head_heatmap_spec(pattern, tokens, scores)
    paper = head_heatmap_spec(pattern, tokens, scores, notation="paper")
    np.testing.assert_array_equal(common["arrays"]["weight"], pattern)
    np.testing.assert_array_equal(paper["arrays"]["weight"], pattern.T)
    np.testing.assert_array_equal(paper["arrays"]["score"], scores.T)
    assert (common["arrays"]["masked"] == np.triu(np.ones((6, 6)), 1)).all()
    assert (paper["arrays"]["masked"] == np.tril(np.ones((6, 6)), -1)).all()
    np.testing.assert_allclose(common["arrays"]["weight"].sum(axis=1), 1, rtol=1e-6)  # rows sum to 1
    np.testing.assert_allclose(paper["arrays"]["weight"].sum(axis=0), 1, rtol=1e-6)  # columns, in the paper's
    assert (common["row_role"], common["col_role"]) == ("query", "key")
    assert (paper["row_role"], paper["col_role"]) == ("key", "query")
    assert (paper["x_title"], paper["y_title"]) == axis_titles("paper")
    assert common["hatch"] and common["zmin"] == 0 and common["zmax"] == 1


def test_masked_cells_come_from_the_mask_when_given():
    pattern, _ = causal_head(4)
    hidden = np.zeros((4, 4), bool)
    hidden[3, 0] = True
    spec = head_heatmap_spec(pattern, list("abcd"), masked=hidden)
    assert spec["arrays"]["masked"].sum() == 1 and spec["arrays"]["masked"][3, 0] == 1
    assert [field["name"] for field in spec["fields"]] == ["weight"]  # no scores, no score in the hover


def test_labels_are_plain_text_with_invisible_characters_shown():
    pattern, scores = causal_head(4)
    spec = head_heatmap_spec(pattern, ["<b>", " ", "a\x07", "&"], scores, unknown=[True, False, False, False])
    assert spec["labels"] == ["⟨<b>⟩?", "␣", "a\\x07", "&"]  # a canvas draws text: nothing HTML-escaped


def test_long_texts_thin_the_ticks_and_drop_the_hatching():
    pattern, scores = causal_head(512)
    spec = head_heatmap_spec(pattern, [f"t{i}" for i in range(512)], scores)
    assert spec["tick_step"] == -(-512 // MAX_TICK_LABELS) and len(range(0, 512, spec["tick_step"])) <= MAX_TICK_LABELS
    assert not spec["hatch"] and 512 > MAX_HATCHED
    assert spec["arrays"]["score"].shape == (512, 512)  # bytes, not lists: the scores go at every size


def test_difference_spec_is_b_minus_a_greyed_only_where_both_hide():
    a, scores_a = causal_head(5, seed=1)
    b = np.full((5, 5), 0.2, np.float32)  # no mask: uniform
    spec = difference_heatmap_spec(a, b, list("abcde"), masked_a=np.isneginf(scores_a),
                                   masked_b=np.zeros((5, 5), bool), notation="paper")
    np.testing.assert_array_equal(spec["arrays"]["diff"], (b - a).T)
    np.testing.assert_array_equal(spec["arrays"]["a"], a.T)
    assert not spec["arrays"]["masked"].any()
    assert spec["zmin"] == -spec["zmax"] == -float(np.abs(b - a).max())
    assert [field["name"] for field in spec["fields"]] == ["A", "B", "B − A"]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="N = len"):
        head_heatmap_spec(np.zeros((3, 3)), ["a", "b"])
    with pytest.raises(ValueError, match="differ in shape"):
        difference_heatmap_spec(np.zeros((3, 3)), np.zeros((2, 2)), ["a", "b", "c"])


def test_unpack_refuses_trailing_bytes():
    pattern, scores = causal_head(3)
    with pytest.raises(ValueError, match="past its arrays"):
        unpack(pack(head_heatmap_spec(pattern, list("abc"), scores)) + b"\0\0\0\0")


def test_a_divider_falls_between_two_tokens_on_both_axes():
    pattern = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]
    spec = unpack(pack(head_heatmap_spec(pattern, list("abcdef"), divider=4)))
    assert spec["divider"]["at"] == 4 and spec["divider"]["color"].startswith("#")
    assert "divider" not in head_heatmap_spec(pattern, list("abcdef"))
    for outside in (0, 6, 9):
        with pytest.raises(ValueError, match="between two of the 6 tokens"):
            head_heatmap_spec(pattern, list("abcdef"), divider=outside)


def test_the_overview_tiles_every_head_in_whole_per_cents():
    """Layers down, heads across, each weight rounded to a whole per cent; one tile's mask serves every head;
    the paper's notation transposes each tile; the selected head travels with it."""
    heads = np.stack([np.stack([causal_head(5, seed=3 * layer + head)[0] for head in range(3)]) for layer in range(2)])
    masked = np.triu(np.ones((5, 5), bool), 1)
    for notation, orient in (("common", lambda m: m), ("paper", np.transpose)):
        spec = unpack(pack(overview_spec(heads, list("abcde"), notation=notation, selected=(1, 2), masked=masked)))
        weight = spec["arrays"]["weight"]
        assert weight.shape == (2 * 5, 3 * 5) and spec["tiles"] == {"layers": 2, "heads": 3, "size": 5,
                                                                    "selected": [1, 2]}
        np.testing.assert_array_equal(weight[5:, 10:], np.rint(orient(heads[1, 2]) * 100))  # L1 H2's tile
        np.testing.assert_array_equal(spec["arrays"]["masked"], orient(masked))
        assert spec["labels"] == ["0: a", "1: b", "2: c", "3: d", "4: e"] and spec["zmax"] == 100


def test_past_max_cells_an_overview_tile_shows_each_key_blocks_share_of_the_queries_weight():
    """A cell of b queries × b keys: the weight on those keys summed, averaged over the queries (rows of a tile
    still sum to 1, so a long text's heads do not fade b times)."""
    n = 10
    patterns = np.random.default_rng(2).dirichlet(np.ones(n), size=(1, 2, n))  # [M=1, H=2, N=10, N=10]
    masked = np.triu(np.ones((n, n), dtype=bool), 1)
    spec = overview_spec(patterns, [f"t{i}" for i in range(n)], masked=masked, max_cells=4)  # blocks of 3: 4 a side
    weight = spec["arrays"]["weight"]
    assert weight.shape == (4, 8) and spec["labels"] == ["0–2", "3–5", "6–8", "9–9"]
    share = patterns[0, 1, 0:3, 3:6].sum(1).mean()  # H1, queries 0-2 on keys 3-5
    assert weight[0, 4 + 1] == np.rint(share * 100)
    assert weight[3, 3] == np.rint(patterns[0, 0, 9, 9] * 100)  # the last block holds one token: its own weight
    assert np.abs(weight[:, :4].sum(1).astype(int) - 100).max() <= 4  # a row of a tile sums to 1 (rounded per cent)
    assert spec["fields"][0]["name"] == "weight on these 3 keys (summed; mean of the queries) ≈"
    assert spec["row_role"] == "queries"
    hidden = spec["arrays"]["masked"]
    assert hidden[0, 1] and not hidden[0, 0] and not hidden[1, 1]  # masked only where the whole block is
    paper = overview_spec(patterns, [f"t{i}" for i in range(n)], notation="paper", max_cells=4)["arrays"]["weight"]
    assert paper[1, 4 + 0] == np.rint(share * 100)  # keys are the rows in paper notation: the same cell, transposed


def test_the_rollout_spec_sends_the_rollout_oriented_by_notation():
    matrix = causal_head(6)[0]  # rows sum to 1, as a rollout's do
    for notation, orient in (("common", lambda m: m), ("paper", np.transpose)):
        spec = rollout_spec(matrix, list("abcdef"), notation=notation)
        np.testing.assert_array_equal(spec["arrays"]["rollout"], orient(matrix))
        assert spec["zmax"] == pytest.approx(matrix.max())
    assert spec["row_role"] == "input token" and "columns sum to 1" in spec["x_title"]
