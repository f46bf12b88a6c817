"""An encoder–decoder transformer, nanoGPT style: the original transformer's shape, built from core/model/transformer.py's parts.

Seed 003 §3.1 (Definitions 3.1, 3.2) and §6.3 (Definition 6.3); seed 002, "The Decoder", steps 1–6:

    encoder   Z = Encoder(X)               M_enc blocks of seed 001 figure 7, bidirectional: core.model.transformer.Block as is
    decoder   each of M_dec blocks has three residual sublayers (seed 003 Definition 3.2), pre-LN:
              Y'   = Y   + MHSA(TokenNorm(Y))                 masked: position t sees the target tokens <= t only
              Y''  = Y'  + CrossAttention(TokenNorm(Y'), Z)   "multi-head attention over encoder outputs"
              Y''' = Y'' + MLP(TokenNorm(Y''))
    output    p(y_{t+1} | y_<=t, X) = softmax(W_U TokenNorm(y_t^(M)))

    CrossAttention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V,  "where Q comes from decoder and K, V from encoder"
    (seed 003 Definition 6.3): the encoder's output is the memory every decoder step reads; it is computed once
    (seed 002: "Encoding happens just once"), and greedy generation re-runs only the decoder.

Code layout as in core/model/transformer.py: X as [B, N, D], patterns [B, H, query, key] with rows summing to 1.
Every intermediate is recorded under a TransformerLens-like name, prefixed by its stack:
    encoder.hook_embed, encoder.blocks.0.attn.hook_pattern [H, S, S], encoder.blocks.0.hook_resid_post, ...
    decoder.blocks.0.attn.hook_pattern [H, T, T] (masked entries exactly 0)
    decoder.blocks.0.cross_attn.hook_pattern [H, T, S] (row t: how step t reads the source), logits [T, vocab]
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from core.model.checkpoint import ModelCard, save_checkpoint
from core.model.config import ConfigError, ModelConfig
from core.model.masks import ScoreMask, causal_mask, score_mask
from core.model.positions import sinusoidal_table
from core.model.registry import ASSETS
from core.model.transformer import (MLP, Block, MultiHeadSelfAttention, PositionContext, Recorder, TokenNorm,
                                    _init_weights, attend)

SEQ2SEQ_DIR = ASSETS / "seq2seq"
PositionEncoding = Literal["learned", "sinusoidal"]
NO_POSITION = PositionContext("none")  # positions are added to the embeddings, nothing acts inside attention


# ---------------------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Seq2SeqConfig:
    """The encoder–decoder's sizes, in seed 001's symbols (D features, H heads of size K = D / H).

    Validated when built: a combination that cannot work raises ConfigError saying why."""

    src_vocab_size: int  # the encoder reads English token ids
    tgt_vocab_size: int  # the decoder reads and predicts target token ids
    d_model: int = 128  # D
    n_heads: int = 4  # H, in every attention of both stacks
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_mlp: int = 256
    max_src_len: int = 24  # S at most (source words + [EOS])
    max_tgt_len: int = 32  # T at most ([BOS] + target words)
    pos_encoding: PositionEncoding = "learned"
    ln_eps: float = 1e-5
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for problem in self.problems():
            raise ConfigError(problem)

    def problems(self):
        """Yield every reason this configuration cannot be built (the first one is raised)."""
        if self.pos_encoding not in get_args(PositionEncoding):
            yield (f"pos_encoding={self.pos_encoding!r} is not one of {', '.join(get_args(PositionEncoding))} "
                   "(the encoder–decoder adds its positions to the embeddings)")
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_mlp"):
            if getattr(self, name) < 1:
                yield f"{name} must be at least 1, got {getattr(self, name)}"
        for name in ("src_vocab_size", "tgt_vocab_size", "max_src_len", "max_tgt_len"):
            if getattr(self, name) < 2:
                yield f"{name} must be at least 2 (a word and an end marker), got {getattr(self, name)}"
        if self.n_heads >= 1 and self.d_model % self.n_heads:
            yield f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
        if self.pos_encoding == "sinusoidal" and self.d_model % 2:
            yield f"sinusoidal encoding pairs sin and cos features, so D must be even (got {self.d_model})"
        if not 0.0 <= self.dropout < 1.0:
            yield f"dropout must be in [0, 1), got {self.dropout}"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def block_config(self, stack: str) -> ModelConfig:
        """The ModelConfig that core.model.transformer's Block, MultiHeadSelfAttention and MLP read their sizes from: the
        encoder's blocks are those of a bidirectional model, the decoder's self-attention that of a causal one."""
        encoder = stack == "encoder"
        return ModelConfig(d_model=self.d_model, n_heads=self.n_heads, d_mlp=self.d_mlp, ln_eps=self.ln_eps,
                           dropout=self.dropout, pos_encoding="none",
                           n_layers=self.n_encoder_layers if encoder else self.n_decoder_layers,
                           max_len=self.max_src_len if encoder else self.max_tgt_len,
                           vocab_size=self.src_vocab_size if encoder else self.tgt_vocab_size,
                           mask="none" if encoder else "causal", head="masked_token" if encoder else "next_token")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seq2SeqConfig:
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigError(f"unknown config fields: {', '.join(unknown)}")
        return cls(**data)


# ---------------------------------------------------------------------------------------------------------
# The modules
# ---------------------------------------------------------------------------------------------------------

class Prefixed:
    """A Recorder seen through a prefix: core.model.transformer's Block records "blocks.0...", this files it under
    "encoder.blocks.0..." or "decoder.blocks.0...", so both stacks share one recording without clashing."""

    def __init__(self, recorder: Recorder, prefix: str):
        self.recorder, self.prefix = recorder, prefix

    def __call__(self, name: str, tensor: torch.Tensor, token_axes: tuple[int, ...] = (0,),
                 **context: torch.Tensor) -> torch.Tensor:
        return self.recorder(f"{self.prefix}.{name}", tensor, token_axes, **context)


class CrossAttention(MultiHeadSelfAttention):
    """Multi-head cross-attention (seed 003 Definition 6.3; seed 002 "The Decoder", step 3): the same W_Q, W_K,
    W_V, W_O as self-attention, but the queries come from the decoder's tokens y_t and the keys and values from
    the encoder's output z_s:

        q_{h,t} = U_{q,h} y_t,   k_{h,s} = U_{k,h} z_s,   v_{h,s} = U_{v,h} z_s
        A_h[t, s] = softmax_s(k_{h,s} . q_{h,t} / sqrt(K)),   out_t = Σ_h U_h Σ_s A_h[t, s] v_{h,s}

    No mask but the source's padding: every target step may read every source token."""

    def forward(self, y: torch.Tensor, memory: torch.Tensor, mask: ScoreMask, record,
                prefix: str) -> torch.Tensor:
        """mask: offset [B, T, S], 0 on real source tokens and -inf on padding (core.model.masks.score_mask)."""
        q = record(f"{prefix}.hook_q", self.split_heads(self.W_Q(y)))  # [B, T, H, K]
        k = record(f"{prefix}.hook_k", self.split_heads(self.W_K(memory)))  # [B, S, H, K]
        v = record(f"{prefix}.hook_v", self.split_heads(self.W_V(memory)))
        scores, pattern, z = attend(q / math.sqrt(self.head_dim), k, v, mask, None)  # [B, H, T, S], rows sum to 1
        record(f"{prefix}.hook_attn_scores", scores)
        record(f"{prefix}.hook_pattern", pattern)
        z = record(f"{prefix}.hook_z", z)  # [B, T, H, K]
        return self.W_O(z.flatten(2))  # [B, T, H*K] -> [B, T, D]


