"""core/lessons/vision.py (what the image page shows) and core/figures/images.py (its figures), on tiny random ViTs."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from vision_models import tiny_vit

from core.data.images import CLASSES, HELDOUT_SEED, generate_dataset
from core.figures.canvas import image_overlay_spec, pack, unpack
from core.figures.images import SELECTED_COLOUR, class_probability_bars, figure2_strip, image_with_grid, muted
from core.lessons.analysis import rollout
from core.lessons.vision import (ImageRecording, downsample_mask, image_encodings, mask_grid, patch_attention,
                                 patch_token, readout_attention, record_image, rollout_grid, token_of_patch)
from core.model.config import ConfigError, ModelConfig
from core.model.patches import patchify

ROWS = COLS = 8  # 32 x 32 images, 4 x 4 patches
N_PATCHES = ROWS * COLS


@pytest.fixture(scope="module")
def images():
    return generate_dataset(4, HELDOUT_SEED)[0]


@pytest.fixture(scope="module")
def vit():
    return tiny_vit(0, pos_encoding="learned")


@pytest.fixture(scope="module")
def vit_mean():
    return tiny_vit(3, pos_encoding="learned", pooling="mean")


@pytest.fixture(scope="module")
def run(vit, images):
    return record_image(vit, images[0])


# ---------------------------------------------------------------------------------------------------------
# Recording an image
# ---------------------------------------------------------------------------------------------------------

def test_record_image_gives_probabilities_of_the_models_logits(vit, images, run):
    assert run.probabilities.shape == (len(CLASSES),)
    assert run.probabilities.sum() == pytest.approx(1.0)
    logits = run.recording["logits"]
    assert run.predicted == int(np.argmax(logits))
    assert run.predicted_class == CLASSES[run.predicted]
    assert np.array_equal(run.image, images[0])
    assert run.recording.n_tokens == N_PATCHES + 1  # CLS + 64 patches


@pytest.mark.parametrize("bad", [np.zeros((32, 32, 3), dtype=np.float32), np.zeros((32, 16, 3), dtype=np.uint8),
                                 np.zeros((32, 32), dtype=np.uint8)])
def test_record_image_refuses_what_the_model_cannot_take(vit, bad):
    with pytest.raises(ValueError):
        record_image(vit, bad)


def test_a_square_image_of_another_size_is_fitted_pixel_by_pixel_and_says_so(vit):
    small = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    run = record_image(vit, small)
    assert run.image.shape == (32, 32, 3) and run.recording.meta["resized_from"] == 16
    assert np.array_equal(run.image[::2, ::2], small) and np.array_equal(run.image[1::2, 1::2], small)  # nearest
    assert "resized_from" not in record_image(vit, run.image).recording.meta


def test_token_positions_follow_the_cls_token(vit, vit_mean):
    assert token_of_patch(vit.cfg, 0) == 1 and token_of_patch(vit.cfg, 63) == 64
    assert token_of_patch(vit_mean.cfg, 0) == 0 and token_of_patch(vit_mean.cfg, 63) == 63


def test_image_encodings_offer_only_what_patches_can_use():
    assert image_encodings("learned") == ["learned", "none", "sinusoidal"]
    assert image_encodings("none") == ["none", "sinusoidal"]
    assert image_encodings("sinusoidal") == ["sinusoidal", "none"]


# ---------------------------------------------------------------------------------------------------------
# Figure 2: x_n = W p_n + e_n
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding, pe", [("learned", None), ("sinusoidal", None), ("none", None),
                                          ("learned", "none"), ("learned", "sinusoidal")])
@pytest.mark.parametrize("patch", [0, 9, 63])
def test_figure2_identity_matches_the_recording(images, encoding, pe, patch):
    model = tiny_vit(1, pos_encoding=encoding)
    run = record_image(model, images[1], pe=pe)
    token = patch_token(model, run, patch)
    rec = run.recording
    n = patch + 1
    assert token.token == n and (token.row, token.col) == divmod(patch, COLS)
    # vec(p_n) is the model's own patchify of the image, and the pixels are that square of the image
    image = torch.tensor(images[1]).permute(2, 0, 1)[None].float() / 255
    assert np.allclose(token.vec, patchify(image, 4)[0, patch].numpy())
    r, c = divmod(patch, COLS)
    assert np.allclose(token.pixels, images[1][4 * r:4 * r + 4, 4 * c:4 * c + 4] / 255)
    # W p_n + b recomputed from the weights is row n of hook_embed; e_n is row n of hook_pos_embed
    with torch.no_grad():
        w_p = (model.patch_embed.weight @ torch.tensor(token.vec) + model.patch_embed.bias).numpy()
    assert np.allclose(w_p, rec["hook_embed"][n], atol=1e-5)
    assert np.array_equal(token.embedded, rec["hook_embed"][n])
    assert np.array_equal(token.position, rec["hook_pos_embed"][n])
    # x_n = W p_n + e_n is what enters block 0
    assert np.allclose(token.embedded + token.position, rec["blocks.0.hook_resid_pre"][n], atol=1e-6)
    assert np.array_equal(token.token_vector, rec["blocks.0.hook_resid_pre"][n])
    assert token.embed_error < 1e-5 and token.sum_error < 1e-6
    if (pe or encoding) == "none":
        assert not token.position.any()  # no position encoding: e_n = 0
    if encoding == "learned" and pe is None:
        assert np.allclose(token.position, model.pos_embed.weight[n].detach().numpy())


def test_a_standardising_model_reads_each_channel_at_mean_0(images):
    model = tiny_vit(2, image_norm=True)
    run = record_image(model, images[2])
    read = run.recording["hook_image_norm"]  # [C, H, W], what the patch embedding read
    image = images[2].transpose(2, 0, 1) / 255.0
    eps = 0.05**2
    expected = (image - image.mean(axis=(1, 2), keepdims=True)) / np.sqrt(image.var(axis=(1, 2), keepdims=True) + eps)
    assert np.allclose(read, expected, atol=1e-5)
    assert np.allclose(read.mean(axis=(1, 2)), 0, atol=1e-5)
    spread = np.sqrt(image.var(axis=(1, 2)))
    assert np.allclose(read.std(axis=(1, 2)), spread / np.sqrt(spread**2 + eps), atol=1e-4)  # under 1 by eps
    # figure 2 shows the picture's own pixels, and vec(p_n) is the standardised patch the model read
    token = patch_token(model, run, 9)
    r, c = divmod(9, COLS)
    assert np.allclose(token.pixels, images[2][4 * r:4 * r + 4, 4 * c:4 * c + 4] / 255)
    assert np.allclose(token.vec, patchify(torch.tensor(read)[None], 4)[0, 9].numpy())
    assert token.embed_error < 1e-5 and token.sum_error < 1e-6
    # the same shape in other colours reads the same up to each channel's sign
    inverted = record_image(model, 255 - images[2]).recording["hook_image_norm"]
    assert np.allclose(inverted, -read, atol=1e-4)


def test_a_flat_image_standardises_to_zeros_not_noise():
    model = tiny_vit(2, image_norm=True)
    flat = np.full((32, 32, 3), (200, 30, 90), dtype=np.uint8)
    assert np.abs(record_image(model, flat).recording["hook_image_norm"]).max() < 1e-4  # float rounding only


def test_image_norm_needs_patches():
    with pytest.raises(ConfigError, match="image patches"):
        ModelConfig(vocab_size=10, image_norm=True)


def test_figure2_refuses_a_patch_that_does_not_exist(vit, run):
    with pytest.raises(ValueError, match="64 patches"):
        patch_token(vit, run, 64)


# ---------------------------------------------------------------------------------------------------------
# Attention on the patch grid
# ---------------------------------------------------------------------------------------------------------

def test_cls_attention_is_row_zero_on_the_8x8_grid(vit, run):
    attention = readout_attention(run)
    m, h = vit.cfg.n_layers, vit.cfg.n_heads
    assert attention.grid.shape == (m, h, ROWS, COLS)
    assert attention.cls_self.shape == (m, h)
    patterns = run.recording.patterns()
    assert np.allclose(attention.grid.reshape(m, h, -1), patterns[:, :, 0, 1:])
    assert np.allclose(attention.grid.sum(axis=(2, 3)) + attention.cls_self, 1.0, atol=1e-5)
    # patch (r, c) sits at grid[r, c]: patch 9 = row 1, column 1 = token 10
    assert attention.grid[1, 0, 1, 1] == pytest.approx(patterns[1, 0, 0, 10])


def test_mean_pooling_model_uses_the_mean_over_queries(vit_mean, images):
    run = record_image(vit_mean, images[0])
    attention = readout_attention(run)
    assert attention.cls_self is None and "mean" in attention.source and attention.notes
    patterns = run.recording.patterns()
    assert run.recording.n_tokens == N_PATCHES
    assert attention.grid.shape == (2, 2, ROWS, COLS)
    assert np.allclose(attention.grid.reshape(2, 2, -1), patterns.mean(axis=2))
    assert np.allclose(attention.grid.sum(axis=(2, 3)), 1.0, atol=1e-5)
    grid, share, what = rollout_grid(run)
    assert share is None and "mean" in what
    assert grid.sum() == pytest.approx(1.0)
    weights, to_cls = patch_attention(run, 0, 1, 5)
    assert to_cls is None and np.allclose(weights.reshape(-1), patterns[0, 1, 5])


def test_patch_attention_is_the_patchs_query_row(run):
    weights, to_cls = patch_attention(run, 1, 0, 9)
    row = run.recording.pattern(1)[0, 10]
    assert weights.shape == (ROWS, COLS)
    assert to_cls == pytest.approx(row[0])
    assert np.allclose(weights.reshape(-1), row[1:])
    assert weights.sum() + to_cls == pytest.approx(1.0, abs=1e-5)


def test_rollout_rows_sum_to_one_and_the_grid_is_row_zero(run):
    rolled = rollout(run.recording.patterns())
    assert np.allclose(rolled.sum(axis=-1), 1.0)
    grid, share, _ = rollout_grid(run)
    assert grid.shape == (ROWS, COLS)
    assert np.allclose(grid.reshape(-1), rolled[0, 1:]) and share == pytest.approx(rolled[0, 0])
    assert grid.sum() + share == pytest.approx(1.0)
    from_patch, share_patch, what = rollout_grid(run, source=9)
    assert np.allclose(from_patch.reshape(-1), rolled[10, 1:]) and "patch 9" in what
    assert from_patch.sum() + share_patch == pytest.approx(1.0)


def _with_patterns(run: ImageRecording, pattern: np.ndarray) -> ImageRecording:
    """The same run with every head's pattern replaced by `pattern` [N, N]."""
    rec = run.recording
    tensors = dict(rec.tensors)
    for layer in range(rec.n_layers):
        name = f"blocks.{layer}.attn.hook_pattern"
        tensors[name] = torch.tensor(np.broadcast_to(pattern, tensors[name].shape).copy())
    return ImageRecording(type(rec)(rec.config, tensors, dict(rec.meta)), run.image, run.probabilities)


