"""Teaching one head where "it" points: an auxiliary loss on its attention (Preset.referent_head).

Trained on masked tokens alone, no head of english-mlm lets "it" follow the meaning (its card: 49-50.5 %, chance),
because nothing in that loss needs the referent at the position of a visible "it". A model can be told, as LISA
(Strubell et al. 2018) tells one head to attend to each word's syntactic parent: besides the masked-token loss, each
step reads a batch of "it" sentences (english.it_sentence, half of them with the place named first, so that the
order of the nouns cannot stand in for their meaning) and adds the cross-entropy of the chosen head's row at "it"
against the referent,

    L_referent = -mean over sentences of log A[referent, it]     (A: that head's pattern, seed 001 eq. 2.3)

so the head learns to put its weight on the noun the adjective picks. Nothing is written into the head: at test
time it computes its pattern from the sentence like every other, and it is scored on sentences it never read, with
adjectives it was never taught on (UNTAUGHT: every other adjective of each kind), and never on the lesson's pair
of nouns ("animal" and "street", core.lessons.coreference.CANDIDATES), which the teaching sentences leave out.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from core.data import english
from core.data.lexicon import Lexicon
from core.lessons import coreference
from core.model.transformer import Transformer
from core.tokenizers.subword import SubwordTokenizer

REFERENT_BATCH = 16  # "it" sentences read a step besides the masked-token batch
REFERENT_POOL = 4000  # teaching sentences drawn once, before training
TEACHING_SEED = 7  # the teaching sentences' draw (the evaluation's are english.HELDOUT_SEED's)


def taught_adjectives(lexicon: Lexicon, kind: str) -> tuple[str, ...]:
    """The adjectives of a kind the teaching sentences use: every other one, the most frequent first."""
    return lexicon.adjectives_of(kind)[::2]


def untaught_adjectives(lexicon: Lexicon, kind: str) -> tuple[str, ...]:
    """The others: the head is scored on them too, to see that it reads meaning, not a list of words."""
    return lexicon.adjectives_of(kind)[1::2]


@dataclass
class ReferentBatch:
    inputs: torch.Tensor  # [B, N] ids, padded
    valid: torch.Tensor  # [B, N] True on real tokens
    pronoun: torch.Tensor  # [B] the position of "it"
    referent: torch.Tensor  # [B] the position of the noun it stands for

    def to(self, device: torch.device | str) -> ReferentBatch:
        return ReferentBatch(*(tensor.to(device) for tensor in (self.inputs, self.valid, self.pronoun, self.referent)))


class ReferentPool:
    """Teaching sentences, encoded as the pages encode them ([BOS] text), with where "it" and its referent are.
    Sentences whose nouns are not one piece each are passed over (the head would be taught to split its weight)."""

    def __init__(self, tokenizer: SubwordTokenizer, lexicon: Lexicon, n: int = REFERENT_POOL,
                 seed: int = TEACHING_SEED):
        rng = random.Random(seed)
        self.pad_id = tokenizer.pad_id
        self.rows: list[tuple[list[int], int, int]] = []  # ids, pronoun, referent
        while len(self.rows) < n:
            to_animal, place_first = len(self.rows) % 2 == 0, len(self.rows) // 2 % 2 == 1  # a quarter each
            text, animal, place = english.it_sentence(rng, lexicon, to_animal, taught_adjectives, place_first)
            if (animal, place) == coreference.CANDIDATES:
                continue
            encoded = tokenizer.encode(text)
            nouns = [coreference.word_position(encoded.tokens, word) for word in (animal, place)]
            if None in nouns:
                continue
            pronoun = coreference.word_position(encoded.tokens, coreference.PRONOUN, after=max(nouns))
            self.rows.append((encoded.ids, pronoun, nouns[0] if to_animal else nouns[1]))

    def batch(self, indices: list[int]) -> ReferentBatch:
        width = max(len(self.rows[i][0]) for i in indices)
        inputs = torch.tensor([self.rows[i][0] + [self.pad_id] * (width - len(self.rows[i][0])) for i in indices])
        return ReferentBatch(inputs, inputs != self.pad_id, torch.tensor([self.rows[i][1] for i in indices]),
                             torch.tensor([self.rows[i][2] for i in indices]))

    def batches(self, seed: int, size: int = REFERENT_BATCH) -> Iterator[ReferentBatch]:
        """An endless stream of random batches, drawn with `seed`."""
        generator = torch.Generator().manual_seed(seed + 1)
        while True:
            yield self.batch(torch.randint(len(self.rows), (size,), generator=generator).tolist())


def referent_batches(referent_head: tuple[int, int] | None, tokenizer: SubwordTokenizer | None,
                     seed: int) -> Iterator[ReferentBatch] | None:
    """The teaching sentences' batches for a preset's referent head, drawn with `seed`; None without one."""
    if referent_head is None:
        return None
    from core.data.lexicon import build_lexicon  # wordfreq, lemminflect, inflect: training time only

    return ReferentPool(tokenizer, build_lexicon()).batches(seed)


def referent_loss(model: Transformer, batch: ReferentBatch, layer: int, head: int) -> torch.Tensor:
    """-mean log A[referent, it] of one head (the module docstring's L_referent), from a forward pass that keeps the
    pattern's gradient: the pattern is taken as it passes its hook point (an identity replacement)."""
    taken: dict[str, torch.Tensor] = {}

    def take(pattern: torch.Tensor, **_) -> torch.Tensor:
        taken["pattern"] = pattern  # [B, H, N, N]: queries down, keys across
        return pattern

    model(batch.inputs, valid=batch.valid, intervene={f"blocks.{layer}.attn.hook_pattern": take})
    rows = torch.arange(len(batch.inputs))
    weight = taken["pattern"][rows, head, batch.pronoun, batch.referent]  # [B]
    return -torch.log(weight.clamp(min=1e-9)).mean()
