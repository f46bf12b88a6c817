"""Record one forward pass of a bundled model on a text, from Python or the command line.

    python -m core.record --model lm-rope --text "the keys to the cabinet are" --out rec.npz
    python -m core.record --list
    python -m core.record --model hf:gpt2 --text "the keys to the cabinet are" --out rec.npz   # a pretrained one
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from functools import lru_cache

import torch

from core import pretrained
from core.checkpoint import ModelCard
from core.config import MASK_KINDS, POSITION_ENCODINGS, ConfigError
from core.masks import MaskSpec
from core.model import Transformer
from core.recording import Recording
from core.registry import DEFAULT_TEXT_MODEL, UnknownModelError, describe, list_cards, load_model
from core.pretrained import PretrainedTokenizer
from core.tokenizer import TextTokenizer

MAX_TEXT_CHARS = 20_000  # beyond this no bundled model's context can hold the text; refuse before tokenizing


class TextInputError(ValueError):
    """Text the model cannot be run on; str() is one clear line for the user."""


@lru_cache(maxsize=1)
def tokenizer() -> TextTokenizer:
    return TextTokenizer()


def text_tokenizer(card: ModelCard | None = None) -> TextTokenizer | PretrainedTokenizer:
    """The tokenizer the model of `card` reads: ours, or a pretrained model's own."""
    if card is not None and pretrained.is_pretrained(card.name):
        return pretrained.load(pretrained.source_of(card.name)).tokenizer
    return tokenizer()


def encode_text(text: str, max_len: int, tok: TextTokenizer | PretrainedTokenizer | None = None
                ) -> tuple[list[int], list[str], list[bool]]:
    """Token ids, surface tokens and unknown flags of a text (by `tok`, ours by default), checked against the
    context length."""
    if not text or not text.strip() or all(unicodedata.category(c)[0] in "CZ" for c in text):
        raise TextInputError("the text is empty: type a few words")
    if len(text) > MAX_TEXT_CHARS:
        raise TextInputError(f"the text has {len(text):,} characters; this model reads at most "
                             f"{max_len} tokens, so shorten it")
    encoded = (tok or tokenizer()).encode(text)
    if len(encoded.ids) > max_len:
        raise TextInputError(f"the text has {len(encoded.ids)} tokens (with its first token) but this model's "
                             f"context length is {max_len}; shorten it")
    return encoded.ids, encoded.tokens, encoded.is_unknown


@torch.no_grad()
def record_text(model: Transformer, text: str, mask: str | MaskSpec | torch.Tensor | None = None,
                pe: str | None = None, card: ModelCard | None = None) -> Recording:
    """The recording of the model's forward pass on `text` (with [BOS] first, or a pretrained model's own first
    tokens), tokens in its meta."""
    ids, tokens, unknown = encode_text(text, model.cfg.max_len, text_tokenizer(card))
    started = time.perf_counter()
    recording = model(torch.tensor([ids]), mask=mask, pe=pe, record=True).recording
    recording.meta.update(tokens=tokens, ids=ids, unknown=unknown, text=text, model=card.name if card else None,
                          seconds=time.perf_counter() - started)  # how long the forward pass took (pages say so)
    return recording


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.record", description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the bundled models, one per line, name first")
    parser.add_argument("--model", default=DEFAULT_TEXT_MODEL)
    parser.add_argument("--text")
    parser.add_argument("--mask", choices=MASK_KINDS, help="run with this mask instead of the model's own")
    parser.add_argument("--window", type=int, help="sliding-window width (with --mask window)")
    parser.add_argument("--stride", type=int, help="stride (with --mask strided)")
    parser.add_argument("--pe", choices=POSITION_ENCODINGS, help="run with this position encoding (ablation)")
    parser.add_argument("--out", help="the .npz file to write")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(describe(card) for card in list_cards()))
        return 0
    if args.text is None or not args.out:
        parser.error("--text and --out are required (or use --list)")
    try:
        model, card = load_model(args.model)
        mask = None
        if args.mask:
            cfg = model.cfg
            mask = MaskSpec(args.mask, args.window or cfg.window, cfg.window_causal, args.stride or cfg.stride)
        recording = record_text(model, args.text, mask=mask, pe=args.pe, card=card)
        recording.save_npz(args.out)
    except (UnknownModelError, TextInputError, ConfigError, pretrained.PretrainedError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(recording.names)} arrays for {recording.n_tokens} tokens to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
