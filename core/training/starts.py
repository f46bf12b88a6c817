"""A model that starts from another's trained weights (Preset.init_from): which sources a preset may name
(check_init_sources), which trained model it starts from (init_source: the one that ships, so every seed starts from
the same weights), the model it then trains (initial_model), and what its card records of that start."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from core.model.checkpoint import load_checkpoint, read_card
from core.model.config import ConfigError
from core.model.registry import MODELS_DIR
from core.model.transformer import Transformer

if TYPE_CHECKING:
    from core.training.train import Preset

# what a model started from another may change: a causal model's mask and head become a masked-token model's
RESHAPED_BY_INIT = ("mask", "head")


def check_init_sources(table: dict[str, Preset]) -> None:
    """Every init_from names a preset of the table, trained earlier (no chains), whose configuration is the
    preset's but for RESHAPED_BY_INIT: its weights then fit the model one to one."""
    for preset in table.values():
        source = table.get(preset.init_from) if preset.init_from else None
        if preset.init_from and source is None:
            raise ConfigError(f"{preset.name} starts from {preset.init_from!r}, which is not a preset")
        if source is None:
            continue
        if source.init_from:
            raise ConfigError(f"{preset.name} starts from {source.name}, which starts from another model itself")
        differ = [key for key, value in source.config.to_dict().items()
                  if key not in RESHAPED_BY_INIT and preset.config.to_dict()[key] != value]
        if differ:
            raise ConfigError(f"{preset.name} cannot start from {source.name}: their {', '.join(differ)} differ")


def init_source(preset: Preset, source_dir: Path = MODELS_DIR) -> Path:
    """The card of the trained model a preset starts from (init_from): the one shipped in source_dir, else the bundled
    one. Every seed of the preset starts from it (for a seeded source, its median seed), whatever seeds_dir holds."""
    candidates = [directory / f"{preset.init_from}.json" for directory in (source_dir, MODELS_DIR)]
    source = next((path for path in candidates if path.with_suffix(".safetensors").is_file()), None)
    if source is None:
        raise ConfigError(f"{preset.name} starts from {preset.init_from}: train it first "
                          f"(python -m core.train --preset {preset.init_from})")
    return source


def initial_model(preset: Preset, source_dir: Path = MODELS_DIR) -> Transformer:
    """The model a preset trains: random weights from its seed, or, with init_from, the trained model of that
    preset (init_source), its weights copied one to one (its mask and head may differ)."""
    torch.manual_seed(preset.seed)
    model = Transformer(preset.config)
    if preset.init_from:
        model.load_state_dict(load_checkpoint(init_source(preset, source_dir))[0].state_dict())
    return model


def started_from(preset: Preset, source_dir: Path) -> dict:
    """What a card records of the weights its training started from: init_from's own seed (the recipe names it)."""
    if not preset.init_from:
        return {}
    return {"init_from_seed": read_card(init_source(preset, source_dir)).training.get("seed")}
