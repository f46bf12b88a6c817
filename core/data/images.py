"""Synthetic shape images for the tiny vision transformers.

Every image is drawn by this module from a seeded ``numpy.random.Generator`` (never global random state), so a data
set is fully determined by its seed and nothing is downloaded. Each image keeps the shape's pixel mask, so we can
check whether attention falls on the object.

The held-out test sets mix three kinds of image a class meets (issue 16); the training mix (SKETCH_MIX) adds a fourth,
*sketch* (issue 35: any rotation, stroke, outline and size, on paper under uneven light, photographed):

- **cluttered**: a shape on a background of faint lines and specks, with pixel noise;
- **plain**: a clean shape on a flat background of any colour, its edges anti-aliased as an uploaded picture's are
  once shrunk to 32×32;
- **drawn**: the shape painted on the image page's 16×16 grid of 2×2-pixel cells, with a hand's wobble at its edge.

Shapes are 10–28 pixels (drawn ones at least 14, seven cells), anywhere in the image and against one of its sides
three times in ten. A seventh class, "nothing", is a background with no shape: a blank drawing, an empty picture.
The held-out test sets (TEST_SETS) take each kind alone, shapes off-centre at the extremes of size, and empty images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IMAGE_SIZE = 32
CLASSES = ("circle", "square", "triangle", "cross", "ring", "bar", "nothing")
SHAPES = CLASSES[:-1]
NOTHING = CLASSES.index("nothing")
TRAIN_SEED = 0
HELDOUT_SEED = 1

KINDS = ("cluttered", "plain", "drawn", "sketch", "pen", "fine")
KIND_MIX = (0.4, 0.3, 0.3, 0.0, 0.0, 0.0)  # the mix of the held-out TEST_SETS (and the training mix before issue 35)
# The shipped vision models' training mix (issue 35): with sketches, see core.training.train's presets and the README.
# A kind's zero share leaves the stream of draws as it was without that kind.
SKETCH_MIX = (0.2, 0.15, 0.2, 0.45, 0.0, 0.0)
# The mix of their second stage, which adds shapes drawn with the page's pen (outlines too, turned) and sketches
# down to the finest hairline (FINE_HAIRLINE), and keeps every kind of the first.
POLISH_MIX = (0.1, 0.05, 0.2, 0.25, 0.15, 0.25)
# The mix of their third stage: PEN_SHARE of the images drawn with the page's pen (the canvas outlines were read
# right 59-81 % of the time after the second stage), the other kinds as in POLISH_MIX.
PEN_SHARE = 0.5
PEN_MIX = tuple(PEN_SHARE if kind == "pen" else share * (1 - PEN_SHARE) / (1 - POLISH_MIX[KINDS.index("pen")])
                for kind, share in zip(KINDS, POLISH_MIX))
TEST_SETS = ("mix", "cluttered", "plain", "drawn", "off-centre", "nothing")

MIN_SHAPE_SIZE, MAX_SHAPE_SIZE = 10.0, 28.0
MIN_DRAWN_SIZE = 14.0  # seven cells of the drawing grid: smaller, a triangle and a circle look alike
AGAINST_SIDE_RATE = 0.3
DRAW_CELLS = 16  # the image page's drawing grid: 16 x 16 cells, each 2 x 2 pixels
DRAWING_INK, DRAWING_BACKGROUND = (240, 240, 240), (32, 32, 32)  # the page's default colours
WOBBLE_RATE = 0.06  # of a drawing's edge cells, the fraction a hand gets wrong
SUPERSAMPLE = 4  # sub-pixels per side when measuring how much of a pixel a shape covers
# The drawing templates' shapes, centred: 12 cells across. At 22 pixels (11 cells) the circle filled 88 % of its
# box, a rounded square (two of the twelve seed models took it for one); at 24 it fills 78 %, a circle's pi/4.
TEMPLATE_SIZE = 24.0
# Cluttered images take object and background colours from opposite ends of the brightness range; plain ones any
# two colours at least PLAIN_CONTRAST apart (RGB distance), as a student would pick.
DARK_RANGE = (0.0, 100.0)
LIGHT_RANGE = (155.0, 255.0)
PLAIN_CONTRAST = 120.0
NOISE_STD = 8.0

# Sub-pixel-centre coordinates, in pixels, shared by every drawing function.
_FINE = IMAGE_SIZE * SUPERSAMPLE
_YS, _XS = (np.mgrid[0:_FINE, 0:_FINE].astype(np.float32) + 0.5) / SUPERSAMPLE
# Fractions along a line: two samples per pixel so 1-px lines have no gaps.
_LINE_STEPS = np.linspace(0.0, 1.0, 2 * IMAGE_SIZE)[:, None]


@dataclass
class ShapeSample:
    """One generated image with its class label and object mask."""

    image: np.ndarray  # uint8 [H, W, 3]
    label: int
    mask: np.ndarray  # bool [H, W], True on the object's pixels (none for "nothing")
    kind: str = "cluttered"


# ---------------------------------------------------------------------------------------------------------
# The shapes, as boolean masks on the sub-pixel grid
# ---------------------------------------------------------------------------------------------------------

def _circle(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    radius = size / 2
    return (_XS - cx) ** 2 + (_YS - cy) ** 2 <= radius**2


def _square(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    half = size / 2
    return (np.abs(_XS - cx) <= half) & (np.abs(_YS - cy) <= half)


def _triangle(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    """Isosceles triangle pointing up or down (apex to base = ``size``)."""
    half = size / 2
    depth = (_YS - (cy - half)) / size  # 0 at the top edge, 1 at the bottom edge
    if rng.random() < 0.5:
        depth = 1 - depth  # point down instead of up
    inside_rows = (depth >= 0) & (depth <= 1)
    return inside_rows & (np.abs(_XS - cx) <= depth * half)


def _cross(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    """Plus sign: two perpendicular arms of thickness about a fifth of its size."""
    half, arm = size / 2, max(1.5, size / 10)
    dx, dy = np.abs(_XS - cx), np.abs(_YS - cy)
    return ((dx <= arm) & (dy <= half)) | ((dy <= arm) & (dx <= half))


def _ring(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    outer = size / 2
    inner = outer - max(2.0, size / 6)
    dist2 = (_XS - cx) ** 2 + (_YS - cy) ** 2
    return (dist2 <= outer**2) & (dist2 >= inner**2)


def _bar(cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    """Long thick rectangle, horizontal or vertical (aspect ratio about 4:1)."""
    half_long, half_short = size / 2, max(1.5, size / 8)
    dx, dy = np.abs(_XS - cx), np.abs(_YS - cy)
    if rng.random() < 0.5:
        dx, dy = dy, dx
    return (dx <= half_long) & (dy <= half_short)


_DRAWERS = (_circle, _square, _triangle, _cross, _ring, _bar)
assert len(_DRAWERS) == len(SHAPES)


def coverage(label: int, cx: float, cy: float, size: float, rng: np.random.Generator) -> np.ndarray:
    """How much of each pixel the shape covers: float [H, W] in [0, 1] (the mean over its sub-pixels)."""
    inside = _DRAWERS[label](cx, cy, size, rng)  # [H*S, W*S]
    return inside.reshape(IMAGE_SIZE, SUPERSAMPLE, IMAGE_SIZE, SUPERSAMPLE).mean(axis=(1, 3))


def _shape_cover(label: int, rng: np.random.Generator, sizes: tuple[float, float], side_rate: float) -> np.ndarray:
    """The coverage of one shape of a size in `sizes`, anywhere inside the image, or pushed against one of its sides
    (with probability side_rate; whole pixels, so its edges stay as drawn)."""
    size = rng.uniform(*sizes)
    cx, cy = rng.uniform(size / 2, IMAGE_SIZE - size / 2, 2)
    cover = coverage(label, cx, cy, size, rng)
    if rng.random() < side_rate:
        axis, to_start = int(rng.integers(2)), rng.random() < 0.5
        filled = np.flatnonzero((cover >= 0.5).any(axis=1 - axis))  # the rows (axis 0) or columns (1) it fills
        cover = np.roll(cover, -filled[0] if to_start else IMAGE_SIZE - 1 - filled[-1], axis=axis)
    return cover


# ---------------------------------------------------------------------------------------------------------
# Drawings: a grid of cells, as on the image page
# ---------------------------------------------------------------------------------------------------------

def mask_grid(cells: np.ndarray, size: int = IMAGE_SIZE, ink=DRAWING_INK, background=DRAWING_BACKGROUND) -> np.ndarray:
    """A drawing: a boolean grid [r, r] (True = ink) upscaled by nearest neighbour to a uint8 [size, size, 3]
    image; `size` must be a multiple of r."""
    cells = np.asarray(cells, dtype=bool)
    if cells.ndim != 2 or cells.shape[0] != cells.shape[1] or size % cells.shape[0]:
        raise ValueError(f"the drawing must be a square grid whose side divides {size}, got {cells.shape}")
    big = _upscale(cells, size // cells.shape[0])
    return np.where(big[..., None], np.asarray(ink, np.uint8), np.asarray(background, np.uint8)).astype(np.uint8)


def downsample_mask(mask: np.ndarray, cells: int) -> np.ndarray:
    """An object mask (or coverage) [H, W] as a coarse boolean grid [cells, cells]: a cell is ink when half of it is."""
    mask = np.asarray(mask, dtype=float)
    h = mask.shape[0] // cells
    return mask[: h * cells, : h * cells].reshape(cells, h, cells, h).mean(axis=(1, 3)) >= 0.5


def _upscale(cells: np.ndarray, scale: int) -> np.ndarray:
    return np.kron(cells, np.ones((scale, scale), dtype=bool))


def _wobble(cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The cells with some of the shape's edge cells (ink beside paper, or paper beside ink) flipped."""
    padded = np.pad(cells, 1, mode="edge")
    neighbours = [padded[1:-1, :-2], padded[1:-1, 2:], padded[:-2, 1:-1], padded[2:, 1:-1]]
    edge = np.any([n != cells for n in neighbours], axis=0)
    wobbled = cells ^ (edge & (rng.random(cells.shape) < WOBBLE_RATE))
    return wobbled if wobbled.any() else cells


