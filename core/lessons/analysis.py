"""Pure functions of recorded attention: rollout, head scores and one score taken apart (qk_breakdown).
Patterns are [.., N(query), N(key)]."""

from __future__ import annotations

from dataclasses import dataclass

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


# ---------------------------------------------------------------------------------------------------------
# One attention score taken apart: q · k, scaling, position bias, mask, softmax (seed 001 §2.1, eqs. 3–6)
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class QKBreakdown:
    """Every step from the query and key vectors of one head to one attention weight, with the recorded values
    to check it against. Indices are token positions (0 = [BOS]); "row" arrays run over all N keys of the query.

    rotated: True when the model ran with RoPE, so q and k are the rotated vectors (hook_rot_q, hook_rot_k) the
    scores are made of; q_unrotated and k_unrotated (hook_q, hook_k) are then given too, else None."""

    layer: int
    head: int
    query: int
    key: int
    rotated: bool
    q: np.ndarray  # [K] the query vector q_{h,n} (rotated with RoPE)
    k: np.ndarray  # [K] the key vector k_{h,n'} (rotated with RoPE)
    q_unrotated: np.ndarray | None
    k_unrotated: np.ndarray | None
    products: np.ndarray  # [K] q_i k_i
    dot: float  # Σ_i q_i k_i = k·q
    scale: float  # 1 / sqrt(K)
    scaled: float  # k·q / sqrt(K)
    bias: float | None  # the position bias b_{h,n,n'} (ALiBi, relative), None when the model adds none
    allowed: bool  # False where the mask hides the key from the query: the score is then -inf
    score: float  # scaled + bias, or -inf when masked
    recorded_score: float  # blocks.{l}.attn.hook_attn_scores[h, n, n']
    row_scores: np.ndarray  # [N] the scores of every key for this query, computed the same way (-inf masked)
    row_max: float  # max over the allowed keys of row_scores (subtracted before exp, as the model does)
    numerator: float  # exp(score - row_max), 0 when masked
    denominator: float  # Σ_n'' exp(row_scores[n''] - row_max) over the allowed keys
    weight: float  # numerator / denominator: A[n, n'] in the common layout
    recorded_weight: float  # blocks.{l}.attn.hook_pattern[h, n, n']
    row_weights: np.ndarray  # [N] the softmax of row_scores

    @property
    def head_dim(self) -> int:
        return int(self.q.shape[0])

    @property
    def score_error(self) -> float:
        """|computed − recorded| score (0 when both are −∞)."""
        if not self.allowed and np.isneginf(self.recorded_score):
            return 0.0
        return float(abs(self.score - self.recorded_score))

    @property
    def weight_error(self) -> float:
        return float(abs(self.weight - self.recorded_weight))

    @property
    def score_matches(self) -> bool:
        """The computed score equals the recorded one (float32 rounding allowed)."""
        if np.isneginf(self.score) or np.isneginf(self.recorded_score):
            return bool(np.isneginf(self.score) and np.isneginf(self.recorded_score))
        return bool(np.isclose(self.score, self.recorded_score, rtol=1e-4, atol=1e-4))

    @property
    def weight_matches(self) -> bool:
        return bool(np.isclose(self.weight, self.recorded_weight, rtol=1e-4, atol=1e-5))


def qk_breakdown(rec, layer: int, head: int, query: int, key: int) -> QKBreakdown:
    """Recompute one attention weight of a recording step by step, in float64, from its recorded q and k.

    For head h of layer l, query token n and key token n′ (seed 001 eqs. 5–6, with footnote 8's scaling):

        q = q_{h,n},  k = k_{h,n′}                      (after the rotation R_n, R_n′ when the model uses RoPE)
        k·q = Σ_{i=1..K} q_i k_i                          (the elementwise products, summed)
        s_{n,n′} = k·q / √K + b_{h,n,n′}                  (b: ALiBi or relative position bias, else 0)
        s_{n,n′} = −∞ where the mask hides key n′ from query n
        A_{n,n′} = exp(s_{n,n′} − m) / Σ_{n″} exp(s_{n,n″} − m),   m = max_{n″} s_{n,n″}

    A is in the common layout (row = query, rows sum to 1); the seed paper writes the same number as
    [A_h]_{n′,n}. Which keys are masked is read from the recording (the model writes −∞ into
    hook_attn_scores there); everything else is recomputed, so `score` vs `recorded_score` and `weight` vs
    `recorded_weight` check the recorded forward pass."""
    prefix = f"blocks.{layer}.attn."
    n = rec.n_tokens
    if not (0 <= layer < rec.n_layers and 0 <= head < rec.config.n_heads):
        raise ValueError(f"no head L{layer} H{head} in a model with {rec.n_layers} layers of "
                         f"{rec.config.n_heads} heads")
    if not (0 <= query < n and 0 <= key < n):
        raise ValueError(f"query {query} and key {key} must be token positions 0..{n - 1}")
    rotated = prefix + "hook_rot_q" in rec
    q_all = np.asarray(rec[prefix + ("hook_rot_q" if rotated else "hook_q")], dtype=np.float64)[:, head]  # [N, K]
    k_all = np.asarray(rec[prefix + ("hook_rot_k" if rotated else "hook_k")], dtype=np.float64)[:, head]
    scale = 1.0 / np.sqrt(q_all.shape[-1])
    bias_row = (np.asarray(rec[prefix + "hook_pos_bias"], dtype=np.float64)[head, query]
                if prefix + "hook_pos_bias" in rec else None)
    recorded_scores = np.asarray(rec[prefix + "hook_attn_scores"], dtype=np.float64)[head, query]  # [N]
    allowed_row = ~np.isneginf(recorded_scores)
    row = k_all @ q_all[query] * scale + (bias_row if bias_row is not None else 0.0)
    row_scores = np.where(allowed_row, row, -np.inf)
    if allowed_row.any():
        row_max = float(row_scores[allowed_row].max())
        exps = np.where(allowed_row, np.exp(np.where(allowed_row, row_scores, row_max) - row_max), 0.0)
        denominator = float(exps.sum())
        row_weights = exps / denominator
    else:  # a query that may see nothing: the model gives it all-zero weights
        row_max, denominator = float("-inf"), 0.0
        exps = row_weights = np.zeros(n)
    q, k = q_all[query], k_all[key]
    products = q * k
    dot = float(products.sum())
    return QKBreakdown(
        layer=layer, head=head, query=query, key=key, rotated=rotated, q=q, k=k,
        q_unrotated=(np.asarray(rec[prefix + "hook_q"], dtype=np.float64)[query, head] if rotated else None),
        k_unrotated=(np.asarray(rec[prefix + "hook_k"], dtype=np.float64)[key, head] if rotated else None),
        products=products, dot=dot, scale=float(scale), scaled=dot * float(scale),
        bias=None if bias_row is None else float(bias_row[key]), allowed=bool(allowed_row[key]),
        score=float(row_scores[key]), recorded_score=float(recorded_scores[key]), row_scores=row_scores,
        row_max=row_max, numerator=float(exps[key]), denominator=denominator, weight=float(row_weights[key]),
        recorded_weight=float(np.asarray(rec[prefix + "hook_pattern"], dtype=np.float64)[head, query, key]),
        row_weights=row_weights)
