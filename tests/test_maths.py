"""core/lessons/maths.py: one layer recomputed in the seed paper's layout equals what the model recorded, step by step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_models import tiny_model

from core.lessons.maths import GLOSSARY, GLOSSARY_COLUMNS, column_softmax, layer_maths, max_abs_difference
from core.model.run import record_text

torch.set_num_threads(1)
TEXT = "the keys to the old cabinet are on the table ."
TOLERANCE = 1e-5

CONFIGS = [
    *(dict(norm=norm, pos_encoding=pe) for norm in ("pre", "post")
      for pe in ("rope", "alibi", "relative", "learned", "sinusoidal", "none")),
    dict(norm="pre", pos_encoding="relative", mask="none", head="masked_token"),  # bidirectional relative buckets
    dict(norm="post", pos_encoding="alibi", mask="window", window=3),
    dict(norm="pre", pos_encoding="rope", mask="strided", stride=3, n_heads=4),
]


def recorded(seed: int = 0, pe: str | None = None, **changes):
    model = tiny_model(seed=seed, **changes)
    return model, record_text(model, TEXT, pe=pe)


@pytest.mark.parametrize("changes", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_every_step_equals_the_recording(changes):
    model, rec = recorded(**changes)
    for layer in range(model.cfg.n_layers):
        maths = layer_maths(model, rec, layer)
        for head in range(model.cfg.n_heads):
            checked = [step for step in maths.checks(head) if step.recorded is not None]
            assert {"queries", "keys", "scores", "pattern", "z"} <= set(maths.heads[head].steps)
            for step in checked:
                assert step.value.shape == step.recorded.shape, step.title
                assert step.max_diff < TOLERANCE, (step.title, step.hook, step.max_diff)
            assert maths.max_diff(head) < TOLERANCE
        hooks = {step.hook for step in maths.checks(0)}
        assert f"blocks.{layer}.hook_attn_out" in hooks and f"blocks.{layer}.hook_resid_post" in hooks
        assert f"blocks.{layer}.mlp.hook_pre" in hooks
        pe = changes["pos_encoding"]
        assert ("rotated queries" in maths.heads[0].steps) == (pe == "rope")
        assert ("position bias" in maths.heads[0].steps) == (pe in ("alibi", "relative"))
        assert (maths.X.hook is not None) == (changes["norm"] == "pre")  # pre-LN: X is ln1's output, checked


def test_pre_ln_tokennorm_and_post_ln_residual_steps_are_checked():
    model, rec = recorded(norm="pre")
    maths = layer_maths(model, rec, 1)
    assert maths.X.hook == "blocks.1.ln1.hook_normalized"
    assert maths.X.checked_against == "blocks.1.ln1.hook_normalized × γ + β"  # recorded before γ, β (TransformerLens)
    assert maths.steps["token norm 2"].hook == "blocks.1.ln2.hook_normalized"
    model, rec = recorded(norm="post")
    maths = layer_maths(model, rec, 1)
    assert "token norm 2" not in maths.steps
    assert maths.steps["residual 1"].hook == "blocks.1.hook_resid_mid"  # = TokenNorm(X + Y)
    np.testing.assert_array_equal(maths.X.value, rec["blocks.1.hook_resid_pre"].T)


def test_an_ablated_encoding_is_recomputed_as_it_was_run():
    model, rec = recorded(pos_encoding="rope", pe="alibi")  # RoPE weights, run with ALiBi
    maths = layer_maths(model, rec, 0)
    assert "position bias" in maths.heads[1].steps and "rotated queries" not in maths.heads[1].steps
    assert maths.max_diff(1) < TOLERANCE


def test_concatenate_then_project_equals_the_sum_over_heads():
    model, rec = recorded(n_heads=4, pos_encoding="alibi")
    maths = layer_maths(model, rec, 0)
    assert maths.sum_vs_concat < 1e-12
    total = sum(head.V @ maths.X.recorded @ head.pattern for head in maths.heads)  # Σ_h V_h X A_h from the parts
    np.testing.assert_allclose(total, maths.steps["concat then project"].value, atol=1e-12)
    np.testing.assert_allclose(total, rec["blocks.0.hook_attn_out"].T, atol=TOLERANCE)


def test_v_h_factors_through_the_head_size():
    model, rec = recorded(d_head=4)  # K = 4 < D = 32
    head = layer_maths(model, rec, 0).heads[1]
    assert head.U_q.shape == head.U_v.shape == (4, 32) and head.U_o.shape == (32, 4)
    assert head.V.shape == (32, 32) and head.V_rank == 4
    np.testing.assert_allclose(head.V, model.blocks[0].attn.W_O.weight.detach().double()[:, 4:8].numpy()
                               @ model.blocks[0].attn.W_V.weight.detach().double()[4:8].numpy())


def test_the_pattern_is_normalised_over_columns_and_masked_entries_are_zero():
    model, rec = recorded(pos_encoding="learned")
    head = layer_maths(model, rec, 1).heads[0]
    A, S = head.pattern, head.steps["scores"].value
    np.testing.assert_allclose(A.sum(axis=0), 1.0, atol=1e-12)  # columns (queries) sum to 1
    assert np.isneginf(S[np.triu_indices(len(A), 1)[::-1]]).all()  # key after query: masked
    assert (A[np.isneginf(S)] == 0).all()


def test_the_check_fails_on_the_wrong_weights():
    model, rec = recorded(seed=0)
    other = tiny_model(seed=5)  # same config, other weights
    maths = layer_maths(other, rec, 0)
    assert maths.heads[0].steps["queries"].max_diff > 1e-3
    with pytest.raises(ValueError, match="another model"):
        layer_maths(tiny_model(norm="post"), rec, 0)
    with pytest.raises(ValueError, match="layer must be"):
        layer_maths(model, rec, 2)


def test_column_softmax_and_the_difference_of_masked_arrays():
    scores = np.array([[0.0, -np.inf], [np.log(3.0), -np.inf]])  # second column: no visible key
    np.testing.assert_allclose(column_softmax(scores), [[0.25, 0.0], [0.75, 0.0]])
    a = np.array([1.0, -np.inf, 2.0])
    assert max_abs_difference(a, np.array([1.5, -np.inf, 2.0])) == 0.5
    assert max_abs_difference(a, np.array([1.0, 0.0, 2.0])) == math.inf
    with pytest.raises(ValueError):
        max_abs_difference(a, a[:2])


def test_the_glossary_names_every_recorded_tensor_a_step_is_checked_against():
    assert all(len(row) == len(GLOSSARY_COLUMNS) for row in GLOSSARY)
    hooks_text = " ".join(row[3] for row in GLOSSARY)
    model, rec = recorded(pos_encoding="rope", norm="pre")
    maths = layer_maths(model, rec, 0)
    for step in maths.checks(0):
        if step.hook is not None:
            last = step.hook.split(".")[-1]  # hook_q, hook_normalized, hook_attn_out, ...
            assert last in hooks_text, step.hook
    assert any(row[0] == "TokenNorm" and "LayerNorm" in row[4] for row in GLOSSARY)
