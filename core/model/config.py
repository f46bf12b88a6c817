"""The model's configuration: one frozen dataclass, checked when it is built.

Symbols follow the seed paper (001): D features per token, N tokens, H heads of size K, M blocks.
An incompatible combination raises `ConfigError` with a message that says why, so a bad preset
or a bad toggle fails at construction instead of producing silent nonsense.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

PositionEncoding = Literal["none", "sinusoidal", "learned", "rope", "alibi", "relative"]
MaskKind = Literal["none", "causal", "padding", "window", "strided"]
NormPlacement = Literal["pre", "post"]
HeadKind = Literal["next_token", "masked_token", "classifier"]
InputKind = Literal["tokens", "patches"]
Pooling = Literal["cls", "mean"]
Activation = Literal["gelu", "gelu_tanh"]  # GELU exactly (erf), or GPT-2's tanh approximation of it

POSITION_ENCODINGS: tuple[str, ...] = get_args(PositionEncoding)
MASK_KINDS: tuple[str, ...] = get_args(MaskKind)
# Encodings that act inside attention (on q/k, or as a bias on the scores) rather than on the embedding.
ATTENTION_ENCODINGS = ("rope", "alibi", "relative")
# Encodings with no trained parameters: any model can be run with one of them instead of its own.
PARAMETER_FREE_ENCODINGS = ("none", "sinusoidal", "rope", "alibi")
# the encodings that are a function of the position, so that a pass may put its tokens at positions other than
# 0..N-1 (training with random strides): a learned table has only max_len rows, and "none" has no positions
STRIDABLE_ENCODINGS = ("sinusoidal", "rope", "alibi", "relative")
# Masks under which no token sees a later one (the incremental property of seed 001 §4.1 holds).
CAUSAL_MASKS = ("causal", "strided")


class ConfigError(ValueError):
    """An option, or a combination of options, the model cannot be built with."""


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 128  # D
    n_heads: int = 4  # H
    n_layers: int = 4  # M
    d_head: int | None = None  # K; D / H when None (seed 001 footnote 13)
    d_mlp: int = 512
    max_len: int = 128  # the context length: tokens, or patches plus the CLS token
    input: InputKind = "tokens"
    vocab_size: int = 0  # tokens only
    image_size: int = 32  # patches only
    patch_size: int = 4
    channels: int = 3
    image_norm: bool = False  # patches only: each image's colour channels standardised first (image_standardise)
    n_classes: int = 0  # classifier head only
    pooling: Pooling = "cls"
    pos_encoding: PositionEncoding = "learned"
    mask: MaskKind = "causal"
    window: int = 8  # the sliding window's width w
    window_causal: bool = True
    stride: int = 4  # the strided mask's stride s
    norm: NormPlacement = "pre"
    head: HeadKind = "next_token"
    relative_buckets: int = 32  # T5 relative-position buckets
    relative_max_distance: int = 128
    rope_base: float = 10000.0
    ln_eps: float = 1e-5
    dropout: float = 0.0
    # Options a pretrained model of another family needs (core/model/pretrained.py); our own models keep the defaults.
    activation: Activation = "gelu"  # the MLP's nonlinearity
    attn_bias: bool = False  # biases on W_Q, W_K, W_V, W_O (GPT-2, BERT, ViT)
    segment_embed: bool = False  # a learned vector added to every token: BERT's token-type embedding of one text
    embed_norm: bool = False  # a TokenNorm on embedding + position before block 0 (BERT's embeddings.LayerNorm)
    head_transform: bool = False  # dense -> activation -> TokenNorm before the unembedding (BERT's MLM head)

    def __post_init__(self) -> None:
        for problem in _problems(self):
            raise ConfigError(problem)

    @property
    def head_dim(self) -> int:
        """K, the size of one head's queries, keys and values."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def uses_cls(self) -> bool:
        return self.head == "classifier" and self.pooling == "cls"

    @property
    def is_causal(self) -> bool:
        return self.mask in CAUSAL_MASKS or (self.mask == "window" and self.window_causal)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config fields: {', '.join(unknown)}")
        return cls(**data)