def test_rollout_of_identity_attention_is_the_identity(run):
    n = run.recording.n_tokens
    assert np.allclose(rollout(np.broadcast_to(np.eye(n), (3, 2, n, n))), np.eye(n))
    grid, share, _ = rollout_grid(_with_patterns(run, np.eye(n)))
    assert share == pytest.approx(1.0) and np.allclose(grid, 0.0)  # CLS draws only on itself
    from_patch, share_patch, _ = rollout_grid(_with_patterns(run, np.eye(n)), source=9)
    assert share_patch == pytest.approx(0.0) and from_patch[1, 1] == pytest.approx(1.0)
    assert from_patch.sum() == pytest.approx(1.0)


def test_rollout_of_uniform_attention_is_uniform(run):
    """Uniform attention mixes every token equally. Without the residual term the rollout is exactly uniform;
    with rollout's residual ½ I per layer, M layers leave 2^-M on the token itself and spread the rest evenly:
    rollout = (1 - 2^-M) U + 2^-M I, so every *other* token (every patch, seen from CLS) gets the same share."""
    n, m = run.recording.n_tokens, run.recording.n_layers
    uniform = np.full((n, n), 1.0 / n)
    stacked = np.broadcast_to(uniform, (3, 2, n, n))
    assert np.allclose(rollout(stacked, residual_weight=0.0), 1.0 / n)
    assert np.allclose(rollout(stacked), (1 - 0.5 ** 3) / n + 0.5 ** 3 * np.eye(n))
    grid, share, _ = rollout_grid(_with_patterns(run, uniform))
    assert np.allclose(grid, (1 - 0.5 ** m) / n)  # the same on every patch
    assert share == pytest.approx((1 - 0.5 ** m) / n + 0.5 ** m)
    assert grid.sum() + share == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------------------

