"""Held-out quality is shown where a model is chosen: the bundled models' figures in the model picker and its caption."""

from __future__ import annotations

from pathlib import Path

from conftest import ok
from streamlit.testing.v1 import AppTest

from core.model.registry import DEFAULT_TEXT_MODEL, MODELS_DIR, list_cards, quality

EXPLORER = str(Path(__file__).resolve().parent.parent / "pages" / "text_explorer.py")


def test_the_model_picker_shows_each_models_held_out_quality(monkeypatch):
    monkeypatch.delenv("ATTENTION_LAB_MODELS_DIR", raising=False)
    at = AppTest.from_file(EXPLORER, default_timeout=90).run()
    ok(at)
    cards = {card.name: card for card in list_cards(MODELS_DIR)}
    options = at.sidebar.selectbox(key="model").options
    sinusoidal = next(option for option in options if option.startswith("lm-sinusoidal"))
    agreement = cards["lm-sinusoidal"].metrics["headline"]["agreement"]
    assert sinusoidal == f"lm-sinusoidal (agreement {agreement:.0%})"  # the spread is in the caption
    caption = " ".join(c.value for c in at.sidebar.caption)
    assert f"Held-out: {quality(cards[DEFAULT_TEXT_MODEL])}" in caption  # the model the picker opens on


def test_a_broad_english_model_is_labelled_by_its_agreement_outside_the_templates():
    card = next(card for card in list_cards(MODELS_DIR) if card.name == "english-lm")
    figure = card.metrics["headline"]["agreement_out_of_template"]
    assert quality(card, first_only=True) == f"agrees {figure:.0%}"  # short: the picker fits presenter mode
    assert quality(card).startswith(f"agreement outside the templates {figure:.0%}")
