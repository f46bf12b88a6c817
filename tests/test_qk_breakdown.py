"""core.lessons.analysis.qk_breakdown: one attention score recomputed step by step equals what the model recorded,
for a plain (learned positions), a RoPE, an ALiBi and a relative-bias model; a masked key gets weight 0."""

import numpy as np
import pytest
from tiny_models import tiny_model

from core.lessons.analysis import qk_breakdown, rollout
from core.model.masks import MaskSpec
from core.model.run import record_text

TEXT = "the keys to the old cabinet are on the table ."


@pytest.fixture(scope="module", params=["learned", "rope", "alibi", "relative"])
def recording(request):
    return record_text(tiny_model(pos_encoding=request.param, seed=3), TEXT)


def test_every_score_and_weight_equals_the_recorded_one(recording):
    n = recording.n_tokens
    scores = np.stack([recording.scores(layer) for layer in range(recording.n_layers)])
    patterns = recording.patterns()
    for layer in range(recording.n_layers):
        for head in range(recording.config.n_heads):
            for query in range(n):
                for key in range(n):
                    b = qk_breakdown(recording, layer, head, query, key)
                    assert b.score_matches and b.weight_matches, (layer, head, query, key)
                    assert b.recorded_score == scores[layer, head, query, key]
                    assert b.recorded_weight == pytest.approx(float(patterns[layer, head, query, key]))
                    if b.allowed:
                        assert b.score == pytest.approx(b.recorded_score, abs=1e-4)
                    assert b.weight == pytest.approx(b.recorded_weight, abs=1e-5)


def test_the_steps_add_up(recording):
    b = qk_breakdown(recording, 1, 1, recording.n_tokens - 1, 2)
    np.testing.assert_allclose(b.products, b.q * b.k)
    assert b.dot == pytest.approx(b.products.sum())
    assert b.scale == pytest.approx(1 / np.sqrt(recording.config.head_dim)) and b.head_dim == recording.config.head_dim
    assert b.scaled == pytest.approx(b.dot * b.scale)
    assert b.score == pytest.approx(b.scaled + (b.bias or 0.0))
    assert b.weight == pytest.approx(b.numerator / b.denominator)
    assert b.row_weights.sum() == pytest.approx(1.0)
    assert b.row_scores[b.key] == b.score and b.row_weights[b.key] == b.weight


def test_rope_uses_the_rotated_vectors_and_says_so(recording):
    b = qk_breakdown(recording, 0, 0, 5, 3)
    encoding = recording.meta["pe"]
    assert b.rotated == (encoding == "rope")
    if b.rotated:
        np.testing.assert_allclose(b.q, recording["blocks.0.attn.hook_rot_q"][5, 0], rtol=1e-6)
        np.testing.assert_allclose(b.q_unrotated, recording["blocks.0.attn.hook_q"][5, 0], rtol=1e-6)
        assert not np.allclose(b.q, b.q_unrotated)  # position 5 is rotated
        # with the unrotated vectors the score would be wrong: RoPE matters
        assert not np.isclose(float(b.q_unrotated @ b.k_unrotated) * b.scale, b.recorded_score, atol=1e-4)
    else:
        assert b.q_unrotated is None and b.k_unrotated is None
        np.testing.assert_allclose(b.q, recording["blocks.0.attn.hook_q"][5, 0], rtol=1e-6)
    has_bias = encoding in ("alibi", "relative")
    assert (b.bias is not None) == has_bias
    if has_bias:
        assert b.bias == pytest.approx(float(recording["blocks.0.attn.hook_pos_bias"][0, 5, 3]))


def test_a_masked_key_gets_minus_infinity_and_weight_zero(recording):
    b = qk_breakdown(recording, 0, 1, 2, 7)  # causal: query 2 cannot see key 7
    assert not b.allowed and np.isneginf(b.score) and np.isneginf(b.recorded_score)
    assert b.weight == 0.0 and b.recorded_weight == 0.0 and b.numerator == 0.0
    assert b.score_matches and b.weight_matches and b.score_error == 0.0
    assert np.isfinite(b.dot)  # q·k itself exists; the mask throws it away


def test_window_mask_ablation_and_validation():
    recording = record_text(tiny_model(pos_encoding="rope"), TEXT, mask=MaskSpec("window", 2, True, 4))
    hidden, seen = qk_breakdown(recording, 1, 0, 6, 3), qk_breakdown(recording, 1, 0, 6, 5)
    assert not hidden.allowed and hidden.weight == 0.0
    assert seen.allowed and seen.weight_matches and seen.weight > 0
    assert np.count_nonzero(seen.row_weights) == 2
    for bad in [(2, 0, 0, 0), (0, 2, 0, 0), (0, 0, 99, 0), (0, 0, 0, -1)]:
        with pytest.raises(ValueError):
            qk_breakdown(recording, *bad)


def test_rollout_rows_sum_to_one(recording):
    result = rollout(recording.patterns())
    np.testing.assert_allclose(result.sum(axis=1), 1.0, atol=1e-6)
    assert np.allclose(np.triu(result, 1), 0)  # causal: nothing flows from later tokens
