"""The drawing's link value (core/serving/drawing_link.py): every grid goes there and back, and a link's value that
is not one this app writes is refused with a one-line reason, its length checked before anything is decoded."""

from __future__ import annotations

import numpy as np
import pytest

from core.data.images import CLASSES, DRAW_CELLS, template_cells
from core.serving.drawing_link import DrawingLinkError, decode_drawing, encode_drawing, link_length

SIDE = DRAW_CELLS


def test_every_grid_goes_to_the_link_and_back():
    rng = np.random.default_rng(0)
    grids = [rng.random((SIDE, SIDE)) < rate for rate in (0.0, 0.1, 0.5, 0.9, 1.0)]
    grids += [template_cells(label) for label in range(len(CLASSES))]
    for grid in grids:
        value = encode_drawing(grid)
        assert len(value) == link_length(SIDE) == 43
        np.testing.assert_array_equal(decode_drawing(value, SIDE), grid)


def test_the_spelling_is_the_one_the_canvas_writes():
    """Row by row, the first cell in a byte's high bit, URL-safe base64 unpadded (assets/web/drawing.js)."""
    grid = np.zeros((SIDE, SIDE), dtype=bool)
    grid[0, 0] = True
    assert encode_drawing(grid) == "gA" + "A" * 41
    grid[0, 0], grid[-1, -1] = False, True
    assert encode_drawing(grid) == "A" * 42 + "E"
    assert encode_drawing(np.ones((SIDE, SIDE), dtype=bool)) == "_" * 42 + "8"  # 1111, then two spare bits


@pytest.mark.parametrize("value, reason", [
    ("", "43 characters long, this one is 0"),
    ("A" * 42, "43 characters long, this one is 42"),
    ("A" * 44, "43 characters long, this one is 44"),
    ("A" * 10_000_000, "43 characters long, this one is 10000000"),
    ("A" * 42 + "=", "letters, digits, '-' and '_' only"),
    ("A" * 41 + "+/", "letters, digits, '-' and '_' only"),
    ("A" * 41 + " A", "letters, digits, '-' and '_' only"),
    ("Ä" * 43, "letters, digits, '-' and '_' only"),
    ("<script>" + "A" * 35, "letters, digits, '-' and '_' only"),
    ("A" * 42 + "B", "not one this app writes"),  # the last character's spare bits set
])
def test_bad_values_are_refused_with_a_reason(value, reason):
    with pytest.raises(DrawingLinkError, match=reason):
        decode_drawing(value, SIDE)


def test_other_grid_sizes():
    """The codec takes the grid's side: a side whose cells do not fill the last byte pads it with zeros."""
    grid = np.random.default_rng(1).random((7, 7)) < 0.5
    value = encode_drawing(grid)
    assert len(value) == link_length(7) == 10
    np.testing.assert_array_equal(decode_drawing(value, 7), grid)
    with pytest.raises(DrawingLinkError, match="43 characters long"):
        decode_drawing(value, SIDE)
