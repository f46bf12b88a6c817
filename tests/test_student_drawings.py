"""The held-out drawings and photos of issue 35 (core.data.student_drawings): drawn apart from the training generator,
read through the upload path, the same every time."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from core.data import student_drawings as drawings
from core.data.images import CLASSES, DRAWING_BACKGROUND, DRAWING_INK, NOTHING

SOURCE = Path(drawings.__file__)


def test_the_held_out_drawings_share_only_the_class_names_with_the_training_generator():
    imported = {(node.module, alias.name) for node in ast.walk(ast.parse(SOURCE.read_text()))
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    # the class names, and for the canvas condition the canvas's size and the page's own rendering of it
    assert {name for module, name in imported if module == "core.data.images"} == {"CLASSES", "DRAW_CELLS", "mask_grid"}
    assert ("core.serving.image_io", "load_image") in imported  # every other image goes through the upload path


def test_a_drawing_is_the_same_for_the_same_stream_and_is_an_upload_of_32_pixels():
    first = drawings._draw("triangle", np.random.default_rng([5, 1]), True, degrees=(5.0, 20.0))
    again = drawings._draw("triangle", np.random.default_rng([5, 1]), True, degrees=(5.0, 20.0))
    np.testing.assert_array_equal(first, again)
    assert first.shape == (32, 32, 3) and first.dtype == np.uint8
    other = drawings._draw("triangle", np.random.default_rng([5, 2]), True, degrees=(5.0, 20.0))
    assert not np.array_equal(first, other)


def test_a_shape_is_ink_on_paper_and_a_blank_page_is_lit_unevenly():
    rng = np.random.default_rng(0)
    square = drawings._draw("square", rng, True, size_range=(0.6, 0.6)).astype(float).mean(axis=2)
    assert square.min() < 0.5 * square.max(), "dark ink on light paper"
    for strength in (0.0, 0.3):
        page = drawings._draw(None, np.random.default_rng(1), True, ramp=strength).astype(float).mean(axis=2)
        assert not (page == page[0, 0]).all(), "paper has grain"
    ramped = drawings._draw(None, np.random.default_rng(3), True, ramp=0.3).astype(float).mean(axis=2)
    flat = drawings._draw(None, np.random.default_rng(3), True, ramp=0.0).astype(float).mean(axis=2)
    assert np.ptp(ramped) > np.ptp(flat) + 20


def test_framed_as_the_page_frames_an_upload_a_tiny_shape_fills_more_of_the_image_and_a_blank_page_is_unchanged():
    for stream in range(5):
        framed, unframed = (drawings._draw("square", np.random.default_rng([7, stream]), framed, size_range=(0.15, 0.2),
                                           stroke_range=(0.12, 0.2)).astype(float).mean(axis=2)
                            for framed in (True, False))
        dark = [(image < (image.max() + image.min()) / 2).mean() for image in (framed, unframed)]
        assert dark[0] > 3 * dark[1], "framed, the square covers several times the pixels"
        blank = [drawings._draw(None, np.random.default_rng([8, stream]), framed, ramp=0.3) for framed in (True, False)]
        np.testing.assert_array_equal(*blank)


def test_every_condition_holds_its_shapes_evenly_and_blank_pages_by_ramp():
    _, labels = drawings.condition_set("outlined")
    assert set(labels) == {CLASSES.index("square"), CLASSES.index("triangle")}
    assert np.bincount(labels).max() == len(labels) // 2
    _, labels = drawings.condition_set("blank")
    assert (labels == NOTHING).all() and len(labels) == len(drawings.blank_ramps())
    assert set(drawings.blank_ramps()) == set(drawings.RAMPS) and max(drawings.RAMPS) == 0.3


def test_canvas_outlines_are_the_page_pens_line_around_an_empty_middle():
    """The "canvas" condition: outlined squares and triangles drawn a cell wide on the image page's 16x16 canvas,
    in the page's two default colours, with nothing inside the line."""
    images, labels = drawings.condition_set("canvas")
    assert set(labels) == {CLASSES.index("square"), CLASSES.index("triangle")}
    assert np.bincount(labels).max() == len(labels) // 2
    for image in images:
        assert {tuple(colour) for colour in image.reshape(-1, 3)} == {DRAWING_INK, DRAWING_BACKGROUND}
        ink = (image[::2, ::2] == DRAWING_INK).all(axis=2)  # [16, 16] cells
        assert 0.05 < ink.mean() < 0.45 and _enclosed(ink).any(), "a line around an empty middle"


def _enclosed(ink: np.ndarray) -> np.ndarray:
    """The background cells that no 4-connected path of background cells joins to the border."""
    outside = np.zeros_like(ink)
    outside[[0, -1], :], outside[:, [0, -1]] = ~ink[[0, -1], :], ~ink[:, [0, -1]]
    while True:
        grown = outside.copy()
        grown[1:] |= outside[:-1]
        grown[:-1] |= outside[1:]
        grown[:, 1:] |= outside[:, :-1]
        grown[:, :-1] |= outside[:, 1:]
        grown &= ~ink
        if (grown == outside).all():
            return ~ink & ~outside
        outside = grown
