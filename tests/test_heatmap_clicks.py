"""A click on the canvas chart is what the browser says it is (issue 36, finding 9): pages/ui/heatmap.py passes the
pages' callbacks only a cell the chart could send (cell_limits, valid_cell); a forged one (a string, a negative or
huge index, a missing or extra field) is ignored, never an exception in a callback and a traceback in the log."""

from __future__ import annotations

import numpy as np
import pytest

from core.figures import canvas
from pages.ui.heatmap import cell_limits, valid_cell

TOKENS = list("abcd")
PATTERN = np.full((4, 4), 0.25)


def specs() -> dict[str, dict]:
    image = np.zeros((32, 32, 3))
    return {"head": canvas.head_heatmap_spec(PATTERN, TOKENS),
            "head, paper notation": canvas.head_heatmap_spec(PATTERN, TOKENS, notation="paper"),
            "overview": canvas.overview_spec(np.stack([np.stack([PATTERN] * 3)] * 2), TOKENS),
            "head view": canvas.head_view_spec(np.stack([PATTERN, PATTERN]), TOKENS, [0, 1]),
            "image": canvas.image_overlay_spec(image, np.random.rand(4, 4)),
            "image, every head": canvas.image_overlay_spec(image, np.random.rand(2, 3, 4, 4))}


@pytest.mark.parametrize("kind, sent", [
    ("head", {"query": 3, "key": 0}), ("head, paper notation", {"key": 3, "query": 0}),
    ("overview", {"layer": 1, "head": 2, "query": 3, "key": 3}), ("head view", {"query": 3}),
    ("image", {"row": 3, "column": 3}), ("image, every head", {"layer": 1, "head": 2, "row": 0, "column": 3})])
def test_what_the_chart_sends_passes_and_every_forgery_of_it_does_not(kind, sent):
    limits = cell_limits(specs()[kind])
    assert valid_cell(sent, limits) == sent
    for name in sent:
        for forged in (-1, limits[name], 10**20, "1", 1.0, True, None, [1], {"a": 1}):
            assert valid_cell({**sent, name: forged}, limits) is None, (name, forged)
        assert valid_cell({k: v for k, v in sent.items() if k != name}, limits) is None
    assert valid_cell({**sent, "extra": 0}, limits) is None
    for forged in (None, "cell", 3, [sent], {}):
        assert valid_cell(forged, limits) is None
