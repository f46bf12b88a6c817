"""Generation with a key/value cache, decoding rules, and the mask editor's presets and edits.

The cache must change nothing: every step's logits and attention row equal a full recomputation of the whole
text, for every position encoding (RoPE, ALiBi and relative biases must be applied at the new token's position).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_model

from core.figures.generation import CELL_SELECTION, GRID_SHARE, generation_spec, mask_grid, next_token_bars
from core.lessons.generation import Sampling, cache_check, choose, generate, next_token_distribution
from core.model.config import POSITION_ENCODINGS, ConfigError
from core.model.masks import (MASK_PRESETS, MAX_CELLS_CHARS, MaskPreset, MaskSpec, block_sparse_mask, build_mask,
                              flip_cells, format_cells, fully_masked_rows, parse_cells, random_mask, sees_later_tokens)
from core.model.transformer import KVCache

torch.set_num_threads(1)
PROMPT = [2, 7, 11, 5, 9]  # [BOS] and four word ids


def logits_of(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


# ---------------------------------------------------------------------------------------------------------
# The cache equals a full recomputation
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pe", POSITION_ENCODINGS)
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_cached_generation_equals_full_recomputation(pe, norm):
    model = tiny_model(norm=norm, pos_encoding=pe)
    for sampling in (Sampling(temperature=0), Sampling(temperature=1.3, top_k=20, top_p=0.9, seed=4)):
        cached = generate(model, PROMPT, 10, sampling)
        full = generate(model, PROMPT, 10, sampling, use_cache=False)
        assert cached.cached and not full.cached
        assert cached.ids == full.ids
        for a, b in zip(cached.steps, full.steps):
            np.testing.assert_allclose(a.logits, b.logits, atol=1e-5)
            np.testing.assert_allclose(a.pattern, b.pattern, atol=1e-6)
            np.testing.assert_array_equal(np.isneginf(a.scores), np.isneginf(b.scores))
        check = cache_check(model, cached)
        assert check.passed() and check.same_greedy_tokens


@pytest.mark.parametrize("mask", [MaskSpec("window", window=3), MaskSpec("strided", stride=2)])
def test_cache_follows_causal_sparse_masks(mask):
    model = tiny_model(pos_encoding="rope")
    tokens = torch.tensor([[2, 7, 11, 5, 9, 13, 8, 21, 6]])
    full = model(tokens, mask=mask).logits
    cache = KVCache()
    steps = [model(tokens[:, :3], mask=mask, cache=cache).logits]
    steps += [model(tokens[:, i:i + 1], mask=mask, cache=cache).logits for i in range(3, tokens.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == tokens.shape[1]
    assert cache.keys["blocks.0.attn"].shape == (1, 9, model.cfg.n_heads, model.cfg.head_dim)


def test_a_cached_step_records_one_row_over_every_key():
    model = tiny_model(pos_encoding="alibi")
    cache = KVCache()
    model(torch.tensor([PROMPT]), cache=cache)
    rec = model(torch.tensor([[4]]), cache=cache, record=True).recording
    pattern = rec.pattern(1)
    assert pattern.shape == (model.cfg.n_heads, 1, len(PROMPT) + 1)
    np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-6)


def test_the_cache_refuses_what_it_cannot_do():
    model = tiny_model()
    with pytest.raises(ValueError, match="causal"):
        model(torch.tensor([PROMPT]), mask="none", cache=KVCache())
    with pytest.raises(ValueError, match="valid"):
        model(torch.tensor([PROMPT]), valid=torch.ones(1, 5, dtype=torch.bool), cache=KVCache())
    cache = KVCache()
    model(torch.tensor([[2] * 60]), cache=cache)
    with pytest.raises(ValueError, match="context length"):
        model(torch.tensor([[2] * 5]), cache=cache)


def test_generation_refuses_masked_token_models_and_too_long_texts():
    with pytest.raises(ValueError, match="next-token"):
        generate(tiny_model(mask="none", head="masked_token"), PROMPT, 3, Sampling())
    with pytest.raises(ValueError, match="context length of 64"):
        generate(tiny_model(), PROMPT, 60, Sampling())


def test_attention_so_far_grows_one_row_per_step():
    model = tiny_model(pos_encoding="relative")
    generation = generate(model, PROMPT, 6, Sampling(temperature=0))
    for steps in (0, 3, 6):
        pattern, scores = generation.attention(steps)
        n = len(PROMPT) + steps
        assert pattern.shape == (model.cfg.n_layers, model.cfg.n_heads, n, n)
        np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-6)
        later = np.triu(np.ones((n, n), dtype=bool), 1)
        assert (pattern[..., later] == 0).all() and np.isneginf(scores[..., later]).all()
    full = model(torch.tensor([generation.ids]), record=True).recording
    np.testing.assert_allclose(generation.attention(6)[0], full.patterns(), atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------------------

def test_greedy_keeps_only_the_argmax_and_shows_the_models_own_distribution():
    logits = logits_of(1.0, 3.0, 2.0, -1.0)
    probs, kept = next_token_distribution(logits, Sampling(temperature=0))
    np.testing.assert_allclose(probs, np.exp(logits) / np.exp(logits).sum())
    np.testing.assert_array_equal(kept, [0, 1, 0, 0])
    assert choose(logits, Sampling(temperature=0), np.random.default_rng(0)).token == 1


def test_temperature_sharpens_and_flattens():
    logits = logits_of(1.0, 3.0, 2.0, -1.0)
    cold = next_token_distribution(logits, Sampling(temperature=0.5))[0]
    warm = next_token_distribution(logits, Sampling(temperature=2.0))[0]
    plain = next_token_distribution(logits, Sampling(temperature=1.0))[0]
    assert cold.max() > plain.max() > warm.max()
    assert np.argmax(cold) == np.argmax(warm) == 1


def test_top_k_and_top_p_cut_and_renormalise():
    logits = np.log(logits_of(0.05, 0.4, 0.3, 0.15, 0.1))  # probabilities at T = 1
    _, kept = next_token_distribution(logits, Sampling(top_k=2))
    np.testing.assert_allclose(kept, [0, 0.4 / 0.7, 0.3 / 0.7, 0, 0])
    _, kept = next_token_distribution(logits, Sampling(top_p=0.8))  # 0.4 + 0.3 < 0.8: 0.15 is needed too
    np.testing.assert_allclose(kept, [0, 0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85, 0])
    _, kept = next_token_distribution(logits, Sampling(top_p=0.7, top_k=1))
    np.testing.assert_allclose(kept, [0, 1, 0, 0, 0])
    _, kept = next_token_distribution(logits, Sampling(top_p=0.01))  # the likeliest token always stays
    np.testing.assert_allclose(kept, [0, 1, 0, 0, 0])


def test_sampling_draws_from_the_kept_distribution():
    logits = np.log(logits_of(0.05, 0.4, 0.3, 0.15, 0.1))
    sampling = Sampling(top_k=3, seed=0)
    rng = np.random.default_rng(0)
    draws = np.bincount([choose(logits, sampling, rng).token for _ in range(4000)], minlength=5) / 4000
    np.testing.assert_allclose(draws, [0, 0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85, 0], atol=0.03)


def test_the_seed_decides_the_sampled_text():
    model = tiny_model()
    a = generate(model, PROMPT, 12, Sampling(temperature=1.5, seed=1)).ids
    assert generate(model, PROMPT, 12, Sampling(temperature=1.5, seed=1)).ids == a
    assert generate(model, PROMPT, 12, Sampling(temperature=1.5, seed=2)).ids != a


def test_candidates_include_the_chosen_token():
    logits = np.log(logits_of(0.05, 0.4, 0.3, 0.15, 0.1))
    choice = choose(logits, Sampling(), np.random.default_rng(0))
    choice.token = 0  # the least likely, as a draw can be
    assert list(choice.candidates(2)) == [1, 2, 0]
    assert list(choice.candidates(5)) == [1, 2, 3, 4, 0]


@pytest.mark.parametrize("changes, message", [(dict(temperature=-1), "temperature"), (dict(top_k=-2), "top-k"),
                                              (dict(top_p=0), "top-p"), (dict(top_p=1.5), "top-p")])
def test_sampling_options_are_validated(changes, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**changes)


# ---------------------------------------------------------------------------------------------------------
# Mask presets and edits
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [True, False])
def test_block_sparse_mask_is_own_block_plus_block_summaries(causal):
    n, b = 11, 3
    allowed = block_sparse_mask(n, b, causal).numpy()
    for i in range(n):
        for j in range(n):
            expected = (i // b == j // b or j % b == b - 1) and (j <= i or not causal)
            assert allowed[i, j] == expected, (i, j)


def test_random_mask_is_seeded_keeps_the_diagonal_and_its_density():
    a = random_mask(64, 0.3, seed=5, causal=False)
    assert torch.equal(a, random_mask(64, 0.3, seed=5, causal=False))
    assert not torch.equal(a, random_mask(64, 0.3, seed=6, causal=False))
    assert a.diagonal().all()
    off_diagonal = a[~torch.eye(64, dtype=torch.bool)].float().mean().item()
    assert abs(off_diagonal - 0.3) < 0.03
    causal = random_mask(64, 0.3, seed=5)
    assert not sees_later_tokens(causal) and torch.equal(causal, a & build_mask(MaskSpec("causal"), 64))
    assert torch.equal(random_mask(8, 0.0), torch.eye(8, dtype=torch.bool))


def test_presets_match_the_named_masks():
    n = 12
    assert torch.equal(MaskPreset("causal").build(n), build_mask(MaskSpec("causal"), n))
    assert torch.equal(MaskPreset("window", width=3).build(n), build_mask(MaskSpec("window", window=3), n))
    assert torch.equal(MaskPreset("window", width=3, causal=False).build(n),
                       build_mask(MaskSpec("window", window=3, window_causal=False), n))
    assert torch.equal(MaskPreset("strided", stride=3).build(n), build_mask(MaskSpec("strided", stride=3), n))
    assert MaskPreset("none").build(n).all()
    assert torch.equal(MaskPreset("block-sparse", width=4).build(n), block_sparse_mask(n, 4))
    assert torch.equal(MaskPreset("random", density=0.5, seed=3).build(n), random_mask(n, 0.5, 3))
    assert set(MASK_PRESETS) == {"causal", "window", "strided", "block-sparse", "random", "none"}


@pytest.mark.parametrize("changes, message", [(dict(kind="diagonal"), "not one of"), (dict(width=0), "at least 1"),
                                              (dict(density=1.5), "density")])
def test_presets_are_validated(changes, message):
    with pytest.raises(ConfigError, match=message):
        MaskPreset(**changes)


@pytest.mark.parametrize("preset", [MaskPreset("block-sparse", width=3), MaskPreset("random", density=0.4, seed=2),
                                    MaskPreset("random", density=0.4, seed=2, causal=False)])
def test_the_model_under_a_preset_mask(preset):
    """Masked weights are exactly 0 and every row sums to 1 (the diagonal keeps every row non-empty)."""
    model = tiny_model()
    allowed = preset.build(10)
    rec = model(torch.tensor([[2, 7, 11, 5, 9, 13, 8, 21, 6, 4]]), mask=allowed, record=True).recording
    for layer in range(model.cfg.n_layers):
        pattern = rec.pattern(layer)
        assert (pattern[:, ~allowed.numpy()] == 0).all()
        np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-6)


def test_cells_are_parsed_switched_and_written_back():
    cells = parse_cells("3:1, 4:2 9:9 3:1 2:0")  # 3:1 twice: switched twice, so it drops out
    assert cells == {(4, 2), (9, 9), (2, 0)}
    assert format_cells(cells) == "2:0 4:2 9:9" and parse_cells(format_cells(cells)) == cells
    allowed = build_mask(MaskSpec("causal"), 5)
    flipped = flip_cells(allowed, cells)  # 9:9 is outside a 5-token mask: ignored
    assert not flipped[2, 0] and not flipped[4, 2]
    assert (flipped != allowed).sum() == 2 and allowed[2, 0]  # the input is not changed
    for bad in ("3-1", "a:b", "3:", "-1:2"):
        with pytest.raises(ValueError, match="query:key"):
            parse_cells(bad)
    assert parse_cells("  ") == set()


def test_a_list_of_cells_is_capped_before_it_is_read():  # issue 15: every text input has a cap
    many = " ".join(f"{i % 32}:{i // 32 % 32}" for i in range(600))  # 600 cells, under the cap
    assert len(parse_cells(many)) > 0 and len(many) < MAX_CELLS_CHARS
    with pytest.raises(ValueError, match="at most 4,000"):
        parse_cells("1:0 " * 2_000_000)  # 8 MB


def test_fully_masked_rows_and_later_keys_are_found():
    allowed = flip_cells(build_mask(MaskSpec("causal"), 4), {(2, 0), (2, 1), (2, 2)})
    assert fully_masked_rows(allowed) == [2]
    assert not sees_later_tokens(allowed)
    assert sees_later_tokens(flip_cells(allowed, {(0, 3)}))


# ---------------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------------

def test_mask_grid_marks_rows_with_no_key_and_selects_cells():
    allowed = flip_cells(build_mask(MaskSpec("causal"), 4), {(2, 0), (2, 1), (2, 2)}).numpy()
    spec = mask_grid(allowed, ["[BOS]", "a", "b", "c"]).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 16
    states = {(row["query"], row["key"]): row["state"] for row in rows}
    assert states[(2, 0)] == "row with no key" and states[(1, 0)] == "allowed" and states[(0, 1)] == "masked"
    assert spec["params"][0]["name"] == CELL_SELECTION and spec["params"][0]["select"]["fields"] == ["query", "key"]


def test_mask_grid_grows_its_type_in_presenter_mode():
    """Altair charts do not pass through presenter_figure: the grid scales its own labels, titles and legend."""
    allowed = build_mask(MaskSpec("causal"), 4).numpy()
    normal, large = (mask_grid(allowed, ["[BOS]", "a", "b", "c"], font_scale=scale).to_dict() for scale in (1, 1.5))
    for axis in ("x", "y"):
        assert large["encoding"][axis]["axis"]["labelFontSize"] == 18 == 1.5 * normal["encoding"][axis]["axis"][
            "labelFontSize"]
    assert large["encoding"]["color"]["legend"]["labelFontSize"] > normal["encoding"]["color"]["legend"]["labelFontSize"]
    assert large["width"] > normal["width"] == 440  # the larger labels leave the cells room


def test_mask_grid_labels_stay_within_their_rows_on_a_long_text():
    """Presenter mode's 20 px labels on 31 rows of about 10 px ran into each other: a label is no taller than its row."""
    n = 31
    spec = mask_grid(build_mask(MaskSpec("causal"), n).numpy(), [f"w{i}" for i in range(n)], font_scale=20 / 12).to_dict()
    row_px = GRID_SHARE * spec["width"] / n  # the cells' share of the chart
    for axis in ("x", "y"):
        assert 7 <= spec["encoding"][axis]["axis"]["labelFontSize"] <= row_px


