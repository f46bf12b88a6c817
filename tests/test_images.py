"""Tests for the shape generator, ViT patching and safe upload loading.

Every file fed to ``load_image`` is generated here with Pillow or raw bytes.
"""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
import torch
from PIL import ExifTags, Image, features
from upload_files import png_chunk, png_header

from core.data.images import (CLASSES, DRAW_CELLS, HELDOUT_SEED, IMAGE_SIZE, KIND_MIX, KINDS, NOTHING, PEN_MIX,
                              PEN_SHARE, POLISH_MIX, SKETCH_MIX, TEST_SETS, TRAIN_SEED, ShapeSample, generate_dataset,
                              generate_sample, generate_test_set, mask_grid, template_cells)
from core.data import images
from core.model.patches import images_to_tensor, mask_to_patch_fraction, patch_grid, patchify, unpatchify
from core.serving.image_io import MAX_UPLOAD_BYTES, ImageInputError, LoadedImage, load_image

RED, BLUE, GREEN, WHITE = (255, 0, 0), (0, 0, 255), (0, 255, 0), (255, 255, 255)


# --- patches -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "channels", "height", "width", "patch"),
    [(2, 3, 32, 32, 4), (1, 1, 8, 12, 4), (3, 3, 32, 32, 8), (2, 2, 6, 10, 2), (1, 3, 5, 5, 1)],
)
def test_patchify_round_trip(
    batch: int, channels: int, height: int, width: int, patch: int
) -> None:
    images = torch.randn(batch, channels, height, width, generator=torch.Generator().manual_seed(0))
    patches = patchify(images, patch)
    rows, cols = patch_grid(height, width, patch)
    assert patches.shape == (batch, rows * cols, channels * patch * patch)
    assert torch.equal(unpatchify(patches, patch, channels, height, width), images)


def test_patch_order_is_row_major_and_each_patch_is_its_image_slice() -> None:
    images = torch.randn(2, 3, 8, 12, generator=torch.Generator().manual_seed(1))
    patch = 4
    patches = patchify(images, patch)
    rows, cols = patch_grid(8, 12, patch)
    for row in range(rows):
        for col in range(cols):
            piece = images[:, :, row * patch : (row + 1) * patch, col * patch : (col + 1) * patch]
            assert torch.equal(patches[:, row * cols + col], piece.reshape(2, -1))


def test_patchify_rejects_sizes_not_divisible_by_patch() -> None:
    with pytest.raises(ValueError, match="not divisible by patch size 4"):
        patchify(torch.zeros(1, 3, 32, 30), 4)
    with pytest.raises(ValueError, match="not divisible"):
        patch_grid(30, 32, 4)


def test_unpatchify_rejects_mismatched_shape() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        unpatchify(torch.zeros(1, 63, 48), 4, 3, 32, 32)


def test_images_to_tensor_scales_and_reorders() -> None:
    images = np.zeros((2, 4, 6, 3), dtype=np.uint8)
    images[1, 2, 5] = (255, 51, 0)
    tensor = images_to_tensor(images)
    assert tensor.shape == (2, 3, 4, 6) and tensor.dtype == torch.float32
    assert torch.allclose(tensor[1, :, 2, 5], torch.tensor([1.0, 0.2, 0.0]))
    assert tensor.sum() == pytest.approx(1.2)
    with pytest.raises(ValueError, match="uint8"):
        images_to_tensor(images.astype(np.float32))


def test_mask_to_patch_fraction() -> None:
    mask = np.zeros((8, 8), dtype=bool)
    mask[0:4, 0:4] = True  # all of patch 0
    mask[4, 4:6] = True  # 2 of 16 pixels of patch 3
    fraction = mask_to_patch_fraction(mask, 4)
    assert fraction.shape == (4,)
    np.testing.assert_allclose(fraction, [1.0, 0.0, 0.0, 2 / 16])
    _, _, masks = generate_dataset(5, seed=3)
    for sample_mask in masks:
        fraction = mask_to_patch_fraction(sample_mask, 4)
        assert fraction.sum() * 16 == pytest.approx(sample_mask.sum())
        assert ((fraction >= 0) & (fraction <= 1)).all()


# --- synthetic shapes ----------------------------------------------------------


