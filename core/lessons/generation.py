"""Generating text one token at a time (seed 001 §4.1): choose w_n from p(w_n | w_{1:n-1}), append it, repeat.

Decoding: greedy (temperature T = 0: the argmax), or sampled from softmax(logits / T) cut down to the top-k tokens
and to the top-p nucleus (the fewest likeliest tokens whose probabilities reach p), renormalised (Holtzman et al.).

`generate` reads each new token with a key/value cache (core.model.transformer.KVCache): the model computes q, k, v of that
token only and attends over the stored keys, which the incremental property of §4.1 allows under a causal mask.
With use_cache=False it re-reads the whole sequence every step: the reference the cache must equal, and does
(`cache_check` measures it on the page, tests/test_generation.py asserts it for every position encoding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.lessons.lens import final_prediction
from core.model.masks import MaskSpec
from core.model.recording import Recording
from core.model.transformer import KVCache, Transformer


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen. temperature 0 is greedy decoding; top_k 0 and top_p 1 switch those cuts off."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0  # of the random draws: the same seed gives the same text

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"the temperature must be ≥ 0 (0 is greedy decoding), got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top-k must be ≥ 0 (0 keeps every token), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top-p is a probability mass in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Choice:
    """One step's choice. probs [V]: softmax(logits / T), the model's own softmax(logits) for greedy decoding;
    kept [V]: the distribution the token is drawn from, zero outside the top-k and the top-p nucleus, renormalised
    (greedy: 1 on the argmax)."""

    probs: np.ndarray
    kept: np.ndarray
    token: int

    def candidates(self, n: int = 10) -> np.ndarray:
        """The ids of the n likeliest tokens, likeliest first, and the chosen one after them if it is not among them."""
        top = np.argsort(-self.probs, kind="stable")[:n]
        return top if self.token in top else np.append(top, self.token)


def next_token_distribution(logits: np.ndarray, sampling: Sampling) -> tuple[np.ndarray, np.ndarray]:
    """(probs, kept) of one row of logits [V], as in Choice."""
    order, sorted_probs = final_prediction(logits, sampling.temperature or 1.0, top_k=len(logits))  # likeliest first
    keep = np.ones(len(order), dtype=bool)
    if sampling.greedy:  # the limit T -> 0 of softmax(logits / T): all the mass on the argmax
        keep[1:] = False
    elif sampling.top_k:
        keep[sampling.top_k:] = False
    mass_before = np.cumsum(sorted_probs) - sorted_probs
    keep &= mass_before < sampling.top_p  # the nucleus: every token until the mass reaches p, that one included
    probs, kept = np.zeros(len(order)), np.zeros(len(order))
    probs[order] = sorted_probs
    kept[order[keep]] = sorted_probs[keep]
    return probs, kept / kept.sum()


def choose(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> Choice:
    """Greedy: the argmax; otherwise a draw from the kept distribution."""
    probs, kept = next_token_distribution(logits, sampling)
    token = int(np.argmax(kept)) if sampling.greedy else int(rng.choice(len(kept), p=kept))
    return Choice(probs, kept, token)


@dataclass
class Step:
    """One generated token: the logits it was chosen from (at the position before it), the choice, and the row of
    attention the model computed when it read the new token: pattern, scores [M, H, n + 1] (keys 0..n)."""

    logits: np.ndarray
    choice: Choice
    pattern: np.ndarray
    scores: np.ndarray

    @property
    def token(self) -> int:
        return self.choice.token


@dataclass
class Generation:
    """A prompt of P tokens and the steps that extended it. prompt_pattern, prompt_scores [M, H, P, P]."""

    prompt_ids: list[int]
    prompt_pattern: np.ndarray
    prompt_scores: np.ndarray
    steps: list[Step]
    cached: bool

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + [step.token for step in self.steps]

    def attention(self, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(pattern, scores) [M, H, n, n] of the prompt and the first `n_steps` generated tokens, each row as the
        model computed it when it read that token; keys not yet produced are masked (weight 0, score -inf)."""
        p = len(self.prompt_ids)
        n = p + n_steps
        pattern = np.zeros((*self.prompt_pattern.shape[:2], n, n), dtype=self.prompt_pattern.dtype)
        scores = np.full(pattern.shape, -np.inf, dtype=self.prompt_scores.dtype)
        pattern[..., :p, :p], scores[..., :p, :p] = self.prompt_pattern, self.prompt_scores
        for s, step in enumerate(self.steps[:n_steps]):
            pattern[..., p + s, : p + s + 1], scores[..., p + s, : p + s + 1] = step.pattern, step.scores
        return pattern, scores


