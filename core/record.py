"""Record one forward pass of a bundled model on a text, from the command line (from Python: core.model.run).

    python -m core.record --model lm-rope --text "the keys to the cabinet are" --out rec.npz
    python -m core.record --list
    python -m core.record --model hf:gpt2 --text "the keys to the cabinet are" --out rec.npz   # a pretrained one
"""

from __future__ import annotations

import argparse
import sys

from core.model import pretrained
from core.model.config import MASK_KINDS, POSITION_ENCODINGS, ConfigError
from core.model.masks import MaskSpec
from core.model.registry import DEFAULT_TEXT_MODEL, UnknownModelError, describe, list_cards, load_model
from core.model.run import TextInputError, record_text


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