class DecoderBlock(nn.Module):
    """Seed 003 Definition 3.2: masked self-attention, attention over the encoder's output, MLP; each a residual
    sublayer with TokenNorm before it (pre-LN, as core.model.transformer.Block)."""

    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.name = f"blocks.{layer}"
        self.ln1, self.ln_cross, self.ln2 = (TokenNorm(cfg.d_model, cfg.ln_eps) for _ in range(3))
        self.attn = MultiHeadSelfAttention(cfg)
        self.cross_attn = CrossAttention(cfg)
        self.mlp = MLP(cfg)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, self_mask: ScoreMask, cross_mask: ScoreMask,
                record) -> torch.Tensor:
        """self_mask [B, T, T], cross_mask [B, T, S]: score_mask of what each target step may read."""
        p = self.name
        y = record(f"{p}.hook_resid_pre", y)
        attn = self.attn(self.ln1(y, record, f"{p}.ln1"), self_mask, NO_POSITION, record, f"{p}.attn")
        y = record(f"{p}.hook_resid_mid", y + record(f"{p}.hook_attn_out", self.dropout(attn)))
        cross = self.cross_attn(self.ln_cross(y, record, f"{p}.ln_cross"), memory, cross_mask, record,
                                f"{p}.cross_attn")
        y = record(f"{p}.hook_resid_cross", y + record(f"{p}.hook_cross_attn_out", self.dropout(cross)))
        mlp = self.mlp(self.ln2(y, record, f"{p}.ln2"), record, f"{p}.mlp")
        return record(f"{p}.hook_resid_post", y + record(f"{p}.hook_mlp_out", self.dropout(mlp)))


