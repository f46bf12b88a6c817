"""Frame a drawing before it is shrunk to the model's size (issue 35).

A phone photo or a scan of a drawing reaches the model as 32x32 pixels. A shape drawn small then covers a few pixels
inside one 8x8 patch, and a pen's line becomes a faint trace a fraction of a pixel wide: the vision transformers
misread both. A person looking at the picture would first look at the drawing, not at the paper, so this does:

1. The page's light: a quadratic surface in x and y fitted to the grey levels of a band along the picture's edges,
   trimming outliers (ink reaching the edge) as it goes. A lamp's fall-off and a linear gradient are quadratic, so
   uneven light is not taken for ink.
2. The ink: pixels that differ from that light by more than ``INK_LEVELS`` grey levels and ``INK_SIGMAS`` times
   the paper's grain (the fit's robust spread), with isolated pixels dropped.
3. The frame: a square around the ink's box, the box filling ``FILL`` of its side (as a large shape fills the
   training images), never smaller than ``MIN_SIDE`` of the picture's shorter side nor larger than it, moved inside
   the picture where the box is near an edge. The whole picture is searched, so a drawing off to one side of a
   landscape photo is found, where a centre crop would cut it.
4. Thin strokes: where less than ``THIN_SURVIVAL`` of the ink survives an erosion by half a model pixel (nearly
   all of it is thinner than one model pixel), it is thickened by up to half a model pixel each side (a minimum
   filter for dark ink, a maximum filter for light ink), so the shrink keeps a line about a pixel wide. A filled
   shape or a thick stroke is left as it is.

A picture with no ink (a blank page) is read as before, its centre square. Every step is said in ``Framing.note``,
and the app shows the framed image as what the model read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

FILL = 0.85  # the ink's box fills this much of the framed square's side (the training images: 15-95 %)
MIN_SIDE = 0.3  # the framed square's smallest side, a fraction of the picture's shorter one: a speck is not blown up
EDGE_BAND = 0.08  # the page's light is fitted on this band along the edges (a fraction of the side)
INK_LEVELS = 20.0  # grey levels a pixel must differ from the page's light to be ink, at the least
INK_SIGMAS = 6.0  # ... and this many times the paper's grain
MIN_INK_PIXELS = 8
TRIM_SIGMAS = 3.0  # the light's fit drops pixels this far off it (ink at the edge), and is fitted again
TRIM_ROUNDS = 4
THIN_SURVIVAL = 0.3  # strokes are thin when less than this share of the ink survives an erosion by half a model pixel


@dataclass(frozen=True)
class Framing:
    """How a picture was framed: ``box`` (left, top, right, bottom) is the square cut from it, in the pixels of the
    picture framed, whose (width, height) is ``picture``; ``thickened`` how many of those pixels each stroke grew on
    each side (0: not at all); ``dark_ink`` whether the ink is darker than the page."""

    box: tuple[int, int, int, int]
    picture: tuple[int, int]
    thickened: int
    dark_ink: bool

    @property
    def cropped(self) -> bool:
        """Whether the square is a part of the picture (not the whole of a square picture)."""
        return self.box != (0, 0, *self.picture)

    def note(self, original_size: tuple[int, int]) -> str:
        """One line for the user, in the pixels of the picture as uploaded (``original_size``, width and height: the
        picture framed may have been shrunk first)."""
        width, height = original_size
        side = round((self.box[2] - self.box[0]) * width / self.picture[0])
        parts = [f"framed the drawing: cut a {side}×{side} square around it from the {width}×{height} picture"
                 ] if self.cropped else []
        if self.thickened:
            parts.append("thickened its thin strokes by up to half a pixel of the model's image each side, so the "
                         "shrink keeps them")
        return "; ".join(parts)


def _quadratic_design(height: int, width: int) -> np.ndarray:
    """[H*W, 6]: 1, x, y, x², y², xy at each pixel (x, y in -0.5..0.5)."""
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float64)
    xs, ys = (xs + 0.5) / width - 0.5, (ys + 0.5) / height - 0.5
    return np.stack([np.ones_like(xs), xs, ys, xs * xs, ys * ys, xs * ys], -1).reshape(-1, 6)


def _edge_band(height: int, width: int) -> np.ndarray:
    """bool [H*W]: the pixels within EDGE_BAND of the side (at least one pixel) of an edge."""
    ys, xs = np.mgrid[0:height, 0:width]
    from_edge = np.minimum(np.minimum(xs, width - 1 - xs), np.minimum(ys, height - 1 - ys))
    return (from_edge < max(1.0, EDGE_BAND * min(height, width))).reshape(-1)


def page_light(gray: np.ndarray) -> tuple[np.ndarray, float]:
    """The page's light fitted to the edge band (float [H, W]) and the paper's grain about it (a robust sd)."""
    height, width = gray.shape
    design, values = _quadratic_design(height, width), gray.reshape(-1).astype(np.float64)
    band = _edge_band(height, width)
    used = band
    for _ in range(TRIM_ROUNDS):
        coefficients, *_ = np.linalg.lstsq(design[used], values[used], rcond=None)
        residual = values - design @ coefficients
        spread = 1.4826 * np.median(np.abs(residual[used] - np.median(residual[used]))) + 1e-6
        kept = band & (np.abs(residual) < TRIM_SIGMAS * spread)
        if kept.sum() < design.shape[1]:  # too few left to fit: keep the last fit
            break
        used = kept
    return (design @ coefficients).reshape(height, width), float(spread)


def ink_mask(gray: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """(bool [H, W] the ink, whether it is darker than the page), or None when there is no ink."""
    light, grain = page_light(gray)
    residual = gray - light
    ink = np.abs(residual) > max(INK_LEVELS, INK_SIGMAS * grain)
    padded = np.pad(ink, 1).astype(np.int8)
    neighbours = sum(np.roll(padded, (dy, dx), (0, 1)) for dy in (-1, 0, 1) for dx in (-1, 0, 1))[1:-1, 1:-1]
    ink &= neighbours - ink >= 2  # an isolated pixel or a pair is grain or a JPEG artefact, not a stroke
    if ink.sum() < MIN_INK_PIXELS:
        return None
    return ink, bool(np.median(residual[ink]) < 0)


def _square_around(ink: np.ndarray) -> tuple[int, int, int, int]:
    """The framed square (left, top, right, bottom) around the ink's box, inside the picture."""
    picture_height, picture_width = ink.shape
    shorter = min(picture_height, picture_width)
    rows, cols = np.flatnonzero(ink.any(1)), np.flatnonzero(ink.any(0))
    width, height = cols[-1] + 1 - cols[0], rows[-1] + 1 - rows[0]
    side = round(min(shorter, max(max(width, height) / FILL, MIN_SIDE * shorter)))
    left = int(np.clip(round((cols[0] + cols[-1] + 1 - side) / 2), 0, picture_width - side))
    top = int(np.clip(round((rows[0] + rows[-1] + 1 - side) / 2), 0, picture_height - side))
    return left, top, left + side, top + side


