"""Held-out drawings and photos as a class makes them, for the vision transformers' conditions (issue 35).

This module is written apart from the training generator (core.data.images): it shares only the class names. Its
shapes are polygons drawn with Pillow at 256 pixels (a phone's size for the photographed ones), its hand wobble is a
smoothed random walk across the outline (the generator bends the whole plane with sine waves), its light is a lamp's
fall-off from a point with a vignette, or a linear ramp for blank pages (the generator: a linear ramp and a half-plane
shadow), its shadows are a blurred hand-shaped ellipse; and every image reaches 32x32 through the image page's upload
path, core.serving.image_io.load_image (PNG, or JPEG for photos), as a student's upload does, framed around its
drawing as the page frames it by default (core.serving.framing; condition_set's frame=False does not). One condition,
"canvas", is drawn on the image page's own 16x16 canvas instead, rendered as the page renders it
(core.data.images.mask_grid), and never framed, as on the page.

    python -m core.data.student_drawings OUT.png     # a contact sheet of every condition
"""

from __future__ import annotations

import io
import sys
from functools import cache

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from core.data.images import CLASSES, DRAW_CELLS, mask_grid
from core.serving.image_io import load_image

SIDE = 256  # the drawings' side in pixels, before the upload path shrinks them
SEED = 35
N_PER_SHAPE = 40  # images per shape and condition
RAMPS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)  # blank pages: how much darker the far side is
CONDITIONS = ("rotated", "thick", "thin", "outlined", "tiny", "large", "wobbly", "photographed", "blank", "canvas")
PHONE_SIZES = ((1600, 1200), (1200, 1600), (1280, 960), (960, 1280))
INKS = {"pencil": (105, 105, 110), "ballpoint": (30, 40, 120), "felt black": (25, 25, 25), "red": (190, 35, 35),
        "green": (35, 120, 60)}
PAGES = {"white": (248, 248, 245), "cream": (242, 234, 214), "grey": (215, 215, 210), "yellow": (250, 240, 180)}


# ---------------------------------------------------------------------------------------------------------
# Outlines: closed polygons in a unit frame (size 1, centred at 0), then placed, turned and wobbled
# ---------------------------------------------------------------------------------------------------------

def _circle(n: int = 96) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return 0.5 * np.stack([np.cos(t), np.sin(t)], 1)


def _square() -> np.ndarray:
    return np.array([(-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)])


def _triangle(apex: float) -> np.ndarray:
    return np.array([(apex, -0.5), (0.5, 0.5), (-0.5, 0.5)])


def _plus(arm: float) -> np.ndarray:
    """A plus sign's outline with arms `arm` wide (fraction of the size)."""
    a = arm / 2
    return np.array([(-a, -0.5), (a, -0.5), (a, -a), (0.5, -a), (0.5, a), (a, a), (a, 0.5), (-a, 0.5), (-a, a),
                     (-0.5, a), (-0.5, -a), (-a, -a)])


def _rectangle(thickness: float) -> np.ndarray:
    t = thickness / 2
    return np.array([(-0.5, -t), (0.5, -t), (0.5, t), (-0.5, t)])


def _densify(points: np.ndarray, step: float) -> np.ndarray:
    """The closed outline with a point every `step` or so along each side."""
    out = []
    for a, b in zip(points, np.roll(points, -1, axis=0)):
        n = max(1, int(np.ceil(np.linalg.norm(b - a) / step)))
        out.append(a + np.linspace(0, 1, n, endpoint=False)[:, None] * (b - a))
    return np.concatenate(out)


def _hand(points: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    """A hand's drawing of the outline (in pixels): each point pushed along the outline's normal by a smoothed random
    walk that closes on itself, `amount` pixels at its widest, plus a tremor of a tenth of that."""
    dense = _densify(points, 3.0)
    walk = np.cumsum(rng.normal(0, 1, len(dense)))
    walk -= np.linspace(0, walk[-1], len(dense))  # back to where it started: the outline closes
    kernel = np.ones(9) / 9
    walk = np.convolve(np.concatenate([walk[-8:], walk, walk[:8]]), kernel, mode="same")[8:-8]
    walk = walk / (np.abs(walk).max() + 1e-9) * amount + rng.normal(0, 0.1 * amount, len(dense))
    tangent = np.roll(dense, -1, axis=0) - np.roll(dense, 1, axis=0)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], 1) / (np.linalg.norm(tangent, axis=1, keepdims=True) + 1e-9)
    return dense + walk[:, None] * normal