def test_a_drawing_becomes_a_32x32_image():
    cells = np.zeros((16, 16), dtype=bool)
    cells[3, 5] = True
    image = mask_grid(cells, 32, ink=(255, 0, 0), background=(0, 0, 9))
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8
    assert (image[6:8, 10:12] == (255, 0, 0)).all()
    assert (image[0, 0] == (0, 0, 9)).all() and (image == (255, 0, 0)).all(axis=-1).sum() == 4
    with pytest.raises(ValueError):
        mask_grid(np.zeros((5, 5), dtype=bool), 32)


def test_a_shape_mask_downsamples_to_the_drawing_grid():
    mask = np.zeros((32, 32), dtype=bool)
    mask[8:16, 0:4] = True
    cells = downsample_mask(mask, 16)
    assert cells.shape == (16, 16) and cells.sum() == 8 and cells[4:8, 0:2].all()


# ---------------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------------

def _heatmaps(fig: go.Figure) -> list:
    return [trace for trace in fig.data if trace.type == "heatmap"]


def test_image_with_grid_draws_the_image_the_grid_and_the_numbers(images):
    fig = image_with_grid(images[0], 4, first_token=1, selected=9)
    assert any(trace.type == "image" for trace in fig.data)
    lines = [shape for shape in fig.layout.shapes if shape.type == "line"]
    assert len(lines) == 14  # 7 inner vertical + 7 inner horizontal lines
    outline = [shape for shape in fig.layout.shapes if shape.type == "rect"]
    assert len(outline) == 1 and (outline[0].x0, outline[0].y0) == (4, 4)
    numbers = [trace for trace in fig.data if trace.type == "scatter" and trace.mode == "text"]
    assert sorted(int(t) for trace in numbers for t in trace.text) == list(range(1, 65))
    clickable = next(trace for trace in fig.data if trace.type == "scatter" and trace.name == "patches")
    assert [int(c[0]) for c in clickable.customdata] == list(range(1, 65))
    assert (clickable.x[10], clickable.y[10]) == (10, 6)  # patch 10 = row 1, column 2: centre (10, 6)
    assert list(fig.layout.yaxis.range) == [32, 0]  # y down, as in the image


