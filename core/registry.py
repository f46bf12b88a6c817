"""The bundled models: every NAME.json card under assets/models, read by the app and the command line."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from core.checkpoint import ModelCard, load_checkpoint, read_card
from core.model import Transformer

ASSETS = Path(__file__).resolve().parent.parent / "assets"
MODELS_DIR = ASSETS / "models"
DEFAULT_TEXT_MODEL = "lm-rope"
TEXT_TASKS = ("grammar-lm", "grammar-mlm", "reversal", "copy", "sort")


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return f"no bundled model is called {self.args[0]!r}; `python -m core.record --list` lists them"


def list_cards(directory: Path = MODELS_DIR) -> list[ModelCard]:
    """Every bundled model's card, sorted by name."""
    return [read_card(path) for path in sorted(directory.glob("*.json"))]


def text_model_names(directory: Path = MODELS_DIR) -> list[str]:
    return [card.name for card in list_cards(directory) if card.task in TEXT_TASKS]


def card_path(name: str, directory: Path = MODELS_DIR) -> Path:
    path = directory / f"{name}.json"
    if not path.is_file() or path.parent != directory:
        raise UnknownModelError(name)
    return path


@lru_cache(maxsize=32)
def load_model(name: str, directory: Path = MODELS_DIR) -> tuple[Transformer, ModelCard]:
    """A bundled model in eval mode, loaded once per process."""
    return load_checkpoint(card_path(name, directory))


def describe(card: ModelCard) -> str:
    """One line for --list: name first, then task, encoding, mask, size and held-out quality."""
    cfg = card.config
    size = f"M={cfg.n_layers} H={cfg.n_heads} D={cfg.d_model}"
    quality = ", ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                        for key, value in card.metrics.get("headline", {}).items())
    return f"{card.name}\t{card.task}\tpe={cfg.pos_encoding}\tmask={cfg.mask}\t{size}\t{quality or 'not evaluated'}"