class Embedding(nn.Module):
    """x_n = W e(token_n) + p_n (seed 001 §3): a token embedding plus a learned or sinusoidal position."""

    def __init__(self, vocab_size: int, max_len: int, cfg: Seq2SeqConfig):
        super().__init__()
        self.token = nn.Embedding(vocab_size, cfg.d_model)
        self.position = nn.Embedding(max_len, cfg.d_model) if cfg.pos_encoding == "learned" else None
        self.max_len, self.d_model = max_len, cfg.d_model

    def forward(self, ids: torch.Tensor, record) -> torch.Tensor:
        n = ids.shape[1]
        if not 1 <= n <= self.max_len:
            raise ValueError(f"{n} tokens; this stack reads 1 to {self.max_len}")
        if self.position is not None:
            position = self.position(torch.arange(n, device=ids.device))  # [N, D]
        else:
            position = sinusoidal_table(n, self.d_model).to(ids.device)
        return record("hook_embed", self.token(ids)) + record("hook_pos_embed", position[None].expand(len(ids), -1, -1))


@dataclass
class Seq2SeqOutput:
    logits: torch.Tensor  # [B, T, target vocabulary]: row t predicts target token t + 1 (after [BOS])
    recording: Seq2SeqRecording | None = None


class Seq2SeqTransformer(nn.Module):
    """Source ids -> encoder -> memory Z; [BOS] + target ids -> decoder (reading Z) -> next-token logits."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        encoder_cfg, decoder_cfg = cfg.block_config("encoder"), cfg.block_config("decoder")
        self.src_embed = Embedding(cfg.src_vocab_size, cfg.max_src_len, cfg)
        self.encoder = nn.ModuleList(Block(encoder_cfg, layer) for layer in range(cfg.n_encoder_layers))
        self.encoder_ln_final = TokenNorm(cfg.d_model, cfg.ln_eps)
        self.tgt_embed = Embedding(cfg.tgt_vocab_size, cfg.max_tgt_len, cfg)
        self.decoder = nn.ModuleList(DecoderBlock(decoder_cfg, layer) for layer in range(cfg.n_decoder_layers))
        self.decoder_ln_final = TokenNorm(cfg.d_model, cfg.ln_eps)
        self.unembed = nn.Linear(cfg.d_model, cfg.tgt_vocab_size)
        self.apply(_init_weights)

    def encode(self, src: torch.Tensor, src_valid: torch.Tensor, recorder: Recorder) -> torch.Tensor:
        """The memory Z [B, S, D]: bidirectional blocks over the source (padding hidden), then TokenNorm."""
        record = Prefixed(recorder, "encoder")
        x = self.src_embed(src, record)  # [B, S, D]
        mask = score_mask(src_valid[:, None, :].expand(-1, src.shape[1], -1))  # [B, S(query), S(key)]: real keys
        for block in self.encoder:
            x = block(x, mask, NO_POSITION, record)
        return self.encoder_ln_final(x, record, "ln_final")

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_valid: torch.Tensor,
               recorder: Recorder) -> torch.Tensor:
        """Next-token logits [B, T, V] for decoder input tgt [B, T] ([BOS] first) reading memory [B, S, D]."""
        record = Prefixed(recorder, "decoder")
        y = self.tgt_embed(tgt, record)  # [B, T, D]
        t = tgt.shape[1]
        self_mask = score_mask(causal_mask(t, tgt.device).expand(len(tgt), t, t))  # [B, T, T]: t sees t' <= t
        cross_mask = score_mask(src_valid[:, None, :].expand(-1, t, -1))  # [B, T, S]: every real source token
        for block in self.decoder:
            y = block(y, memory, self_mask, cross_mask, record)
        return recorder("logits", self.unembed(self.decoder_ln_final(y, record, "ln_final")))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, *, src_valid: torch.Tensor | None = None,
                record: bool = False) -> Seq2SeqOutput:
        """src [B, S] source ids, tgt [B, T] decoder input ([BOS] y_1 .. y_{T-1}); src_valid [B, S] True on real
        tokens (None: all). Padding at the end of a target needs no mask: by causality it changes no earlier row.
        record=True keeps every intermediate, for a batch of one sequence."""
        if record and len(src) != 1:
            raise ValueError("recording is for a batch of one sentence")
        src_valid = torch.ones_like(src, dtype=torch.bool) if src_valid is None else src_valid
        recorder = Recorder(record)
        memory = self.encode(src, src_valid, recorder)
        logits = self.decode(tgt, memory, src_valid, recorder)
        recording = Seq2SeqRecording(self.cfg, recorder.split(None)[0]) if record else None
        return Seq2SeqOutput(logits, recording)

    @torch.no_grad()
    def generate(self, src: torch.Tensor, bos_id: int, eos_id: int, src_valid: torch.Tensor | None = None,
                 max_len: int | None = None) -> list[list[int]]:
        """Greedy decoding: encode once, then at each step append argmax p(y_{t+1} | y_<=t, X) and run the decoder
        again on the longer input. Returns each sentence's tokens up to and including [EOS] (if it came)."""
        src_valid = torch.ones_like(src, dtype=torch.bool) if src_valid is None else src_valid
        off = Recorder(False)
        memory = self.encode(src, src_valid, off)
        ys = torch.full((len(src), 1), bos_id, dtype=torch.long, device=src.device)  # [B, 1]
        done = torch.zeros(len(src), dtype=torch.bool, device=src.device)
        for _ in range((max_len or self.cfg.max_tgt_len) - 1):
            next_id = self.decode(ys, memory, src_valid, off)[:, -1].argmax(-1)  # [B]
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done |= next_id == eos_id
            if done.all():
                break
        return [_until(row[1:], eos_id) for row in ys.tolist()]

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _until(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id) + 1] if eos_id in ids else ids