def test_patch_numbers_are_dark_on_light_corners_and_light_on_dark_ones():
    """White numbers on a white shape could not be read: each number takes the ink that contrasts with the corner
    of its patch it is drawn in (a light square on dark: numbers 6, 7, 10, 11 sit on it)."""
    image = np.full((32, 32, 3), 20, np.uint8)
    image[8:24, 8:24] = 240  # patches (1, 1), (1, 2), (2, 1), (2, 2) of the 4 x 4 grid of 8-pixel patches
    fig = image_with_grid(image, 8, first_token=1)
    texts = [trace for trace in fig.data if trace.type == "scatter" and trace.mode == "text"]
    inks = {int(t): trace.textfont.color for trace in texts for t in trace.text}
    dark_text = {n for n, ink in inks.items() if ink != "white"}
    assert dark_text == {6, 7, 10, 11} and len(inks) == 16
    assert all("white" in trace.textfont.shadow for trace in texts if trace.textfont.color != "white")


def test_attention_overlay_is_the_canvas_chart_over_the_grey_image(images):
    """One map: the exact weights in patch order, on 0 … its largest, over the image in grey, transparent at 0;
    the chosen patch outlined, hover numbered from the first patch's token n."""
    grid = np.random.default_rng(0).dirichlet(np.ones(64)).reshape(8, 8)
    spec = unpack(pack(image_overlay_spec(images[0], grid, 1, selected_patch=10)))
    assert np.array_equal(spec["arrays"]["weight"], grid.astype(np.float32)) and spec["color"] == "weight"
    assert spec["zmax"] == pytest.approx(grid.max()) and spec["colorbar_title"] == "weight"
    assert np.array_equal(spec["arrays"]["backdrop"], muted(images[0])[..., 0])
    assert spec["colorscale"][0][1].endswith(", 0)")  # 0 is transparent: the image shows through
    assert spec["outline"] == {"axis": "cell", "at": [1, 2], "color": SELECTED_COLOUR}  # patch 10: row 1, column 2
    assert spec["patches"] == {"first": 1, "cols": 8} and "tiles" not in spec and spec["ticks"] is False