def test_generation_figures_mark_the_newest_row_and_the_chosen_token():
    generation = generate(tiny_model(), PROMPT, 3, Sampling(temperature=0))
    pattern, scores = generation.attention(3)
    tokens = [str(i) for i in generation.ids]
    spec = generation_spec(pattern[0, 0], scores[0, 0], tokens, len(PROMPT))
    assert spec["outline"]["axis"] == "row" and spec["outline"]["at"] == 7  # the 3rd generated token, the 8th of 8
    assert spec["divider"]["at"] == len(PROMPT)  # the dashed line after the prompt
    np.testing.assert_array_equal(spec["arrays"]["weight"], pattern[0, 0])  # the recorded weights, as they are
    paper = generation_spec(pattern[0, 0], scores[0, 0], tokens, len(PROMPT), notation="paper")
    assert paper["outline"]["axis"] == "col"  # the newest query is a column in the paper's notation
    bars = next_token_bars(["a", "b", "c"], np.array([0.5, 0.3, 0.2]), np.array([0.0, 1.0, 0.0]), chosen=1,
                           sampling=Sampling(temperature=1.0, seed=2))
    assert list(bars.data[0].x) == ["a", "▶ b", "c"] and list(bars.data[0].marker.line.width) == [0, 3, 0]


def test_the_choice_legend_says_how_the_token_was_chosen():
    probs = np.array([0.5, 0.3, 0.2])
    greedy = next_token_bars(["a", "b", "c"], probs, np.array([1.0, 0.0, 0.0]), 0, Sampling(temperature=0))
    assert len(greedy.data) == 1  # nothing was sampled: no "sampled from" bars
    assert "greedy" in greedy.data[0].name and "argmax" in greedy.data[0].name and "nothing sampled" in \
        greedy.data[0].name and "sampled from" not in greedy.data[0].name
    cut = next_token_bars(["a", "b", "c"], probs, np.array([0.625, 0.375, 0.0]), 1,
                          Sampling(temperature=0.8, top_k=2, seed=1))
    assert [bar.name for bar in cut.data] == ["the model's p = softmax(logits / 0.8)",
                                              "sampled from: p cut to top-k 2, renormalised"]
    uncut = next_token_bars(["a", "b", "c"], probs, probs, 2, Sampling(temperature=1.0, seed=1))
    assert uncut.data[1].name == "sampled from: p itself (no top-k or top-p cut)"
