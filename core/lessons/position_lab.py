"""The position-encoding and masking lessons as pure functions of a model (seed 001 §3 and §4.1, seed 003 §7).

- encoding tables, position × feature, and the dot-product similarity of two positions' encodings;
- RoPE's rotation of one query/key feature pair, read from a recording;
- ALiBi and T5 relative biases per head, from the model's own code, and as a function of the offset j - i;
- the permutation demonstration: without a position encoding and without a mask, permuting the tokens permutes
  every representation (seed 001 §3, "herbivores eat plants"); a position encoding, or a causal mask, breaks it;
- the incremental property (§4.1): appending a token changes no earlier representation under a causal mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.lessons.lens import residual_stack
from core.model.masks import MaskSpec
from core.model.positions import apply_rope, rope_angles, sinusoidal_table
from core.model.recording import Recording, block_hook
from core.model.transformer import Transformer

TABLE_ENCODINGS = ("sinusoidal", "learned", "rope")
BIAS_ENCODINGS = ("alibi", "relative")
ROUNDING = 1e-5  # relative changes below this are float rounding: the same numbers summed in another order


# ---------------------------------------------------------------------------------------------------------
# Encodings as tables
# ---------------------------------------------------------------------------------------------------------

def table_encodings(model: Transformer) -> list[str]:
    """The encodings whose table this model can show: learned only if it has trained position embeddings."""
    return [e for e in TABLE_ENCODINGS if e != "learned" or model.cfg.pos_encoding == "learned"]


@torch.no_grad()
def encoding_table(model: Transformer, encoding: str, n: int) -> np.ndarray:
    """Position × feature, [N, F]:

    sinusoidal  e_n = PE[n] (Vaswani et al.), F = D, the vector added to token n (seed 001 footnote 19);
    learned     e_n = the model's trained position embedding, F = D;
    rope        R(n θ) (1, 0, 1, 0, …): where RoPE turns the unit vector of each feature pair at position n,
                (cos nθ_i, sin nθ_i) for pair i (seed 003 §7.3), F = K, through the model's own apply_rope.
    """
    cfg = model.cfg
    if encoding not in table_encodings(model):
        raise ValueError(f"{encoding!r} has no table for this model; choose one of {', '.join(table_encodings(model))}")
    if not 1 <= n <= cfg.max_len:
        raise ValueError(f"the table covers 1 to {cfg.max_len} positions, got {n}")
    if encoding == "sinusoidal":
        return sinusoidal_table(n, cfg.d_model).numpy()
    if encoding == "learned":
        return model.pos_embed.weight[:n].numpy().copy()
    unit = torch.zeros(1, n, 1, cfg.head_dim)  # [B, N, H, K]
    unit[..., 0::2] = 1.0
    return apply_rope(unit, rope_angles(n, cfg.head_dim, cfg.rope_base))[0, :, 0].numpy()


def position_similarity(table: np.ndarray) -> np.ndarray:
    """S[n, m] = e_n · e_m, [N, N]. For sinusoidal and RoPE it depends on n - m only (for RoPE it is
    Σ_i cos((n - m) θ_i), the score of one vector at two positions); learned embeddings need not."""
    table = np.asarray(table, dtype=np.float64)
    return table @ table.T


def most_similar(similarity: np.ndarray, position: int, k: int = 3) -> list[int]:
    """The k other positions whose encodings have the largest dot product with position's, most similar first."""
    order = np.argsort(-np.asarray(similarity)[position], kind="stable")
    return [int(m) for m in order if m != position][:k]


# ---------------------------------------------------------------------------------------------------------
# RoPE: one feature pair, before and after its rotation
# ---------------------------------------------------------------------------------------------------------

@dataclass
class RopePair:
    """Feature pair (2i, 2i+1) of one head's queries or keys at every position: before [N, 2], after [N, 2] the
    rotation by angle [N] = n θ_i, as the model computed them (hook_q / hook_rot_q, or the keys)."""

    pair: int
    theta: float
    before: np.ndarray
    after: np.ndarray
    angle: np.ndarray

    @property
    def length_change(self) -> float:
        """max over tokens of | |after| - |before| |: a rotation keeps every length."""
        return float(np.abs(np.linalg.norm(self.after, axis=1) - np.linalg.norm(self.before, axis=1)).max())

    @property
    def max_error(self) -> float:
        """max |R(n θ_i) before - after|: the recording agrees with a rotation by n θ_i."""
        cos, sin = np.cos(self.angle), np.sin(self.angle)
        x, y = self.before[:, 0], self.before[:, 1]
        rotated = np.stack([x * cos - y * sin, x * sin + y * cos], axis=1)
        return float(np.abs(rotated - self.after).max())


def rope_pair(rec: Recording, layer: int, head: int, pair: int, which: str = "q") -> RopePair:
    """One pair of a RoPE recording (a model run with pe="rope"); which is "q" or "k"."""
    if which not in ("q", "k"):
        raise ValueError(f"which must be 'q' or 'k', got {which!r}")
    rotated = block_hook(layer, f"attn.hook_rot_{which}")
    if rotated not in rec:
        raise ValueError("this recording has no rotated queries and keys: run the model with RoPE")
    cfg = rec.config
    if not 0 <= pair < cfg.head_dim // 2:
        raise ValueError(f"pair must be in 0..{cfg.head_dim // 2 - 1}, got {pair}")
    angles = rope_angles(rec.n_tokens, cfg.head_dim, cfg.rope_base)[:, pair].numpy()  # [N] = n θ_i
    before = rec[block_hook(layer, f"attn.hook_{which}")][:, head, 2 * pair: 2 * pair + 2]
    after = rec[rotated][:, head, 2 * pair: 2 * pair + 2]
    theta = float(rope_angles(2, cfg.head_dim, cfg.rope_base)[1, pair])  # θ_i: the turn per position
    return RopePair(pair, theta, before.astype(np.float64), after.astype(np.float64), angles.astype(np.float64))


