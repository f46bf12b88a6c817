"""Framing an upload around its drawing before the shrink (core.serving.framing, issue 35), on pictures drawn here
with Pillow: pages under uneven light, small and thin drawings, chalk on a board, pictures of every size."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from core.serving.framing import FILL, MIN_SIDE, frame_drawing, ink_mask
from core.serving.image_io import NO_DRAWING_NOTE, load_image

SIDE = 256


def page(light: str = "flat", strength: float = 0.3, grain: float = 5.0, seed: int = 0,
         paper: tuple[int, int, int] = (245, 242, 232)) -> np.ndarray:
    """A page [SIDE, SIDE, 3] float: paper with grain under `light` ("flat", "ramp": darker by `strength` across the
    page, "lamp": a point light's fall-off to `strength` darker at the far corner)."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:SIDE, 0:SIDE] / SIDE
    if light == "ramp":
        angle = rng.uniform(0, 2 * np.pi)
        along = np.cos(angle) * xs + np.sin(angle) * ys
        shade = 1 - strength * (along - along.min()) / np.ptp(along)
    elif light == "lamp":
        spot = rng.uniform(0, 1, 2)
        falloff = (xs - spot[0]) ** 2 + (ys - spot[1]) ** 2
        shade = 1 - strength * falloff / falloff.max()
    else:
        shade = np.ones((SIDE, SIDE))
    return (np.array(paper, float) + rng.normal(0, grain, (SIDE, SIDE, 1))) * shade[..., None]


def with_ink(picture: np.ndarray, draw, ink=(30, 30, 40)) -> Image.Image:
    """`draw(ImageDraw)` paints a mask; the ink is laid on the picture through it."""
    mask = Image.new("L", (picture.shape[1], picture.shape[0]), 0)
    draw(ImageDraw.Draw(mask))
    alpha = np.asarray(mask, float)[..., None] / 255
    return Image.fromarray(np.clip(picture * (1 - alpha) + np.array(ink, float) * alpha, 0, 255).astype(np.uint8))


def blank(picture: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(picture, 0, 255).astype(np.uint8))


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("light", ["flat", "ramp", "lamp"])
@pytest.mark.parametrize("seed", range(4))
def test_a_blank_page_under_uneven_light_is_left_as_it_is(light, seed):
    picture = blank(page(light, strength=0.3, seed=seed))
    framed, framing = frame_drawing(picture, 32)
    assert framing is None and framed is picture


@pytest.mark.parametrize("light", ["flat", "ramp", "lamp"])
def test_a_small_drawing_is_framed_so_it_fills_the_square(light):
    left, top, width = 150, 40, 70
    square = (left, top, left + width, top + width)
    picture = with_ink(page(light, strength=0.25), lambda d: d.rectangle(square, fill=255))
    framed, framing = frame_drawing(picture, 32)
    x0, y0, x1, y1 = framing.box
    assert x1 - x0 == y1 - y0 == framed.size[0] == framed.size[1]
    assert x0 <= left and y0 <= top and x1 > left + width and y1 > top + width, "the drawing is inside the frame"
    assert abs((x1 - x0) - (width + 1) / FILL) <= 2, "the drawing fills FILL of the frame"
    assert framing.thickened == 0, "a filled square has no thin strokes"
    assert "framed the drawing" in framing.note((SIDE, SIDE))


def test_a_speck_is_not_blown_up_past_the_smallest_frame():
    picture = with_ink(page(), lambda d: d.ellipse((120, 120, 126, 126), fill=255))
    _, framing = frame_drawing(picture, 32)
    x0, _, x1, _ = framing.box
    assert x1 - x0 == round(MIN_SIDE * SIDE)


def test_a_large_drawing_is_not_cut():
    picture = with_ink(page("lamp"), lambda d: d.ellipse((10, 12, 240, 244), fill=255))
    framed, framing = frame_drawing(picture, 32)
    assert not framing.cropped and framing.note((SIDE, SIDE)) == ""
    assert np.array_equal(np.asarray(framed), np.asarray(picture))


def wide_page(width: int, height: int, ramp: float, seed: int = 0) -> np.ndarray:
    """A page [height, width, 3] float: paper with grain, darker by `ramp` from left to right."""
    rng = np.random.default_rng(seed)
    shade = 1 - ramp * np.linspace(0, 1, width)[None, :, None]
    return (np.array((245, 242, 232), float) + rng.normal(0, 5, (height, width, 1))) * shade


def landscape(left: int) -> Image.Image:
    """A 640x480 page with a filled square 60 pixels across whose left edge is at `left`."""
    return with_ink(wide_page(640, 480, 0.2), lambda d: d.rectangle((left, 200, left + 60, 260), fill=255))


def test_a_drawing_off_to_one_side_of_a_landscape_photo_is_found():
    """The whole picture is searched: the centre crop (x 80..560) would cut this square at x 560..620 away."""
    picture = landscape(560)
    framed, framing = frame_drawing(picture, 32)
    x0, y0, x1, y1 = framing.box
    assert framing.picture == (640, 480) and x0 <= 560 and x1 > 620 and x1 <= 640 and y0 <= 200 and y1 > 260
    plain, found = load_image(png(picture)), load_image(png(picture), frame=True)
    assert plain.array.min() > 100, "unframed, the centre crop holds no ink"
    assert found.array.min() < 80, "framed, the square is in the picture"
    smallest = round(MIN_SIDE * 480)  # the square is at least MIN_SIDE of the shorter side
    assert found.notes == [f"framed the drawing: cut a {smallest}×{smallest} square around it from the 640×480 "
                           "picture",
                           "resized that square to 32×32"]


def test_a_blank_page_framed_says_so_and_reads_the_centre_square():
    picture = blank(wide_page(400, 256, 0.25))
    loaded, plain = load_image(png(picture), frame=True), load_image(png(picture))
    assert loaded.notes == [NO_DRAWING_NOTE, "resized from 400×256 to 32×32 (centre crop to square first)"]
    assert np.abs(loaded.array.astype(int) - plain.array).max() <= 1


def test_a_drawing_at_the_edge_is_framed_inside_the_picture():
    picture = with_ink(page(), lambda d: d.rectangle((200, 0, 255, 40), fill=255))
    _, framing = frame_drawing(picture, 32)
    x0, y0, x1, y1 = framing.box
    assert 0 <= x0 and 0 <= y0 and x1 <= SIDE and y1 <= SIDE and x1 == SIDE and y0 == 0


def test_thin_lines_are_thickened_so_the_shrink_keeps_them():
    picture = with_ink(page("ramp", 0.2), lambda d: d.rectangle((60, 90, 200, 130), outline=255, width=1))
    framed, framing = frame_drawing(picture, 32)
    assert framing.thickened >= 1 and framing.dark_ink and "thickened" in framing.note((SIDE, SIDE))
    plain = load_image(png(picture)).array.astype(float).min(-1)
    shown = load_image(png(picture), frame=True).array.astype(float).min(-1)
    assert shown.min() < plain.min() - 40, "the line is darker after the shrink than it was unframed"


def test_chalk_on_a_board_is_light_ink_and_thickened_with_a_maximum():
    board = page(paper=(40, 52, 46), grain=3)
    picture = with_ink(board, lambda d: d.ellipse((90, 90, 170, 170), outline=255, width=1), ink=(236, 236, 230))
    framed, framing = frame_drawing(picture, 32)
    assert not framing.dark_ink and framing.thickened >= 1
    assert np.asarray(framed).max() >= 200


def test_the_ink_is_what_differs_from_the_pages_light():
    picture = with_ink(page("lamp", 0.3), lambda d: d.line((40, 200, 220, 60), fill=255, width=3))
    found = ink_mask(np.asarray(picture.convert("L"), float))
    assert found is not None
    ink, dark = found
    ys, xs = np.nonzero(ink)
    assert dark and xs.min() >= 35 and xs.max() <= 225 and ys.min() >= 55 and ys.max() <= 205


@pytest.mark.parametrize("size", [(8, 8), (9, 13), (33, 31), (64, 64), (640, 480)])
@pytest.mark.parametrize("kind", ["flat", "noise", "half", "dot"])
def test_any_picture_frames_without_error(size, kind):
    rng = np.random.default_rng(1)
    pixels = {"flat": np.full((size[1], size[0], 3), 200, np.uint8),
              "noise": rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8),
              "half": np.tile(np.where(np.arange(size[0]) < size[0] // 2, 0, 255), (size[1], 1)),
              "dot": np.full((size[1], size[0]), 250, np.uint8)}[kind]
    if kind == "dot":
        pixels[size[1] // 2 - 1:size[1] // 2 + 1, size[0] // 2 - 1:size[0] // 2 + 1] = 0
    loaded = load_image(png(Image.fromarray(pixels.astype(np.uint8))), frame=True)
    assert loaded.array.shape == (32, 32, 3) and loaded.array.dtype == np.uint8


def test_unframed_is_the_plain_upload_path():
    picture = with_ink(page(), lambda d: d.ellipse((120, 120, 160, 160), fill=255))
    plain, framed = load_image(png(picture)), load_image(png(picture), frame=True)
    assert not any("framed" in note for note in plain.notes)
    assert any("framed the drawing" in note for note in framed.notes)
    assert not np.array_equal(plain.array, framed.array)
