"""Tiny random text models for the lens and page tests, written as model cards into a folder.

Random weights are enough for the properties tested (sums, axes, agreement with the model's own logits); the
weights are perturbed so that γ ≠ 1 and β ≠ 0 and TokenNorm's parameters matter.
"""

from __future__ import annotations

from pathlib import Path

import torch

from core.checkpoint import ModelCard, save_checkpoint
from core.config import ModelConfig
from core.model import Transformer
from core.record import tokenizer

TINY = dict(d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=64)


def tiny_model(norm: str = "pre", seed: int = 0, **changes) -> Transformer:
    """A random 2-layer text model (eval mode) with the real tokenizer's vocabulary."""
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tokenizer().vocab_size, norm=norm, **{**TINY, **changes})
    model = Transformer(cfg)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


def write_tiny_models(directory: Path) -> Path:
    """lm-rope (pre-LN, causal, RoPE), post-ln (post-LN) and mlm-learned (bidirectional, masked-token head)."""
    specs = [("lm-rope", "grammar-lm", dict(norm="pre", pos_encoding="rope")),
             ("post-ln", "grammar-lm", dict(norm="post", pos_encoding="learned")),
             ("mlm-learned", "grammar-mlm", dict(norm="pre", pos_encoding="learned", mask="none",
                                                 head="masked_token"))]
    for seed, (name, task, changes) in enumerate(specs):
        model = tiny_model(seed=seed, **changes)
        save_checkpoint(model, ModelCard(name, task, model.cfg, f"tiny random test model ({changes['norm']}-LN)"),
                        directory)
    return directory