# ---------------------------------------------------------------------------------------------------------
# The recording
# ---------------------------------------------------------------------------------------------------------

ATTENTION_HOOKS = {  # which attention -> its pattern's hook name
    "encoder": "encoder.blocks.{layer}.attn.hook_pattern",  # [H, S, S]
    "decoder": "decoder.blocks.{layer}.attn.hook_pattern",  # [H, T, T], causal
    "cross": "decoder.blocks.{layer}.cross_attn.hook_pattern",  # [H, T, S]
}


@dataclass
class Seq2SeqRecording:
    """Everything one encoder–decoder pass computed for one sentence (no batch axis), by hook name."""

    config: Seq2SeqConfig
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name].numpy()

    @property
    def names(self) -> list[str]:
        return list(self.tensors)

    def pattern(self, kind: str, layer: int) -> np.ndarray:
        """A of every head of one attention: kind "encoder", "decoder" or "cross". Rows (queries) sum to 1."""
        if kind not in ATTENTION_HOOKS:
            raise ValueError(f"kind must be one of {', '.join(ATTENTION_HOOKS)}, got {kind!r}")
        return self[ATTENTION_HOOKS[kind].format(layer=layer)]

    def scores(self, kind: str, layer: int) -> np.ndarray:
        """The pre-softmax scores of that attention (masked entries -inf)."""
        return self[ATTENTION_HOOKS[kind].format(layer=layer).replace("hook_pattern", "hook_attn_scores")]


# ---------------------------------------------------------------------------------------------------------
# Teacher forcing and free generation of one sentence
# ---------------------------------------------------------------------------------------------------------

@dataclass
class TranslationRun:
    """One source sentence through the model twice.

    free: the decoder reads its own greedy output ([BOS] + generated), recorded in one pass; by the incremental
    property (row t depends on decoder inputs <= t only) each row is what that greedy step computed.
    forced: teacher forcing, the decoder reads the reference ([BOS] + reference), when there is one.
    """

    source_ids: list[int]
    generated: list[int]  # greedy output, [EOS] included when it came
    free: Seq2SeqRecording
    reference: list[int] | None = None  # target ids, [EOS] last
    forced: Seq2SeqRecording | None = None

    def steps(self) -> list[Step]:
        """Step by step, the reference word, the teacher-forced prediction and the free one, with probabilities."""
        forced = _top(self.forced) if self.forced is not None else ([], [])
        free = _top(self.free)
        n = max(len(self.generated), len(self.reference or []))
        return [Step(t, _at(self.reference, t), _at(forced[0], t), _at(forced[1], t), _at(self.generated, t),
                     _at(free[1], t)) for t in range(n)]

    @property
    def first_divergence(self) -> int | None:
        """The first step where free generation writes another token than the reference (None: none)."""
        if self.reference is None:
            return None
        for t, (ours, theirs) in enumerate(zip(self.generated, self.reference)):
            if ours != theirs:
                return t
        return None if len(self.generated) == len(self.reference) else min(len(self.generated), len(self.reference))