def _attention(rec: Recording) -> tuple[np.ndarray, np.ndarray]:
    """(pattern, scores) of every layer of a recording, [M, H, N, N_keys]."""
    return rec.patterns(), np.stack([rec.scores(layer) for layer in range(rec.n_layers)])


@torch.no_grad()
def generate(model: Transformer, prompt_ids: list[int], n_new: int, sampling: Sampling, *,
             mask: str | MaskSpec | None = None, pe: str | None = None, use_cache: bool = True) -> Generation:
    """Extend the prompt by n_new tokens. Each step chooses a token from the last logits, then the model reads it:
    with the cache only that token (its row of attention over every key so far), without it the whole sequence."""
    cfg = model.cfg
    if cfg.head != "next_token":
        raise ValueError(f"generation needs a next-token model; this one has a {cfg.head.replace('_', '-')} head")
    if n_new < 0 or len(prompt_ids) + n_new > cfg.max_len:
        raise ValueError(f"{len(prompt_ids)} prompt tokens and {n_new} new ones exceed this model's context "
                         f"length of {cfg.max_len}")
    cache = KVCache() if use_cache else None
    rng = np.random.default_rng(sampling.seed)
    out = model(torch.tensor([prompt_ids]), mask=mask, pe=pe, record=True, cache=cache)
    prompt_pattern, prompt_scores = _attention(out.recording)
    ids, steps = list(prompt_ids), []
    for _ in range(n_new):
        logits = out.logits[0, -1].double().numpy()  # p(w_n | w_{1:n-1}) from x_{n-1}^(M)
        choice = choose(logits, sampling, rng)
        ids.append(choice.token)
        out = model(torch.tensor([[choice.token] if use_cache else ids]), mask=mask, pe=pe, record=True, cache=cache)
        pattern, scores = _attention(out.recording)
        steps.append(Step(logits, choice, pattern[:, :, -1], scores[:, :, -1]))  # the new token's rows
    return Generation(list(prompt_ids), prompt_pattern, prompt_scores, steps, use_cache)


@dataclass
class CacheCheck:
    """How far a generation read with the cache is from one full forward pass over its final text."""

    logits_error: float  # max |Δ| over every step's logits
    pattern_error: float  # max |Δ| over every attention weight
    same_greedy_tokens: bool  # the argmax of every step's logits is the same

    def passed(self, tolerance: float = 1e-4) -> bool:
        return self.logits_error < tolerance and self.pattern_error < tolerance and self.same_greedy_tokens


@torch.no_grad()
def cache_check(model: Transformer, generation: Generation, *, mask: str | MaskSpec | None = None,
                pe: str | None = None) -> CacheCheck:
    """Recompute the generated text in one forward pass (no cache) and compare every number the steps recorded."""
    full = model(torch.tensor([generation.ids]), mask=mask, pe=pe, record=True)
    p, n_steps = len(generation.prompt_ids), len(generation.steps)
    logits = full.logits[0, p - 1: p - 1 + n_steps].double().numpy()  # the positions each token was chosen from
    stepped = np.stack([step.logits for step in generation.steps]) if n_steps else logits
    pattern, _ = generation.attention(n_steps)
    return CacheCheck(float(np.abs(logits - stepped).max(initial=0.0)),
                      float(np.abs(full.recording.patterns() - pattern).max(initial=0.0)),
                      bool((logits.argmax(-1) == stepped.argmax(-1)).all()))
