"""Attention masks: which keys each query may attend to (seed 001 §4.1, seed 003 on sparse attention).

Every mask here is a boolean array `allowed[i, j]`, True where query i may attend to key j:
rows are queries, columns keys, in the common (N x N, rows sum to 1) layout of the recorded patterns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from core.model.config import MASK_KINDS, ConfigError, ModelConfig


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


def block_sparse_mask(n: int, block: int, causal: bool = True, device=None) -> torch.Tensor:
    """Block-sparse attention (seed 003 §6.1; the "fixed" pattern of Child et al.): the tokens are cut into blocks
    of b; a query sees every key of its own block, ⌊i/b⌋ = ⌊j/b⌋, and the last key of every block, j mod b = b-1,
    which carries the block's summary onwards. Causal: only keys j <= i."""
    position = torch.arange(n, device=device)
    same_block = (position[:, None] // block) == (position[None, :] // block)
    summary = (position % block == block - 1)[None, :].expand(n, n)
    allowed = same_block | summary
    return allowed & (_offsets(n, device) >= 0) if causal else allowed


def random_mask(n: int, density: float, seed: int = 0, causal: bool = True, device=None) -> torch.Tensor:
    """Random attention (seed 003 §6.1, as in BigBird): each query sees itself and each other key with probability
    `density`, drawn once from `seed` (the same seed gives the same mask). Causal: only keys j <= i."""
    draw = torch.rand(n, n, generator=torch.Generator().manual_seed(seed)).to(device)
    allowed = (draw < density) | torch.eye(n, dtype=torch.bool, device=device)
    return allowed & (_offsets(n, device) >= 0) if causal else allowed


def build_mask(spec: MaskSpec, n: int, device=None) -> torch.Tensor:
    """The [N, N] allowed-matrix of a named mask."""
    if spec.kind in ("none", "padding"):
        return torch.ones(n, n, dtype=torch.bool, device=device)
    if spec.kind == "causal":
        return causal_mask(n, device)
    if spec.kind == "window":
        return window_mask(n, spec.window, spec.window_causal, device)
    return strided_mask(n, spec.stride, device)


def score_offset(allowed: torch.Tensor) -> torch.Tensor:
    """What a mask adds to the attention scores: 0 where `allowed`, -inf where not, so that a hidden key's weight
    exp(-inf) = 0 is exactly 0. Made once per forward pass and added in place to every layer's fresh scores:
    one pass over them and no copy (a masked_fill copy of each layer's [H, N, N] scores cost more than the
    softmax at N = 1024)."""
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill_(~allowed, float("-inf"))


ROWS_PER_BLOCK = 128  # queries a block
MIN_BLOCKED = 512  # below this many queries, one block: at 256 two blocks were 5 % slower than one, at 1024 eight 15 % faster


@dataclass(frozen=True)
class ScoreMask:
    """A self-attention mask as the attention uses it (score_mask).

    offset: [B, N, S], 0 where a query may see a key and -inf where not (score_offset).
    blocks: (first query, end query, open keys, keys seen) that tile the N queries in order. Every query in
    first..end-1 sees each of the first `open keys`, and none sees a key from `keys seen` on: their scores there
    are never computed (they are -inf and their weights exactly 0, as computing them would give), and the offset
    is added only between the two. Under a causal mask at N = 1024, in blocks of 128 queries, that skips 44 % of
    the products q·k and A·v and of the softmax."""

    offset: torch.Tensor
    blocks: tuple[tuple[int, int, int, int], ...]


def score_mask(allowed: torch.Tensor, rows: int = ROWS_PER_BLOCK, min_blocked: int = MIN_BLOCKED) -> ScoreMask:
    """The ScoreMask of an allowed-matrix [B, N, S]: its offset, and its queries in blocks of `rows` from
    `min_blocked` queries on, else one block (blocks that see every key merged, so a mask that hides no end of a row
    is one block: all of attention at once)."""
    n, keys = allowed.shape[-2:]
    rows = rows if n >= min_blocked else max(n, 1)
    numbers = torch.arange(1, keys + 1, dtype=torch.int32, device=allowed.device)
    # per query: 1 + the last key any batch item lets it see (0: none), the first key any hides (S: none)
    seen = (allowed.any(0) * numbers).amax(-1)
    open_ = torch.where((~allowed).any(0), numbers - keys - 1, 0).amin(-1) + keys
    blocks: list[tuple[int, int, int, int]] = []
    for first in range(0, n, rows):
        end = min(first + rows, n)
        block_seen, block_open = int(seen[first:end].max()), int(open_[first:end].min())
        if blocks and blocks[-1][3] == keys == block_seen:  # both see every key: one block
            blocks[-1] = (blocks[-1][0], end, min(blocks[-1][2], block_open), keys)
        else:
            blocks.append((first, end, min(block_open, block_seen), block_seen))
    return ScoreMask(score_offset(allowed), tuple(blocks))


@functools.lru_cache(maxsize=8)
def named_score_mask(spec: MaskSpec, n: int, batch: int, device: str) -> ScoreMask:
    """score_mask of a named mask over n tokens for a batch of texts of that length: made once and shared by the
    forward passes that use it, which only read it (at N = 1024 building it was about 5 ms, 4 % of a pass)."""
    return score_mask(build_mask(spec, n, torch.device(device)).expand(batch, n, n))


def padding_mask(valid: torch.Tensor) -> torch.Tensor:
    """From valid [B, N] (True on real tokens) the keys every query may see: [B, 1, N] (broadcast over queries)."""
    return valid[:, None, :]


# ---------------------------------------------------------------------------------------------------------
# Presets of the mask editor, and its edits
# ---------------------------------------------------------------------------------------------------------

MASK_PRESETS = ("causal", "window", "strided", "block-sparse", "random", "none")


@dataclass(frozen=True)
class MaskPreset:
    """A starting point for an editable mask: one of MASK_PRESETS and its parameters.

    width: the sliding window's w, or the block size b of block-sparse; stride: the strided mask's s;
    density and seed: the random mask's; causal: whether window, block-sparse and random keep only keys j <= i
    (causal and strided always do, none never does)."""

    kind: str = "causal"
    width: int = 4
    stride: int = 4
    density: float = 0.3
    seed: int = 0
    causal: bool = True

    def __post_init__(self) -> None:
        if self.kind not in MASK_PRESETS:
            raise ConfigError(f"mask preset {self.kind!r} is not one of {', '.join(MASK_PRESETS)}")
        if self.width < 1 or self.stride < 1:
            raise ConfigError("the window width, block size and stride must be at least 1")
        if not 0.0 <= self.density <= 1.0:
            raise ConfigError(f"the random mask's density is a probability in [0, 1], got {self.density}")

    def build(self, n: int, device=None) -> torch.Tensor:
        """The [N, N] allowed-matrix."""
        if self.kind == "block-sparse":
            return block_sparse_mask(n, self.width, self.causal, device)
        if self.kind == "random":
            return random_mask(n, self.density, self.seed, self.causal, device)
        return build_mask(MaskSpec(self.kind, self.width, self.causal, self.stride), n, device)


def flip_cells(allowed: torch.Tensor, cells: set[tuple[int, int]]) -> torch.Tensor:
    """A copy of the [N, N] allowed-matrix with each (query, key) cell in `cells` switched (cells outside: ignored)."""
    flipped = allowed.clone()
    n = allowed.shape[-1]
    for query, key in cells:
        if 0 <= query < n and 0 <= key < n:
            flipped[query, key] = not bool(flipped[query, key])
    return flipped


def fully_masked_rows(allowed: torch.Tensor) -> list[int]:
    """The queries that may attend to no key at all (the model gives them a zero row: no information flows in)."""
    return torch.nonzero(~allowed.any(dim=-1)).flatten().tolist()


def sees_later_tokens(allowed: torch.Tensor) -> bool:
    """True when some query may attend to a later key: appending a token can then change earlier ones (§4.1)."""
    return bool((allowed & (_offsets(allowed.shape[-1], allowed.device) < 0)).any())


MAX_CELLS_CHARS = 4_000  # far more cells than the editor's 32 x 32 grid makes worth writing out; refused unread


def parse_cells(text: str) -> set[tuple[int, int]]:
    """The editor's edits as written in its box and the URL, "query:key" pairs split by spaces or commas:
    "3:1 4:2" -> {(3, 1), (4, 2)}. A cell written twice is switched twice, so it drops out. ValueError for a text
    longer than MAX_CELLS_CHARS or an item that is not a cell."""
    if len(text) > MAX_CELLS_CHARS:
        raise ValueError(f"the list of cells has {len(text):,} characters; write at most {MAX_CELLS_CHARS:,}")
    cells: set[tuple[int, int]] = set()
    for item in text.replace(",", " ").split():
        query, colon, key = item.partition(":")
        if not colon or not query.isdigit() or not key.isdigit():
            raise ValueError(f"{item!r} is not a cell: write query:key, for example 3:1")
        cells ^= {(int(query), int(key))}
    return cells


def format_cells(cells: set[tuple[int, int]]) -> str:
    """The inverse of parse_cells, sorted: {(4, 2), (3, 1)} -> "3:1 4:2"."""
    return " ".join(f"{query}:{key}" for query, key in sorted(cells))
