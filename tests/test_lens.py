"""core/lessons/lens.py: the residual stream adds up, the logit lens ends at the model's own prediction, temperature and
TokenNorm / BatchNorm do what the formulas say, on the bundled default model when it is there and on tiny ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_model
from torch.nn import functional as F

from core.lessons import lens
from core.model.registry import DEFAULT_TEXT_MODEL, load_model, text_model_names
from core.model.run import record_text

TEXT = "the keys to the old cabinet are on the table ."


def _bundled():
    if DEFAULT_TEXT_MODEL not in text_model_names():
        pytest.skip(f"{DEFAULT_TEXT_MODEL} is not bundled yet (assets/models); the tiny-model cases still run")
    return load_model(DEFAULT_TEXT_MODEL)[0]


@pytest.fixture(params=["bundled", "tiny-pre", "tiny-mlm"])
def pre_ln(request):
    """(model, recording) of a pre-LN model."""
    return _pre_ln(request.param)


def _pre_ln(kind: str):
    if kind == "bundled":
        model = _bundled()
    elif kind == "tiny-pre":
        model = tiny_model(pos_encoding="rope")
    else:
        model = tiny_model(seed=2, pos_encoding="learned", mask="none", head="masked_token")
    return model, record_text(model, TEXT)


@pytest.fixture
def post_ln():
    model = tiny_model(norm="post", seed=1, pos_encoding="learned")
    return model, record_text(model, TEXT)


@pytest.fixture(params=["bundled", "tiny-pre", "tiny-mlm", "tiny-post"])
def any_ln(request):
    """(model, recording) of a pre-LN or a post-LN model."""
    if request.param == "tiny-post":
        return request.getfixturevalue("post_ln")
    return _pre_ln(request.param)


# ---------------------------------------------------------------------------------------------------------
# Decomposition and norms
# ---------------------------------------------------------------------------------------------------------

def test_the_parts_add_up_to_the_final_stream(pre_ln):
    model, rec = pre_ln
    decomposition = lens.residual_decomposition(rec)
    m = rec.n_layers
    assert list(decomposition.parts) == ["embed", "pos_embed"] + [f"L{l} {s}" for l in range(m) for s in ("attn", "mlp")]
    final = rec[f"blocks.{m - 1}.hook_resid_post"]
    np.testing.assert_allclose(decomposition.total, final, atol=1e-4)
    assert decomposition.max_abs_error < 1e-4
    # the components along the final direction stack up to the stream's length, token by token
    np.testing.assert_allclose(sum(decomposition.projections().values()), np.linalg.norm(final, axis=1), atol=1e-4)


def test_a_post_ln_stream_does_not_decompose_and_says_why(post_ln):
    _, rec = post_ln
    with pytest.raises(lens.NotDecomposableError, match="post-LN"):
        lens.residual_decomposition(rec)


def test_residual_norms_are_the_stream_lengths_at_each_point(pre_ln):
    _, rec = pre_ln
    norms = lens.residual_norms(rec)
    assert norms.shape == (rec.n_layers + 1, rec.n_tokens)
    np.testing.assert_allclose(norms[0], np.linalg.norm(rec["hook_embed"] + rec["hook_pos_embed"], axis=1), rtol=1e-5)
    for layer in range(rec.n_layers):
        np.testing.assert_allclose(norms[layer + 1], np.linalg.norm(rec[f"blocks.{layer}.hook_resid_post"], axis=1),
                                   rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# Logit lens and the final prediction
# ---------------------------------------------------------------------------------------------------------

def test_the_logit_lens_at_the_last_layer_is_the_models_own_top_k(any_ln):
    model, rec = any_ln
    k = 5
    result = lens.logit_lens(rec, model, top_k=k)
    assert result.labels[0] == "embed" and len(result.labels) == rec.n_layers + 1
    assert result.top_ids.shape == result.top_probs.shape == (rec.n_layers + 1, rec.n_tokens, k)
    own = lens.softmax(rec["logits"])
    own_top = np.argsort(-own, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(result.top_ids[-1], own_top)
    np.testing.assert_allclose(result.top_probs[-1], np.take_along_axis(own, own_top, -1), atol=1e-5)
    np.testing.assert_allclose(result.probs.sum(-1), 1.0, atol=1e-9)


def test_the_logit_lens_recomputes_ln_final_statistics_on_the_intermediate_stream(pre_ln):
    model, rec = pre_ln
    resid = rec.tensors["blocks.0.hook_resid_post"]
    ln = model.ln_final
    with torch.no_grad():  # an independent implementation: torch's layer_norm, then the unembedding
        expected = model.unembed(F.layer_norm(resid, (rec.config.d_model,), ln.weight, ln.bias, ln.eps)).numpy()
    np.testing.assert_allclose(lens.lens_logits(rec, model)[1], expected, atol=1e-4)


def test_temperature_one_reproduces_softmax_of_the_logits(pre_ln):
    _, rec = pre_ln
    row = rec["logits"][-1]
    ids, probs = lens.final_prediction(row, temperature=1.0, top_k=row.shape[0])
    expected = torch.softmax(torch.tensor(row, dtype=torch.float64), -1).numpy()
    np.testing.assert_allclose(probs, expected[ids], atol=1e-9)
    assert np.all(np.diff(probs) <= 0) and abs(probs.sum() - 1) < 1e-9
    assert ids[0] == int(np.argmax(row))


def test_temperature_sharpens_and_flattens():
    logits = np.array([2.0, 1.0, 0.5, -1.0])
    entropy = [(lambda p: -(p * np.log(p)).sum())(lens.final_prediction(logits, t, 4)[1]) for t in (0.5, 1, 2)]
    assert entropy[0] < entropy[1] < entropy[2]
    ids, probs = lens.final_prediction(logits, 0.0, 2)
    assert ids[0] == 0 and probs.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError):
        lens.final_prediction(logits, -1.0)


# ---------------------------------------------------------------------------------------------------------
# TokenNorm vs BatchNorm
# ---------------------------------------------------------------------------------------------------------

def test_batchnorm_normalises_each_feature_and_tokennorm_each_token(pre_ln):
    _, rec = pre_ln
    x = rec["blocks.1.hook_resid_pre"]
    token, batch = lens.tokennorm_statistics(x), lens.batchnorm_statistics(x)
    assert (token.axis, batch.axis) == (1, 0)
    assert token.mean.shape == token.std.shape == (rec.n_tokens,)
    assert batch.mean.shape == batch.std.shape == (rec.config.d_model,)
    np.testing.assert_allclose(token.normalized.mean(axis=1), 0, atol=1e-6)  # every token row: mean 0
    np.testing.assert_allclose(batch.normalized.mean(axis=0), 0, atol=1e-6)  # every feature column: mean 0
    np.testing.assert_allclose(token.normalized.std(axis=1), 1, atol=1e-3)
    # ... and not the other way round: the other axis is not centred
    assert np.abs(token.normalized.mean(axis=0)).max() > 1e-2
    assert np.abs(batch.normalized.mean(axis=1)).max() > 1e-2
    # TokenNorm's statistics are the model's own
    np.testing.assert_allclose(token.mean, rec["blocks.1.ln1.hook_mean"], atol=1e-5)
    np.testing.assert_allclose(token.std, rec["blocks.1.ln1.hook_scale"][:, 0], rtol=1e-4)


def test_token_norm_view_agrees_with_the_recording(any_ln):
    model, rec = any_ln
    pre = rec.config.norm == "pre"
    sites = [(layer, which) for layer in range(rec.n_layers) for which in ("ln1", "ln2")]
    sites += [(0, "ln_final")] if pre else []
    for layer, which in sites:
        view = lens.token_norm_view(rec, model, layer, which)
        np.testing.assert_allclose(view.before.mean(axis=1), view.mean, atol=1e-5)
        np.testing.assert_allclose(np.sqrt(view.before.var(axis=1) + model.cfg.ln_eps), view.std, rtol=1e-4)
        assert view.max_abs_error < 1e-4
        module = model.ln_final if which == "ln_final" else getattr(model.blocks[layer], which)
        np.testing.assert_allclose(view.gamma, module.weight.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(view.beta, module.bias.detach().numpy(), rtol=1e-6)
    if not pre:
        with pytest.raises(ValueError, match="post-LN"):
            lens.token_norm_view(rec, model, 0, "ln_final")
    with pytest.raises(ValueError):
        lens.token_norm_view(rec, model, rec.n_layers, "ln1")