def test_generate_dataset_shapes_and_types() -> None:
    images, labels, masks = generate_dataset(12, seed=TRAIN_SEED)
    assert images.shape == (12, IMAGE_SIZE, IMAGE_SIZE, 3) and images.dtype == np.uint8
    assert labels.shape == (12,) and labels.dtype == np.int64
    assert masks.shape == (12, IMAGE_SIZE, IMAGE_SIZE) and masks.dtype == np.bool_
    assert ((labels >= 0) & (labels < len(CLASSES))).all()


def test_generator_is_deterministic_by_seed_and_ignores_global_state() -> None:
    np.random.seed(123)
    first = generate_dataset(20, seed=TRAIN_SEED)
    np.random.seed(456)
    second = generate_dataset(20, seed=TRAIN_SEED)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    sample = generate_sample(np.random.default_rng(TRAIN_SEED))
    assert isinstance(sample, ShapeSample)
    np.testing.assert_array_equal(sample.image, first[0][0])
    np.testing.assert_array_equal(sample.mask, first[2][0])
    assert sample.label == first[1][0]


def test_different_seeds_give_different_data() -> None:
    train_images, _, _ = generate_dataset(20, seed=TRAIN_SEED)
    heldout_images, _, _ = generate_dataset(20, seed=HELDOUT_SEED)
    assert not np.array_equal(train_images, heldout_images)


def test_labels_are_roughly_balanced() -> None:
    _, labels, _ = generate_dataset(600, seed=TRAIN_SEED)
    counts = np.bincount(labels, minlength=len(CLASSES))
    expected = len(labels) / len(CLASSES)
    assert (counts > 0.6 * expected).all() and (counts < 1.4 * expected).all()


def test_masks_are_plausible_and_objects_stand_out() -> None:
    images, labels, masks = generate_dataset(120, seed=HELDOUT_SEED)
    for image, label, mask in zip(images.astype(np.float64), labels, masks):
        if label == NOTHING:
            assert not mask.any(), "an empty image has no object"
            continue
        assert 20 <= mask.sum() <= 0.8 * IMAGE_SIZE * IMAGE_SIZE, "every object covers a visible area, not all"
        object_colour = image[mask].mean(axis=0)
        background_colour = np.median(image[~mask], axis=0)
        assert np.linalg.norm(object_colour - background_colour) > 60, "the object stands out from its background"


def test_the_training_mix_holds_every_kind_and_the_empty_class() -> None:
    rng = np.random.default_rng(TRAIN_SEED)
    samples = [generate_sample(rng) for _ in range(600)]
    kinds = np.array([KINDS.index(s.kind) for s in samples])
    np.testing.assert_allclose(np.bincount(kinds, minlength=len(KINDS)) / len(samples), KIND_MIX, atol=0.06)
    assert sum(s.label == NOTHING for s in samples) > 0.6 * len(samples) / len(CLASSES)


def _blocks_are_cells(image: np.ndarray) -> bool:
    """Whether the image is made of 2 x 2 blocks of one colour each, as the page's drawing grid paints."""
    scale = IMAGE_SIZE // DRAW_CELLS
    blocks = image.reshape(DRAW_CELLS, scale, DRAW_CELLS, scale, 3)
    return bool((blocks == blocks[:, :1, :, :1]).all())


def test_drawn_images_are_two_colours_on_the_drawing_grid() -> None:
    images, labels, masks = generate_test_set("drawn", 40)
    for image, mask in zip(images, masks):
        assert _blocks_are_cells(image)
        assert len(np.unique(image.reshape(-1, 3), axis=0)) <= 2
        assert _blocks_are_cells(np.repeat(mask[..., None], 3, axis=2))


def test_plain_images_have_a_flat_background() -> None:
    images, labels, masks = generate_test_set("plain", 40)
    for image, mask in zip(images.astype(float), masks):
        grown = mask | np.roll(mask, 1, 0) | np.roll(mask, -1, 0) | np.roll(mask, 1, 1) | np.roll(mask, -1, 1)
        assert image[~grown].std(axis=0).max() < 10, "no clutter, a little noise at most"


def test_off_centre_shapes_touch_a_side_at_the_extremes_of_size() -> None:
    _, labels, masks = generate_test_set("off-centre", 60)
    assert NOTHING not in labels
    for mask in masks:
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        assert min(rows[0], cols[0]) <= 2 or max(rows[-1], cols[-1]) >= IMAGE_SIZE - 3  # a drawing wobbles
        extent = max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1
        assert extent <= 17 or extent >= 22  # small (drawn ones at least seven cells) or large


