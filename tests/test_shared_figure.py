"""pages/ui/store.shared_figure: a figure drawn once for every session that asks for the same one, keyed by the
whole of its arrays (numpy's repr leaves out the middle of a long array: a key made from it would hand one text's
figure to another)."""

from __future__ import annotations

import numpy as np
import pytest

from pages.ui.store import shared_figure

calls: list[tuple] = []


def _draw(values: np.ndarray, labels: list[str], *, title: str = "") -> dict:
    calls.append((values.copy(), tuple(labels), title))
    return {"mean": float(values.mean()), "labels": labels, "title": title}


draw = shared_figure(_draw)


def test_the_same_arguments_draw_once_and_share_the_figure():
    values = np.arange(4000, dtype=np.float32)
    first = draw(values, ["a", "b"], title="t")
    before = len(calls)
    again = draw(values.copy(), ["a", "b"], title="t")
    assert again is first and len(calls) == before


@pytest.mark.parametrize("change", ["middle", "label", "title", "dtype"])
def test_any_difference_draws_anew(change):
    values = np.arange(4000, dtype=np.float32)
    first = draw(values, ["a", "b"], title="t")
    changed, labels, title = values.copy(), ["a", "b"], "t"
    if change == "middle":
        changed[2000] += 1  # outside what repr(values) shows
        assert repr(changed) == repr(values)
    elif change == "label":
        labels = ["a", "c"]
    elif change == "title":
        title = "u"
    else:
        changed = values.astype(np.float64)
    before = len(calls)
    assert draw(changed, labels, title=title) is not first and len(calls) == before + 1


def test_an_object_whose_repr_may_hide_its_data_is_refused():
    class View:
        def __init__(self):
            self.values = np.zeros(3)

    with pytest.raises(TypeError, match="cannot key a shared result by a View"):
        draw(View(), [])