def template_cells(label: int) -> np.ndarray:
    """The drawing the image page offers to start from: the class's shape, centred, on the 16 x 16 grid (bool);
    an empty grid for "nothing"."""
    if label == NOTHING:
        return np.zeros((DRAW_CELLS, DRAW_CELLS), dtype=bool)
    middle = IMAGE_SIZE / 2
    return downsample_mask(coverage(label, middle, middle, TEMPLATE_SIZE, np.random.default_rng(0)), DRAW_CELLS)


# ---------------------------------------------------------------------------------------------------------
# Colours and backgrounds
# ---------------------------------------------------------------------------------------------------------

def _colour_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random (background, object) colours: one dark, one light, either way round."""
    dark, light = rng.uniform(*DARK_RANGE, 3), rng.uniform(*LIGHT_RANGE, 3)
    return (dark, light) if rng.random() < 0.5 else (light, dark)


def _contrasting_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random (background, object) colours of any hue, at least PLAIN_CONTRAST apart."""
    while True:
        background, colour = rng.uniform(0, 255, (2, 3))
        if np.linalg.norm(background - colour) >= PLAIN_CONTRAST:
            return background, colour


def _thin_line(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates of a 1-px line between two random points."""
    start, end = rng.uniform(0, IMAGE_SIZE - 1, (2, 2))
    points = (start + _LINE_STEPS * (end - start)).astype(int)
    return points[:, 1], points[:, 0]


def _speck(rng: np.random.Generator) -> tuple[slice, slice]:
    """Rows and columns of a 2-3 px blob: too small to be mistaken for a class shape."""
    top, left = rng.integers(0, IMAGE_SIZE - 3, 2)
    height, width = rng.integers(2, 4, 2)
    return slice(top, top + height), slice(left, left + width)


def _clutter_colour(background: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Colour halfway between the background and a random colour: milder than the object."""
    return (background + rng.uniform(0, 255, 3)) / 2


def _cluttered_background(colour: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Float image of a flat colour with a few faint lines and specks."""
    canvas = np.broadcast_to(colour, (IMAGE_SIZE, IMAGE_SIZE, 3)).copy()
    for _ in range(rng.integers(1, 4)):
        rows, cols = _thin_line(rng)
        canvas[rows, cols] = _clutter_colour(colour, rng)
    for _ in range(rng.integers(1, 4)):
        rows, cols = _speck(rng)
        canvas[rows, cols] = _clutter_colour(colour, rng)
    return canvas


def _paint(canvas: np.ndarray, cover: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """The canvas with `colour` laid over it in proportion to the coverage (anti-aliased edges)."""
    return canvas * (1 - cover[..., None]) + colour * cover[..., None]


def _to_uint8(canvas: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(canvas), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------
# One image of each kind
# ---------------------------------------------------------------------------------------------------------

def _cluttered(label: int, rng: np.random.Generator, sizes, side_rate) -> tuple[np.ndarray, np.ndarray]:
    background, colour = _colour_pair(rng)
    canvas, mask = _cluttered_background(background, rng), np.zeros((IMAGE_SIZE, IMAGE_SIZE), dtype=bool)
    if label != NOTHING:
        cover = _shape_cover(label, rng, sizes, side_rate)
        canvas, mask = _paint(canvas, cover, colour), cover >= 0.5
    return _to_uint8(canvas + rng.normal(0.0, NOISE_STD, canvas.shape)), mask


def _plain(label: int, rng: np.random.Generator, sizes, side_rate) -> tuple[np.ndarray, np.ndarray]:
    background, colour = _contrasting_pair(rng)
    canvas, mask = np.broadcast_to(background, (IMAGE_SIZE, IMAGE_SIZE, 3)), np.zeros((IMAGE_SIZE,) * 2, dtype=bool)
    if label != NOTHING:
        cover = _shape_cover(label, rng, sizes, side_rate)
        canvas, mask = _paint(canvas, cover, colour), cover >= 0.5
    return _to_uint8(canvas + rng.normal(0.0, rng.uniform(0, 3), canvas.shape)), mask  # a little camera noise


def _canvas_colours(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A drawing's (ink, background): the image page's default colours half the time, else any two that contrast."""
    if rng.random() < 0.5:
        return np.asarray(DRAWING_INK, np.uint8), np.asarray(DRAWING_BACKGROUND, np.uint8)
    background, ink = (_to_uint8(c) for c in _contrasting_pair(rng))
    return ink, background


def _drawn(label: int, rng: np.random.Generator, sizes, side_rate) -> tuple[np.ndarray, np.ndarray]:
    ink, background = _canvas_colours(rng)
    cells = np.zeros((DRAW_CELLS, DRAW_CELLS), dtype=bool)
    if label != NOTHING:
        cover = _shape_cover(label, rng, (max(sizes[0], MIN_DRAWN_SIZE), max(sizes[1], MIN_DRAWN_SIZE)), side_rate)
        cells = _wobble(downsample_mask(cover, DRAW_CELLS), rng)
    return mask_grid(cells, IMAGE_SIZE, ink, background), _upscale(cells, IMAGE_SIZE // DRAW_CELLS)



# ---------------------------------------------------------------------------------------------------------
# Sketches: shapes as a class draws them on paper and photographs them (issue 35)
# ---------------------------------------------------------------------------------------------------------
# Any rotation, strokes from a hairline to very thick, squares, bars and triangles outlined as well as filled, sizes
# from 15 % to 95 % of the frame, a hand's wobble (a smooth bend of the drawing plane), pen colours on paper with
# grain, ruled lines, a shadow and a brightness gradient, and a phone photo's blur and noise. "Nothing" is such a page
# with no shape. The held-out sets of these conditions are drawn by other code (core.data.student_drawings).

SKETCH_SIZES = (0.15 * IMAGE_SIZE, 0.95 * IMAGE_SIZE)  # drawn log-uniformly: each doubling of size as often
HAIRLINE = 0.3  # the thinnest stroke, in pixels: a pen's line on a page a phone shrinks to 32 pixels
FINE_HAIRLINE = 0.12  # the "fine" kind's: a 0.5 mm pen line on a 15 cm drawing shrunk to 32 pixels is 0.1 px
MAX_RAMP = 0.45  # the strongest brightness gradient across a page, as a fraction of its brightness
MAX_WOBBLE = 0.04  # the largest bend of a hand's line, as a fraction of the shape's size
PAPERS = ((250, 250, 246), (240, 236, 222), (222, 225, 230), (250, 244, 205), (210, 230, 246), (40, 52, 46))
PENS = ((20, 20, 30), (25, 45, 150), (170, 30, 30), (25, 110, 50), (95, 95, 100))
CHALK = (236, 236, 230)  # on the dark board (the last paper)


def _sketch_frame(cx: float, cy: float, size: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each sub-pixel's coordinates (u, v) in the shape's own frame: centred on (cx, cy), turned by any angle and
    bent by a smooth displacement of up to MAX_WOBBLE times the size, half a wave to one and a half across it."""
    angle = rng.uniform(0, 2 * np.pi)
    dx, dy = _XS - cx, _YS - cy
    u, v = np.cos(angle) * dx + np.sin(angle) * dy, np.cos(angle) * dy - np.sin(angle) * dx
    bend = rng.uniform(0, MAX_WOBBLE) * size
    waves = rng.uniform(0.5, 1.5, 2) * 2 * np.pi / size
    phases = rng.uniform(0, 2 * np.pi, 2)
    return u + bend * np.sin(waves[0] * v + phases[0]), v + bend * np.sin(waves[1] * u + phases[1])


def _side_distance(u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signed distance of (u, v) from the line through a and b: positive inside a polygon listed clockwise on screen
    (y down)."""
    (ax, ay), (bx, by) = a, b
    length = np.hypot(bx - ax, by - ay)
    return ((by - ay) * (ax - u) - (bx - ax) * (ay - v)) / length


def _inside_distance(label: int, u: np.ndarray, v: np.ndarray, half: float, rng: np.random.Generator) -> np.ndarray:
    """A square's, bar's or triangle's distance inward from its nearest side (negative outside). A bar is 2.5 to 8
    times as long as thick; the triangle points up, its apex anywhere over the middle half of its base."""
    if label == CLASSES.index("square"):
        return half - np.maximum(np.abs(u), np.abs(v))
    if label == CLASSES.index("bar"):
        return np.minimum(half - np.abs(u), half / rng.uniform(2.5, 8.0) - np.abs(v))
    corners = np.array([(rng.uniform(-0.5, 0.5) * half, -half), (half, half), (-half, half)])
    return np.min([_side_distance(u, v, a, b) for a, b in zip(corners, np.roll(corners, -1, axis=0))], axis=0)


def _sketch_shape(label: int, u: np.ndarray, v: np.ndarray, size: float, stroke: float,
                  rng: np.random.Generator) -> np.ndarray:
    """The shape in its own frame (boolean, sub-pixel grid). Crosses and rings are strokes from a hairline to a
    third of the size (a ring keeps its hole); squares, bars and triangles are filled or, half the time, outlined
    with the stroke (an outlined circle is a ring)."""
    half = size / 2
    name = CLASSES[label]
    if name == "circle":
        return u**2 + v**2 <= half**2
    if name == "ring":
        radius = np.sqrt(u**2 + v**2)
        return (radius <= half) & (radius >= half - min(stroke, 0.45 * half))
    if name == "cross":
        arm = min(stroke, size / 6)
        return ((np.abs(u) <= arm) & (np.abs(v) <= half)) | ((np.abs(v) <= arm) & (np.abs(u) <= half))
    inside = _inside_distance(label, u, v, half, rng)
    return (inside >= 0) & (inside < stroke) if rng.random() < 0.5 else inside >= 0


def _paper(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A page as a phone sees it: float [H, W, 3] paper with grain and, some of the time, ruled lines; and its light
    [H, W] (a brightness gradient of up to MAX_RAMP in any direction, sometimes a soft-edged shadow) to multiply the
    page and its ink by. Returns (page, light)."""
    page = np.broadcast_to(np.asarray(PAPERS[rng.integers(len(PAPERS))], float), (IMAGE_SIZE, IMAGE_SIZE, 3)).copy()
    rows, cols = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / (IMAGE_SIZE - 1) - 0.5
    if rng.random() < 0.3:  # ruled lines, nearly level, 4-8 pixels apart
        tilt, gap = rng.uniform(-0.1, 0.1), rng.uniform(4, 8)
        across = (rows + tilt * cols) * (IMAGE_SIZE - 1) / gap + rng.uniform(0, 1)
        strength = np.clip(1 - np.abs(across - np.round(across)) * gap / rng.uniform(0.4, 1.0), 0, 1)
        page = _paint(page, strength * rng.uniform(0.1, 0.35), np.array([120.0, 150.0, 210.0]))
    page += rng.normal(0, rng.uniform(0.5, 5), page.shape)  # grain
    angle = rng.uniform(0, 2 * np.pi)
    light = 1 - rng.uniform(0, MAX_RAMP) * (np.cos(angle) * cols + np.sin(angle) * rows + 0.5)
    if rng.random() < 0.25:  # a shadow: a half-plane with a soft edge
        angle, offset = rng.uniform(0, 2 * np.pi), rng.uniform(-0.4, 0.4)
        beyond = (np.cos(angle) * cols + np.sin(angle) * rows - offset) * IMAGE_SIZE / rng.uniform(0.5, 4)
        light = light * (1 - rng.uniform(0.1, 0.4) / (1 + np.exp(-beyond)))
    return page, light


def _photographed(canvas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A phone's photo of the page: a colour cast, half the time a little blur, and sensor noise."""
    canvas = canvas * rng.uniform(0.9, 1.1, 3)
    if rng.random() < 0.5:
        sigma = rng.uniform(0.3, 1.0)
        taps = np.exp(-0.5 * (np.arange(-2, 3) / sigma) ** 2)
        taps /= taps.sum()
        for axis in (0, 1):
            padded = np.pad(canvas, [(2, 2) if a == axis else (0, 0) for a in range(3)], mode="edge")
            canvas = sum(t * np.take(padded, range(i, i + IMAGE_SIZE), axis=axis) for i, t in enumerate(taps))
    return canvas + rng.normal(0, rng.uniform(0, 4), canvas.shape)


def _sketch(label: int, rng: np.random.Generator, sizes, side_rate,
            hairline: float = HAIRLINE) -> tuple[np.ndarray, np.ndarray]:
    """A shape drawn on paper and photographed (sizes: SKETCH_SIZES; side_rate unused: the frame crops it), its
    strokes from `hairline` to a third of its size."""
    page, light = _paper(rng)
    mask = np.zeros((IMAGE_SIZE, IMAGE_SIZE), dtype=bool)
    if label != NOTHING:
        size = float(np.exp(rng.uniform(*np.log(SKETCH_SIZES))))  # as many tiny shapes as large ones
        cx, cy = rng.uniform(min(size / 2, IMAGE_SIZE / 2), max(IMAGE_SIZE - size / 2, IMAGE_SIZE / 2), 2)
        stroke = float(np.exp(rng.uniform(np.log(hairline), np.log(max(0.7, size / 3)))))  # hairline to thick
        inside = _sketch_shape(label, *_sketch_frame(cx, cy, size, rng), size, stroke, rng)
        cover = inside.reshape(IMAGE_SIZE, SUPERSAMPLE, IMAGE_SIZE, SUPERSAMPLE).mean(axis=(1, 3))
        dark_board = page.mean() < 128
        pen = np.asarray(CHALK if dark_board else PENS[rng.integers(len(PENS))], float)
        page, mask = _paint(page, cover * rng.uniform(0.6, 1.0), pen), cover >= 0.5  # a pencil is fainter
    return _to_uint8(_photographed(page * light[..., None], rng)), mask


def _fine(label: int, rng: np.random.Generator, sizes, side_rate) -> tuple[np.ndarray, np.ndarray]:
    """A sketch whose strokes go down to FINE_HAIRLINE."""
    return _sketch(label, rng, sizes, side_rate, hairline=FINE_HAIRLINE)


PEN_SIZES = (MIN_DRAWN_SIZE, 0.85 * IMAGE_SIZE)  # 7 to 13.6 cells, drawn log-uniformly as a sketch's sizes


PEN_BUMPS = 0.15  # the largest share of the cells beside a pen drawing's line that a hand's wobble inks too


def _bumps(cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The cells with some of the paper cells beside the ink inked too: a hand drawing on the canvas goes a cell
    past its line here and there."""
    padded = np.pad(cells, 1)
    beside = ~cells & (padded[1:-1, :-2] | padded[1:-1, 2:] | padded[:-2, 1:-1] | padded[2:, 1:-1])
    return cells | (beside & (rng.random(cells.shape) < rng.uniform(0, PEN_BUMPS)))


def _pen(label: int, rng: np.random.Generator, sizes, side_rate) -> tuple[np.ndarray, np.ndarray]:
    """A shape drawn on the image page's 16 x 16 canvas with its pen, as a student draws it: turned by any angle and
    bent by the hand (the sketch's frame), its strokes and outlines about a cell wide, so that a square, bar or
    triangle is outlined half the time. A cell is ink when the pen covered a quarter to a half of it."""
    ink, background = _canvas_colours(rng)
    cells = np.zeros((DRAW_CELLS, DRAW_CELLS), dtype=bool)
    if label != NOTHING:
        size = float(np.exp(rng.uniform(*np.log(PEN_SIZES))))
        margin = min(0.7 * size, IMAGE_SIZE / 2)  # a student keeps the shape on the canvas, turned or not
        cx, cy = rng.uniform(margin, IMAGE_SIZE - margin, 2)
        inside = _sketch_shape(label, *_sketch_frame(cx, cy, size, rng), size, rng.uniform(1.5, 2.5), rng)
        cover = inside.reshape(DRAW_CELLS, _FINE // DRAW_CELLS, DRAW_CELLS, _FINE // DRAW_CELLS).mean(axis=(1, 3))
        cells = _bumps(cover >= rng.uniform(0.25, 0.5), rng)
    return mask_grid(cells, IMAGE_SIZE, ink, background), _upscale(cells, IMAGE_SIZE // DRAW_CELLS)


_KIND_MAKERS = {"cluttered": _cluttered, "plain": _plain, "drawn": _drawn, "sketch": _sketch, "pen": _pen,
                "fine": _fine}


def generate_sample(rng: np.random.Generator, kind: str | None = None, label: int | None = None,
                    sizes: tuple[float, float] = (MIN_SHAPE_SIZE, MAX_SHAPE_SIZE),
                    side_rate: float = AGAINST_SIDE_RATE, mix: tuple[float, ...] = KIND_MIX) -> ShapeSample:
    """One image: of `kind` (else drawn from `mix`, shares of KINDS) and class `label` (else uniform over
    CLASSES)."""
    kind = kind or str(rng.choice(KINDS, p=mix))
    label = int(rng.integers(len(CLASSES))) if label is None else label
    image, mask = _KIND_MAKERS[kind](label, rng, sizes, side_rate)
    return ShapeSample(image=image, label=label, mask=mask, kind=kind)


def _test_sample(name: str, rng: np.random.Generator) -> ShapeSample:
    """One image of a held-out test set (TEST_SETS)."""
    if name == "mix":
        return generate_sample(rng)
    if name == "nothing":
        return generate_sample(rng, label=NOTHING)
    if name == "off-centre":  # against a side, at the smallest or the largest size
        small = rng.random() < 0.5
        sizes = (MIN_SHAPE_SIZE, MIN_SHAPE_SIZE + 4) if small else (MAX_SHAPE_SIZE - 4, MAX_SHAPE_SIZE)
        return generate_sample(rng, label=int(rng.integers(len(SHAPES))), sizes=sizes, side_rate=1.0)
    return generate_sample(rng, kind=name)


def _stack(samples: list[ShapeSample]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.stack([s.image for s in samples]), np.array([s.label for s in samples], dtype=np.int64),
            np.stack([s.mask for s in samples]))


BLOCK = 5000  # a training set with sketches is drawn in blocks of this many images, each from its own stream


def _training_block(seed: int, block: int, n: int, mix: tuple[float, ...]) -> list[ShapeSample]:
    rng = np.random.default_rng([seed, block])
    return [generate_sample(rng, mix=mix) for _ in range(n)]


def generate_dataset(n: int, seed: int, mix: tuple[float, ...] = KIND_MIX,
                     workers: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` samples of the training `mix` from ``seed``: images uint8 [n, H, W, 3], labels int64 [n] and masks
    bool [n, H, W]. KIND_MIX is one stream of `seed` (the training set before issue 35); any other mix is drawn in
    blocks, block k of BLOCK images from the stream [seed, k], so `workers` processes draw the same set as one."""
    if mix == KIND_MIX:
        rng = np.random.default_rng(seed)
        return _stack([generate_sample(rng) for _ in range(n)])
    jobs = [(seed, block, min(BLOCK, n - start), mix) for block, start in enumerate(range(0, n, BLOCK))]
    if workers > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(workers) as pool:
            blocks = pool.starmap(_training_block, jobs)
    else:
        blocks = [_training_block(*job) for job in jobs]
    return _stack([sample for block in blocks for sample in block])


def generate_test_set(name: str, n: int, seed: int = HELDOUT_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` held-out images of the test set `name` (one of TEST_SETS), as generate_dataset returns them. "mix" is
    generate_dataset(n, seed) itself; the others draw from their own stream of `seed`. The sketch conditions are
    core.data.student_drawings'."""
    if name not in TEST_SETS:
        raise ValueError(f"unknown test set {name!r}; the sets are {', '.join(TEST_SETS)}")
    if name == "mix":
        return generate_dataset(n, seed)
    rng = np.random.default_rng([seed, TEST_SETS.index(name)])
    return _stack([_test_sample(name, rng) for _ in range(n)])