def test_the_empty_set_is_every_kind_of_background() -> None:
    images, labels, masks = generate_test_set("nothing", 60)
    assert (labels == NOTHING).all() and not masks.any()
    blank_drawing = mask_grid(template_cells(NOTHING))
    flat = [image for image in images if (image == image[0, 0]).all()]
    assert any(np.array_equal(image, blank_drawing) for image in flat), "the page's blank grid"
    assert 0 < len(flat) < len(images), "flat colours, and cluttered backgrounds"


def test_test_sets_are_held_out_and_named() -> None:
    trained_kinds = {kind for kind, share in zip(KINDS, KIND_MIX) if share}
    assert set(TEST_SETS) >= {"mix", *trained_kinds, "off-centre", "nothing"}
    np.testing.assert_array_equal(generate_test_set("mix", 10)[0], generate_dataset(10, HELDOUT_SEED)[0])
    train = {image.tobytes() for image in generate_dataset(2000, TRAIN_SEED)[0]}
    for name in TEST_SETS:
        held_out = [image for image, label in zip(*generate_test_set(name, 50)[:2]) if label != NOTHING]
        assert not any(image.tobytes() in train for image in held_out), name
    with pytest.raises(ValueError, match="unknown test set"):
        generate_test_set("photos", 5)


def test_drawing_templates_are_each_shape_centred_and_a_blank_grid() -> None:
    for label, name in enumerate(CLASSES):
        cells = template_cells(label)
        assert cells.shape == (DRAW_CELLS, DRAW_CELLS)
        if label == NOTHING:
            assert not cells.any()
            continue
        rows, cols = np.flatnonzero(cells.any(axis=1)), np.flatnonzero(cells.any(axis=0))
        assert abs((rows[0] + rows[-1]) / 2 - (DRAW_CELLS - 1) / 2) <= 1, name
        assert abs((cols[0] + cols[-1]) / 2 - (DRAW_CELLS - 1) / 2) <= 1, name
    assert len({template_cells(label).tobytes() for label in range(len(CLASSES))}) == len(CLASSES)


def box_fill(cells: np.ndarray) -> float:
    """The fraction of its bounding box a drawing's ink fills."""
    rows, cols = np.flatnonzero(cells.any(axis=1)), np.flatnonzero(cells.any(axis=0))
    return float(cells[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].mean())


def test_the_circle_template_is_round_and_the_square_template_square() -> None:
    """A student starting from the circle template must see a circle, not a rounded square: it fills pi/4 of its box
    (it filled 0.88 at 22 pixels), the square all of it."""
    assert box_fill(template_cells(CLASSES.index("circle"))) == pytest.approx(np.pi / 4, abs=0.03)
    assert box_fill(template_cells(CLASSES.index("square"))) == 1.0


# --- load_image: helpers --------------------------------------------------------


def _encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


Colour = int | tuple[int, ...]


