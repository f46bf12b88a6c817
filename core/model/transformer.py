"""The transformer of the seed paper (Turner, "An Introduction to Transformers", seed 001), section by section.

Code works in the common layout, X as [B, N, D] with tokens down the rows; the paper writes X^T (D x N,
tokens across) and normalises A over columns, so the paper's A_{n',n} is our pattern[n, n'].

    x_n^(0)   = embedding + e_n                                     (§1.1, §3, footnote 19)
    pre-LN:   X' = X + MHSA(TokenNorm(X));  X'' = X' + MLP(TokenNorm(X'))   (§2.3, figure 7)
    post-LN:  X' = TokenNorm(X + MHSA(X));  X'' = TokenNorm(X' + MLP(X'))
    head:     next token from x_n^(M) (§4.1), masked token, or a class from x_0^(M) / the mean (§4.2)

Attention is computed explicitly so the matrix A can be recorded; nothing is fused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from core.model.config import PARAMETER_FREE_ENCODINGS, STRIDABLE_ENCODINGS, ConfigError, ModelConfig
from core.model.interventions import Replacement
from core.model.masks import MaskSpec, ScoreMask, build_mask, causal_mask, named_score_mask, padding_mask, score_mask
from core.model.patches import image_standardise, patchify
from core.model.positions import RelativeBias, alibi_bias, apply_rope, rope_angles, sinusoidal_table
from core.model.recording import Recording


class Recorder:
    """Collects named intermediates of one forward pass when enabled; costs nothing when not.

    Each tensor is kept with its batch axis and the axes that run over tokens, so that a padded
    batch can be split into one Recording per sequence holding only that sequence's real tokens.
    An intervention (core.model.interventions) replaces tensors by hook name: the pass goes on from, and records,
    the replaced tensor.
    """

    def __init__(self, enabled: bool, replacements: Mapping[str, Replacement] | None = None):
        self.enabled = enabled
        self.replacements = replacements or {}
        self.tensors: dict[str, tuple[torch.Tensor, tuple[int, ...]]] = {}

    def __call__(self, name: str, tensor: torch.Tensor, token_axes: tuple[int, ...] = (0,),
                 **context: torch.Tensor) -> torch.Tensor:
        """`tensor`, or its replacement, recorded under `name`; `context`: what a replacement may read."""
        if self.replacements and name in self.replacements:
            tensor = self.replacements[name](tensor, **context)
        if self.enabled:  # in inference mode nothing needs detaching: skip a dispatch per tensor
            self.tensors[name] = (tensor.detach() if tensor.requires_grad else tensor, token_axes)
        return tensor

    def split(self, valid: torch.Tensor | None) -> list[dict[str, torch.Tensor]]:
        """One dict per batch item, batch axis removed, padded positions dropped. valid: [B, N] or None."""
        batch = next(iter(self.tensors.values()))[0].shape[0]
        items = []
        for b in range(batch):
            keep = None if valid is None or bool(valid[b].all()) else valid[b].nonzero().squeeze(1)
            items.append({name: _select(t[b], axes, keep) for name, (t, axes) in self.tensors.items()})
        return items


def _select(tensor: torch.Tensor, token_axes: tuple[int, ...], keep: torch.Tensor | None) -> torch.Tensor:
    for axis in token_axes if keep is not None else ():
        tensor = tensor.index_select(axis, keep)
    return tensor


def masked_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over keys of scores whose masked entries are -inf: those weights are exactly 0, and a fully
    masked row is all 0 rather than NaN."""
    return zero_empty_rows(torch.softmax(scores, dim=-1))  # exp(-inf) = 0 on masked entries


def zero_empty_rows(weights: torch.Tensor) -> torch.Tensor:
    """Softmax weights with each row of a query that sees no key (its scores all -inf: NaN throughout) set to 0."""
    empty = weights[..., :1].isnan()  # such a row is NaN throughout, any other has no NaN: one column tells
    return weights.masked_fill_(empty, 0.0) if bool(empty.any()) else weights


