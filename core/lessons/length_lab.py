"""Past the training length: how a language model trained on short texts reads texts up to 4x longer.

The bundled language models were trained on one grammar document at a time (at most `trained_length` tokens). Here
they read held-out documents packed one after another into longer texts, and we measure the next-token loss at
every position. Positions past the training length were never seen in training: an encoding that extrapolates keeps
its loss there as low as before (the claim of Press et al.'s ALiBi paper is the prediction to test, not the answer).

Learned positions cannot go past their table (max_len rows, and rows past the training length were never trained);
every parameter-free encoding (none, sinusoidal, RoPE, ALiBi, relative) runs at any length: the model is rebuilt
with a longer context and the same weights (`with_context`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch.nn import functional as F

from core.data import grammar
from core.data.grammar import pack_documents
from core.model.run import tokenizer
from core.model.transformer import Transformer

HELDOUT_SEED = 1
TRAIN_SEED = 0
LONGER = 4  # how many times the training length the texts reach
TEXTS = 24  # held-out texts per measurement
ROSE = 1.10  # a loss past the training length 10% above the loss within it counts as "rose"


@lru_cache(maxsize=4)
def trained_length(pool_size: int = 20000, pack: int = 0) -> int:
    """The longest text a grammar model saw in training (its training pool: core.training.train.make_pool), in tokens."""
    if pack:
        return pack
    return max(len(tokenizer().encode(document).ids) for document in grammar.generate_documents(pool_size, TRAIN_SEED))


def with_context(model: Transformer, n: int) -> Transformer:
    """The same weights with a context of n tokens. Refused for learned positions past their table."""
    if model.cfg.pos_encoding == "learned" and n > model.cfg.max_len:
        raise ValueError(f"learned positions are a table of {model.cfg.max_len} trained vectors: "
                         f"there is no vector for position {model.cfg.max_len} or later")
    if n <= model.cfg.max_len:
        return model
    longer = Transformer(model.cfg.replace(max_len=n))
    longer.load_state_dict(model.state_dict())
    return longer.eval()


def long_texts(n_tokens: int, count: int) -> torch.Tensor:
    """`count` held-out texts of exactly n_tokens ids: grammar documents packed one after another, cut. [count, n]"""
    texts, documents = [], 4 * count * n_tokens // 20  # documents average about 25 tokens
    while len(texts) < count:
        packed = pack_documents(grammar.generate_documents(documents, HELDOUT_SEED), n_tokens + 64, tokenizer())
        texts = [ids[:n_tokens] for ids in (tokenizer().encode(text).ids for text in packed) if len(ids) >= n_tokens]
        documents *= 2
    return torch.tensor(texts[:count])


@torch.no_grad()
def loss_by_position(model: Transformer, ids: torch.Tensor) -> np.ndarray:
    """The mean next-token loss (nats) at each position p = 1..n-1 (predicting token p from tokens 0..p-1). [n-1]"""
    logits = with_context(model, ids.shape[1])(ids).logits[:, :-1]  # [B, n-1, vocabulary]
    losses = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # [B, n-1]
    return losses.mean(0).numpy()


@dataclass(frozen=True)
class LengthRun:
    """One model's loss at every position of texts `LONGER` times its training length."""

    name: str
    encoding: str
    trained_length: int
    loss: np.ndarray  # [n-1], position p at index p-1

    @property
    def within(self) -> float:
        """The mean loss in the second half of the training length (positions trained_length/2 .. trained_length-1).
        Not from position 1: a packed text's first document reads from [BOS] as in training, and these models never
        saw a second document in one text, so the loss rises where it begins (about position 25); by the second
        half every text is past that, as at the positions further on."""
        return float(self.loss[self.trained_length // 2 - 1: self.trained_length - 1].mean())

    @property
    def beyond(self) -> float:
        """The mean loss at positions never seen in training (trained_length ..)."""
        return float(self.loss[self.trained_length - 1:].mean())

    @property
    def ratio(self) -> float:
        return self.beyond / self.within

    def rose(self) -> bool:
        return self.ratio > ROSE


def any_length(encoding: str) -> bool:
    """Whether a model with this encoding can read past its training length: all but learned positions."""
    return encoding != "learned"


def measure(name: str, model: Transformer, length: int, count: int = TEXTS) -> LengthRun:
    """Run `model` on `count` held-out texts of LONGER x `length` tokens."""
    ids = long_texts(LONGER * length, count)
    return LengthRun(name, model.cfg.pos_encoding, length, loss_by_position(model, ids))


def least_rise(runs: list[LengthRun]) -> str:
    """The encoding whose loss rose least past the training length: the answer a prediction is graded against
    (core.lessons.predictions.Grade)."""
    return min(runs, key=lambda run: run.ratio).encoding


def measured_rise(runs: list[LengthRun]) -> str:
    """What the runs measured, in words: each encoding's loss past the training length ÷ its loss before, least
    first, and which stayed within ROSE."""
    length = runs[0].trained_length
    ratios = ", ".join(f"{run.encoding} ×{run.ratio:.2f}" for run in sorted(runs, key=lambda run: run.ratio))
    flat = [run.encoding for run in runs if not run.rose()]
    kept = " and ".join(flat) if flat else "no encoding"  # not "none": that is an encoding, an answer option
    return (f"mean loss past position {length} ÷ mean loss at positions {length // 2}–{length - 1}: {ratios} "
            f"({kept} kept it within {ROSE - 1:.0%})")


@torch.no_grad()
def long_pattern(model: Transformer, ids: torch.Tensor, layer: int, head: int) -> np.ndarray:
    """One head's attention pattern [N, N] on one long text (ids [N]), at a context as long as the text."""
    recording = with_context(model, len(ids))(ids[None], record=True).recording
    return recording.pattern(layer)[head]