# ---------------------------------------------------------------------------------------------------------
# Biases on the scores: ALiBi and relative
# ---------------------------------------------------------------------------------------------------------

@torch.no_grad()
def attention_bias(model: Transformer, encoding: str, n: int, layer: int = 0) -> np.ndarray:
    """b[h, i, j] that `encoding` adds to the scores of layer `layer` for N tokens, [H, N, N], by the model's own
    code: ALiBi's -m_h |i - j| (parameter-free, any text model), or the model's trained T5 relative buckets.
    NaN where the model's own mask hides key j from query i: there the bias is never used."""
    if encoding not in BIAS_ENCODINGS:
        raise ValueError(f"{encoding!r} adds no bias to the scores; choose one of {', '.join(BIAS_ENCODINGS)}")
    if encoding == "relative" and model.cfg.pos_encoding != "relative":
        raise ValueError("relative biases are trained: this model has none")
    position = model.position_context(encoding, n, "cpu")
    bias = model.blocks[layer].attn.position_bias(position, n).numpy()
    allowed = model.allowed(None, n, 1, None, "cpu")[0].numpy()  # the model's own mask, [N, N]
    return np.where(allowed, bias, np.nan)


def bias_by_offset(bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets j - i, values [H, offsets]): the bias read along each diagonal of b[h, i, j], offsets from -(N-1)
    to N-1 less those the mask hides everywhere (all NaN). Both encodings depend on the offset alone, so any cell
    of a diagonal gives it."""
    n = bias.shape[-1]
    offsets = np.arange(-(n - 1), n)
    values = np.stack([np.diagonal(bias, offset=int(d), axis1=1, axis2=2)[:, 0] for d in offsets], axis=1)
    used = ~np.isnan(values).all(axis=0)  # offsets the mask hides everywhere are dropped
    return offsets[used], values[:, used]


# ---------------------------------------------------------------------------------------------------------
# The permutation demonstration and the incremental property
# ---------------------------------------------------------------------------------------------------------

def relative_change(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """‖new - old‖ / ‖old‖ of each vector along the last axis (0 where both are 0)."""
    return np.linalg.norm(new - old, axis=-1) / np.maximum(np.linalg.norm(old, axis=-1), 1e-12)


def find_permutation(ids_a: Sequence[int], ids_b: Sequence[int]) -> np.ndarray | None:
    """perm with ids_b[n] = ids_a[perm[n]] (equal tokens matched in order), or None when b is no rearrangement of a."""
    if sorted(ids_a) != sorted(ids_b):
        return None
    unused: dict[int, list[int]] = {}
    for position, token in enumerate(ids_a):
        unused.setdefault(token, []).append(position)
    return np.array([unused[token].pop(0) for token in ids_b])


MaskChoice = str | MaskSpec | torch.Tensor | None


@torch.no_grad()
def residual_streams(model: Transformer, ids: Sequence[int], mask: MaskChoice = None, pe: str | None = None
                     ) -> np.ndarray:
    """The residual stream at its M+1 points (core.lessons.lens.residual_stack) of one run, [M+1, N, D]."""
    return residual_stack(model(torch.tensor([list(ids)]), mask=mask, pe=pe, record=True).recording)


@dataclass
class PermutationResult:
    """One run of the permutation test. change [M+1, N]: ‖x_b[n] - x_a[perm[n]]‖ / ‖x_a[perm[n]]‖ of every
    token of text b at every stream point: all ≈ 0 when the representations are the same up to permutation."""

    mask: str
    pe: str
    permutation: np.ndarray
    change: np.ndarray

    @property
    def max_change(self) -> float:
        return float(self.change.max())

    def equivariant(self) -> bool:
        return self.max_change < ROUNDING


def permutation_test(model: Transformer, ids_a: Sequence[int], ids_b: Sequence[int], mask: str, pe: str
                     ) -> PermutationResult:
    """Run both texts with this mask kind and encoding and compare b's stream with a's, permuted the same way."""
    permutation = find_permutation(ids_a, ids_b)
    if permutation is None:
        raise ValueError("the second text must hold the same tokens as the first, in another order")
    stream_a = residual_streams(model, ids_a, mask, pe)
    stream_b = residual_streams(model, ids_b, mask, pe)
    return PermutationResult(mask, pe, permutation, relative_change(stream_b, stream_a[:, permutation]))


def incremental_change(model: Transformer, ids: Sequence[int], mask: MaskChoice = None, pe: str | None = None
                       ) -> np.ndarray:
    """Seed 001 §4.1: run w_{1:N-1}, then w_{1:N}; [M+1, N-1], the relative change of each earlier token's
    stream at every point. All exactly 0 under a causal mask; without a mask every token changes after layer 0.
    A custom mask [N, N] is cut to [N-1, N-1] for the shorter run. (Float rounding may leave ~1e-7, see ROUNDING.)"""
    if len(ids) < 2:
        raise ValueError("appending a token needs at least two tokens")
    short_mask = mask[:-1, :-1] if isinstance(mask, torch.Tensor) else mask
    short = residual_streams(model, ids[:-1], short_mask, pe)
    full = residual_streams(model, ids, mask, pe)
    return relative_change(full[:, :-1], short)
