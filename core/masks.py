"""Attention masks: which keys each query may attend to (seed 001 §4.1, seed 003 on sparse attention).

Every mask here is a boolean array `allowed[i, j]`, True where query i may attend to key j:
rows are queries, columns keys, in the common (N x N, rows sum to 1) layout of the recorded patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.config import MASK_KINDS, ConfigError, ModelConfig


@dataclass(frozen=True)
class MaskSpec:
    """A named mask and its parameters; `padding` is the bidirectional mask plus the batch's padding."""

    kind: str = "causal"
    window: int = 8
    window_causal: bool = True
    stride: int = 4

    def __post_init__(self) -> None:
        if self.kind not in MASK_KINDS:
            raise ConfigError(f"mask {self.kind!r} is not one of {', '.join(MASK_KINDS)}")
        if self.window < 1 or self.stride < 1:
            raise ConfigError("the window width and the stride must be at least 1")

    @classmethod
    def of(cls, cfg: ModelConfig) -> MaskSpec:
        return cls(cfg.mask, cfg.window, cfg.window_causal, cfg.stride)

    @property
    def is_causal(self) -> bool:
        return self.kind in ("causal", "strided") or (self.kind == "window" and self.window_causal)


def _offsets(n: int, device: torch.device | None) -> torch.Tensor:
    """offset[i, j] = i - j: how far key j lies before query i. [N, N]"""
    position = torch.arange(n, device=device)
    return position[:, None] - position[None, :]


def causal_mask(n: int, device=None) -> torch.Tensor:
    """A_{n,n'} = 0 when the key comes after the query: each token sees itself and earlier tokens."""
    return _offsets(n, device) >= 0


def window_mask(n: int, width: int, causal: bool = True, device=None) -> torch.Tensor:
    """Sliding window of width w: causal, the w most recent tokens (0 <= i-j < w); else |i - j| < w."""
    offset = _offsets(n, device)
    if causal:
        return (offset >= 0) & (offset < width)
    return offset.abs() < width


def strided_mask(n: int, stride: int, device=None) -> torch.Tensor:
    """Sparse Transformer's strided pattern (Child et al.), causal: the last s tokens, and every s-th before."""
    offset = _offsets(n, device)
    return (offset >= 0) & ((offset < stride) | (offset % stride == 0))


def build_mask(spec: MaskSpec, n: int, device=None) -> torch.Tensor:
    """The [N, N] allowed-matrix of a named mask."""
    if spec.kind in ("none", "padding"):
        return torch.ones(n, n, dtype=torch.bool, device=device)
    if spec.kind == "causal":
        return causal_mask(n, device)
    if spec.kind == "window":
        return window_mask(n, spec.window, spec.window_causal, device)
    return strided_mask(n, spec.stride, device)


def padding_mask(valid: torch.Tensor) -> torch.Tensor:
    """From valid [B, N] (True on real tokens) the keys every query may see: [B, 1, N] (broadcast over queries)."""
    return valid[:, None, :]
