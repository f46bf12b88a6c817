"""What does "it" refer to? The classic figure of attention (issue 34): in "The animal didn't cross the street
because it was too tired", "it" is the animal; end the sentence "wide" and it is the street. A bidirectional model
reads the ending before it settles what "it" stands for, so some head of it may move its attention from "it" with
the meaning. A causal model cannot: "it" comes before the ending, and its row of A (seed 001 eq. 2.3, masked) never
sees it.

Pure functions of recordings: where "it" and the two candidates are, how much each head's "it" row puts on each
(`ItAttention`), which of the two a head prefers, and how a head is chosen honestly (`referent_head`: on one set of
sentences, scored on another), so that the lesson's sentence is never the one that picked its head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from core.model.recording import Recording

CLASSIC = "The animal didn't cross the street because it was too {}."
ENDINGS = ("tired", "wide")  # "it" is the first candidate, then the second
CANDIDATES = ("animal", "street")
PRONOUN = "it"


class CoreferenceError(ValueError):
    """A sentence the lesson cannot read; str() is one clear line for the user."""


def word_position(tokens: Sequence[str], word: str, after: int = -1) -> int | None:
    """The first token after position `after` that is exactly `word` (ignoring the space it carries and case), or
    None."""
    wanted = word.strip().casefold()
    for i, token in enumerate(tokens):
        if i > after and token.strip().casefold() == wanted:
            return i
    return None


@dataclass(frozen=True)
class ItAttention:
    """How much every head's query at the pronoun attends to each of two candidate words, in one recording."""

    tokens: list[str]
    pronoun: int  # the pronoun's position
    candidates: tuple[int, int]  # the two candidates' positions
    weights: np.ndarray  # [M, H, 2]: A's entry (query: the pronoun, key: each candidate), per layer and head

    def preference(self) -> np.ndarray:
        """[M, H]: the weight on the first candidate minus the weight on the second (> 0: the head prefers the
        first)."""
        return self.weights[..., 0] - self.weights[..., 1]

    def preferred(self, layer: int, head: int) -> int:
        """0 or 1: the candidate this head's pronoun attends to more (a tie counts as neither: -1)."""
        difference = self.preference()[layer, head]
        return 0 if difference > 0 else 1 if difference < 0 else -1

    def row(self, layer: int, head: int, recording: Recording) -> np.ndarray:
        """The pronoun's whole row of attention in one head: [N], summing to 1."""
        return recording.pattern(layer)[head, self.pronoun]


def it_attention(recording: Recording, candidates: Sequence[str] = CANDIDATES,
                 pronoun: str = PRONOUN) -> ItAttention:
    """The pronoun's attention to each candidate in every head of the recording. The candidates are the first
    tokens that are those words; the pronoun, the first after both."""
    tokens = list(recording.meta["tokens"])
    positions = []
    for word in candidates:
        position = word_position(tokens, word)
        if position is None:
            raise CoreferenceError(f"no token of the sentence is “{word}”: each noun must be in the sentence, "
                                   "spelled as there, and read by the model as one piece")
        positions.append(position)
    at = word_position(tokens, pronoun, after=max(positions))
    if at is None:
        raise CoreferenceError(f"the sentence has no “{pronoun}” after “{candidates[0]}” and “{candidates[1]}”")
    weights = np.stack([recording.pattern(layer)[:, at, positions] for layer in range(recording.n_layers)])
    return ItAttention(tokens, at, (positions[0], positions[1]), weights)  # weights [M, H, 2]


def follows_meaning(first: ItAttention, second: ItAttention) -> np.ndarray:
    """[M, H] booleans: the heads whose pronoun prefers the first candidate in the first sentence and the second
    in the second (the reading the meaning asks for, when the first sentence's "it" is the first candidate)."""
    return (first.preference() > 0) & (second.preference() < 0)


@dataclass(frozen=True)
class ReferentHead:
    """The head whose pronoun most often attends more to its referent than to the other noun: chosen on one set of
    sentences, scored on another (so its figure is not the one that chose it)."""

    layer: int
    head: int
    accuracy: float  # on the scoring set: how often the head prefers the referent
    n: int  # sentences in the scoring set
    always_first: float  # the majority baselines: always preferring the first candidate (the animal) ...
    always_second: float  # ... or always the second (the place)
    chosen_on: int  # sentences in the choosing set
    per_head: list[list[float]]  # [M][H]: each head's accuracy on the scoring set

    def to_dict(self) -> dict:
        return asdict(self)


def referent_right(attentions: Sequence[ItAttention], referents: Sequence[int]) -> np.ndarray:
    """[S, M, H] booleans: whether each head, in each sentence, attends more to the referent (0: the first
    candidate, 1: the second)."""
    preference = np.stack([a.preference() for a in attentions])  # [S, M, H]
    sign = np.where(np.asarray(referents) == 0, 1.0, -1.0)[:, None, None]
    return preference * sign > 0


def referent_head(choosing: tuple[Sequence[ItAttention], Sequence[int]],
                  scoring: tuple[Sequence[ItAttention], Sequence[int]]) -> ReferentHead:
    """The head most often right on the choosing set (ties: the earliest), with its accuracy on the scoring set."""
    chosen = referent_right(*choosing).mean(axis=0)  # [M, H]
    layer, head = np.unravel_index(int(np.argmax(chosen)), chosen.shape)
    scored = referent_right(*scoring).mean(axis=0)
    referents = np.asarray(scoring[1])
    return ReferentHead(int(layer), int(head), float(scored[layer, head]), len(referents),
                        float(np.mean(referents == 0)), float(np.mean(referents == 1)), len(choosing[1]),
                        scored.round(4).tolist())
