"""The recording of one forward pass: every intermediate, named like TransformerLens hook points.

Arrays have no batch dimension. Shapes (N tokens, D features, H heads, K head size):
  hook_embed, hook_pos_embed                                   [N, D]   (hook_token_type_embed: BERT)
  blocks.{l}.hook_resid_pre / _mid / _post, hook_attn_out, hook_mlp_out   [N, D]
  blocks.{l}.ln1.hook_scale                                    [N, 1]  sqrt(var + eps) (also ln2, ln_final, embed_ln)
  blocks.{l}.ln1.hook_normalized                               [N, D]  (x - mean) / scale, before gamma and beta
  blocks.{l}.ln1.hook_mean                                     [N]     ours: TransformerLens records no mean
  blocks.{l}.attn.hook_q, hook_k, hook_v, hook_z               [N, H, K]  (hook_rot_q, hook_rot_k with RoPE)
  blocks.{l}.attn.hook_attn_scores, hook_pattern               [H, N, N]  row = query, key across
  blocks.{l}.attn.hook_pos_bias                                [H, N, N]  (ALiBi, relative)
  blocks.{l}.mlp.hook_pre, mlp.hook_post                       [N, d_mlp]
  logits                                                       [N, vocabulary] or [classes]

Every name TransformerLens 4.3 (TransformerBridge) also records means what it means there, with these differences
(tests/test_pretrained.py checks the rest on GPT-2 and BERT built from configs):
  hook_attn_scores   masked entries are -inf here, the dtype's most negative number there; the rest are equal
                     (GPT-2). TransformerBridge's BERT scores are neither q.k/sqrt(K) of its own hook_q, hook_k nor
                     what its hook_pattern is the softmax of (off by up to 0.09 on a tiny BERT): ours are both.
  post-LN models (BERT): our hook_attn_out / hook_mlp_out are the sublayer's output W_O z + b_O (seed 001's MHSA),
                     before the residual sum and TokenNorm; TransformerBridge hooks BERT's whole attention module,
                     whose output is TokenNorm(x + W_O z + b_O) (our hook_resid_mid); so hook_resid_mid differs too.
  ln_final           in BERT the MLM head's TokenNorm (after its dense + GELU), as TransformerBridge names it.
  hook_embed         always the token embedding. TransformerBridge's BERT aliases hook_embed to the embeddings'
                     output after their TokenNorm (our blocks.0.hook_resid_pre); its embed.hook_out is ours.
  hook_token_type_embed  BERT's segment embedding, HookedEncoder's name (TransformerBridge: token_type_embed.hook_out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.model.config import ModelConfig


def block_hook(layer: int, name: str) -> str:
    """`block_hook(0, "attn.hook_pattern")` -> "blocks.0.attn.hook_pattern"."""
    return f"blocks.{layer}.{name}"


@dataclass
class Recording:
    """Everything one forward pass computed for one sequence, plus what it was computed from.

    A pass without gradients records inference tensors (Transformer.forward): read them, or compute with them
    under torch.no_grad(); autograd cannot save them (clone one to differentiate through it)."""

    config: ModelConfig
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)  # tokens, ids, mask, pe, model name...

    def __getitem__(self, name: str) -> np.ndarray:
        """The array under a hook name, read-only: one recording may be shared by every session (core.serving.lru)."""
        array = self.tensors[name].numpy()
        array.flags.writeable = False
        return array

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    @property
    def names(self) -> list[str]:
        return list(self.tensors)

    @property
    def nbytes(self) -> int:
        """The bytes the recorded tensors hold."""
        return sum(tensor.nbytes for tensor in self.tensors.values())

    @property
    def n_tokens(self) -> int:
        return self.tensors["hook_embed"].shape[0]

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    def pattern(self, layer: int) -> np.ndarray:
        """A of every head in the common layout: [H, N(query), N(key)], each row sums to 1."""
        return self[block_hook(layer, "attn.hook_pattern")]

    def scores(self, layer: int) -> np.ndarray:
        """Pre-softmax scores after scaling, position bias and mask (masked entries -inf): [H, N, N]."""
        return self[block_hook(layer, "attn.hook_attn_scores")]

    def patterns(self) -> np.ndarray:
        """All patterns stacked: [M, H, N, N]."""
        return np.stack([self.pattern(layer) for layer in range(self.n_layers)])

    def save_npz(self, path: str | Path) -> None:
        """Every array under its hook name, and a JSON string `meta` with the config and `self.meta`."""
        meta = {**self.meta, "config": self.config.to_dict()}
        arrays = {name: tensor.numpy() for name, tensor in self.tensors.items()}
        np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load_npz(cls, path: str | Path) -> Recording:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            tensors = {name: torch.from_numpy(data[name]) for name in data.files if name != "meta"}
        config = ModelConfig.from_dict(meta.pop("config"))
        return cls(config, tensors, meta)
