"""The position-encoding lesson's numbers (core/lessons/position_lab.py) against the model's own, and the properties the
lessons teach: the permutation demonstration (seed 001 §3) and the incremental property (§4.1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_model

from core.figures.positions import bias_heatmaps, permutation_grid, similarity_heatmap
from core.lessons import position_lab as lab
from core.model.config import POSITION_ENCODINGS
from core.model.masks import MaskPreset, flip_cells
from core.model.positions import alibi_slopes

torch.set_num_threads(1)
IDS = [2, 7, 11, 5, 9, 13, 8, 21, 6]


def recording(model, ids=IDS, **kwargs):
    with torch.no_grad():
        return model(torch.tensor([ids]), record=True, **kwargs).recording


def is_toeplitz(matrix: np.ndarray, atol: float = 1e-5) -> bool:
    """Every diagonal constant: the value depends on n - m alone."""
    n = matrix.shape[-1]
    return all(np.allclose(np.diagonal(matrix, d, -2, -1), np.diagonal(matrix, d, -2, -1)[..., :1], atol=atol)
               for d in range(-(n - 1), n))


# ---------------------------------------------------------------------------------------------------------
# Tables and similarity
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["sinusoidal", "learned"])
def test_additive_tables_are_what_the_model_adds(encoding):
    model = tiny_model(pos_encoding=encoding)
    table = lab.encoding_table(model, encoding, len(IDS))
    np.testing.assert_allclose(table, recording(model)["hook_pos_embed"], atol=1e-6)


def test_rope_table_is_the_unit_pair_turned_by_n_theta():
    model = tiny_model(pos_encoding="rope")
    k, n = model.cfg.head_dim, 20
    table = lab.encoding_table(model, "rope", n)
    assert table.shape == (n, k)
    theta = model.cfg.rope_base ** (-np.arange(0, k, 2) / k)
    np.testing.assert_allclose(table[:, 0::2], np.cos(np.arange(n)[:, None] * theta), atol=1e-5)
    np.testing.assert_allclose(table[:, 1::2], np.sin(np.arange(n)[:, None] * theta), atol=1e-5)


def test_learned_table_needs_a_learned_model():
    model = tiny_model(pos_encoding="rope")
    assert lab.table_encodings(model) == ["sinusoidal", "rope"]
    with pytest.raises(ValueError, match="no table"):
        lab.encoding_table(model, "learned", 8)
    with pytest.raises(ValueError, match="positions"):
        lab.encoding_table(model, "sinusoidal", 0)


@pytest.mark.parametrize("encoding", ["sinusoidal", "rope"])
def test_fixed_encodings_are_alike_by_distance_alone(encoding):
    model = tiny_model(pos_encoding="rope")
    similarity = lab.position_similarity(lab.encoding_table(model, encoding, 32))
    np.testing.assert_allclose(similarity, similarity.T)
    assert is_toeplitz(similarity, atol=1e-4)
    assert set(lab.most_similar(similarity, 10, 2)) == {9, 11}
    if encoding == "rope":  # Σ_i cos(0) over the K/2 pairs
        np.testing.assert_allclose(np.diagonal(similarity), model.cfg.head_dim / 2, atol=1e-4)


def test_learned_similarity_is_the_gram_matrix_of_the_embeddings():
    model = tiny_model(pos_encoding="learned")
    weight = model.pos_embed.weight.detach().numpy()[:12].astype(np.float64)
    np.testing.assert_allclose(lab.position_similarity(lab.encoding_table(model, "learned", 12)), weight @ weight.T,
                               atol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["q", "k"])
def test_rope_pair_is_a_rotation_by_n_theta(which):
    model = tiny_model(pos_encoding="rope")
    pair = lab.rope_pair(recording(model), layer=1, head=1, pair=2, which=which)
    assert pair.max_error < 1e-5 and pair.length_change < 1e-5
    turned = np.arctan2(pair.after[:, 1], pair.after[:, 0]) - np.arctan2(pair.before[:, 1], pair.before[:, 0])
    expected = np.arange(len(IDS)) * pair.theta
    np.testing.assert_allclose(np.angle(np.exp(1j * (turned - expected))), 0, atol=1e-4)  # equal modulo 2π
    np.testing.assert_allclose(pair.theta, model.cfg.rope_base ** (-4 / model.cfg.head_dim))


def test_rope_pair_of_an_ablation_and_its_errors():
    model = tiny_model(pos_encoding="learned")
    with pytest.raises(ValueError, match="RoPE"):
        lab.rope_pair(recording(model), 0, 0, 0)
    pair = lab.rope_pair(recording(model, pe="rope"), 0, 0, 0)  # a learned model run with RoPE switched on
    assert pair.max_error < 1e-5 and pair.theta == pytest.approx(1.0)
    with pytest.raises(ValueError, match="pair"):
        lab.rope_pair(recording(model, pe="rope"), 0, 0, model.cfg.head_dim // 2)


# ---------------------------------------------------------------------------------------------------------
# Biases
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["alibi", "relative"])
def test_biases_are_the_ones_the_model_adds(encoding):
    model = tiny_model(pos_encoding=encoding)
    rec = recording(model)
    for layer in range(model.cfg.n_layers):
        bias = lab.attention_bias(model, encoding, len(IDS), layer)
        recorded = rec[f"blocks.{layer}.attn.hook_pos_bias"]
        allowed = ~np.isneginf(rec.scores(layer)[0])
        np.testing.assert_allclose(bias[:, allowed], recorded[:, allowed], atol=1e-6)
        assert np.isnan(bias[:, ~allowed]).all()  # hidden by the causal mask: never used
        assert is_toeplitz(np.nan_to_num(bias, nan=0.0), atol=1e-6)


def test_alibi_by_offset_is_minus_slope_times_distance():
    model = tiny_model(pos_encoding="alibi", mask="none", head="masked_token")
    offsets, values = lab.bias_by_offset(lab.attention_bias(model, "alibi", 6))
    np.testing.assert_array_equal(offsets, np.arange(-5, 6))  # no mask: both sides
    np.testing.assert_allclose(values, -alibi_slopes(model.cfg.n_heads).numpy()[:, None] * np.abs(offsets), atol=1e-6)
    causal = tiny_model(pos_encoding="alibi")
    offsets, _ = lab.bias_by_offset(lab.attention_bias(causal, "alibi", 6))
    np.testing.assert_array_equal(offsets, np.arange(-5, 1))  # causal: only keys at or before the query


def test_relative_bias_is_per_layer_and_needs_a_relative_model():
    model = tiny_model(pos_encoding="relative")
    assert not np.allclose(np.nan_to_num(lab.attention_bias(model, "relative", 8, 0)),
                           np.nan_to_num(lab.attention_bias(model, "relative", 8, 1)))
    with pytest.raises(ValueError, match="trained"):
        lab.attention_bias(tiny_model(pos_encoding="alibi"), "relative", 8)
    with pytest.raises(ValueError, match="no bias"):
        lab.attention_bias(model, "rope", 8)


# ---------------------------------------------------------------------------------------------------------
# The permutation demonstration
# ---------------------------------------------------------------------------------------------------------

SWAPPED = [2, 7, 8, 5, 9, 13, 11, 21, 6]  # IDS with the tokens at positions 2 and 6 swapped


def test_find_permutation():
    permutation = lab.find_permutation(IDS, SWAPPED)
    assert [IDS[i] for i in permutation] == SWAPPED
    assert list(lab.find_permutation([4, 4, 5], [5, 4, 4])) == [2, 0, 1]  # equal tokens matched in order
    assert lab.find_permutation(IDS, IDS[:-1] + [3]) is None
    with pytest.raises(ValueError, match="same tokens"):
        lab.permutation_test(tiny_model(), IDS, IDS[:-1], "none", "none")


@pytest.mark.parametrize("pe", POSITION_ENCODINGS)
def test_without_position_encoding_or_mask_the_representations_are_permuted(pe):
    """Seed 001 §3: the same up to permutation, to float rounding, whatever encoding the model was trained with."""
    model = tiny_model(pos_encoding=pe)
    result = lab.permutation_test(model, IDS, SWAPPED, "none", "none")
    assert result.equivariant() and result.max_change < 1e-5
    assert result.change.shape == (model.cfg.n_layers + 1, len(IDS))


@pytest.mark.parametrize("pe", [pe for pe in POSITION_ENCODINGS if pe != "none"])
def test_a_position_encoding_tells_the_orders_apart(pe):
    model = tiny_model(pos_encoding=pe)
    result = lab.permutation_test(model, IDS, SWAPPED, "none", pe)
    assert not result.equivariant() and result.max_change > 1e-2


def test_the_causal_mask_alone_leaks_order():
    """No encoding, but a causal mask: the tokens after the first swapped one see other sets of tokens."""
    model = tiny_model(pos_encoding="none")
    result = lab.permutation_test(model, IDS, SWAPPED, "causal", "none")
    assert not result.equivariant()
    assert result.change[:, :2].max() < 1e-5  # the shared prefix [2, 7] is untouched
    assert result.change[-1, 2:].min() > 1e-3  # every later token differs at the last layer


# ---------------------------------------------------------------------------------------------------------
# The incremental property
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pe", POSITION_ENCODINGS)
def test_under_a_causal_mask_appending_changes_nothing_earlier(pe):
    model = tiny_model(pos_encoding=pe)
    change = lab.incremental_change(model, IDS)
    assert change.shape == (model.cfg.n_layers + 1, len(IDS) - 1)
    assert change.max() < lab.ROUNDING
    for preset in (MaskPreset("window", width=3), MaskPreset("block-sparse", width=3), MaskPreset("random", seed=1)):
        assert lab.incremental_change(model, IDS, preset.build(len(IDS)), pe="none").max() < lab.ROUNDING


def test_without_a_mask_appending_changes_every_earlier_token():
    model = tiny_model(pos_encoding="learned")
    change = lab.incremental_change(model, IDS, "none")
    assert (change[0] == 0).all()  # the embeddings are per token
    assert change[1:].min() > 1e-4


def test_one_cell_that_sees_the_future_changes_exactly_the_tokens_it_reaches():
    """A causal mask plus the cell (2, last): token 2 reads the appended token, and from layer 1 on the tokens that
    read token 2 change too; tokens 0 and 1 read neither and stay put."""
    model = tiny_model(pos_encoding="rope")
    n = len(IDS)
    mask = flip_cells(MaskPreset("causal").build(n), {(2, n - 1)})
    change = lab.incremental_change(model, IDS, mask)
    assert change[:, :2].max() < lab.ROUNDING
    assert change[1, 2] > 1e-3 and change[1, 3:].max() < lab.ROUNDING  # layer 0: only token 2 sees the new token
    assert change[2, 3:].min() > 1e-4  # layer 1: every token after 2 reads token 2's changed stream
    with pytest.raises(ValueError, match="two tokens"):
        lab.incremental_change(model, IDS[:1])


# ---------------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------------

def test_bias_and_permutation_figures_keep_the_numbers():
    model = tiny_model(pos_encoding="alibi")
    bias = lab.attention_bias(model, "alibi", 5)
    fig = bias_heatmaps(bias)
    assert len(fig.data) == model.cfg.n_heads
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert np.isnan(z[0, 1]) and z[4, 0] == pytest.approx(bias[0, 4, 0], abs=1e-4)  # hidden cells stay blank
    wrapped = bias_heatmaps(np.concatenate([bias, bias]), cols=2)  # presenter mode: 4 heads, 2 a row
    assert [(trace.xaxis, trace.yaxis) for trace in wrapped.data] == [("x", "y"), ("x2", "y2"), ("x3", "y3"), ("x4", "y4")]
    assert wrapped.layout.yaxis3.domain[1] < wrapped.layout.yaxis.domain[0]  # heads 2, 3 on a second row
    assert wrapped.layout.xaxis2.domain == wrapped.layout.xaxis4.domain  # in the same columns as heads 0, 1
    assert wrapped.layout.height > fig.layout.height
    changes = [np.zeros((3, 4)), np.full((3, 4), 0.5)]
    grid = permutation_grid(changes, ["a", "b"], ["w", "x", "y", "z"], ["embed", "after L0", "after L1"])
    assert [trace.zmax for trace in grid.data] == [0.5, 0.5]  # one shared scale: white means the same in both


def test_similarity_scale_fits_the_values_and_the_plot_is_as_tall_as_its_colour_bar():
    model = tiny_model(pos_encoding="rope")
    positive = lab.position_similarity(lab.encoding_table(model, "sinusoidal", 64))
    assert positive.min() > 0
    heatmap = similarity_heatmap(positive).data[0]
    assert heatmap.colorscale != similarity_heatmap(-positive + positive.mean()).data[0].colorscale
    assert (heatmap.zmin, heatmap.zmax) == pytest.approx((positive.min(), positive.max()), abs=1e-6)
    assert all(float(colour.strip("rgb()").split(",")[2]) > 100 for _, colour in heatmap.colorscale)  # all blue
    signed = positive - positive.mean()  # both sides of 0: red-blue, centred
    diverging = similarity_heatmap(signed).data[0]
    assert diverging.zmin == -diverging.zmax == pytest.approx(-abs(signed).max(), abs=1e-6)
    layout = similarity_heatmap(positive).layout
    assert layout.yaxis.scaleanchor is None  # square cells would shrink the plot below its colour bar
