"""Position encodings (seed 001 §3, seed 002 on RoPE and relative encodings).

Two families: additive encodings give each position a vector e_n added to its token, x_n = W p_n + e_n
(seed 001 footnote 19); attention encodings act inside attention, by rotating queries and keys (RoPE)
or by adding a bias b[h, i, j] to the score of query i and key j (ALiBi, T5 relative buckets).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(n_positions: int, d_model: int, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Vaswani et al.: PE[n, 2i] = sin(n / 10000^(2i/D)), PE[n, 2i+1] = cos(n / 10000^(2i/D)). [N, D]

    Computed in float64 and then rounded once to float32: in float32 the angle n * frequency loses digits as n
    grows (an error of 3e-5 at position 512), in float64 only the final rounding (under 6e-8) is left."""
    position = (torch.arange(n_positions) if positions is None else positions).double()[:, None]  # [N, 1]
    frequency = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float()


def rope_angles(n_positions: int, head_dim: int, base: float = 10000.0,
                positions: torch.Tensor | None = None) -> torch.Tensor:
    """RoPE (Su et al.): position n turns feature pair (2i, 2i+1) by n * theta_i, theta_i = base^(-2i/K). [N, K/2]

    positions: [N], the position of each token when it is not 0..N-1 (training with random strides)."""
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # [K/2]
    if positions is None:
        positions = torch.arange(n_positions, dtype=torch.float32)
    return positions.float()[:, None] * theta[None, :]


def random_stride_positions(n_positions: int, generator: torch.Generator) -> torch.Tensor:
    """Positions 0 = p_0 < p_1 < ... < p_{N-1}, each a step of 1 or 2 (even odds) after the last. [N]

    Trained on these, a model whose encoding is a function of the position (RoPE, sinusoidal, ALiBi, relative) meets
    every distance between tokens up to about twice its texts' (randomized positions, after Ruoss et al. 2023):
    subject and verb farther apart than any training sentence put them are then still a distance it knows. The
    model reads 0..N-1 at inference."""
    steps = 1 + (torch.rand(n_positions, generator=generator) < 0.5).long()  # [N]: p_n - p_{n-1} for n >= 1
    return torch.cat([torch.zeros(1, dtype=torch.long), steps[1:].cumsum(0)])


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_2i, x_2i+1) of x [B, N, H, K] by the angle of its position; angles [N, K/2].

    A rotation by n*theta of q and m*theta of k leaves q.k depending only on n - m.
    """
    cos = angles.cos()[None, :, None, :]  # [1, N, 1, K/2]
    sin = angles.sin()[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]  # [B, N, H, K/2] each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # [B, N, H, K/2, 2]
    return rotated.flatten(-2)  # [B, N, H, K]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Press et al. (ALiBi): a geometric sequence starting at 2^(-8/H) with that ratio, for H a power of two.

    For other H, the slopes of the closest smaller power of two, then every other slope of twice that.
    """
    def power_of_two_slopes(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two_slopes(closest)
    if closest < n_heads:
        slopes += power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, n_positions: int, positions: torch.Tensor | None = None) -> torch.Tensor:
    """b[h, i, j] = -m_h |i - j|. Under a causal mask only j <= i is kept, where this is -m_h (i - j). [H, N, N]"""
    position = torch.arange(n_positions) if positions is None else positions
    distance = (position[:, None] - position[None, :]).abs().float()  # [N, N]
    return -alibi_slopes(n_heads)[:, None, None] * distance[None]


def relative_bucket(relative_position: torch.Tensor, bidirectional: bool, n_buckets: int,
                    max_distance: int) -> torch.Tensor:
    """T5's bucketing of key minus query offsets: exact buckets for small distances, log-spaced after, capped.

    Bidirectional models spend half the buckets on keys after the query.
    """
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        n_buckets //= 2
        bucket += (relative_position > 0).long() * n_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = max(n_buckets // 2, 1)
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (n_buckets - max_exact)).long()
    large = large.clamp(max=n_buckets - 1)
    return bucket + torch.where(is_small, distance, large)


class RelativeBias(nn.Module):
    """A learned bias per head and bucket: b[h, i, j] = w[bucket(j - i), h] (Raffel et al., T5)."""

    def __init__(self, n_heads: int, n_buckets: int, max_distance: int, bidirectional: bool):
        super().__init__()
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional
        self.weight = nn.Embedding(n_buckets, n_heads)

    def forward(self, n_positions: int, positions: torch.Tensor | None = None) -> torch.Tensor:
        position = torch.arange(n_positions) if positions is None else positions
        position = position.to(self.weight.weight.device)
        offset = position[None, :] - position[:, None]  # [N, N], key minus query
        bucket = relative_bucket(offset, self.bidirectional, self.n_buckets, self.max_distance)
        return self.weight(bucket).permute(2, 0, 1)  # [N, N, H] -> [H, N, N]