def _halves(size: tuple[int, int], left: Colour, right: Colour, mode: str = "RGB") -> Image.Image:
    """Image whose left half has colour ``left`` and right half colour ``right``."""
    image = Image.new(mode, size, left)
    image.paste(right, (size[0] // 2, 0, size[0], size[1]))
    return image


def _noise(size: tuple[int, int] = (64, 64)) -> Image.Image:
    pixels = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def _one_bit_png(width: int, height: int, pixel_data: bytes) -> bytes:
    """A 1-bit grayscale PNG whose header claims ``width`` x ``height``."""
    return (
        png_header(width, height, "L", bit_depth=1)
        + png_chunk(b"IDAT", zlib.compress(pixel_data, 9))
        + png_chunk(b"IEND", b"")
    )


def _bomb_png(width: int, height: int) -> bytes:
    """A valid PNG of ``width`` x ``height`` black pixels: tiny file, huge when decoded."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + packed bits
    return _one_bit_png(width, height, row * height)


def _assert_ready(loaded: LoadedImage) -> np.ndarray:
    """Check the model-ready contract and return the array as float for comparisons."""
    assert isinstance(loaded, LoadedImage)
    assert loaded.array.shape == (32, 32, 3) and loaded.array.dtype == np.uint8
    return loaded.array.astype(np.float64)


def _close(pixel: np.ndarray, colour: tuple[int, int, int], tolerance: float = 40) -> bool:
    return bool(np.abs(pixel - np.array(colour)).max() <= tolerance)


# --- load_image: refused inputs ---------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"hello, this is a text file\n", "PNG, JPEG, GIF, BMP or WebP"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\n", "not a supported image"),
        (np.random.default_rng(0).bytes(4096), "not a supported image"),
        (b"\x89PNG\r\n\x1a\n" + bytes(MAX_UPLOAD_BYTES), "limit is 5 MB"),
    ],
    ids=["empty", "text", "pdf", "random-bytes", "too-many-bytes"],
)
def test_non_images_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ImageInputError, match=message):
        load_image(data)


@pytest.mark.parametrize("fmt", ["TIFF", "ICO", "PPM"])
def test_other_formats_are_refused_naming_allowed_ones(fmt: str) -> None:
    with pytest.raises(ImageInputError, match="PNG, JPEG, GIF, BMP or WebP"):
        load_image(_encode(_noise(), fmt))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_files_are_refused(fmt: str) -> None:
    data = _encode(_noise(), fmt)
    for cut in (len(data) // 2, 60):
        with pytest.raises(ImageInputError):
            load_image(data[:cut])


def test_decompression_bomb_is_refused_before_decoding() -> None:
    bomb = _bomb_png(10_000, 9_000)  # 90 megapixels in about 10 KB
    assert len(bomb) < 100_000
    with pytest.raises(ImageInputError, match="too many pixels"):
        load_image(bomb)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_huge_dimensions_are_refused() -> None:
    with pytest.raises(ImageInputError, match="4000×4000 pixels .16 megapixels.; the limit for a PNG is 8.3 "):
        load_image(_bomb_png(4_000, 4_000))  # over our limit, under Pillow's error threshold
    with pytest.raises(ImageInputError, match="too many pixels"):
        load_image(_one_bit_png(100_000, 100_000, b""))  # claims 10 gigapixels, holds none


@pytest.mark.parametrize("size", [(1, 1), (7, 7), (200, 5)])
def test_tiny_images_are_refused(size: tuple[int, int]) -> None:
    with pytest.raises(ImageInputError, match="at least 8×8"):
        load_image(_encode(Image.new("RGB", size, RED), "PNG"))


# --- load_image: converted inputs -------------------------------------------------


def test_plain_rgb_png_is_resized_with_a_note() -> None:
    loaded = load_image(_encode(_halves((64, 64), RED, BLUE), "PNG"))
    array = _assert_ready(loaded)
    assert loaded.original_size == (64, 64)
    assert loaded.notes == ["resized from 64×64 to 32×32"]
    assert _close(array[:, :14].mean(axis=(0, 1)), RED, 5)
    assert _close(array[:, 18:].mean(axis=(0, 1)), BLUE, 5)


def test_exact_size_image_is_unchanged() -> None:
    pixels = np.asarray(_noise((32, 32)))
    loaded = load_image(_encode(Image.fromarray(pixels), "PNG"))
    assert loaded.notes == []
    np.testing.assert_array_equal(loaded.array, pixels)


def test_non_square_image_is_centre_cropped() -> None:
    image = Image.new("RGB", (640, 480), GREEN)
    image.paste(RED, (80, 0, 560, 480))  # the centre square is red, the sides green
    loaded = load_image(_encode(image, "JPEG", quality=95))
    array = _assert_ready(loaded)
    assert loaded.notes == ["resized from 640×480 to 32×32 (centre crop to square first)"]
    assert _close(array[:, 1:-1].reshape(-1, 3).mean(axis=0), RED, 20)
    assert array[:, :, 1].max() < 100, "no green from the cropped-off sides"


def test_small_image_is_enlarged() -> None:
    loaded = load_image(_encode(Image.new("RGB", (8, 8), BLUE), "PNG"))
    assert _close(_assert_ready(loaded).mean(axis=(0, 1)), BLUE, 1)
    assert loaded.notes == ["resized from 8×8 to 32×32"]


def test_grayscale_becomes_equal_rgb_channels() -> None:
    loaded = load_image(_encode(_halves((32, 32), 30, 220, "L"), "PNG"))
    array = _assert_ready(loaded)
    assert loaded.notes == ["converted from grayscale"]
    assert (array[..., 0] == array[..., 1]).all() and (array[..., 1] == array[..., 2]).all()
    assert array[0, 0, 0] == 30 and array[0, 31, 0] == 220


def test_grayscale_with_alpha_is_flattened_onto_white() -> None:
    loaded = load_image(_encode(_halves((32, 32), (0, 0), (0, 255), "LA"), "PNG"))
    array = _assert_ready(loaded)
    assert loaded.notes == ["converted from grayscale", "flattened transparency onto white"]
    assert _close(array[:, :16].mean(axis=(0, 1)), WHITE, 0)
    assert _close(array[:, 16:].mean(axis=(0, 1)), (0, 0, 0), 0)


def test_rgba_transparency_is_flattened_onto_white() -> None:
    loaded = load_image(_encode(_halves((32, 32), (255, 0, 0, 0), (0, 0, 255, 255), "RGBA"), "PNG"))
    array = _assert_ready(loaded)
    assert loaded.notes == ["flattened transparency onto white"]
    assert _close(array[:, :16].mean(axis=(0, 1)), WHITE, 0)
    assert _close(array[:, 16:].mean(axis=(0, 1)), BLUE, 0)


def test_opaque_rgba_gets_no_transparency_note() -> None:
    opaque = _halves((32, 32), (255, 0, 0, 255), (0, 0, 255, 255), "RGBA")
    loaded = load_image(_encode(opaque, "PNG"))
    assert loaded.notes == []
    assert _close(_assert_ready(loaded)[0, 0], RED, 0)


@pytest.mark.parametrize("fmt", ["PNG", "GIF"])
def test_palette_with_transparency_is_flattened_onto_white(fmt: str) -> None:
    image = _halves((32, 32), 0, 1, "P")
    image.putpalette([*RED, *BLUE])
    loaded = load_image(_encode(image, fmt, transparency=0))
    array = _assert_ready(loaded)
    assert loaded.notes == ["converted from palette colours", "flattened transparency onto white"]
    assert _close(array[:, :16].mean(axis=(0, 1)), WHITE, 0)
    assert _close(array[:, 16:].mean(axis=(0, 1)), BLUE, 0)


def test_cmyk_jpeg_is_converted() -> None:
    cmyk_red = (0, 255, 255, 0)  # no cyan, full magenta and yellow
    loaded = load_image(_encode(Image.new("CMYK", (32, 32), cmyk_red), "JPEG", quality=95))
    assert loaded.notes == ["converted from CMYK"]
    assert _close(_assert_ready(loaded).mean(axis=(0, 1)), RED, 10)


def test_sixteen_bit_png_is_scaled_not_clipped() -> None:
    pixels = np.full((32, 32), 65535, dtype=np.uint16)
    pixels[:, 16:] = 128 * 257  # mid-grey in 16 bits: clipping would give 255
    image = Image.fromarray(pixels)
    assert image.mode.startswith("I;16")
    loaded = load_image(_encode(image, "PNG"))
    array = _assert_ready(loaded)
    assert loaded.notes == ["scaled 16-bit to 8-bit"]
    assert (array[:, :16] == 255).all() and (array[:, 16:] == 128).all()


def test_one_bit_image_is_converted() -> None:
    loaded = load_image(_encode(_halves((32, 32), 1, 0, "1"), "PNG"))
    array = _assert_ready(loaded)
    assert loaded.notes == ["converted from 1-bit black and white"]
    assert (array[:, :16] == 255).all() and (array[:, 16:] == 0).all()


def test_animated_gif_uses_first_frame() -> None:
    frames = [Image.new("RGB", (32, 32), colour) for colour in (RED, BLUE, GREEN)]
    data = _encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    loaded = load_image(data)
    assert "used the first frame of an animated GIF" in loaded.notes
    assert _close(_assert_ready(loaded).mean(axis=(0, 1)), RED, 10)


def test_exif_orientation_is_applied() -> None:
    landscape = _halves((64, 32), RED, BLUE)  # red on the left
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6  # viewers rotate 90° clockwise: red ends up on top
    loaded = load_image(_encode(landscape, "JPEG", quality=95, exif=exif))
    array = _assert_ready(loaded)
    assert loaded.original_size == (32, 64)
    assert loaded.notes == [
        "rotated by its EXIF orientation",
        "resized from 32×64 to 32×32 (centre crop to square first)",
    ]
    assert _close(array[:12].mean(axis=(0, 1)), RED, 30)
    assert _close(array[20:].mean(axis=(0, 1)), BLUE, 30)


def test_bmp_is_accepted() -> None:
    loaded = load_image(_encode(_halves((32, 32), RED, BLUE), "BMP"))
    assert loaded.notes == []
    assert _close(_assert_ready(loaded)[0, 0], RED, 0)


@pytest.mark.skipif(not features.check("webp"), reason="Pillow built without WebP")
def test_webp_is_accepted() -> None:
    loaded = load_image(_encode(_halves((32, 32), RED, BLUE), "WEBP", lossless=True))
    assert loaded.notes == []
    assert _close(_assert_ready(loaded)[0, 0], RED, 0)


def test_the_mix_with_sketches_holds_every_kind_and_is_drawn_in_blocks() -> None:
    """Issue 35's mix: sketches on paper (any rotation, stroke and size, uneven light) beside the three kinds; a set
    is drawn in blocks, each from its own stream, so it is the same however many processes draw it."""
    images, labels, masks = generate_dataset(400, TRAIN_SEED, SKETCH_MIX)
    again = generate_dataset(400, TRAIN_SEED, SKETCH_MIX)
    for a, b in zip((images, labels, masks), again):
        np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng([TRAIN_SEED, 0])
    kinds = [generate_sample(rng, mix=SKETCH_MIX).kind for _ in range(400)]
    np.testing.assert_allclose([kinds.count(kind) / 400 for kind in KINDS], SKETCH_MIX, atol=0.07)
    assert not np.array_equal(images[:50], generate_dataset(50, TRAIN_SEED)[0]), "not the shipped models' set"


def test_sketches_are_shapes_on_uneven_paper_and_blank_pages_are_nothing() -> None:
    rng = np.random.default_rng(7)
    samples = [generate_sample(rng, kind="sketch") for _ in range(200)]
    sizes = []
    for sample in samples:
        if sample.label == NOTHING:
            assert not sample.mask.any()
            continue
        rows, cols = np.flatnonzero(sample.mask.any(axis=1)), np.flatnonzero(sample.mask.any(axis=0))
        if len(rows):
            sizes.append(max(rows[-1] - rows[0], cols[-1] - cols[0]) + 1)
    assert min(sizes) <= 8 and max(sizes) >= 26, "from 15 % to 95 % of the frame"
    blanks = [s.image.astype(float).mean(axis=2) for s in samples if s.label == NOTHING]
    assert not any((page == page[0, 0]).all() for page in blanks), "a blank page has grain and light, never flat"
    assert max(np.ptp(page) for page in blanks) > 40, "some pages lie under a strong brightness gradient or shadow"


def test_sketched_bars_come_outlined_as_well_as_filled_and_small_shapes_as_often_as_large() -> None:
    """Issue 35's thin and tiny conditions: a class outlines a bar as it does a square (the held-out thin set draws
    outlined bars, which the first sketches never did), and a shape 5-10 pixels across is as common as one 15-30."""
    bar, rng = CLASSES.index("bar"), np.random.default_rng(3)
    u, v = images._XS - IMAGE_SIZE / 2, images._YS - IMAGE_SIZE / 2  # an unturned frame at the centre
    middles = [images._sketch_shape(bar, u, v, 24.0, 0.5, rng)[u.shape[0] // 2, u.shape[1] // 2] for _ in range(200)]
    assert 60 < sum(middles) < 140, "about half filled (ink at the middle), half outlined (none there)"
    rng = np.random.default_rng(4)
    spans = [np.ptp(np.flatnonzero(s.mask.any(axis=0))) + 1 for s in
             (generate_sample(rng, kind="sketch", label=CLASSES.index("circle")) for _ in range(300)) if s.mask.any()]
    small, large = np.mean(np.less_equal(spans, 10)), np.mean(np.greater_equal(spans, 15))
    assert abs(small - large) < 0.15 and small > 0.3, (small, large)


def test_a_kind_with_no_share_leaves_the_draws_of_a_mix_as_they_were() -> None:
    """The second stage's kinds came after the shipped models' first stage: with no share of a mix, they leave its
    stream of images as it was when the kinds were the first four alone."""
    first_kinds = KINDS[:4]
    for mix in (KIND_MIX, SKETCH_MIX):
        assert not any(mix[len(first_kinds):])
        now, then = np.random.default_rng(5), np.random.default_rng(5)
        for _ in range(100):
            kind = str(then.choice(first_kinds, p=mix[:len(first_kinds)]))
            label = int(then.integers(len(CLASSES)))
            image, _ = images._KIND_MAKERS[kind](label, then, (images.MIN_SHAPE_SIZE, images.MAX_SHAPE_SIZE),
                                                 images.AGAINST_SIDE_RATE)
            np.testing.assert_array_equal(generate_sample(now, mix=mix).image, image)


def test_the_polish_mix_draws_every_kind_in_its_shares() -> None:
    rng = np.random.default_rng([TRAIN_SEED, 0])
    kinds = [generate_sample(rng, mix=POLISH_MIX).kind for _ in range(500)]
    np.testing.assert_allclose([kinds.count(kind) / 500 for kind in KINDS], POLISH_MIX, atol=0.06)
    assert all(POLISH_MIX), "every kind of the first stage is kept"


def test_the_pen_mix_is_the_polish_mix_with_more_pen_drawings() -> None:
    pen = KINDS.index("pen")
    assert sum(PEN_MIX) == pytest.approx(1) and PEN_MIX[pen] == PEN_SHARE > POLISH_MIX[pen]
    others = [index for index in range(len(KINDS)) if index != pen]
    np.testing.assert_allclose(np.array(PEN_MIX)[others] / np.array(POLISH_MIX)[others],
                               (1 - PEN_SHARE) / (1 - POLISH_MIX[pen]))


def _ink_cells(sample: ShapeSample) -> np.ndarray:
    return sample.mask[::2, ::2]


def test_pen_drawings_are_canvas_cells_turned_at_any_angle_and_outlined_half_the_time() -> None:
    """The image page's canvas as a student draws on it (issue 35's "canvas" condition): 2 x 2-pixel cells of two
    colours; squares outlined (an empty middle) about half the time, and turned (a filled square fills its box only
    when upright)."""
    rng = np.random.default_rng(11)
    squares = [generate_sample(rng, kind="pen", label=CLASSES.index("square")) for _ in range(200)]
    for sample in squares:
        image = sample.image.astype(int)
        assert (image[::2, ::2] == image[1::2, 1::2]).all(), "whole cells"
        assert len(np.unique(image.reshape(-1, 3), axis=0)) == 2
        np.testing.assert_array_equal(sample.mask, np.kron(_ink_cells(sample), np.ones((2, 2), bool)))
    hollow, fill = [], []
    for sample in squares:
        cells = _ink_cells(sample)
        rows, cols = np.flatnonzero(cells.any(axis=1)), np.flatnonzero(cells.any(axis=0))
        box = cells[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
        if min(box.shape) >= 7:
            hollow.append(not box[box.shape[0] // 2, box.shape[1] // 2])
            if not hollow[-1]:
                fill.append(box.mean())
    assert 0.3 < np.mean(hollow) < 0.7, np.mean(hollow)
    assert min(fill) < 0.7 < 0.9 < max(fill), "turned squares as well as upright ones"


def test_fine_sketches_draw_strokes_below_the_sketches_hairline(monkeypatch) -> None:
    """The second stage's "fine" kind: as the sketch, with strokes down to FINE_HAIRLINE (the held-out thin set's
    finest lines are thinner than the first stage's hairline)."""
    strokes: list[float] = []
    original = images._sketch_shape
    monkeypatch.setattr(images, "_sketch_shape", lambda label, u, v, size, stroke, rng: strokes.append(stroke)
                        or original(label, u, v, size, stroke, rng))
    rng = np.random.default_rng(12)
    for kind in ("sketch", "fine"):
        strokes.clear()
        for _ in range(300):
            generate_sample(rng, kind=kind, label=CLASSES.index("cross"))
        floor = images.HAIRLINE if kind == "sketch" else images.FINE_HAIRLINE
        assert min(strokes) >= floor
        assert np.mean(np.less(strokes, images.HAIRLINE)) > (0.1 if kind == "fine" else -1), kind
