"""Synthetic shape images for the tiny vision transformer.

Every image is drawn by this module from a seeded ``numpy.random.Generator``
(never global random state), so a data set is fully determined by its seed and
nothing is downloaded. Each image holds one class shape on a cluttered
background (noise, thin lines, small specks) and keeps the shape's pixel mask,
so we can later check whether attention falls on the object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IMAGE_SIZE = 32
CLASSES = ("circle", "square", "triangle", "cross", "ring", "bar")
TRAIN_SEED = 0
HELDOUT_SEED = 1

MIN_SHAPE_SIZE = 12
MAX_SHAPE_SIZE = 22
# Object and background colours come from opposite ends of the brightness range,
# so the object always stands out whatever its hue.
DARK_RANGE = (0.0, 100.0)
LIGHT_RANGE = (155.0, 255.0)
NOISE_STD = 8.0

# Pixel-centre coordinates shared by every drawing function.
_YS, _XS = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32) + 0.5
# Fractions along a line: two samples per pixel so 1-px lines have no gaps.
_LINE_STEPS = np.linspace(0.0, 1.0, 2 * IMAGE_SIZE)[:, None]


@dataclass
class ShapeSample:
    """One generated image with its class label and object mask."""

    image: np.ndarray  # uint8 [H, W, 3]
    label: int
    mask: np.ndarray  # bool [H, W], True on the object's pixels


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
assert len(_DRAWERS) == len(CLASSES)


def _colour_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random (background, object) colours: one dark, one light, either way round."""
    dark, light = rng.uniform(*DARK_RANGE, 3), rng.uniform(*LIGHT_RANGE, 3)
    return (dark, light) if rng.random() < 0.5 else (light, dark)


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


def _background(colour: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Float image of a flat colour with a few faint lines and specks."""
    canvas = np.broadcast_to(colour, (IMAGE_SIZE, IMAGE_SIZE, 3)).copy()
    for _ in range(rng.integers(1, 4)):
        rows, cols = _thin_line(rng)
        canvas[rows, cols] = _clutter_colour(colour, rng)
    for _ in range(rng.integers(1, 4)):
        rows, cols = _speck(rng)
        canvas[rows, cols] = _clutter_colour(colour, rng)
    return canvas


def generate_sample(rng: np.random.Generator) -> ShapeSample:
    """Draw one random shape of a random class on a cluttered background."""
    label = int(rng.integers(len(CLASSES)))
    background, colour = _colour_pair(rng)
    canvas = _background(background, rng)
    size = rng.uniform(MIN_SHAPE_SIZE, MAX_SHAPE_SIZE)
    cx, cy = rng.uniform(size / 2, IMAGE_SIZE - size / 2, 2)
    mask = _DRAWERS[label](cx, cy, size, rng)
    canvas[mask] = colour
    canvas += rng.normal(0.0, NOISE_STD, canvas.shape)
    image = np.clip(np.rint(canvas), 0, 255).astype(np.uint8)
    return ShapeSample(image=image, label=label, mask=mask)


def generate_dataset(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate ``n`` samples from ``seed``.

    Returns images uint8 [n, H, W, 3], labels int64 [n] and masks bool [n, H, W].
    """
    rng = np.random.default_rng(seed)
    images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    labels = np.empty(n, dtype=np.int64)
    masks = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=bool)
    for i in range(n):
        sample = generate_sample(rng)
        images[i], labels[i], masks[i] = sample.image, sample.label, sample.mask
    return images, labels, masks