def _placed(unit: np.ndarray, centre: np.ndarray, size: float, degrees: float) -> np.ndarray:
    turn = np.deg2rad(degrees)
    rotation = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
    return centre + (unit * size) @ rotation.T


# ---------------------------------------------------------------------------------------------------------
# One drawing: an ink mask, then paper, ink and light
# ---------------------------------------------------------------------------------------------------------

def _ink_mask(shape: str, canvas: tuple[int, int], centre: np.ndarray, size: float, degrees: float, stroke: float,
              outlined: bool, wobble: float, rng: np.random.Generator) -> Image.Image:
    """The shape's ink as an 8-bit mask of `canvas` (width, height). Strokes are `stroke` pixels wide; wobble in
    pixels. Crosses are filled outlines, rings a stroked circle, bars filled rectangles."""
    mask = Image.new("L", canvas, 0)
    draw = ImageDraw.Draw(mask)
    if shape == "ring":
        path = _hand(_placed(_circle(), centre, size - stroke, degrees), wobble, rng)
        draw.line([tuple(p) for p in np.vstack([path, path[:1]])], fill=255, width=max(1, round(stroke)),
                  joint="curve")
        return mask
    unit = {"circle": lambda: _circle(), "square": _square, "triangle": lambda: _triangle(rng.uniform(-0.2, 0.2)),
            "cross": lambda: _plus(min(stroke / size, 0.34)),
            "bar": lambda: _rectangle(rng.uniform(0.14, 0.3))}[shape]()
    path = [tuple(p) for p in _hand(_placed(unit, centre, size, degrees), wobble, rng)]
    if outlined:
        draw.line(path + path[:1], fill=255, width=max(1, round(stroke)), joint="curve")
    else:
        draw.polygon(path, fill=255)
    return mask


