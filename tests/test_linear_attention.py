"""core/lessons/linear_attention.py: linear attention's O(N) form, its causality, the comparison with the model's softmax
attention, and the time and memory measurement."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_model

from core.lessons.linear_attention import (CostMeasurement, CostPoint, LargestTensor, compare_on_recording, feature_map,
                                           fitted_slope, linear_attention, linear_attention_explicit,
                                           linear_attention_weights, measure_cost, softmax_attention)
from core.model.run import record_text

torch.set_num_threads(1)
TEXT = "the keys to the old cabinet are on the table ."


def qkv(n: int = 12, k: int = 6, dv: int = 5, batch: tuple[int, ...] = (), seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*batch, n, k, generator=generator, dtype=torch.float64),
            torch.randn(*batch, n, k, generator=generator, dtype=torch.float64),
            torch.randn(*batch, n, dv, generator=generator, dtype=torch.float64))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_the_linear_form_equals_the_explicit_n_by_n_form(causal, batch):
    q, k, v = qkv(batch=batch)
    torch.testing.assert_close(linear_attention(q, k, v, causal), linear_attention_explicit(q, k, v, causal),
                               rtol=1e-10, atol=1e-12)


def test_the_implied_weights_are_positive_rows_summing_to_one_and_causal():
    q, k, _ = qkv()
    assert (feature_map(q) > 0).all()
    for causal in (False, True):
        weights = linear_attention_weights(q, k, causal)
        torch.testing.assert_close(weights.sum(-1), torch.ones(12, dtype=torch.float64))
        later = torch.triu(torch.ones(12, 12, dtype=torch.bool), 1)
        assert (weights[later] == 0).all() if causal else (weights > 0).all()


@pytest.mark.parametrize("attention", [linear_attention, softmax_attention])
def test_causal_attention_is_causal(attention):
    q, k, v = qkv()
    changed = [t.clone() for t in (q, k, v)]
    for tensor in changed:
        tensor[7:] += 3.0  # change every token from position 7 on
    before, after = attention(q, k, v, causal=True), attention(*changed, causal=True)
    torch.testing.assert_close(before[:7], after[:7], rtol=0, atol=1e-12)  # earlier outputs untouched
    assert (before[7:] - after[7:]).abs().max() > 1e-3
    non_causal = attention(q, k, v), attention(*changed)
    assert (non_causal[0][:7] - non_causal[1][:7]).abs().max() > 1e-3  # without the mask they do change


def test_shapes_are_checked():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="same N"):
        linear_attention(q, k[:5], v)


def test_softmax_attention_reproduces_the_models_head_output():
    model = tiny_model(pos_encoding="rope")
    rec = record_text(model, TEXT)
    for head in range(model.cfg.n_heads):
        q, k, v = (rec.tensors[f"blocks.1.attn.{name}"][:, head].double()
                   for name in ("hook_rot_q", "hook_rot_k", "hook_v"))
        np.testing.assert_allclose(softmax_attention(q, k, v, causal=True).numpy(),
                                   rec["blocks.1.attn.hook_z"][:, head], atol=1e-5)


@pytest.mark.parametrize("changes, causal, exact, bias", [
    (dict(pos_encoding="rope"), True, True, False),
    (dict(pos_encoding="alibi"), True, True, True),
    (dict(pos_encoding="learned", mask="none", head="masked_token"), False, True, False),
    (dict(pos_encoding="learned", mask="window", window=3), True, False, False),
])
def test_comparison_on_a_recording(changes, causal, exact, bias):
    model = tiny_model(**changes)
    rec = record_text(model, TEXT)
    c = compare_on_recording(rec, 1, 0)
    n = rec.n_tokens
    assert (c.causal, c.exact_mask, c.position_bias) == (causal, exact, bias)
    np.testing.assert_array_equal(c.softmax_out, rec["blocks.1.attn.hook_z"][:, 0])
    np.testing.assert_array_equal(c.masked, np.isneginf(rec.scores(1)[0]))
    names = ("hook_rot_q", "hook_rot_k") if changes["pos_encoding"] == "rope" else ("hook_q", "hook_k")
    q, k, v = (rec.tensors[f"blocks.1.attn.{name}"][:, 0].double() for name in (*names, "hook_v"))
    np.testing.assert_allclose(c.linear_out, linear_attention_explicit(q, k, v, causal).numpy(), atol=1e-10)
    np.testing.assert_allclose(c.linear_pattern.sum(1), 1.0, atol=1e-12)
    assert (c.linear_pattern[c.linear_masked] == 0).all()
    assert c.linear_masked.sum() == (n * (n - 1) // 2 if causal else 0)
    assert c.relative_error > 1e-3  # a different kernel: the outputs differ
    assert c.token_cosine.shape == (n,) and (np.abs(c.token_cosine) <= 1 + 1e-9).all()
    assert 0 < c.pattern_difference <= 1
    soft_bits, linear_bits = c.entropies
    assert 0 <= soft_bits <= np.log2(n) and 0 <= linear_bits <= np.log2(n)
    with pytest.raises(ValueError):
        compare_on_recording(rec, 5, 0)


def test_largest_tensor_sees_every_operation():
    with LargestTensor() as watch:
        a = torch.ones(10, 20)  # 800 bytes
        (a @ torch.ones(20, 3)).sum()  # 120 bytes, then 4
    assert watch.largest == 800


@pytest.mark.parametrize("causal", [False, True])
def test_measured_memory_grows_as_n_squared_for_softmax_and_as_n_for_linear(causal):
    ns, k = [16, 32, 64, 128], 8
    measurement = measure_cost(ns, head_dim=k, causal=causal, repeats=2, time_cap=30)
    assert not measurement.skipped and {(p.method, p.n) for p in measurement.points} == {
        (m, n) for m in ("softmax", "linear") for n in ns}
    for p in measurement.of("softmax"):  # the N×N scores (float32), or the causal mask's N×N int64 offsets
        assert p.largest_bytes == (8 if causal else 4) * p.n * p.n
    for p in measurement.of("linear"):  # the running sums N×K×K (causal), else the N×K features
        assert p.largest_bytes == (4 * p.n * k * k if causal else 4 * p.n * k)
    assert fitted_slope(measurement.of("softmax"), "largest_bytes") == pytest.approx(2)
    assert fitted_slope(measurement.of("linear"), "largest_bytes") == pytest.approx(1)
    assert all(p.seconds > 0 for p in measurement.points)
    assert measurement.doubling_ratio("softmax", "largest_bytes") == pytest.approx(4)


def test_the_time_cap_skips_the_largest_sizes():
    measurement = measure_cost([64, 256, 1024, 4096], head_dim=16, repeats=3, time_cap=0.02)
    assert 4096 in measurement.skipped["softmax"]
    skipped = measurement.skipped["softmax"]
    assert skipped == sorted(skipped) and all(p.n < skipped[0] for p in measurement.of("softmax"))
    assert measurement.seconds_spent < 5


def test_measurement_arguments_and_the_doubling_ratio():
    with pytest.raises(ValueError):
        measure_cost([])
    with pytest.raises(ValueError):
        measure_cost([64], time_cap=0)
    points = [CostPoint("softmax", n, 1e-6 * n * n, 4 * n * n) for n in (100, 200, 400)]
    measurement = CostMeasurement(points)
    assert measurement.doubling_ratio("softmax") == pytest.approx(4)
    assert measurement.doubling_ratio("linear") is None
    assert fitted_slope(points) == pytest.approx(2)
    with pytest.raises(ValueError):
        fitted_slope(points[:1])
