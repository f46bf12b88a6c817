"""Tiny random-weight image models (vit-learned, vit-none, vit-sinusoidal, vit-mean) written as model cards into a
folder, for the image page's tests while (or instead of) the bundled ones train. Random weights are enough for
the properties tested: identities, shapes, sums, and that the page renders."""

from __future__ import annotations

from pathlib import Path

import torch

from core.data.images import CLASSES
from core.model.checkpoint import ModelCard, save_checkpoint
from core.model.config import ModelConfig
from core.model.transformer import Transformer

TINY_VIT = dict(input="patches", head="classifier", n_classes=len(CLASSES), image_size=32, patch_size=4,
                d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=65, mask="none")


def tiny_vit(seed: int = 0, **changes) -> Transformer:
    """A random 2-layer, 2-head vision transformer (eval mode), weights perturbed so nothing is trivially 0."""
    torch.manual_seed(seed)
    model = Transformer(ModelConfig(**{**TINY_VIT, **changes}))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


def write_tiny_vits(directory: Path) -> Path:
    specs = [("vit-learned", dict(pos_encoding="learned")), ("vit-none", dict(pos_encoding="none")),
             ("vit-sinusoidal", dict(pos_encoding="sinusoidal")),
             ("vit-mean", dict(pos_encoding="learned", pooling="mean"))]
    for seed, (name, changes) in enumerate(specs):
        model = tiny_vit(seed, **changes)
        save_checkpoint(model, ModelCard(name, "shapes", model.cfg, f"tiny random test model {name}"), directory)
    return directory
