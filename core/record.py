"""Record one forward pass of a bundled model on a text, from the command line (from Python: core.model.run).

    python -m core.record --model lm-rope --text "The keys near the student are" --out rec.npz
    python -m core.record --list
    python -m core.record --model hf:gpt2 --text "The keys near the student are" --out rec.npz   # a pretrained one
    python -m core.record --text "The keys near the student" --ablate L1H2 --out rec.npz         # an intervention
    python -m core.record --text "The keys near the student" --patch L0H1 --patch-from "The key near the student" ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.model import pretrained
from core.model.config import MASK_KINDS, POSITION_ENCODINGS, ConfigError
from core.model.interventions import ABLATIONS, Ablation, Head, Intervention, parse_edit, parse_patch
from core.model.masks import MaskSpec
from core.model.registry import (DEFAULT_TEXT_MODEL, PRETRAINED_TASKS, TEXT_TASKS, UnknownModelError, describe,
                                 list_cards, load_model)
from core.model.run import record_intervened, record_text, text_tokenizer


class OptionError(ValueError):
    """An option this model cannot run with; str() is one line."""


def npz_path(out: str) -> Path:
    """The file numpy writes for `out`: it adds .npz to a name without it."""
    path = Path(out)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def in_context(option: str, value: int | None, default: int, max_len: int) -> int:
    """`value` (or the model's `default` when not given), refused unless a width within the context."""
    if value is None:
        return default
    if not 1 <= value <= max_len:
        raise OptionError(f"{option} must be between 1 and the model's context length {max_len}, got {value:,}")
    return value


def mask_option(args: argparse.Namespace, model) -> MaskSpec | None:
    """The --mask asked for, with its --window and --stride checked against the model's context."""
    if not args.mask:
        return None
    cfg = model.cfg
    return MaskSpec(args.mask, in_context("--window", args.window, cfg.window, cfg.max_len), cfg.window_causal,
                    in_context("--stride", args.stride, cfg.stride, cfg.max_len))


def intervention_option(args: argparse.Namespace) -> Intervention:
    """The --ablate, --attend and --patch options as one Intervention (empty without them)."""
    if args.patch and args.patch_from is None:
        raise OptionError("--patch needs --patch-from, the second text whose activations are patched in")
    return Intervention(tuple(Ablation(Head.parse(head), args.ablation) for head in args.ablate),
                        tuple(parse_edit(edit) for edit in args.attend), tuple(parse_patch(p) for p in args.patch))


def record(args: argparse.Namespace, model, card):
    """The recording the options ask for: a plain pass, or one with an intervention."""
    mask = mask_option(args, model)
    intervention = intervention_option(args)
    if not intervention:
        return record_text(model, args.text, mask=mask, pe=args.pe, card=card)
    from core.lessons.interventions import head_means, reference_texts  # only a mean ablation needs them

    source = record_text(model, args.patch_from, mask=mask, pe=args.pe, card=card) if args.patch_from else None
    tok = text_tokenizer(card)
    means = head_means(model, tok, reference_texts(tok), mask, args.pe) if intervention.needs_means else None
    return record_intervened(model, args.text, intervention, source=source, means=means, mask=mask, pe=args.pe,
                             card=card)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.record", description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the bundled models, one per line, name first")
    parser.add_argument("--model", default=DEFAULT_TEXT_MODEL)
    parser.add_argument("--text")
    parser.add_argument("--mask", choices=MASK_KINDS, help="run with this mask instead of the model's own")
    parser.add_argument("--window", type=int, help="sliding-window width (with --mask window)")
    parser.add_argument("--stride", type=int, help="stride (with --mask strided)")
    parser.add_argument("--pe", choices=POSITION_ENCODINGS, help="run with this position encoding (ablation)")
    parser.add_argument("--ablate", action="append", default=[], metavar="HEAD",
                        help="ablate this head, e.g. L1H2 (repeatable)")
    parser.add_argument("--ablation", choices=ABLATIONS, default="zero",
                        help="zero: the head's output z set to 0; mean: to its mean over reference texts")
    parser.add_argument("--attend", action="append", default=[], metavar="HEAD:QUERY:KEY",
                        help="force a head's query to attend to one key only, e.g. L1H0:5:2 (repeatable)")
    parser.add_argument("--patch", action="append", default=[], metavar="SITE",
                        help="patch from --patch-from: a head L0H1, mlp2, resid1 or embed, @3 for one position")
    parser.add_argument("--patch-from", help="the second text that --patch takes activations from")
    parser.add_argument("--out", help="the .npz file to write")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(describe(card) for card in list_cards()))
        return 0
    if args.text is None or not args.out:
        parser.error("--text and --out are required (or use --list)")
    try:
        model, card = load_model(args.model)
        if card.task not in TEXT_TASKS + PRETRAINED_TASKS:
            raise OptionError(f"{card.name} is not a text model (its task is {card.task}): pick one from --list")
        recording = record(args, model, card)
        out = npz_path(args.out)
        recording.save_npz(out)
    # ValueError and RuntimeError: an option this model cannot run with (an encoding, a mask, an intervention)
    except (UnknownModelError, ConfigError, pretrained.PretrainedError, OSError, ValueError, RuntimeError) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    changed = recording.meta.get("intervention")
    print(f"wrote {len(recording.names)} arrays for {recording.n_tokens} tokens to {out}"
          + (f" ({changed})" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
