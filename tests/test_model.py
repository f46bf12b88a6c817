"""Properties of the model and its recording that must hold for every number the app shows."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from core.model.config import POSITION_ENCODINGS, ConfigError, ModelConfig
from core.model.masks import (MaskSpec, build_mask, causal_mask, named_score_mask, score_mask, score_offset,
                              strided_mask, window_mask)
from core.model.positions import alibi_slopes, relative_bucket, sinusoidal_table
from core.model.recording import Recording
from core.model.transformer import Transformer, attend_at_once, attend_in_blocks, masked_softmax

VOCAB = 40


def text_model(**changes) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_heads=4, n_layers=2, d_mlp=64, max_len=64, vocab_size=VOCAB).replace(**changes)
    return Transformer(cfg).eval()


def ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, n), generator=torch.Generator().manual_seed(seed))


def record(model: Transformer, tokens: torch.Tensor, **kwargs) -> Recording:
    with torch.no_grad():
        return model(tokens, record=True, **kwargs).recording


ALL_PE = [dict(pos_encoding=pe) for pe in POSITION_ENCODINGS]


@pytest.mark.parametrize("changes", ALL_PE + [dict(norm="post"), dict(mask="none", head="masked_token"),
                                               dict(mask="strided", stride=3), dict(mask="window", window=4)])
def test_pattern_rows_sum_to_one_and_masked_entries_are_zero(changes):
    model = text_model(**changes)
    rec = record(model, ids(20))
    allowed = build_mask(MaskSpec.of(model.cfg), 20).numpy()
    for layer in range(model.cfg.n_layers):
        pattern = rec.pattern(layer)
        np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-5)
        assert (pattern[:, ~allowed] == 0).all()
        assert np.isneginf(rec.scores(layer)[:, ~allowed]).all()
        assert np.isfinite(rec.scores(layer)[:, allowed]).all()


def test_fully_masked_rows_give_zero_rows_not_nan():
    model = text_model(mask="none", head="masked_token")
    allowed = torch.ones(10, 10, dtype=torch.bool)
    allowed[3] = False  # query 3 may attend to nothing
    allowed[:, 7] = False
    output = model(ids(10), mask=allowed, record=True)
    assert torch.isfinite(output.logits).all()
    pattern = output.recording.pattern(0)
    assert (pattern[:, 3] == 0).all() and (pattern[:, :, 7] == 0).all()
    np.testing.assert_allclose(np.delete(pattern, 3, axis=1).sum(-1), 1.0, atol=1e-5)


def test_masked_softmax_equals_softmax_on_rows_with_an_allowed_key():
    scores = torch.randn(2, 3, 5, 5)
    torch.testing.assert_close(masked_softmax(scores), scores.softmax(-1))
    scores[..., 2] = float("-inf")
    torch.testing.assert_close(masked_softmax(scores), scores.softmax(-1))
    assert (masked_softmax(scores)[..., 2] == 0).all()


@pytest.mark.parametrize("pe", POSITION_ENCODINGS)
def test_incremental_property_under_causal_mask(pe):
    """Seed 001 §4.1: appending a token leaves every earlier representation unchanged."""
    model = text_model(pos_encoding=pe)
    tokens = ids(12)
    short, long = record(model, tokens[:, :11]), record(model, tokens)
    for layer in range(model.cfg.n_layers):
        name = f"blocks.{layer}.hook_resid_post"
        np.testing.assert_allclose(long[name][:11], short[name], atol=1e-5)
    np.testing.assert_allclose(long["logits"][:11], short["logits"], atol=1e-5)


def test_without_a_mask_appending_a_token_changes_earlier_representations():
    model = text_model(mask="none", head="masked_token")
    tokens = ids(12)
    short, long = record(model, tokens[:, :11]), record(model, tokens)
    change = np.abs(long["blocks.1.hook_resid_post"][:11] - short["blocks.1.hook_resid_post"]).max(-1)
    assert (change > 1e-4).all()


def test_permutation_equivariance_without_position_encoding_or_mask():
    """Seed 001 §3: permuting the tokens permutes every representation the same way."""
    model = text_model(pos_encoding="none", mask="none", head="masked_token")
    tokens = ids(9)
    permutation = torch.tensor([4, 0, 8, 2, 6, 1, 3, 7, 5])
    plain, permuted = record(model, tokens), record(model, tokens[:, permutation])
    p = permutation.numpy()
    np.testing.assert_allclose(permuted["blocks.1.hook_resid_post"], plain["blocks.1.hook_resid_post"][p], atol=1e-5)
    np.testing.assert_allclose(permuted.pattern(1), plain.pattern(1)[:, p][:, :, p], atol=1e-6)


def test_position_encoding_breaks_permutation_equivariance():
    model = text_model(pos_encoding="sinusoidal", mask="none", head="masked_token")
    tokens = ids(9)
    permutation = torch.tensor([4, 0, 8, 2, 6, 1, 3, 7, 5])
    plain, permuted = record(model, tokens), record(model, tokens[:, permutation])
    difference = permuted["blocks.1.hook_resid_post"] - plain["blocks.1.hook_resid_post"][permutation.numpy()]
    assert np.abs(difference).max() > 1e-3


def test_rope_scores_depend_only_on_the_offset():
    """With the same content at every position, RoPE scores are a function of i - j alone."""
    model = text_model(pos_encoding="rope", mask="none", head="masked_token")
    rec = record(model, torch.full((1, 16), 7))
    scores = rec.scores(0)  # [H, N, N]
    for offset in range(-15, 16):
        diagonal = np.stack([np.diagonal(head, offset) for head in scores])
        np.testing.assert_allclose(diagonal, diagonal[:, :1].repeat(diagonal.shape[1], 1), atol=1e-4)
    assert not np.allclose(np.diagonal(scores[0], 0)[0], np.diagonal(scores[0], 5)[0])


@pytest.mark.parametrize("pe", ["rope", "alibi", "relative"])
def test_attention_encodings_at_other_positions_score_by_their_differences(pe):
    """Training with random strides (Preset.random_strides) feeds positions other than 0..N-1: an encoding inside
    attention then scores the tokens by their position differences, as the same tokens at 0..39 would be scored."""
    from core.model.positions import random_stride_positions
    model = text_model(pos_encoding=pe, mask="none", head="masked_token")
    positions = random_stride_positions(16, torch.Generator().manual_seed(0))
    assert positions[0] == 0 and set((positions[1:] - positions[:-1]).tolist()) == {1, 2}
    strided = record(model, torch.full((1, 16), 7), positions=positions).scores(0)
    plain = record(model, torch.full((1, 40), 7)).scores(0)  # [H, 40, 40]: the same content at 0..39
    np.testing.assert_allclose(strided, plain[:, positions][:, :, positions], atol=1e-4)
    assert not np.allclose(strided, plain[:, :16, :16], atol=1e-3)


def test_sinusoidal_at_other_positions_adds_those_positions_vectors():
    from core.model.positions import random_stride_positions
    model = text_model(pos_encoding="sinusoidal")
    positions = random_stride_positions(16, torch.Generator().manual_seed(1))
    added = record(model, ids(16), positions=positions)["hook_pos_embed"]  # [N, D]
    np.testing.assert_array_equal(added, sinusoidal_table(40, 32)[positions].numpy())


@pytest.mark.parametrize("pe", ["rope", "alibi", "relative", "sinusoidal"])
def test_positions_0_to_n_minus_1_are_the_plain_pass(pe):
    model = text_model(pos_encoding=pe)
    with torch.no_grad():
        np.testing.assert_array_equal(model(ids(12), positions=torch.arange(12)).logits, model(ids(12)).logits)


def test_only_an_encoding_of_the_position_takes_other_positions_and_one_per_token():
    for pe in ("learned", "none"):
        with pytest.raises(ValueError, match=f"this pass reads '{pe}'"):
            text_model(pos_encoding=pe)(ids(9), positions=torch.arange(9))
    with pytest.raises(ValueError, match="one per token"):
        text_model(pos_encoding="rope")(ids(9), positions=torch.arange(8))


def test_sinusoidal_table_is_the_formula_rounded_once_at_every_position():
    n, d = 1024, 128
    table = sinusoidal_table(n, d)
    assert table.dtype == torch.float32
    position, i = np.arange(n)[:, None], np.arange(0, d, 2)[None, :]
    angle = position / 10000.0 ** (i / d)  # float64
    exact = np.empty((n, d))
    exact[:, 0::2], exact[:, 1::2] = np.sin(angle), np.cos(angle)
    assert np.abs(table.numpy() - exact).max() < 1e-7  # only float32's last rounding (a float32 angle: 3e-5 by 512)


def test_alibi_slopes_match_press_et_al():
    np.testing.assert_allclose(alibi_slopes(8), [2.0 ** -(i + 1) for i in range(8)])
    twelve = [2 ** -1, 2 ** -2, 2 ** -3, 2 ** -4, 2 ** -5, 2 ** -6, 2 ** -7, 2 ** -8,
              2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    np.testing.assert_allclose(alibi_slopes(12), twelve, rtol=1e-6)


def test_alibi_bias_is_minus_slope_times_distance():
    model = text_model(pos_encoding="alibi", mask="none", head="masked_token")
    bias = record(model, ids(6))["blocks.0.attn.hook_pos_bias"]
    slopes = alibi_slopes(4).numpy()
    i, j = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    np.testing.assert_allclose(bias, -slopes[:, None, None] * np.abs(i - j)[None], rtol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_relative_buckets_are_monotone_and_capped(bidirectional):
    distance = torch.arange(0, 500)
    before = relative_bucket(-distance, bidirectional, 32, 128)  # keys before the query
    assert (before.diff() >= 0).all() and before.max() < (16 if bidirectional else 32)
    assert before[:8].tolist() == list(range(8))  # exact buckets for small distances
    assert before[128:].unique().numel() == 1  # everything past max_distance shares the last bucket
    if bidirectional:
        after = relative_bucket(distance[1:], True, 32, 128)
        assert (after.diff() >= 0).all() and after.min() >= 16 and after.max() < 32
    else:
        assert (relative_bucket(distance[1:], False, 32, 128) == 0).all()


def test_token_norm_statistics_match_layer_norm():
    model = text_model()
    with torch.no_grad():
        for p in model.blocks[0].ln1.parameters():
            p.normal_()
    rec = record(model, ids(10))
    x = rec.tensors["blocks.0.hook_resid_pre"]
    ln = model.blocks[0].ln1
    standardised = F.layer_norm(x, (x.shape[-1],), eps=ln.eps)  # before gamma and beta, as TransformerLens records
    np.testing.assert_allclose(rec["blocks.0.ln1.hook_normalized"], standardised.numpy(), atol=1e-5)
    np.testing.assert_allclose(rec["blocks.0.ln1.hook_mean"], x.mean(-1).numpy(), atol=1e-6)
    np.testing.assert_allclose(rec["blocks.0.ln1.hook_scale"][:, 0],
                               torch.sqrt(x.var(-1, unbiased=False) + ln.eps).numpy(), rtol=1e-5)
    with torch.no_grad():  # recorded tensors are inference tensors: autograd may not save them
        after = F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, ln.eps)  # what attention reads
    q = after @ model.blocks[0].attn.W_Q.weight.detach().T
    np.testing.assert_allclose(rec["blocks.0.attn.hook_q"].reshape(10, -1), q.numpy(), atol=1e-5)


def test_a_pass_without_gradients_runs_in_inference_mode_and_one_with_gradients_trains():
    model = text_model()
    with torch.no_grad():
        quiet = model(ids(12), record=True)
    assert quiet.logits.is_inference() and quiet.recording.tensors["blocks.1.attn.hook_pattern"].is_inference()
    model.train()
    tracked = model(ids(12))
    assert not tracked.logits.is_inference() and tracked.logits.requires_grad
    tracked.logits.sum().backward()  # a mask made in the pass above, in inference mode, is read here
    assert model.blocks[0].attn.W_Q.weight.grad.abs().sum() > 0
    torch.testing.assert_close(tracked.logits.detach(), quiet.logits, rtol=0, atol=0)  # dropout is 0: same numbers


def test_residual_stream_is_the_sum_of_its_parts():
    model = text_model()
    rec = record(model, ids(10))
    np.testing.assert_allclose(rec["blocks.0.hook_resid_pre"], rec["hook_embed"] + rec["hook_pos_embed"], atol=1e-6)
    for layer in range(2):
        b = f"blocks.{layer}"
        np.testing.assert_allclose(rec[f"{b}.hook_resid_mid"], rec[f"{b}.hook_resid_pre"] + rec[f"{b}.hook_attn_out"], atol=1e-6)
        np.testing.assert_allclose(rec[f"{b}.hook_resid_post"], rec[f"{b}.hook_resid_mid"] + rec[f"{b}.hook_mlp_out"], atol=1e-6)
    np.testing.assert_allclose(rec["blocks.1.hook_resid_pre"], rec["blocks.0.hook_resid_post"])


def test_post_norm_blocks_normalise_after_the_residual_sum():
    model = text_model(norm="post")
    rec = record(model, ids(10))
    total = rec["blocks.0.hook_resid_pre"] + rec["blocks.0.hook_attn_out"]
    mean, scale = rec["blocks.0.ln1.hook_mean"], rec["blocks.0.ln1.hook_scale"]
    np.testing.assert_allclose(mean, total.mean(-1), atol=1e-5)
    ln = model.blocks[0].ln1
    expected = (total - mean[:, None]) / scale * ln.weight.detach().numpy() + ln.bias.detach().numpy()
    np.testing.assert_allclose(rec["blocks.0.hook_resid_mid"], expected, atol=1e-5)


def test_multi_head_output_equals_the_papers_sum_over_heads():
    """Seed 001 eq. 4 in its transposed layout: Y = Σ_h V_h X A_h, with V_h = U_h U_{v,h} (footnote 13)."""
    model = text_model()
    rec = record(model, ids(10))
    attn, cfg = model.blocks[0].attn, model.cfg
    ln = model.blocks[0].ln1
    X = (rec["blocks.0.ln1.hook_normalized"] * ln.weight.detach().numpy() + ln.bias.detach().numpy()).T  # D x N
    K = cfg.head_dim
    Y = np.zeros_like(X)
    for h in range(cfg.n_heads):
        U_v = attn.W_V.weight[h * K:(h + 1) * K].detach().numpy()  # K x D
        U_h = attn.W_O.weight[:, h * K:(h + 1) * K].detach().numpy()  # D x K
        A_h = rec.pattern(0)[h].T  # the paper's A: columns sum to 1
        np.testing.assert_allclose(A_h.sum(0), 1.0, atol=1e-5)
        Y += (U_h @ U_v) @ X @ A_h
    np.testing.assert_allclose(Y.T, rec["blocks.0.hook_attn_out"], atol=1e-5)


def reference_forward(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """A plain pre-LN causal forward pass written independently with torch's own layer_norm and softmax."""
    cfg = model.cfg
    n = tokens.shape[1]
    x = model.embed(tokens) + model.pos_embed(torch.arange(n))
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    for block in model.blocks:
        h = F.layer_norm(x, (cfg.d_model,), block.ln1.weight, block.ln1.bias, cfg.ln_eps)
        q, k, v = (w(h).view(1, n, cfg.n_heads, -1).transpose(1, 2) for w in (block.attn.W_Q, block.attn.W_K, block.attn.W_V))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(cfg.head_dim)).masked_fill(future, float("-inf"))
        z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, n, -1)
        x = x + block.attn.W_O(z)
        h = F.layer_norm(x, (cfg.d_model,), block.ln2.weight, block.ln2.bias, cfg.ln_eps)
        x = x + block.mlp.fc_out(F.gelu(block.mlp.fc_in(h)))
    x = F.layer_norm(x, (cfg.d_model,), model.ln_final.weight, model.ln_final.bias, cfg.ln_eps)
    return model.unembed(x)


