"""Weights as safetensors beside a JSON card (config, task, metrics): never pickle, so loading runs no code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from core.model.config import ModelConfig
from core.model.transformer import Transformer


@dataclass
class ModelCard:
    """What a checkpoint is: its name, task, config, and what it was trained and measured on."""

    name: str
    task: str  # "grammar-lm", "grammar-mlm", "reversal", "copy", "sort", "shapes"
    config: ModelConfig
    description: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "task": self.task, "description": self.description,
                "config": self.config.to_dict(), "metrics": self.metrics, "training": self.training}

    def untrained_from(self, n_tokens: int) -> int | None:
        """The first position of an `n_tokens` text the model never trained on, when the text reaches one: a model
        trained on texts packed to `pack` tokens but with a longer context (lm-rope-long: 512 of 1024); else None."""
        trained = self.training.get("pack")
        return trained if trained and trained < n_tokens else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        return cls(data["name"], data["task"], ModelConfig.from_dict(data["config"]),
                   data.get("description", ""), data.get("metrics", {}), data.get("training", {}))


def save_checkpoint(model: Transformer, card: ModelCard, directory: Path, half: bool = False) -> Path:
    """Write NAME.safetensors and NAME.json into `directory`; returns the JSON path. half: the weights are stored in
    float16, half the size (load_checkpoint reads them back into the model's float32 parameters: it computes in
    float32 on the rounded weights)."""
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: (tensor.half() if half and tensor.is_floating_point() else tensor).detach().contiguous()
             for name, tensor in model.state_dict().items()}
    save_file(state, directory / f"{card.name}.safetensors")
    return write_card(card, directory)


def write_card(card: ModelCard, directory: Path) -> Path:
    """Write NAME.json alone into `directory` (the weights beside it untouched); returns its path."""
    path = directory / f"{card.name}.json"
    path.write_text(json.dumps(card.to_dict(), indent=2) + "\n")
    return path


def read_card(path: Path) -> ModelCard:
    return ModelCard.from_dict(json.loads(path.read_text()))


def load_checkpoint(card_path: Path) -> tuple[Transformer, ModelCard]:
    """The model (in eval mode) and its card, from NAME.json and the NAME.safetensors beside it."""
    card = read_card(card_path)
    model = Transformer(card.config)
    model.load_state_dict(load_file(card_path.with_suffix(".safetensors")))
    return model.eval(), card


def update_metrics(card_path: Path, metrics: dict[str, Any]) -> None:
    card = read_card(card_path)
    card.metrics = metrics
    write_card(card, card_path.parent)