def _page(canvas: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Paper [H, W, 3] float with grain and, a quarter of the time, feint ruled lines."""
    width, height = canvas
    paper = np.array(list(PAGES.values())[rng.integers(len(PAGES))], float)
    page = paper + rng.normal(0, rng.uniform(2, 8), (height, width, 1)).astype(np.float32)
    if rng.random() < 0.25:
        gap = rng.uniform(0.06, 0.1) * min(canvas)
        rows = (np.arange(height) + rng.uniform(0, gap)) % gap < max(1.0, min(canvas) / 160)
        page[rows] = page[rows] * 0.75 + np.array([150.0, 170.0, 220.0]) * 0.25
    return page


def _lamp(canvas: tuple[int, int], strength: float, rng: np.random.Generator) -> np.ndarray:
    """A desk lamp's light [H, W]: brightest at a point somewhere over the page, falling off with the squared
    distance to `strength` darker at the farthest corner, times a camera's vignette."""
    width, height = canvas
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    spot = rng.uniform(-0.3, 1.3, 2) * (width, height)
    falloff = (xs - spot[0]) ** 2 + (ys - spot[1]) ** 2
    vignette = ((xs / width - 0.5) ** 2 + (ys / height - 0.5) ** 2) * rng.uniform(0, 0.15)
    return 1 - strength * falloff / falloff.max() - vignette


def _ramp(canvas: tuple[int, int], strength: float, rng: np.random.Generator) -> np.ndarray:
    """Light falling linearly across the page, in any direction, `strength` darker at the far side."""
    width, height = canvas
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    along = np.cos(angle) * xs + np.sin(angle) * ys
    return 1 - strength * (along - along.min()) / (along.max() - along.min())


def _hand_shadow(canvas: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """The blurred shadow of a hand or phone over part of the page [H, W] (1 = no shadow)."""
    width, height = canvas
    shadow = Image.new("L", canvas, 0)
    cx, cy = rng.uniform(0, 1, 2) * (width, height)
    rx, ry = rng.uniform(0.2, 0.5, 2) * min(canvas)
    side = rng.integers(4)
    cx, cy = [(cx, -0.1 * height), (cx, 1.1 * height), (-0.1 * width, cy), (1.1 * width, cy)][side]
    ImageDraw.Draw(shadow).ellipse((cx - rx, cy - ry, cx + rx, cy + ry), fill=255)
    blurred = np.asarray(shadow.filter(ImageFilter.GaussianBlur(min(canvas) / 20)), np.float32) / 255
    return 1 - rng.uniform(0.1, 0.3) * blurred


LIGHT_SCALE = 8  # light varies slowly: it is computed at 1/8 of the canvas and enlarged


def _light(canvas: tuple[int, int], ramp: float | None, photo: bool, rng: np.random.Generator) -> np.ndarray:
    """The page's light [H, W]: a blank page's ramp (linear or a lamp's, `ramp` darker at the far side), else a lamp
    of up to 30 % with, on photos and three drawings in ten, a hand's shadow."""
    small = (canvas[0] // LIGHT_SCALE, canvas[1] // LIGHT_SCALE)
    if ramp is not None:
        light = _ramp(small, ramp, rng) if rng.random() < 0.5 else _lamp(small, ramp, rng)
    else:
        light = _lamp(small, rng.uniform(0, 0.3), rng)
        if photo or rng.random() < 0.3:
            light = light * _hand_shadow(small, rng)
    return np.asarray(Image.fromarray(light.astype(np.float32), mode="F").resize(canvas, Image.Resampling.BILINEAR))


def _photo_bytes(page: np.ndarray, jpeg: bool, rng: np.random.Generator) -> bytes:
    image = Image.fromarray(np.clip(np.rint(page), 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    if jpeg:
        image.save(buffer, format="JPEG", quality=int(rng.integers(75, 93)))
    else:
        image.save(buffer, format="PNG")
    return buffer.getvalue()


def _draw(shape: str | None, rng: np.random.Generator, framed: bool, *, size_range=(0.4, 0.8),
          degrees=(-10.0, 10.0), stroke_range=(0.08, 0.16), outlined: bool = False, wobble=(0.0, 0.015),
          photo: bool = False, ramp: float | None = None) -> np.ndarray:
    """One image through the upload path: uint8 [32, 32, 3]. size_range: the shape's size as a fraction of the
    (square) frame; degrees: its turn; stroke_range: stroke width as a fraction of its size; wobble: the hand's
    largest deviation as a fraction of its size; photo: a phone-size JPEG with a lamp, a shadow and sensor noise;
    ramp: a blank page under a linear ramp of that strength (shape must be None); framed: framed around the drawing
    as the image page does by default (core.serving.framing)."""
    canvas = PHONE_SIZES[rng.integers(len(PHONE_SIZES))] if photo else (SIDE, SIDE)
    frame = min(canvas)
    page = _page(canvas, rng)
    if shape is not None:
        size = rng.uniform(*size_range) * frame
        margin = (frame - size) / 2 * 0.8
        centre = np.array(canvas, float) / 2 + rng.uniform(-margin, margin, 2)
        stroke = max(1.0, rng.uniform(*stroke_range) * size)
        mask = _ink_mask(shape, canvas, centre, size, rng.uniform(*degrees) * rng.choice([-1, 1]), stroke,
                         outlined, rng.uniform(*wobble) * size, rng)
        ink = np.asarray(mask, np.float32)[..., None] / 255 * rng.uniform(0.75, 1.0)
        page = page * (1 - ink) + np.array(list(INKS.values())[rng.integers(len(INKS))], float) * ink
    page = page * _light(canvas, ramp, photo, rng)[..., None]
    if photo:
        page = page * rng.uniform(0.9, 1.1, 3) + rng.normal(0, rng.uniform(1, 4), page.shape)
    return load_image(_photo_bytes(page, jpeg=photo, rng=rng), frame=framed).array


SHAPES = CLASSES[:-1]
STROKES = ("cross", "ring", "bar")
OUTLINABLE = ("square", "triangle")


CANVAS_FINE = 8  # sub-cells per canvas cell while a stroke is drawn


def _canvas_outline(shape: str, rng: np.random.Generator) -> np.ndarray:
    """An outlined square or triangle as a student draws it with the image page's pen: a line one cell wide along a
    hand-wobbled outline 7 to 12 cells across, turned up to 15 degrees, on the 16x16 canvas in the page's default
    colours. uint8 [32, 32, 3]."""
    side = DRAW_CELLS * CANVAS_FINE
    unit = _square() if shape == "square" else _triangle(rng.uniform(-0.2, 0.2))
    centre = np.full(2, side / 2) + rng.uniform(-1.0, 1.0, 2) * CANVAS_FINE
    outline = _placed(unit, centre, rng.uniform(7, 12) * CANVAS_FINE, rng.uniform(-15, 15))
    path = _hand(outline, rng.uniform(0.2, 0.6) * CANVAS_FINE, rng)
    strokes = Image.new("L", (side, side), 0)
    ImageDraw.Draw(strokes).line([tuple(p) for p in np.vstack([path, path[:1]])], fill=255, width=CANVAS_FINE,
                                 joint="curve")
    cells = np.asarray(strokes.resize((DRAW_CELLS, DRAW_CELLS), Image.Resampling.BOX)) > 100  # a cell the pen crossed
    return mask_grid(cells)


def _condition(name: str, rng: np.random.Generator, frame: bool) -> list[tuple[np.ndarray, int]]:
    """The condition's images and labels (uploads framed or not; the canvas is never framed, as on the page)."""
    if name == "canvas":
        per_shape = N_PER_SHAPE * len(SHAPES) // len(OUTLINABLE)
        return [(_canvas_outline(shape, rng), CLASSES.index(shape)) for shape in OUTLINABLE for _ in range(per_shape)]
    if name == "blank":
        return [(_draw(None, rng, frame, ramp=strength), CLASSES.index("nothing")) for strength in RAMPS
                for _ in range(N_PER_SHAPE)]
    settings = {
        "rotated": (SHAPES, {"degrees": (5.0, 20.0)}),
        "thick": (STROKES, {"stroke_range": (0.22, 0.32)}),
        "thin": (STROKES + OUTLINABLE, {"stroke_range": (0.012, 0.025), "outlined": True}),
        "outlined": (OUTLINABLE, {"stroke_range": (0.03, 0.1), "outlined": True}),
        "tiny": (SHAPES, {"size_range": (0.15, 0.25), "stroke_range": (0.12, 0.2)}),
        "large": (SHAPES, {"size_range": (0.75, 0.95)}),
        "wobbly": (SHAPES, {"wobble": (0.03, 0.05)}),
        "photographed": (SHAPES, {"size_range": (0.3, 0.7), "degrees": (0.0, 180.0), "photo": True}),
    }
    shapes, options = settings[name]
    per_shape = N_PER_SHAPE * len(SHAPES) // len(shapes)  # every condition holds 240 shapes
    return [(_draw(shape, rng, frame, **options), CLASSES.index(shape)) for shape in shapes
            for _ in range(per_shape)]


@cache
def condition_set(name: str, seed: int = SEED, frame: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The held-out images (uint8 [n, 32, 32, 3]) and labels (int64 [n]) of one condition (CONDITIONS), drawn from
    its own stream of `seed`; the same every time. frame: uploads framed around the drawing, the page's default."""
    if name not in CONDITIONS:
        raise ValueError(f"unknown condition {name!r}; the conditions are {', '.join(CONDITIONS)}")
    pairs = _condition(name, np.random.default_rng([seed, CONDITIONS.index(name)]), frame)
    return np.stack([image for image, _ in pairs]), np.array([label for _, label in pairs], dtype=np.int64)


def blank_ramps() -> np.ndarray:
    """The ramp strength of each image of the "blank" condition, in its order (float [n])."""
    return np.repeat(RAMPS, N_PER_SHAPE)


def contact_sheet(per_condition: int = 12) -> np.ndarray:
    """A few images of each condition, a row each (uint8), to look at."""
    rows = []
    for name in CONDITIONS:
        images, _ = condition_set(name)
        chosen = np.linspace(0, len(images) - 1, per_condition).astype(int)
        rows.append(np.concatenate(list(images[chosen]), axis=1))
    return np.concatenate(rows, axis=0)


if __name__ == "__main__":
    sheet = contact_sheet()
    Image.fromarray(sheet).resize((sheet.shape[1] * 4, sheet.shape[0] * 4), Image.Resampling.NEAREST).save(sys.argv[1])