def _check_literal(name: str, value: Any, allowed: tuple[str, ...]) -> str | None:
    if value not in allowed:
        return f"{name}={value!r} is not one of {', '.join(allowed)}"
    return None


def _problems(cfg: ModelConfig):
    """Yield every reason the configuration cannot be built (the first one is raised)."""
    for name, literal in (("pos_encoding", PositionEncoding), ("mask", MaskKind),
                          ("norm", NormPlacement), ("head", HeadKind), ("input", InputKind),
                          ("pooling", Pooling), ("activation", Activation)):
        problem = _check_literal(name, getattr(cfg, name), get_args(literal))
        if problem:
            yield problem
    for name in ("d_model", "n_heads", "n_layers", "d_mlp", "max_len"):
        if getattr(cfg, name) < 1:
            yield f"{name} must be at least 1, got {getattr(cfg, name)}"
    if cfg.d_head is None and cfg.d_model % cfg.n_heads:
        yield f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}; set d_head explicitly"
    if cfg.pos_encoding == "rope" and cfg.head_dim % 2:
        yield f"RoPE rotates pairs of features, so the head size must be even (got K={cfg.head_dim})"
    if cfg.pos_encoding == "sinusoidal" and cfg.d_model % 2:
        yield f"sinusoidal encoding pairs sin and cos features, so D must be even (got {cfg.d_model})"
    if cfg.mask == "window" and cfg.window < 1:
        yield f"the sliding window needs a width of at least 1 (got {cfg.window})"
    if cfg.mask == "strided" and cfg.stride < 1:
        yield f"the strided mask needs a stride of at least 1 (got {cfg.stride})"
    yield from _head_problems(cfg)
    yield from _input_problems(cfg)


def _head_problems(cfg: ModelConfig):
    if cfg.head == "next_token" and not cfg.is_causal:
        yield (f"a next-token head needs a mask that hides later tokens (causal, causal window or "
               f"strided); with mask={cfg.mask!r} each position could read the token it predicts")
    if cfg.head == "masked_token" and cfg.is_causal:
        yield f"a masked-token head predicts from both sides, so it needs a bidirectional mask, not {cfg.mask!r}"
    if cfg.head == "classifier" and cfg.n_classes < 2:
        yield f"a classifier head needs n_classes >= 2 (got {cfg.n_classes})"
    if cfg.head_transform and (cfg.head == "classifier" or cfg.norm == "pre"):
        yield ("head_transform is BERT's dense + TokenNorm before a token head, in a post-LN model (a pre-LN "
               "model's final TokenNorm comes last already)")
    if cfg.head != "classifier" and cfg.input == "patches":
        yield "image patches have no vocabulary to predict: use the classifier head"
    if cfg.pos_encoding == "relative" and cfg.relative_buckets < 2:
        yield f"relative encoding needs at least 2 buckets (got {cfg.relative_buckets})"


def _input_problems(cfg: ModelConfig):
    if cfg.input == "tokens" and cfg.vocab_size < 2:
        yield f"token input needs vocab_size >= 2 (got {cfg.vocab_size})"
    if cfg.input == "tokens" and cfg.image_norm:
        yield "image_norm standardises an image's colour channels: it needs image patches as input"
    if cfg.input == "patches":
        if cfg.image_size % cfg.patch_size:
            yield f"image_size={cfg.image_size} is not divisible by patch_size={cfg.patch_size}"
        elif cfg.n_patches + cfg.uses_cls > cfg.max_len:
            yield (f"{cfg.n_patches} patches{' plus the CLS token' if cfg.uses_cls else ''} "
                   f"exceed max_len={cfg.max_len}")
        if cfg.pos_encoding in ATTENTION_ENCODINGS:
            yield (f"{cfg.pos_encoding!r} is a 1-D sequence encoding; image patches use "
                   f"none, sinusoidal or learned")