def test_every_layer_and_head_is_tiled_each_on_its_own_scale(images):
    grids = np.random.default_rng(1).random((3, 2, 8, 8)).astype(np.float32)
    extra = np.arange(6, dtype=np.float32).reshape(3, 2)
    spec = unpack(pack(image_overlay_spec(images[0], grids, 0, selected_head=(1, 1), extra=extra, extra_name="self")))
    weight, shown = spec["arrays"]["weight"], spec["arrays"]["shown"]
    assert weight.shape == shown.shape == (24, 16) and spec["tiles"]["selected"] == [1, 1]
    for layer in range(3):
        for head in range(2):
            tile = np.s_[8 * layer:8 * (layer + 1), 8 * head:8 * (head + 1)]
            assert np.array_equal(weight[tile], grids[layer, head])  # tile (layer, head) holds that head's map
            assert shown[tile].max() == pytest.approx(1.0)  # each panel scaled to its own largest weight
            assert np.all(spec["arrays"]["extra"][tile] == extra[layer, head])
    assert spec["colorbar_title"] is None and [f["name"] for f in spec["fields"]] == ["weight", "self"]
    with pytest.raises(ValueError, match="square grid"):
        image_overlay_spec(images[0], grids[..., :4], 0)


@pytest.mark.parametrize("notation, shape", [("paper", (32, 1)), ("common", (1, 32))])
def test_figure2_strip_has_the_patch_and_four_vectors(vit, run, notation, shape):
    token = patch_token(vit, run, 9)
    fig = figure2_strip(token.pixels, token.vec, token.embedded, token.position, token.token_vector, token.token,
                        notation=notation)
    assert fig.data[0].type == "image"
    heat = _heatmaps(fig)
    assert len(heat) == 4
    vec_shape = (48, 1) if notation == "paper" else (1, 48)
    assert np.asarray(heat[0].z).shape == vec_shape
    assert all(np.asarray(h.z).shape == shape for h in heat[1:])
    assert np.allclose(np.asarray(heat[3].z).reshape(-1), token.token_vector)
    assert heat[1].zmax == heat[2].zmax == heat[3].zmax  # one colour scale for W p, e and x


def test_class_probability_bars(run):
    fig = class_probability_bars(run.probabilities, CLASSES, true_label=2)
    bar = fig.data[0]
    assert bar.type == "bar" and len(bar.x) == len(CLASSES)
    assert bar.y[2].endswith("✓")
    colours = list(bar.marker.color)
    assert len(set(colours)) == 2 and colours.count(colours[run.predicted]) == 1


def test_figure2_draws_a_standardised_patch_on_a_signed_scale(images):
    model = tiny_vit(2, image_norm=True)
    token = patch_token(model, record_image(model, images[2]), 9)
    assert token.vec.min() < 0  # standardised: numbers of both signs, not pixels in [0, 1]
    fig = figure2_strip(token.pixels, token.vec, token.embedded, token.position, token.token_vector, token.token,
                        standardised=True)
    vec = _heatmaps(fig)[0]
    assert vec.zmin == -vec.zmax == -np.abs(token.vec).max() and vec.colorscale != _heatmaps(figure2_strip(
        token.pixels, token.vec, token.embedded, token.position, token.token_vector, token.token))[0].colorscale
    assert any("standardised" in (a.text or "") for a in fig.layout.annotations)