def test_golden_against_a_plain_reference_forward():
    model = text_model(pos_encoding="learned")
    tokens = ids(15)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens).logits, reference_forward(model, tokens), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("changes", ALL_PE + [dict(norm="post")])
def test_recording_does_not_change_the_output(changes):
    model = text_model(**changes)
    tokens = ids(14)
    with torch.no_grad():
        plain, recorded = model(tokens), model(tokens, record=True)
    assert plain.recordings is None
    assert torch.equal(plain.logits, recorded.logits)
    np.testing.assert_array_equal(recorded.recording["logits"], plain.logits[0].numpy())


def test_recording_has_every_documented_name_and_shape():
    model = text_model(pos_encoding="rope")
    rec = record(model, ids(7))
    N, D, H, K = 7, 32, 4, 8
    shapes = {"hook_embed": (N, D), "hook_pos_embed": (N, D), "logits": (N, VOCAB),
              "ln_final.hook_mean": (N,), "ln_final.hook_scale": (N, 1), "ln_final.hook_normalized": (N, D)}
    for layer in range(2):
        b = f"blocks.{layer}"
        shapes.update({f"{b}.{name}": (N, D) for name in
                       ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out")})
        shapes.update({f"{b}.attn.{name}": (N, H, K) for name in
                       ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_z")})
        shapes.update({f"{b}.attn.{name}": (H, N, N) for name in ("hook_attn_scores", "hook_pattern")})
        for ln in ("ln1", "ln2"):
            shapes.update({f"{b}.{ln}.hook_mean": (N,), f"{b}.{ln}.hook_scale": (N, 1), f"{b}.{ln}.hook_normalized": (N, D)})
    for name, shape in shapes.items():
        assert rec[name].shape == shape, name


def test_padded_batch_records_each_sequence_at_its_own_length():
    model = text_model(mask="none", head="masked_token")
    a, b = ids(9, seed=1), ids(5, seed=2)
    batch = torch.zeros(2, 9, dtype=torch.long)
    batch[0], batch[1, :5] = a[0], b[0]
    valid = torch.zeros(2, 9, dtype=torch.bool)
    valid[0], valid[1, :5] = True, True
    with torch.no_grad():
        output = model(batch, mask="padding", valid=valid, record=True)
    alone = record(model, b)
    short = output.recordings[1]
    assert short.n_tokens == 5 and short.pattern(0).shape == (4, 5, 5)
    np.testing.assert_allclose(short["blocks.1.hook_resid_post"], alone["blocks.1.hook_resid_post"], atol=1e-5)
    np.testing.assert_allclose(output.recordings[0].pattern(1).sum(-1), 1.0, atol=1e-5)


def test_ablating_the_position_encoding_at_inference():
    model = text_model(pos_encoding="learned")
    tokens = ids(10)
    ablated = record(model, tokens, pe="none")
    assert ablated.meta["pe"] == "none" and not ablated["hook_pos_embed"].any()
    assert not np.allclose(ablated["logits"], record(model, tokens)["logits"])
    with pytest.raises(ConfigError, match="trained parameters"):
        model(tokens, pe="relative")


def test_running_with_another_mask_at_inference():
    model = text_model()  # trained causal
    rec = record(model, ids(10), mask="none")
    assert rec.meta["mask"] == "none" and (rec.pattern(0)[:, 0, 1:] > 0).all()
    windowed = record(model, ids(10), mask=MaskSpec("window", window=3))
    assert (windowed.pattern(0)[:, 9, :7] == 0).all() and (windowed.pattern(0)[:, 9, 7:] > 0).all()


def test_mask_shapes():
    assert causal_mask(4).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert window_mask(5, 2)[4].tolist() == [0, 0, 0, 1, 1]
    assert window_mask(5, 2, causal=False)[2].tolist() == [0, 1, 1, 1, 0]
    assert strided_mask(9, 3)[8].tolist() == [0, 0, 1, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize("changes, reason", [
    (dict(pos_encoding="rope", d_model=30, n_heads=2), "even"),
    (dict(d_model=30, n_heads=4), "divisible"),
    (dict(mask="none"), "next-token head"),
    (dict(mask="causal", head="masked_token"), "bidirectional"),
    (dict(pos_encoding="alibii"), "pos_encoding"),
    (dict(input="patches", head="classifier", n_classes=3, mask="none", pos_encoding="alibi", max_len=65), "1-D"),
    (dict(input="patches", head="classifier", n_classes=3, mask="none", max_len=10), "exceed max_len"),
    (dict(head="classifier", n_classes=1, mask="none"), "n_classes"),
])
def test_incompatible_options_are_rejected_with_a_reason(changes, reason):
    with pytest.raises(ConfigError, match=reason):
        text_model(**changes)


def test_context_length_is_enforced():
    with pytest.raises(ValueError, match="context length of 64"):
        text_model()(ids(65))


def test_vision_model_reads_the_cls_token():
    cfg = ModelConfig(input="patches", head="classifier", n_classes=3, mask="none", d_model=32, n_heads=2,
                      n_layers=1, d_mlp=32, image_size=8, patch_size=4, max_len=5)
    model = Transformer(cfg).eval()
    rec = record(model, torch.rand(1, 3, 8, 8))
    assert rec.n_tokens == 5 and rec["logits"].shape == (3,)
    np.testing.assert_allclose(rec["hook_embed"][0], model.cls_token.detach()[0, 0].numpy())


def test_npz_round_trip(tmp_path):
    model = text_model(pos_encoding="alibi")
    rec = record(model, ids(6))
    rec.meta.update(tokens=list("abcdef"))
    rec.save_npz(tmp_path / "r.npz")
    loaded = Recording.load_npz(tmp_path / "r.npz")
    assert loaded.config == model.cfg and loaded.meta["tokens"] == list("abcdef")
    assert set(loaded.names) == set(rec.names)
    np.testing.assert_array_equal(loaded.pattern(1), rec.pattern(1))


def test_the_score_offset_masks_exactly_as_masked_fill_does():
    """Adding score_offset (0 or -inf) to the scores, in place, gives what masked_fill gave, bit for bit: the
    allowed scores unchanged, the hidden ones -inf."""
    allowed = strided_mask(9, 3)
    scores = torch.randn(2, 4, 9, 9)
    expected = scores.masked_fill(~allowed, float("-inf"))
    offset = score_offset(allowed[None].expand(2, 9, 9))
    assert offset.dtype == scores.dtype and set(offset.unique().tolist()) == {0.0, float("-inf")}
    assert torch.equal(scores.clone().add_(offset[:, None]), expected)


def test_queries_in_blocks_see_only_the_keys_their_mask_lets_them():
    """score_mask's blocks, from 512 queries on: 128 queries each, with the keys all of them see (from the first)
    and 1 + the last key any of them may see; blocks that see every key merged (no hidden end of a row: attention
    at once); a block of queries that see nothing sees 0 keys. Fewer queries: one block."""
    n, starts = 600, range(0, 600, 128)
    ends = [min(first + 128, n) for first in starts]
    assert score_mask(causal_mask(n)[None]).blocks == tuple((a, b, a + 1, b) for a, b in zip(starts, ends))
    assert score_mask(torch.ones(1, n, n, dtype=torch.bool)).blocks == ((0, n, n, n),)
    window = window_mask(n, 4)[None].expand(2, n, n)
    assert score_mask(window).blocks == tuple((a, b, 0, b) for a, b in zip(starts, ends))
    blank = torch.zeros(1, n, n, dtype=torch.bool)
    blank[:, 130:, :5] = True  # the first block sees nothing, the others the first five keys
    assert score_mask(blank).blocks == ((0, 128, 0, 0), (128, 256, 0, 5), *((a, b, 5, 5) for a, b in zip(starts[2:],
                                                                                                         ends[2:])))
    padded = causal_mask(n)[None].repeat(2, 1, 1)
    padded[1, :, 300:] = False  # the second text is 300 tokens long: its padding hides keys 300.. from every query
    assert score_mask(padded).blocks == ((0, 128, 1, 128), (128, 256, 129, 256), (256, 384, 257, 384),
                                         (384, 512, 300, 512), (512, 600, 300, 600))
    assert score_mask(causal_mask(300)[None]).blocks == ((0, 300, 1, 300),)
    cached = causal_mask(560)[None, 500:]  # 60 new queries after 500 cached tokens
    assert score_mask(cached).blocks == ((0, 60, 501, 560),)
    assert score_mask(causal_mask(40)[None], rows=16, min_blocked=0).blocks == ((0, 16, 1, 16), (16, 32, 17, 32),
                                                                                (32, 40, 33, 40))


@pytest.mark.parametrize("allowed", ["causal", "window", "strided", "none", "blank rows", "padded", "cached"])
def test_attention_in_blocks_gives_the_numbers_of_attention_at_once(allowed):
    """What every page runs (no gradients: blocks of queries, keys they cannot see never computed) equals what
    training runs (all at once): scores and pattern bit for bit, the hidden entries -inf and exactly 0; z within
    float32 rounding (its sums over keys are cut at different lengths). With a position bias, a batch of two."""
    torch.manual_seed(0)
    n, keys = 40, 40
    masks = {"causal": causal_mask(n), "window": window_mask(n, 5), "strided": strided_mask(n, 4),
             "none": torch.ones(n, n, dtype=torch.bool)}
    if allowed in masks:
        matrix = masks[allowed][None].expand(2, n, n)
    elif allowed == "blank rows":
        matrix = causal_mask(n)[None].repeat(2, 1, 1)
        matrix[:, :20] = False  # the first block sees no key at all, and one row of the next none either
        matrix[:, 25] = False
    elif allowed == "padded":
        matrix = causal_mask(n)[None].repeat(2, 1, 1)
        matrix[1, :, 30:] = False  # the second text is 30 tokens long
    else:
        keys, matrix = 50, causal_mask(50)[None, 10:].expand(2, n, 50)  # 10 cached tokens, then 40
    q, k, v = torch.randn(2, n, 3, 8), torch.randn(2, keys, 3, 8), torch.randn(2, keys, 3, 8)
    bias = torch.randn(2, 3, n, keys)
    whole = attend_at_once(q, k, v, score_mask(matrix), bias)
    blocks = attend_in_blocks(q, k, v, score_mask(matrix, rows=16, min_blocked=0), bias)
    assert len(score_mask(matrix, rows=16, min_blocked=0).blocks) > 1 or allowed in ("none", "cached")
    assert torch.equal(blocks[0], whole[0]) and torch.equal(blocks[1], whole[1])
    torch.testing.assert_close(blocks[2], whole[2], rtol=0, atol=1e-6)
    hidden = ~matrix[:, None]
    assert (blocks[0][hidden.expand_as(blocks[0])] == float("-inf")).all()
    assert (blocks[1][hidden.expand_as(blocks[1])] == 0).all()
    sums = blocks[1].sum(-1)
    seeing = matrix.any(-1)[:, None].expand_as(sums)
    torch.testing.assert_close(sums[seeing], torch.ones_like(sums[seeing]))
    assert (sums[~seeing] == 0).all() and not blocks[1].isnan().any()


def test_a_named_mask_is_made_once_and_no_pass_changes_it():
    """A named mask's offset and blocks are made once per (mask, length, batch) and shared; a pass only reads
    them, so the next pass sees exactly the mask and gives the same numbers."""
    model = text_model(max_len=600)
    named_score_mask.cache_clear()
    first = record(model, ids(520))
    shared = named_score_mask(MaskSpec("causal"), 520, 1, "cpu")
    again = record(model, ids(520))
    assert named_score_mask.cache_info().hits >= 2 and named_score_mask.cache_info().misses == 1
    assert torch.equal(shared.offset, score_offset(causal_mask(520)[None])) and len(shared.blocks) == 5
    np.testing.assert_array_equal(again.pattern(1), first.pattern(1))


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_freed_memory_is_kept_for_the_next_forward_pass():
    """core/serving/allocator.py sets glibc's thresholds (importing core did it already; setting them again succeeds)."""
    from core.serving.allocator import keep_freed_memory

    assert keep_freed_memory()


PREFAULT_PROBE = """
import resource, sys, threading
import torch
from core.serving.allocator import prefault

def allocate():
    if sys.argv[2] == "prefault":
        assert prefault(64 * 2**20)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    tensors = [torch.ones(2**20) for _ in range(8)]  # 8 x 4 MiB, every page written
    print(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

if sys.argv[1] == "main":
    allocate()
else:
    thread = threading.Thread(target=allocate)
    thread.start()
    thread.join()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
@pytest.mark.parametrize("where", ["thread", "main"])
def test_a_thread_reuses_its_prefaulted_memory_without_page_faults(where):
    """core.serving.allocator.prefault: what the same thread allocates next, up to what it prefaulted, is in place already:
    tensors written in full fault in few of their pages, against about half of them without it; in a thread's own
    malloc arena and in the main one (which gave a prefault back at its old trim threshold). Each in a fresh
    process: in this one, a new thread may share an arena that other threads draw from and give back."""
    import resource
    import subprocess

    root = Path(__file__).resolve().parents[1]

    def faults(mode: str) -> int:
        run = subprocess.run([sys.executable, "-c", PREFAULT_PROBE, where, mode], cwd=root, capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONPATH": str(root)})
        return int(run.stdout.split()[-1])

    pages = 32 * 2**20 // resource.getpagesize()
    without, prefaulted = faults("none"), faults("prefault")
    assert prefaulted < pages // 10 and prefaulted * 4 < without, (prefaulted, without, pages)