class TokenNorm(nn.Module):
    """LayerNorm applied to each token separately (seed 001 §2.3, which calls it TokenNorm):

        x̄_{d,n} = (x_{d,n} - mean(x_n)) / sqrt(var(x_n) + eps) * gamma_d + beta_d

    Recorded as TransformerLens records LayerNorm: hook_scale = sqrt(var + eps) [N, 1] and hook_normalized =
    (x - mean) / scale, *before* gamma and beta [N, D]; hook_mean [N] is ours (TransformerLens has none).
    """

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta

    def forward(self, x: torch.Tensor, record: Recorder, prefix: str) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)  # [B, N, 1]
        centred = x - mean
        scale = record(f"{prefix}.hook_scale", (centred.pow(2).mean(dim=-1, keepdim=True) + self.eps).sqrt())
        record(f"{prefix}.hook_mean", mean.squeeze(-1))  # [B, N]
        return record(f"{prefix}.hook_normalized", centred / scale) * self.weight + self.bias


@dataclass
class PositionContext:
    """What the attention layers need of the position encoding in this forward pass."""

    encoding: str  # the encoding in effect (the model's own, or another one for an ablation)
    rope_angles: torch.Tensor | None = None  # [N, K/2], of the N tokens of this pass
    alibi: torch.Tensor | None = None  # [H, N, start + N]: this pass's queries, every key
    start: int = 0  # the position of this pass's first token: the tokens already in a KVCache
    positions: torch.Tensor | None = None  # [N], when not 0..N-1 (training with random strides)


