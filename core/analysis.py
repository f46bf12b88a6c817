"""Pure functions of recorded attention: rollout and head scores. Patterns are [.., N(query), N(key)]."""

from __future__ import annotations

import numpy as np


def rollout(patterns: np.ndarray, residual_weight: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020) from patterns [M, H, N, N] to [N, N].

    Each layer's heads are averaged, the residual connection is added as identity, rows renormalised:
        Â_m = normalise_rows((1 - w) mean_h A_{m,h} + w I);   rollout = Â_M ... Â_2 Â_1
    so row n says how much token n at the top draws on each input token. Every row sums to 1, provided
    every row of every pattern does (a fully masked row keeps only its residual share, then renormalised).
    """
    n = patterns.shape[-1]
    result = np.eye(n)
    for layer in patterns:
        mixed = (1 - residual_weight) * layer.mean(axis=0) + residual_weight * np.eye(n)
        mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        result = mixed @ result
    return result


def mirrored_score(pattern: np.ndarray, length: int) -> float:
    """Reversal task, [BOS] x_1..x_L | y_1..y_L: mean attention from the query predicting y_i (position L+i)
    to x_{L+1-i} (position L+1-i), the token it must copy. pattern: [N, N] of one head."""
    i = np.arange(1, length + 1)
    return float(pattern[length + i, length + 1 - i].mean())


def induction_score(pattern: np.ndarray, length: int) -> float:
    """Copy task, [BOS] x_1..x_L | x_1..x_L: mean attention from the repeated x_i (position L+1+i) to the
    token after its previous occurrence, x_{i+1} (position i+1). pattern: [N, N] of one head."""
    i = np.arange(1, length)
    return float(pattern[length + 1 + i, i + 1].mean())


def best_head(scores: np.ndarray) -> tuple[int, int, float]:
    """(layer, head, score) of the highest entry of a [M, H] score table."""
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head), float(scores[layer, head])


# ---------------------------------------------------------------------------------------------------------
# Head summaries: one number per head, so a class can find heads by behaviour. pattern: [..., N(query), N(key)]
# in the common layout (rows sum to 1, masked entries exactly 0); each returns [...] (the leading axes kept),
# averaged over the queries it is defined for.
# ---------------------------------------------------------------------------------------------------------

def attention_entropy(pattern: np.ndarray) -> np.ndarray:
    """Mean over queries of the entropy of the query's attention, in bits: H_n = -sum_n' A[n, n'] log2 A[n, n'].

    0 means every query looks at one key; log2(number of visible keys) means it spreads evenly over them.
    Masked keys (weight 0) contribute nothing (0 log 0 = 0)."""
    p = np.asarray(pattern, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1).mean(axis=-1)


def mean_attention_distance(pattern: np.ndarray) -> np.ndarray:
    """Mean over queries of the expected distance to the attended key, in tokens: sum_n' A[n, n'] |n - n'|."""
    n = pattern.shape[-1]
    position = np.arange(n)
    distance = np.abs(position[:, None] - position[None, :])
    return (np.asarray(pattern, dtype=np.float64) * distance).sum(axis=-1).mean(axis=-1)


def previous_token_attention(pattern: np.ndarray) -> np.ndarray:
    """Mean weight each query n >= 1 gives to the token just before it, A[n, n-1] (NaN for a single token)."""
    n = pattern.shape[-1]
    if n < 2:
        return np.full(pattern.shape[:-2], np.nan)
    query = np.arange(1, n)
    return np.asarray(pattern, dtype=np.float64)[..., query, query - 1].mean(axis=-1)


def first_token_attention(pattern: np.ndarray) -> np.ndarray:
    """Mean weight each query n >= 1 gives to the first token ([BOS] or CLS), A[n, 0]; query 0 is left out
    because under a causal mask it can only look at itself (NaN for a single token)."""
    n = pattern.shape[-1]
    if n < 2:
        return np.full(pattern.shape[:-2], np.nan)
    return np.asarray(pattern, dtype=np.float64)[..., 1:, 0].mean(axis=-1)


def self_attention(pattern: np.ndarray) -> np.ndarray:
    """Mean weight each query gives to itself, A[n, n]."""
    return np.diagonal(np.asarray(pattern, dtype=np.float64), axis1=-2, axis2=-1).mean(axis=-1)


HEAD_SUMMARIES = {
    "entropy (bits)": attention_entropy,
    "mean distance (tokens)": mean_attention_distance,
    "previous token": previous_token_attention,
    "first token": first_token_attention,
    "self": self_attention,
}


def head_summaries(patterns: np.ndarray) -> dict[str, np.ndarray]:
    """Every summary of HEAD_SUMMARIES for patterns [M, H, N, N]: name -> [M, H]."""
    return {name: summary(patterns) for name, summary in HEAD_SUMMARIES.items()}
