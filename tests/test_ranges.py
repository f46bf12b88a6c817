"""Inputs whose range depends on the model or the text (pages.ui.widgets.keep_in_range): a value left by another model
or given by a link outside the range is replaced by the nearest valid one, with a note, never an exception
(issue 14 §5). On the bundled models, which differ in context (128 and 32 tokens), layers and heads."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "pages"


@pytest.fixture(autouse=True)
def bundled_models(monkeypatch):
    monkeypatch.delenv("ATTENTION_LAB_MODELS_DIR", raising=False)


def start(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / page), default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def notes(at: AppTest) -> str:
    return " ".join(info.value for info in at.info if "out of range" in info.value)


def test_positions_follow_a_model_with_a_shorter_context():
    """The reported case: Positions at 99 on a 128-token model, then `sort` (32 tokens)."""
    at = start("positions_lab.py", model="lm-rope", positions="99", similar_to="90")  # 128 tokens
    ok(at)
    assert at.slider(key="positions").value == 99 and not notes(at)
    at.selectbox(key="model").select("sort").run()
    ok(at)
    assert at.slider(key="positions").value == 32 and at.slider(key="similar_to").value == 31
    assert "Positions 99 is out of range" in notes(at) and "Position n 90" in notes(at)
    at.run()  # the replaced values reach the URL once their widgets exist
    assert at.query_params["similar_to"] == "31" and "positions" not in at.query_params  # 32: sort's default


def test_a_link_out_of_range_is_replaced_by_a_valid_value_with_a_note():
    at = start("positions_lab.py", model="lm-rope", positions="999", rope_pair="40")  # 128 tokens, K = 128 / 4
    ok(at)
    assert at.slider(key="positions").value == 128 and at.slider(key="rope_pair").value == 15
    assert "Positions 999 is out of range" in notes(at) and "Feature pair 40" in notes(at)
    at.run()  # the replaced values reach the URL once their widgets exist
    ok(at)
    assert at.query_params["positions"] == "128" and at.query_params["rope_pair"] == "15"


def test_text_explorer_keeps_layer_head_and_window_in_range():
    at = start("text_explorer.py", layer="L3", head="H3", mask="window", window="100")
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="head").value, at.number_input(key="window").value) == (3, 3, 100)
    at.selectbox(key="model").select("copy").run()  # 2 layers, 1 head, 32 tokens
    ok(at)
    assert (at.radio(key="layer").value, at.radio(key="head").value, at.number_input(key="window").value) == (1, 0, 32)
    assert "Layer 3" in notes(at) and "Head 3" in notes(at) and "Window width 100" in notes(at)


@pytest.mark.parametrize("page, params, key, expected", [
    ("maths.py", dict(token="40"), "token", 11),
    ("residual_stream.py", dict(position="40"), "position", 11),
    ("token_norm.py", dict(token="40", layer="L9"), "layer", 3),
    ("masks_lab.py", dict(layer="L9", head="H3"), "layer", 3),
    ("image_lab.py", dict(patch="500", layer="L9"), "patch", 16),  # the last of vit-learned's 4 x 4 patches
])
def test_every_page_replaces_a_link_value_out_of_range(page, params, key, expected):
    at = start(page, **params)
    ok(at)
    widget = next(w for kind in ("selectbox", "radio", "slider", "number_input") for w in getattr(at, kind)
                  if w.key == key)
    assert widget.value == expected
    assert notes(at)


@pytest.mark.parametrize("page, model", [("positions_lab.py", "sort"), ("text_explorer.py", "lm-alibi"),
                                         ("image_lab.py", "vit-none")])
def test_a_link_names_its_model(page, model):
    """The picker's labels carry each model's held-out figure ("sort (exact match 100%)"); a link names the model."""
    at = start(page, model=model)
    ok(at)
    assert at.selectbox(key="model").value == model
    at.run()
    assert at.query_params["model"] == at.selectbox(key="model").options[at.selectbox(key="model").index]


def test_a_link_from_before_a_model_was_retrained_still_opens_it():
    """A copied link holds the label with the figure of its day; after retraining the figure differs."""
    at = start("positions_lab.py", model="sort (exact match 12%)")
    ok(at)
    assert at.selectbox(key="model").value == "sort"
