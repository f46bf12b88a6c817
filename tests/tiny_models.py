"""Tiny random text models for the lens and page tests, written as model cards into a folder.

Random weights are enough for the properties tested (sums, axes, agreement with the model's own logits); the
weights are perturbed so that γ ≠ 1 and β ≠ 0 and TokenNorm's parameters matter.
"""

from __future__ import annotations

from pathlib import Path

import torch

from core.model.checkpoint import ModelCard, save_checkpoint
from core.model.config import ModelConfig
from core.model.run import tokenizer
from core.model.transformer import Transformer

TINY = dict(d_model=32, n_heads=2, n_layers=2, d_mlp=64, max_len=64)


def tiny_model(norm: str = "pre", seed: int = 0, **changes) -> Transformer:
    """A random 2-layer text model (eval mode) with the real tokenizer's vocabulary."""
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=tokenizer().vocab_size, norm=norm, **{**TINY, **changes})
    model = Transformer(cfg)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model.eval()


def write_tiny_models(directory: Path) -> Path:
    """lm-rope (pre-LN, causal, RoPE), post-ln (post-LN) and mlm-learned (bidirectional, masked-token head)."""
    specs = [("lm-rope", "grammar-lm", dict(norm="pre", pos_encoding="rope")),
             ("post-ln", "grammar-lm", dict(norm="post", pos_encoding="learned")),
             ("mlm-learned", "grammar-mlm", dict(norm="pre", pos_encoding="learned", mask="none",
                                                 head="masked_token"))]
    for seed, (name, task, changes) in enumerate(specs):
        model = tiny_model(seed=seed, **changes)
        save_checkpoint(model, ModelCard(name, task, model.cfg, f"tiny random test model ({changes['norm']}-LN)"),
                        directory)
    return directory


def write_tiny_seq2seq(directory: Path) -> Path:
    """Two tiny random encoder–decoders (`tiny`, `tiny-b`) with the real vocabularies; `tiny` has held-out metrics
    naming L1 H1 as its best-aligned head."""
    from core.data.translation import vocabularies
    from core.model.seq2seq import Seq2SeqCard, Seq2SeqConfig, Seq2SeqTransformer, save_seq2seq

    vocab = vocabularies()
    for seed, name in enumerate(("tiny", "tiny-b")):
        torch.manual_seed(seed)
        cfg = Seq2SeqConfig(src_vocab_size=vocab.source.vocab_size, tgt_vocab_size=vocab.target.vocab_size,
                            d_model=32, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_mlp=64, max_tgt_len=24)
        metrics = {"heldout": {"n": 10, "exact_match": 0.5, "token_accuracy": 0.7, "alignment": {
            "best": {"layer": 1, "head": 1, "score": 0.4}, "per_head": [[0.1, 0.2], [0.3, 0.4]], "chance": 0.1}}}
        card = Seq2SeqCard(name, "translation", cfg, "tiny random", metrics=metrics if seed == 0 else {})
        save_seq2seq(Seq2SeqTransformer(cfg).eval(), card, directory)
    return directory