@dataclass
class KVCache:
    """The keys and values of the tokens seen so far, per attention layer, for incremental decoding.

    Seed 001 §4.1: under a causal mask earlier tokens never see later ones, so appending a token leaves their
    keys and values unchanged. A generation step then computes q, k, v of the new token only and attends over
    the stored keys. Keys are stored as the scores use them: after RoPE's rotation, each at its own position.
    """

    keys: dict[str, torch.Tensor] = field(default_factory=dict)  # "blocks.{l}.attn" -> [B, N_seen, H, K]
    values: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """How many tokens the cache holds."""
        return next(iter(self.keys.values())).shape[1] if self.keys else 0

    def extend(self, layer: str, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' k, v [B, N, H, K] to `layer`'s; return every key and value so far."""
        if layer in self.keys:
            k = torch.cat([self.keys[layer], k], dim=1)  # [B, N_seen + N, H, K]
            v = torch.cat([self.values[layer], v], dim=1)
        self.keys[layer], self.values[layer] = k, v
        return k, v


class MultiHeadSelfAttention(nn.Module):
    """MHSA (seed 001 eqs. 4–6): Y = Σ_h V_h X A_h with q_{h,n} = U_{q,h} x_n, k_{h,n} = U_{k,h} x_n.

    V_h = U_h U_{v,h} (footnote 13): U_{v,h} is head h's slice of W_V, U_h its slice of W_O.
    Our models have no biases, so this sum is exactly what is computed; a pretrained GPT-2, BERT or ViT has them
    (cfg.attn_bias): b_Q, b_K shift queries and keys, b_V rides in every head's z, b_O is added once.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        inner = cfg.n_heads * cfg.head_dim
        self.W_Q = nn.Linear(cfg.d_model, inner, bias=cfg.attn_bias)
        self.W_K = nn.Linear(cfg.d_model, inner, bias=cfg.attn_bias)
        self.W_V = nn.Linear(cfg.d_model, inner, bias=cfg.attn_bias)
        self.W_O = nn.Linear(inner, cfg.d_model, bias=cfg.attn_bias)
        self.relative = (RelativeBias(cfg.n_heads, cfg.relative_buckets, cfg.relative_max_distance,
                                      bidirectional=not cfg.is_causal)
                         if cfg.pos_encoding == "relative" else None)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, n, _ = x.shape
        return x.view(batch, n, self.n_heads, self.head_dim)  # [B, N, H*K] -> [B, N, H, K]

    def forward(self, x: torch.Tensor, mask: ScoreMask, position: PositionContext,
                record: Recorder, prefix: str, cache: KVCache | None = None) -> torch.Tensor:
        """mask: the offset [B, N, start + N] (0 where a query may see a key, -inf where not) and the blocks of
        queries with the keys they see (core.model.masks.score_mask)."""
        q = record(f"{prefix}.hook_q", self.split_heads(self.W_Q(x)))  # [B, N, H, K]
        k = record(f"{prefix}.hook_k", self.split_heads(self.W_K(x)))
        v = record(f"{prefix}.hook_v", self.split_heads(self.W_V(x)))
        if position.encoding == "rope":
            q = record(f"{prefix}.hook_rot_q", apply_rope(q, position.rope_angles))
            k = record(f"{prefix}.hook_rot_k", apply_rope(k, position.rope_angles))
        if cache is not None:  # the keys and values of the earlier tokens, then these: [B, start + N, H, K]
            k, v = cache.extend(prefix, k, v)
        bias = self.position_bias(position, k.shape[1])
        if bias is not None:
            bias = record(f"{prefix}.hook_pos_bias", bias[None].expand(x.shape[0], -1, -1, -1), (1, 2))
        scores, pattern, z = attend(q / math.sqrt(self.head_dim), k, v, mask, bias)
        record(f"{prefix}.hook_attn_scores", scores, (1, 2))
        edited = record(f"{prefix}.hook_pattern", pattern, (1, 2), scores=scores)
        if edited is not pattern:  # an intervention rewrote attention rows: z is what the new rows give (eq. 6)
            z = torch.einsum("bhij,bjhk->bihk", edited, v)
        z = record(f"{prefix}.hook_z", z)  # [B, N, H, K]
        return self.W_O(z.flatten(2))  # [B, N, H*K] -> [B, N, D]

    def position_bias(self, position: PositionContext, n_keys: int) -> torch.Tensor | None:
        """b[h, i, j] of this pass's queries i and every key j: [H, N, start + N], or None."""
        if position.encoding == "alibi":
            return position.alibi
        if position.encoding == "relative":
            return self.relative(n_keys, position.positions)[:, position.start:]  # the rows of the new queries
        return None


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: ScoreMask,
           bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention, explicitly: q (already scaled by 1/sqrt(K)) [B, N, H, K], k and v [B, S, H, K], bias [B, H, N, S]
    or None. Returns the scores and the pattern [B, H, N, S] and z [B, N, H, K]:

        scores[h, n, n'] = k_{h,n'}·q_{h,n} / sqrt(K) + bias + offset   (eq. 5, with footnote 8's scaling)
        pattern[h, n, :] = softmax(scores[h, n, :])                     rows sum to 1 (eq. 5)
        z[n, h]          = Σ_n' pattern[h, n, n'] v_{h,n'}              (eq. 6, before W_O)

    Without gradients (every page), block by block of queries (attend_in_blocks); in training all at once,
    as autograd cannot follow writes into one tensor. Both give the same numbers (tests/test_model.py)."""
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    return (attend_at_once if needs_grad else attend_in_blocks)(q, k, v, mask, bias)


def attend_at_once(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: ScoreMask,
                   bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """attend, every query and key at once."""
    scores = torch.einsum("bihk,bjhk->bhij", q, k)  # [B, H, N, S]
    if bias is not None:
        scores = scores + bias
    scores = scores.add_(mask.offset[:, None])  # -inf where the mask hides a key: in place, on this pass's own tensor
    pattern = masked_softmax(scores)
    return scores, pattern, torch.einsum("bhij,bjhk->bihk", pattern, v)  # z: [B, N, H, K]


def attend_in_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: ScoreMask,
                     bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """attend, block by block of queries (mask.blocks): the keys a block's queries cannot see get -inf scores and
    weight 0 without being computed; the rest is computed as a whole, each block written into one tensor."""
    batch, n, heads, dim = q.shape
    keys = k.shape[1]
    q = q.transpose(1, 2).reshape(batch * heads, n, dim)  # [B, N, H, K] -> [B·H, N, K]: a matrix a head
    k_t = k.permute(0, 2, 3, 1).reshape(batch * heads, dim, keys)  # [B, S, H, K] -> [B·H, K, S]
    v = v.transpose(1, 2).reshape(batch * heads, keys, dim)  # [B·H, S, K]
    scores, pattern = q.new_empty(batch, heads, n, keys), q.new_empty(batch, heads, n, keys)
    z = q.new_empty(batch * heads, n, dim)
    flat_scores, flat_pattern = scores.view(batch * heads, n, keys), pattern.view(batch * heads, n, keys)
    for first, end, open_keys, seen in mask.blocks:
        rows = slice(first, end)
        torch.bmm(q[:, rows], k_t[:, :, :seen], out=flat_scores[:, rows, :seen])
        block = scores[:, :, rows, :seen]  # a view: the additions below land in `scores`
        if bias is not None:
            block.add_(bias[:, :, rows, :seen])
        # -inf where the mask hides a key (the offset is 0 on the first open_keys: nothing to add)
        scores[:, :, rows, open_keys:seen].add_(mask.offset[:, None, rows, open_keys:seen])
        scores[:, :, rows, seen:].fill_(float("-inf"))
        pattern[:, :, rows, seen:].fill_(0.0)
        zero_empty_rows(torch.softmax(block, dim=-1, out=pattern[:, :, rows, :seen]))
        torch.bmm(flat_pattern[:, rows, :seen], v[:, :seen], out=z[:, rows])
    return scores, pattern, z.view(batch, heads, n, dim).transpose(1, 2)  # z: [B·H, N, K] -> [B, N, H, K]


class MLP(nn.Module):
    """Stage 2 (seed 001 §2.2): the same two-layer perceptron applied to every token."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc_in = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.fc_out = nn.Linear(cfg.d_mlp, cfg.d_model)
        self.activation = cfg.activation

    def forward(self, x: torch.Tensor, record: Recorder, prefix: str) -> torch.Tensor:
        hidden = record(f"{prefix}.hook_pre", self.fc_in(x))  # [B, N, d_mlp]
        return self.fc_out(record(f"{prefix}.hook_post", activate(hidden, self.activation)))


def activate(x: torch.Tensor, activation: str) -> torch.Tensor:
    """GELU(x) = x Φ(x); "gelu_tanh" is GPT-2's approximation 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))."""
    return F.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")


class Block(nn.Module):
    """The transformer block of seed 001 figure 7: residual MHSA then residual MLP, with TokenNorm."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.name, self.pre_norm = f"blocks.{layer}", cfg.norm == "pre"
        self.ln1 = TokenNorm(cfg.d_model, cfg.ln_eps)
        self.attn = MultiHeadSelfAttention(cfg)
        self.ln2 = TokenNorm(cfg.d_model, cfg.ln_eps)
        self.mlp = MLP(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: ScoreMask, position: PositionContext,
                record: Recorder, cache: KVCache | None = None) -> torch.Tensor:
        p = self.name
        x = record(f"{p}.hook_resid_pre", x)
        if self.pre_norm:
            attn_out = record(f"{p}.hook_attn_out", self.dropout(
                self.attn(self.ln1(x, record, f"{p}.ln1"), mask, position, record, f"{p}.attn", cache)))
            x = record(f"{p}.hook_resid_mid", x + attn_out)
            mlp_out = record(f"{p}.hook_mlp_out", self.dropout(self.mlp(self.ln2(x, record, f"{p}.ln2"), record, f"{p}.mlp")))
            return record(f"{p}.hook_resid_post", x + mlp_out)
        attn_out = record(f"{p}.hook_attn_out",
                          self.dropout(self.attn(x, mask, position, record, f"{p}.attn", cache)))
        x = record(f"{p}.hook_resid_mid", self.ln1(x + attn_out, record, f"{p}.ln1"))
        mlp_out = record(f"{p}.hook_mlp_out", self.dropout(self.mlp(x, record, f"{p}.mlp")))
        return record(f"{p}.hook_resid_post", self.ln2(x + mlp_out, record, f"{p}.ln2"))


@dataclass
class ModelOutput:
    logits: torch.Tensor  # [B, N, vocabulary] or [B, classes]
    recordings: list[Recording] | None = None  # one per sequence when recording

    @property
    def recording(self) -> Recording:
        """The recording of a single-sequence batch."""
        if not self.recordings or len(self.recordings) != 1:
            raise ValueError("recording is for a batch of one sequence; use recordings")
        return self.recordings[0]


MaskArgument = str | MaskSpec | torch.Tensor | None


class Transformer(nn.Module):
    """Embedding -> position encoding -> M blocks -> final TokenNorm (pre-LN) -> head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.input == "tokens":
            self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        else:  # x_n = W p_n (figure 2), and a learned CLS token at n = 0 (§4.2)
            self.patch_embed = nn.Linear(cfg.channels * cfg.patch_size ** 2, cfg.d_model)
            if cfg.uses_cls:
                self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        if cfg.pos_encoding == "learned":
            self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model)
        if cfg.segment_embed:  # BERT's token-type embedding of segment A, the same for every token of one text
            self.token_type_embed = nn.Parameter(torch.zeros(cfg.d_model))
        self.ln_embed = TokenNorm(cfg.d_model, cfg.ln_eps) if cfg.embed_norm else None
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = TokenNorm(cfg.d_model, cfg.ln_eps) if cfg.norm == "pre" else None
        if cfg.head_transform:  # BERT's MLM head: x -> TokenNorm(act(W x + b)) before the unembedding
            self.head_dense = nn.Linear(cfg.d_model, cfg.d_model)
            self.head_ln = TokenNorm(cfg.d_model, cfg.ln_eps)
        n_outputs = cfg.n_classes if cfg.head == "classifier" else cfg.vocab_size
        self.unembed = nn.Linear(cfg.d_model, n_outputs)
        self.apply(_init_weights)

    def forward(self, inputs: torch.Tensor, *, mask: MaskArgument = None, pe: str | None = None,
                valid: torch.Tensor | None = None, record: bool = False, cache: KVCache | None = None,
                intervene: Mapping[str, Replacement] | None = None,
                positions: torch.Tensor | None = None) -> ModelOutput:
        """inputs: token ids [B, N] or images [B, C, H, W].

        mask: None (the model's own), a mask kind, a MaskSpec, or a boolean allowed-matrix [N, N] / [B, N, N].
        pe: None (the model's own), "none" to switch the position encoding off, or another parameter-free one.
        valid: [B, N] True on real tokens, for a padded batch of unequal lengths.
        cache: a KVCache holding the tokens before these (incremental decoding): the inputs are the next tokens,
        at positions start..start+N-1, start = cache.length; their keys and values are appended to it. A custom
        mask is then [start+N, start+N], over every token so far. Recorded patterns are [H, N, start+N].
        intervene: hook name -> the function its tensor goes through (core.model.interventions.Intervention).
        positions: [N], the tokens' positions when not 0..N-1 (training with random strides; STRIDABLE_ENCODINGS).

        Without gradients (every page) the pass runs in inference mode: the same numbers, without autograd's
        bookkeeping on each of its few hundred small operations (5–10 % of a pass at N = 64–256).
        """
        with torch.inference_mode(not torch.is_grad_enabled()):
            return self.run(inputs, mask, pe, valid, record, cache, intervene, positions)

    def run(self, inputs: torch.Tensor, mask: MaskArgument, pe: str | None, valid: torch.Tensor | None,
            record: bool, cache: KVCache | None, intervene: Mapping[str, Replacement] | None = None,
            positions: torch.Tensor | None = None) -> ModelOutput:
        """forward's pass itself."""
        if intervene and cache is not None:
            raise ValueError("an intervention runs a whole text, not a step of cached decoding")
        recorder = Recorder(record, intervene)
        x = self.embed_inputs(inputs, recorder)  # [B, N, D]
        batch, n, _ = x.shape
        start = self.check_cache(cache, valid, n)  # 0 without a cache
        position = self.position_context(pe, start + n, x.device, start, positions)
        e = self.position_embedding(position.encoding, start + n, x.device, positions)[:, start:]  # [1, N, D]
        x = x + recorder("hook_pos_embed", e.expand(batch, -1, -1))
        if self.cfg.segment_embed:
            x = x + recorder("hook_token_type_embed", self.token_type_embed.expand(batch, n, -1))
        if self.ln_embed is not None:
            x = self.ln_embed(x, recorder, "embed_ln")
        scored = self.score_mask(mask, n, batch, valid, x.device, cache)
        for block in self.blocks:
            x = block(x, scored, position, recorder, cache)
        if self.ln_final is not None:
            x = self.ln_final(x, recorder, "ln_final")
        logits = self.head(self.transform(x, recorder), valid)
        if self.cfg.head == "classifier":
            recorder("logits", logits, ())
        else:
            recorder("logits", logits)
        recordings = None
        if record:
            meta = {"mask": _describe_mask(mask, self.cfg), "pe": position.encoding}
            recordings = [Recording(self.cfg, tensors, dict(meta)) for tensors in recorder.split(valid)]
        return ModelOutput(logits, recordings)

    def embed_inputs(self, inputs: torch.Tensor, record: Recorder) -> torch.Tensor:
        cfg = self.cfg
        if cfg.input == "tokens":
            if inputs.dim() != 2:
                raise ValueError(f"token ids must be [batch, tokens], got shape {tuple(inputs.shape)}")
            self.check_length(inputs.shape[1])
            return record("hook_embed", self.embed(inputs))
        if cfg.image_norm:
            inputs = record("hook_image_norm", image_standardise(inputs), ())  # [B, C, H, W], as the patches read it
        x = self.patch_embed(patchify(inputs, cfg.patch_size))  # [B, C, H, W] -> [B, N, C*p*p] -> [B, N, D]
        if cfg.uses_cls:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # [B, 1 + N, D]
        self.check_length(x.shape[1])
        return record("hook_embed", x)

    def check_cache(self, cache: KVCache | None, valid: torch.Tensor | None, n: int) -> int:
        """The number of tokens before these ones: cache.length, 0 without a cache. Checks the cache can be used."""
        if cache is None:
            return 0
        if self.cfg.input != "tokens" or self.cfg.head == "classifier":
            raise ValueError("a key/value cache is for generating tokens, not for classifying a whole input")
        if valid is not None:
            raise ValueError("a key/value cache decodes one unpadded sequence batch: leave out `valid`")
        self.check_length(cache.length + n)
        return cache.length

    def check_length(self, n: int) -> None:
        if n < 1:
            raise ValueError("the input is empty: there is nothing to attend to")
        if n > self.cfg.max_len:
            raise ValueError(f"{n} tokens exceed this model's context length of {self.cfg.max_len}")

    def position_context(self, pe: str | None, n: int, device, start: int = 0,
                         positions: torch.Tensor | None = None) -> PositionContext:
        """The encoding's tensors for the tokens start..n-1 of a sequence of n (all of them when start = 0), at
        `positions` [n] instead of 0..n-1 when given (an encoding that is a function of the position only)."""
        encoding = self.cfg.pos_encoding if pe is None else pe
        if positions is not None and (encoding not in STRIDABLE_ENCODINGS or start or positions.shape != (n,)):
            raise ValueError(f"positions other than 0..N-1 are for {', '.join(STRIDABLE_ENCODINGS)}, one per token of "
                             f"a whole text ({n} here, without a cache); this pass reads {encoding!r} and has "
                             f"{tuple(positions.shape)}")
        if encoding != self.cfg.pos_encoding and encoding not in PARAMETER_FREE_ENCODINGS:
            raise ConfigError(f"{encoding!r} has trained parameters this model does not have; it can be "
                              f"switched to {', '.join(PARAMETER_FREE_ENCODINGS)} or its own {self.cfg.pos_encoding!r}")
        if encoding == "rope" and self.cfg.head_dim % 2:
            raise ConfigError(f"RoPE needs an even head size (this model has K={self.cfg.head_dim})")
        if encoding in ("rope", "alibi", "relative") and self.cfg.input == "patches":
            raise ConfigError(f"{encoding!r} is a 1-D sequence encoding; image models use none, sinusoidal or learned")
        context = PositionContext(encoding, start=start, positions=positions)
        if encoding == "rope":
            angles = rope_angles(n, self.cfg.head_dim, self.cfg.rope_base, positions)  # [n, K/2]
            context.rope_angles = angles.to(device)[start:]
        elif encoding == "alibi":
            context.alibi = alibi_bias(self.cfg.n_heads, n, positions).to(device)[:, start:]
        return context

    def position_embedding(self, encoding: str, n: int, device, positions: torch.Tensor | None = None) -> torch.Tensor:
        """e_n for n = 0..N-1 (or at `positions` [N]), [1, N, D]; zero for encodings that act inside attention."""
        if encoding == "learned":
            return self.pos_embed(torch.arange(n, device=device))[None]
        if encoding == "sinusoidal":
            return sinusoidal_table(n, self.cfg.d_model, positions).to(device)[None]
        return torch.zeros(1, n, self.cfg.d_model, device=device)

    def score_mask(self, mask: MaskArgument, n: int, batch: int, valid: torch.Tensor | None, device,
                   cache: KVCache | None) -> ScoreMask:
        """What the mask adds to every layer's scores [B, N, start + N] (0 or -inf) and its blocks of queries
        (core.model.masks.score_mask); a named mask's, without padding or a cache, is made once (named_score_mask)."""
        if valid is None and cache is None and not isinstance(mask, torch.Tensor):
            return named_score_mask(_mask_spec(mask, self.cfg), n, batch, str(device))
        start = cache.length if cache is not None else 0
        allowed = self.allowed(mask, start + n, batch, valid, device)[:, start:]  # [B, N, start + N]
        if cache is not None and (allowed & ~causal_mask(start + n, device)[start:]).any():
            raise ValueError("a key/value cache needs a mask under which no token sees a later one "
                             "(causal, causal window or strided): earlier tokens would change as tokens are added")
        return score_mask(allowed)

    def allowed(self, mask: MaskArgument, n: int, batch: int, valid: torch.Tensor | None, device) -> torch.Tensor:
        """The boolean [B, N, N] matrix of which key each query may attend to."""
        if isinstance(mask, torch.Tensor):
            if mask.dtype != torch.bool or mask.shape[-2:] != (n, n):
                raise ValueError(f"a custom mask must be a boolean [{n}, {n}] matrix, got {mask.dtype} {tuple(mask.shape)}")
            allowed = mask.to(device)
        else:
            allowed = build_mask(_mask_spec(mask, self.cfg), n, device)
        allowed = allowed.expand(batch, n, n) if allowed.dim() == 2 else allowed
        if valid is not None:
            allowed = allowed & padding_mask(valid.to(device))
        return allowed

    def transform(self, x: torch.Tensor, record: Recorder | None = None) -> torch.Tensor:
        """What the unembedding reads: the final stream itself, or BERT's TokenNorm(act(W x + b)) of it."""
        if not self.cfg.head_transform:
            return x
        return self.head_ln(activate(self.head_dense(x), self.cfg.activation), record or Recorder(False), "ln_final")

    def head(self, x: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        if self.cfg.head != "classifier":
            return self.unembed(x)  # p(w_n | x_{n-1}) ∝ exp(g_w . x_{n-1}^(M)) (§4.1)
        if self.cfg.pooling == "cls":
            return self.unembed(x[:, 0])  # classify from x_0^(M) (§4.2)
        weights = torch.ones(x.shape[:2], device=x.device) if valid is None else valid.float()
        pooled = (x * weights[..., None]).sum(1) / weights.sum(1, keepdim=True)  # mean over real tokens
        return self.unembed(pooled)

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _mask_spec(mask: str | MaskSpec | None, cfg: ModelConfig) -> MaskSpec:
    if mask is None:
        return MaskSpec.of(cfg)
    if isinstance(mask, MaskSpec):
        return mask
    return MaskSpec(mask, cfg.window, cfg.window_causal, cfg.stride)


def _describe_mask(mask: MaskArgument, cfg: ModelConfig) -> str:
    if isinstance(mask, torch.Tensor):
        return "custom"
    spec = _mask_spec(mask, cfg)
    return {"window": f"window({spec.window}{', causal' if spec.window_causal else ''})",
            "strided": f"strided({spec.stride})"}.get(spec.kind, spec.kind)


def _init_weights(module: nn.Module) -> None:
    """GPT-2 style: normal(0, 0.02) weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
