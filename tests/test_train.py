"""Training: the loss falls on a tiny preset, and a saved checkpoint loads back to the same function."""

from __future__ import annotations

import numpy as np
import torch

from core.checkpoint import load_checkpoint
from core.model import Transformer
from core.tokenizer import TextTokenizer
from core.train import learning_rate, presets, train_preset, train_steps


def test_loss_falls_on_the_tiny_preset():
    tokenizer = TextTokenizer()
    preset = presets(tokenizer.vocab_size)["tiny-test"]
    model = Transformer(preset.config)
    losses = [stats.loss for stats in train_steps(model, preset, tokenizer)]
    assert len(losses) == preset.steps
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])
    assert not model.training  # left in eval mode


def test_training_is_reproducible_and_the_checkpoint_round_trips(tmp_path):
    tokenizer = TextTokenizer()
    preset = presets(tokenizer.vocab_size)["tiny-test"]
    first = load_checkpoint(train_preset(preset, tmp_path / "a", progress=False))[0]
    second, card = load_checkpoint(train_preset(preset, tmp_path / "b", progress=False))
    assert card.name == "tiny-test" and card.training["loss_curve"][0][0] == 0
    ids = torch.tensor([tokenizer.encode("3 1 4 | 4 1 3").ids])
    with torch.no_grad():
        torch.testing.assert_close(first(ids).logits, second(ids).logits)


def test_warm_up_then_decay():
    preset = presets(40)["lm-rope"]
    rates = [learning_rate(step, preset) for step in range(preset.steps)]
    peak = int(np.argmax(rates))
    assert peak == preset.warmup - 1 and rates[0] < rates[peak] / 10
    assert np.all(np.diff(rates[peak:]) <= 1e-12) and rates[-1] >= preset.learning_rate * 0.1 - 1e-9