def centre_square(image: Image.Image) -> Image.Image:
    """The largest square at the picture's centre (the picture itself when it is square)."""
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return image if width == height else image.crop((left, top, left + side, top + side))


def _erodes_away(ink: np.ndarray, radius: int) -> bool:
    """Whether most of the ink is thinner than 2 * radius + 1 pixels (an erosion by `radius` removes most of it)."""
    mask = Image.fromarray(ink.astype(np.uint8) * 255)
    eroded = np.asarray(mask.filter(ImageFilter.MinFilter(2 * radius + 1))) > 0
    return eroded.sum() < THIN_SURVIVAL * ink.sum()


def frame_drawing(image: Image.Image, size: int) -> tuple[Image.Image, Framing | None]:
    """The RGB ``image`` (any shape) framed in a square for a ``size`` x ``size`` model (module docstring), and how;
    its centre square and None when it holds no ink."""
    found = ink_mask(np.asarray(image.convert("L"), np.float64))
    if found is None:
        return centre_square(image), None
    ink, dark = found
    box = _square_around(ink)
    framed = image.crop(box)
    half_pixel = (box[2] - box[0]) / size / 2  # half a model pixel, in the picture's pixels
    grow = int(half_pixel)  # at most half a model pixel each side
    thickened = grow if grow >= 1 and _erodes_away(ink, max(1, round(half_pixel))) else 0
    if thickened:
        spread = ImageFilter.MinFilter if dark else ImageFilter.MaxFilter
        framed = framed.filter(spread(2 * thickened + 1))
    return framed, Framing(box, image.size, thickened, dark)
