"""The shipped checkpoints meet their quality thresholds, measured afresh on held-out data (no training)."""

from __future__ import annotations

import pytest
import torch

from core.evaluate import agreement_accuracy, evaluate_algorithmic, evaluate_shapes
from core.registry import DEFAULT_TEXT_MODEL, list_cards, load_model
from core.tokenizer import TextTokenizer

BUNDLED = {card.name: card for card in list_cards()}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: more threads than free cores only slows them
    yield
    torch.set_num_threads(threads)


def bundled(name: str):
    if name not in BUNDLED:
        pytest.fail(f"{name} is not bundled in assets/models")
    return load_model(name)


def test_every_position_encoding_has_a_bundled_language_model():
    assert {f"lm-{pe}" for pe in ("none", "sinusoidal", "learned", "rope", "alibi", "relative")} <= set(BUNDLED)
    assert any(card.task == "grammar-mlm" for card in BUNDLED.values())
    assert {"reversal", "copy", "sort"} <= set(BUNDLED)
    sizes = {(c.config.n_layers, c.config.n_heads, c.config.d_model) for c in BUNDLED.values() if c.task == "grammar-lm"}
    assert len(sizes) == 1  # same size, so the app can swap them and compare


def test_default_model_agrees_in_number_across_attractors():
    model, _ = bundled(DEFAULT_TEXT_MODEL)
    assert agreement_accuracy(model, TextTokenizer(), n=300) >= 0.90


def test_reversal_is_exact_and_attends_to_the_mirrored_token():
    model, _ = bundled("reversal")
    metrics = evaluate_algorithmic(model, TextTokenizer(), "reversal", n=80)
    assert metrics["exact_match"] >= 0.95
    assert metrics["mirrored_attention"] > 0.3


@pytest.fixture(scope="module")
def copy_metrics():
    model, _ = bundled("copy")
    return evaluate_algorithmic(model, TextTokenizer(), "copy", n=80)


def test_copy_repeats_the_sequence(copy_metrics):
    assert copy_metrics["token_accuracy"] >= 0.95


def test_copy_uses_a_textbook_induction_head(copy_metrics):
    assert copy_metrics["induction_score"] >= 0.5


def test_default_vision_model_classifies_held_out_shapes():
    model, _ = bundled("vit-learned")
    metrics = evaluate_shapes(model, n=300)
    assert metrics["accuracy"] >= 0.95
    assert metrics["rollout_on_object"] > metrics["object_patch_fraction"]  # attention finds the object
