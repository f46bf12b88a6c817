"""Linear attention (seed 003 §6.2, Katharopoulos et al. 2020) beside softmax attention, and what each costs.

Layout: the common one of seed 003, Q, K [..., N, K] and V [..., N, Dv], one row per token, rows of the weights
summing to 1. Softmax attention (seed 003 §2.2, Algorithm 1; §15.2, Algorithm 4 for the causal mask):

    Attention(Q, K, V) = softmax(Q Kᵀ / √K) V                                 O(N² K) time, an N×N matrix in memory

Linear attention (seed 003 §6.2, Definition 6.2) replaces exp(q·k) by a kernel φ(q)·φ(k) with the feature map
φ(x) = elu(x) + 1 > 0 (Katharopoulos et al., eq. 7), and uses associativity, (φ(Q) φ(K)ᵀ) V = φ(Q) (φ(K)ᵀ V):

    LinearAttention(Q, K, V) = φ(Q) (φ(K)ᵀ V) / (φ(Q) φ(K)ᵀ 1)                 O(N K Dv): no N×N matrix
    causal:  out_i = φ(q_i)ᵀ S_i / φ(q_i)ᵀ z_i,  S_i = Σ_{j≤i} φ(k_j) v_jᵀ,  z_i = Σ_{j≤i} φ(k_j)

It is a different kernel, not an approximation of the softmax: on the same Q, K, V the outputs differ.
seed 003 Theorem 9.1 (§9.1) gives softmax attention's O(N² d) cost; `measure_cost` measures both on this machine.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from core.lessons.analysis import attention_entropy
from core.model.masks import causal_mask
from core.model.recording import Recording, block_hook
from core.model.transformer import masked_softmax

METHODS = ("softmax", "linear")


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 (Katharopoulos et al., eq. 7): positive, so φ(q)·φ(k) > 0 can weight like exp(q·k)."""
    return F.elu(x) + 1


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.shape != k.shape or q.shape[:-1] != v.shape[:-1] or q.dim() < 2:
        raise ValueError(f"q and k must be [..., N, K] and v [..., N, Dv] with the same N; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(Q Kᵀ / √K) V (seed 003 Algorithm 1; with `causal`, scores of later keys −∞, Algorithm 4), with the
    model's own masked softmax. The N×N score matrix is built explicitly. [..., N, Dv]"""
    _check_shapes(q, k, v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [..., N, N]
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    return masked_softmax(scores) @ v


def linear_attention_weights(q: torch.Tensor, k: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """The N×N matrix linear attention implies, W[i, j] = φ(q_i)·φ(k_j) / Σ_j′ φ(q_i)·φ(k_j′) (j, j′ ≤ i when
    causal): rows sum to 1, like a softmax pattern. [..., N, N]"""
    kernel = feature_map(q) @ feature_map(k).transpose(-1, -2)  # [..., N, N], every entry > 0
    if causal:
        kernel = kernel * causal_mask(q.shape[-2], q.device)
    return kernel / kernel.sum(dim=-1, keepdim=True)


def linear_attention_explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Linear attention the quadratic way, (φ(Q) φ(K)ᵀ) V normalised row by row: the check on `linear_attention`."""
    _check_shapes(q, k, v)
    return linear_attention_weights(q, k, causal) @ v


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Seed 003 Definition 6.2 with φ = elu + 1, by associativity: no N×N matrix is ever formed. [..., N, Dv]

    non-causal: φ(Q) (φ(K)ᵀ V) / (φ(Q) (φ(K)ᵀ 1)), the K×Dv sum φ(K)ᵀ V shared by every query;
    causal:     the running sums S_i = Σ_{j≤i} φ(k_j) v_jᵀ ([..., N, K, Dv], a cumulative sum) and z_i = Σ_{j≤i} φ(k_j).
    """
    _check_shapes(q, k, v)
    phi_q, phi_k = feature_map(q), feature_map(k)  # [..., N, K]
    if not causal:
        kv = phi_k.transpose(-1, -2) @ v  # [..., K, Dv]
        normaliser = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1)  # [..., N, K] @ [..., K, 1] -> [..., N, 1]
        return (phi_q @ kv) / normaliser
    kv = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # [..., N, K, 1] * [..., N, 1, Dv] -> S_i
    z = torch.cumsum(phi_k, dim=-2)  # [..., N, K]
    numerator = (phi_q.unsqueeze(-2) @ kv).squeeze(-2)  # [..., N, 1, K] @ [..., N, K, Dv] -> [..., N, Dv]
    return numerator / (phi_q * z).sum(dim=-1, keepdim=True)


ATTENTION = {"softmax": softmax_attention, "linear": linear_attention}


# ---------------------------------------------------------------------------------------------------------
# The two kernels on a model's real queries, keys and values
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelComparison:
    """Softmax attention as the model computed it vs linear attention on the same q, k, v of one head.

    softmax_pattern [N, N] and softmax_out [N, K] are the recording's hook_pattern and hook_z (the model's own
    numbers, with its mask and position bias); linear_pattern and linear_out are linear attention's on the same
    (rotated, with RoPE) queries and keys and the same values. Common layout: row = query."""

    softmax_pattern: np.ndarray
    linear_pattern: np.ndarray
    softmax_out: np.ndarray
    linear_out: np.ndarray
    masked: np.ndarray  # [N, N] True where the model's mask hid the key from the query
    causal: bool  # linear attention was run causally (the model's mask hides every later key)
    exact_mask: bool  # the model's mask is exactly causal or exactly none, so both see the same keys
    position_bias: bool  # the model adds a position bias (ALiBi, relative) that linear attention leaves out

    @property
    def relative_error(self) -> float:
        """‖linear − softmax‖ / ‖softmax‖ over the whole output (Frobenius norms)."""
        return float(np.linalg.norm(self.linear_out - self.softmax_out) / np.linalg.norm(self.softmax_out))

    @property
    def token_cosine(self) -> np.ndarray:
        """Per token, the cosine of the angle between the two outputs (1: same direction). [N]"""
        dot = (self.linear_out * self.softmax_out).sum(axis=1)
        norms = np.linalg.norm(self.linear_out, axis=1) * np.linalg.norm(self.softmax_out, axis=1)
        return dot / np.maximum(norms, np.finfo(np.float64).tiny)

    @property
    def linear_masked(self) -> np.ndarray:
        """[N, N] True where linear attention hid the key: the later keys when causal, else none."""
        n = self.masked.shape[0]
        return np.triu(np.ones((n, n), dtype=bool), 1) if self.causal else np.zeros((n, n), dtype=bool)

    @property
    def entropies(self) -> tuple[float, float]:
        """Mean entropy in bits of a query's weights, (softmax, linear): the larger, the more evenly spread."""
        return float(attention_entropy(self.softmax_pattern)), float(attention_entropy(self.linear_pattern))

    @property
    def pattern_difference(self) -> float:
        """The largest |weight difference| between the two N×N matrices."""
        return float(np.abs(self.linear_pattern - self.softmax_pattern).max())


def compare_on_recording(rec: Recording, layer: int, head: int) -> KernelComparison:
    """Run linear attention on head `head` of layer `layer`'s recorded queries, keys (after RoPE, if used) and
    values, causally when the recorded mask hides every later key; compare with what the model computed."""
    if not (0 <= layer < rec.n_layers and 0 <= head < rec.config.n_heads):
        raise ValueError(f"no head L{layer} H{head} in a model with {rec.n_layers} layers of "
                         f"{rec.config.n_heads} heads")
    hook = partial(block_hook, layer)
    rotated = hook("attn.hook_rot_q") in rec
    names = ("attn.hook_rot_q", "attn.hook_rot_k") if rotated else ("attn.hook_q", "attn.hook_k")
    q, k, v = (rec.tensors[hook(name)][:, head].double() for name in (*names, "attn.hook_v"))  # [N, K]
    allowed = ~np.isneginf(rec.scores(layer)[head])  # [N(query), N(key)]
    causal = not np.triu(allowed, 1).any()
    exact = bool(np.array_equal(allowed, np.tril(np.ones_like(allowed))) if causal else allowed.all())
    with torch.no_grad():
        linear_pattern = linear_attention_weights(q, k, causal).numpy()
        linear_out = linear_attention(q, k, v, causal).numpy()
    return KernelComparison(rec.pattern(layer)[head].astype(np.float64), linear_pattern,
                            rec[hook("attn.hook_z")][:, head].astype(np.float64), linear_out, ~allowed, causal, exact,
                            hook("attn.hook_pos_bias") in rec)


# ---------------------------------------------------------------------------------------------------------
# Measuring time and memory against N
# ---------------------------------------------------------------------------------------------------------

class LargestTensor(TorchFunctionMode):
    """While active, watches every torch operation and keeps the size in bytes of the largest tensor any of them
    returns: for softmax attention the N×N scores, for linear attention its K×Dv or N×K×Dv running sums."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(tensor, torch.Tensor):
                self.largest = max(self.largest, tensor.numel() * tensor.element_size())
        return result


@contextmanager
def one_thread():
    """torch on one thread for a fair, repeatable timing (the old thread count restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class CostPoint:
    method: str  # "softmax" or "linear"
    n: int  # tokens N
    seconds: float  # median wall time of `runs` runs
    largest_bytes: int  # the largest tensor created during one run
    runs: int = 1  # how many timed runs the median is of
    times: tuple[float, ...] = ()  # every timed run's seconds (the fit of the growth uses them all)

    @property
    def every_time(self) -> tuple[float, ...]:
        return self.times or (self.seconds,)


@dataclass(frozen=True)
class CostMeasurement:
    points: list[CostPoint]
    skipped: dict[str, list[int]] = field(default_factory=dict)  # method -> the N left out to stay under the cap
    head_dim: int = 32
    causal: bool = True
    repeats: int = 5
    seconds_spent: float = 0.0

    def of(self, method: str) -> list[CostPoint]:
        return [p for p in self.points if p.method == method]

    def time_growth(self, method: str) -> GrowthFit | None:
        """How `method`'s time grows, fitted over every timed run at every N; None below two sizes."""
        points = self.of(method)
        return growth_fit(points) if len({p.n for p in points}) > 1 else None

    def doubling_ratio(self, method: str, value: str = "seconds") -> float | None:
        """value(N) / value(N/2) at the largest N of `method` whose half was measured too ("seconds" or
        "largest_bytes"): about 4 for a cost growing as N², 2 for one growing as N; None without such a pair."""
        by_n = {p.n: getattr(p, value) for p in self.of(method)}
        pairs = [n for n in by_n if n % 2 == 0 and n // 2 in by_n]
        return by_n[max(pairs)] / by_n[max(pairs) // 2] if pairs else None


def _time_once(method: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> float:
    start = time.perf_counter()
    ATTENTION[method](q, k, v, causal)
    return time.perf_counter() - start


def _largest_tensor(method: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> int:
    with LargestTensor() as watch:
        ATTENTION[method](q, k, v, causal)
    return watch.largest


GROWTH = {"softmax": 2, "linear": 1}  # the least exponent used to guess the next N's time, to respect the cap
RUN_BUDGET = 1.0  # seconds of timed runs per point: fewer than `repeats` runs when one run is slow


@torch.no_grad()
def measure_cost(ns: list[int], head_dim: int = 32, causal: bool = True, repeats: int = 5,
                 time_cap: float = 20.0, seed: int = 0) -> CostMeasurement:
    """Time and memory of softmax vs linear attention for one head of size K = `head_dim` on random q, k, v, for
    each N in `ns` (ascending), on one CPU thread: after one warm-up run, the median of `repeats` runs (fewer when
    they would take more than RUN_BUDGET seconds, at least one), and the bytes of the largest tensor created
    (LargestTensor). An N whose runs are predicted from the last ones to take the total past `time_cap` seconds is
    skipped, and so is every larger N of that method."""
    if not ns or any(n < 1 for n in ns) or head_dim < 1 or repeats < 1 or time_cap <= 0:
        raise ValueError("need at least one N >= 1, head_dim >= 1, repeats >= 1 and a positive time cap")
    generator = torch.Generator().manual_seed(seed)
    points: list[CostPoint] = []
    skipped: dict[str, list[int]] = {method: [] for method in METHODS}
    history: dict[str, list[tuple[int, float]]] = {method: [] for method in METHODS}
    started = time.perf_counter()
    with one_thread():
        for n in sorted(set(ns)):
            q, k, v = (torch.randn(n, head_dim, generator=generator) for _ in range(3))
            for method in METHODS:
                left = time_cap - (time.perf_counter() - started)
                if skipped[method] or _predicted(history[method], n, method, repeats) > left:
                    skipped[method].append(n)
                    continue
                warm_up = _time_once(method, q, k, v, causal)
                runs = max(1, min(repeats, int(RUN_BUDGET / max(warm_up, 1e-9))))
                times = tuple(_time_once(method, q, k, v, causal) for _ in range(runs))
                points.append(CostPoint(method, n, statistics.median(times), _largest_tensor(method, q, k, v, causal),
                                        runs, times))
                history[method].append((n, points[-1].seconds))
    return CostMeasurement(points, {m: s for m, s in skipped.items() if s}, head_dim, causal, repeats,
                           time.perf_counter() - started)


def _predicted(history: list[tuple[int, float]], n: int, method: str, repeats: int) -> float:
    """Seconds the warm-up, the timed runs and the memory run at N = n should take, extrapolated from the last
    measured (N, seconds) with the steeper of the method's exponent and the one between its last two points."""
    if not history:
        return 0.0
    last_n, last_seconds = history[-1]
    exponent = GROWTH[method]
    if len(history) > 1:
        before_n, before_seconds = history[-2]
        exponent = max(exponent, math.log(last_seconds / before_seconds) / math.log(last_n / before_n))
    one_run = last_seconds * (n / last_n) ** exponent
    return 2 * one_run + min(repeats * one_run, max(RUN_BUDGET, one_run))


def fitted_slope(points: list[CostPoint], value: str = "seconds", min_n: int = 1) -> float:
    """The slope of log(value) against log(N) by least squares over the points with N >= min_n (value: "seconds"
    or "largest_bytes"): about 2 for a cost growing as N², 1 for one growing as N."""
    chosen = [p for p in points if p.n >= min_n]
    if len(chosen) < 2:
        raise ValueError("a slope needs at least two points")
    x = np.log([p.n for p in chosen])
    y = np.log([getattr(p, value) for p in chosen])
    return float(np.polyfit(x, y, 1)[0])


Z_95 = 1.959964  # the normal quantile of a two-sided 95 % interval


@dataclass(frozen=True)
class GrowthFit:
    """The Theil–Sen slope of log(time) against log(N) and Sen's 95 % interval for it (low, high): about 2 for a
    cost growing as N², 1 for one growing as N. Unlike the ratio of two sizes' times, one slow or fast run
    moves it little: it is the median of the slopes between every two runs at different N."""

    slope: float
    low: float
    high: float
    runs: int  # timed runs fitted
    sizes: int  # different N among them

    @property
    def per_doubling(self) -> float:
        """The factor time grows by when N doubles, 2^slope."""
        return 2 ** self.slope

    @property
    def per_doubling_range(self) -> tuple[float, float]:
        return 2 ** self.low, 2 ** self.high


def growth_fit(points: list[CostPoint]) -> GrowthFit:
    """Theil–Sen (Sen 1968) over every timed run of `points`: the median of the slopes of log(seconds) against
    log(N) between every two runs at different N, with the distribution-free interval from the ranks of those
    slopes (Kendall's S variance, corrected for the runs that share an N)."""
    x = np.log([p.n for p in points for _ in p.every_time])
    y = np.log([t for p in points for t in p.every_time])
    i, j = np.triu_indices(len(x), 1)
    apart = x[i] != x[j]
    slopes = np.sort((y[j] - y[i])[apart] / (x[j] - x[i])[apart])
    if not len(slopes):
        raise ValueError("a slope needs runs at two sizes at least")
    tied = np.unique(x, return_counts=True)[1]
    variance = (len(x) * (len(x) - 1) * (2 * len(x) + 5) - np.sum(tied * (tied - 1) * (2 * tied + 5))) / 18
    reach = Z_95 * math.sqrt(variance)
    low = max(0, round((len(slopes) - reach) / 2) - 1)  # the ranks (M - C) / 2 and (M + C) / 2 + 1, counted from 1
    high = min(len(slopes) - 1, round((len(slopes) + reach) / 2))
    return GrowthFit(float(np.median(slopes)), float(slopes[low]), float(slopes[high]), len(x), len(tied))
