"""Run a model on a text: the text checked and tokenized (ours, or a pretrained model's own tokenizer), one forward
pass with record=True, and the tokens in the Recording's meta. Pages, lessons and the command line (core/record.py)
all record a text through record_text.
"""

from __future__ import annotations

import re
import time
import unicodedata
from functools import lru_cache

import torch

from core.model import pretrained
from core.model.checkpoint import ModelCard
from core.model.interventions import Head, Intervention, Replacement
from core.model.masks import MaskSpec
from core.model.pretrained import PretrainedTokenizer
from core.model.recording import Recording
from core.model.transformer import Transformer
from core.tokenizers.subword import ENGLISH_TOKENIZER_PATH, SubwordTokenizer
from core.tokenizers.words import TextTokenizer

MAX_TEXT_CHARS = 20_000  # beyond this no bundled model's context can hold the text; refuse before tokenizing


class TextInputError(ValueError):
    """Text the model cannot be run on; str() is one clear line for the user."""


@lru_cache(maxsize=1)
def tokenizer() -> TextTokenizer:
    return TextTokenizer()


@lru_cache(maxsize=1)
def english_tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer()


def text_tokenizer(card: ModelCard | None = None) -> TextTokenizer | SubwordTokenizer | PretrainedTokenizer:
    """The tokenizer the model of `card` reads: a pretrained model's own, the byte-level BPE of broad English when
    its card names that file (core.training.train.tokenizer_for), else the grammar's word-level one."""
    if card is not None and pretrained.is_pretrained(card.name):
        return pretrained.load(pretrained.source_of(card.name)).tokenizer
    if card is not None and card.training.get("tokenizer") == ENGLISH_TOKENIZER_PATH.name:
        return english_tokenizer()
    return tokenizer()


def length_refusal(*texts: str) -> str | None:
    """Why the first of `texts` longer than MAX_TEXT_CHARS is refused, or None. Pages ask before any cache sees a
    text: a cache keyed by its arguments would otherwise hold a refused 10 MB text (and its refusal) for good."""
    for text in texts:
        if len(text) > MAX_TEXT_CHARS:
            return (f"the text has {len(text):,} characters; no model here reads more than {MAX_TEXT_CHARS:,}, "
                    "so shorten it")
    return None


def encode_text(text: str, max_len: int, tok: TextTokenizer | PretrainedTokenizer | None = None
                ) -> tuple[list[int], list[str], list[bool]]:
    """Token ids, surface tokens and unknown flags of a text (by `tok`, ours by default), checked against the
    context length."""
    if not text or not text.strip() or all(unicodedata.category(c)[0] in "CZ" for c in text):
        raise TextInputError("the text is empty: type a few words")
    refusal = length_refusal(text)
    if refusal:
        raise TextInputError(refusal)
    encoded = (tok or tokenizer()).encode(text)
    if len(encoded.ids) > max_len:
        raise TextInputError(f"the text has {len(encoded.ids)} tokens (with its first token) but this model's "
                             f"context length is {max_len}; shorten it")
    return encoded.ids, encoded.tokens, encoded.is_unknown


def fitting_start(text: str, max_len: int, tok: TextTokenizer | PretrainedTokenizer | None = None) -> str | None:
    """The longest start of `text` that encode_text accepts at this context length, cut at the end of a word: the
    text itself when it fits, None when not even its first word does (or the text is empty). A start has no fewer
    tokens than a shorter start, so a binary search over the word ends finds it in a dozen encodings."""
    def fits(end: int) -> bool:
        try:
            encode_text(text[:end], max_len, tok)
        except TextInputError:
            return False
        return True

    if fits(len(text)):
        return text
    # only the words within the cap can end a start: a pasted 10 MB text is not scanned past it
    ends = [word.end() for word in re.finditer(r"\S+", text[:MAX_TEXT_CHARS + 1]) if word.end() <= MAX_TEXT_CHARS]
    fitting, too_long = -1, len(ends)  # ends[fitting] fits (-1: none known yet), ends[too_long] does not
    while too_long - fitting > 1:
        middle = (fitting + too_long) // 2
        fitting, too_long = (middle, too_long) if fits(ends[middle]) else (fitting, middle)
    return text[:ends[fitting]] if fitting >= 0 else None


@torch.no_grad()
def record_text(model: Transformer, text: str, mask: str | MaskSpec | torch.Tensor | None = None,
                pe: str | None = None, card: ModelCard | None = None,
                intervene: dict[str, Replacement] | None = None) -> Recording:
    """The recording of the model's forward pass on `text` (with [BOS] first, or a pretrained model's own first
    tokens), tokens in its meta; `intervene`: hook name -> replacement (core.model.interventions)."""
    ids, tokens, unknown = encode_text(text, model.cfg.max_len, text_tokenizer(card))
    started = time.perf_counter()
    recording = model(torch.tensor([ids]), mask=mask, pe=pe, record=True, intervene=intervene).recording
    recording.meta.update(tokens=tokens, ids=ids, unknown=unknown, text=text, model=card.name if card else None,
                          seconds=time.perf_counter() - started)  # how long the forward pass took (pages say so)
    return recording


@torch.no_grad()
def record_intervened(model: Transformer, text: str, intervention: Intervention, *, source: Recording | None = None,
                      means: dict[Head, torch.Tensor] | None = None, mask: str | MaskSpec | torch.Tensor | None = None,
                      pe: str | None = None, card: ModelCard | None = None) -> Recording:
    """record_text with `intervention` applied: `source` is the second text's recording (record_text, with the same
    mask and encoding) that patches take their values from, `means` each mean-ablated head's mean output. The
    intervention is described in the recording's meta."""
    n_tokens = len(encode_text(text, model.cfg.max_len, text_tokenizer(card))[0])
    hooks = intervention.replacements(model.cfg, n_tokens, source, means)
    recording = record_text(model, text, mask, pe, card, intervene=hooks)
    recording.meta.update(intervention=str(intervention),
                          source_text=source.meta.get("text") if source is not None and intervention.patches else None)
    return recording