@dataclass(frozen=True)
class Step:
    """Decoder step t of one sentence: the reference word y_t, what teacher forcing predicts there (after the true
    prefix) and what free generation wrote (after its own prefix), each with the model's probability for it."""

    t: int
    reference: int | None
    forced: int | None
    forced_p: float | None
    generated: int | None
    generated_p: float | None

    @property
    def forced_wrong(self) -> bool:
        return self.reference is not None and self.forced != self.reference

    @property
    def free_wrong(self) -> bool:
        return self.reference is not None and self.generated != self.reference


def _top(recording: Seq2SeqRecording) -> tuple[list[int], list[float]]:
    """Per decoder step the argmax token and its probability, p = softmax(logits)."""
    probs = torch.softmax(recording.tensors["logits"].double(), dim=-1)  # [T, V]
    top = probs.max(dim=-1)
    return top.indices.tolist(), top.values.tolist()


def _at(values, t: int):
    return values[t] if values is not None and t < len(values) else None


@torch.no_grad()
def run_translation(model: Seq2SeqTransformer, source_ids: list[int], bos_id: int, eos_id: int,
                    reference: list[int] | None = None) -> TranslationRun:
    """Greedy generation, its recording, and (with a reference) the teacher-forced recording."""
    src = torch.tensor([source_ids])
    generated = model.generate(src, bos_id, eos_id)[0]
    free = model(src, torch.tensor([[bos_id, *generated[:-1]]] if generated else [[bos_id]]), record=True).recording
    forced = None
    if reference is not None:
        forced = model(src, torch.tensor([[bos_id, *reference[:-1]]]), record=True).recording
    return TranslationRun(list(source_ids), generated, free, reference, forced)


def alignment_mass(pattern: np.ndarray, alignment) -> np.ndarray:
    """For each head, the mean over target steps t of the cross-attention weight on the source token that target
    token t comes from: pattern [..., T, S] (rows sum to 1), alignment [T] source indices -> [...]. 1 is a
    perfect alignment; attending uniformly gives the mean of 1 / S."""
    pattern = np.asarray(pattern)
    steps = np.arange(len(alignment))
    return pattern[..., steps, np.asarray(alignment)].mean(axis=-1)


# ---------------------------------------------------------------------------------------------------------
# Checkpoints: safetensors + a JSON card in assets/seq2seq
# ---------------------------------------------------------------------------------------------------------

class Seq2SeqCard(ModelCard):
    """A bundled encoder–decoder's card: core.model.checkpoint's ModelCard (name, task, config, description, held-out
    metrics, training) holding a Seq2SeqConfig."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seq2SeqCard:
        return cls(data["name"], data["task"], Seq2SeqConfig.from_dict(data["config"]), data.get("description", ""),
                   data.get("metrics", {}), data.get("training", {}))


def save_seq2seq(model: Seq2SeqTransformer, card: Seq2SeqCard, directory: Path = SEQ2SEQ_DIR,
                 half: bool = False) -> Path:
    """NAME.safetensors and NAME.json (never pickle) into `directory`; returns the card's path. half: float16
    weights (see save_checkpoint)."""
    return save_checkpoint(model, card, directory, half)


def list_seq2seq_cards(directory: Path = SEQ2SEQ_DIR) -> list[Seq2SeqCard]:
    """Every encoder–decoder in `directory` (a card beside its weights), sorted by name."""
    cards = [Seq2SeqCard.from_dict(json.loads(weights.with_suffix(".json").read_text()))
             for weights in Path(directory).glob("*.safetensors") if weights.with_suffix(".json").is_file()]
    return sorted(cards, key=lambda card: card.name)


def load_seq2seq(name: str, directory: Path = SEQ2SEQ_DIR) -> tuple[Seq2SeqTransformer, Seq2SeqCard]:
    """A bundled encoder–decoder (eval mode) and its card."""
    path = Path(directory) / f"{name}.json"
    if not path.is_file() or path.parent != Path(directory):
        raise FileNotFoundError(f"no encoder–decoder is called {name!r} in {directory}")
    card = Seq2SeqCard.from_dict(json.loads(path.read_text()))
    model = Seq2SeqTransformer(card.config)
    model.load_state_dict(load_file(path.with_suffix(".safetensors")))
    return model.eval(), card
