"""Train and evaluate the encoder–decoder (core/model/seq2seq.py) on the English -> Tailish task (core/data/translation.py).

    python -m core.training.train_seq2seq                   # train the bundled model, evaluate it, write assets/seq2seq/
    python -m core.training.train_seq2seq --list
    python -m core.training.train_seq2seq --evaluate        # re-measure the saved model and rewrite its card's metrics

Teacher forcing (seed 002, "The Decoder"): the decoder reads [BOS] + the reference translation and is trained to
predict each next word, every position at once, its causal mask hiding the words it must predict. The schedule is
core/training/train.py's (AdamW, warm-up then cosine decay, gradient clipping), with its learning_rate function.

Held-out metrics (sentences never trained on): exact match of greedy (free) generation, teacher-forced token
accuracy, and for every cross-attention head the alignment score: the mean weight a target step puts on the source
word its target word comes from (known from the generator), under teacher forcing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence
from tqdm import tqdm

from core.data import translation
from core.data.translation import HELDOUT_SEED, TRAIN_SEED, Pair, Vocabularies
from core.model.checkpoint import write_card
from core.model.seq2seq import (SEQ2SEQ_DIR, Seq2SeqCard, Seq2SeqConfig, Seq2SeqTransformer, alignment_mass,
                                load_seq2seq, save_seq2seq)
from core.model.transformer import Recorder
from core.training.tasks import IGNORE
from core.training.train import StepStats, learning_rate

N_HELDOUT = 1000


@dataclass(frozen=True)
class Seq2SeqPreset:
    """A bundled model's recipe (the fields core.training.train.learning_rate reads: learning_rate, warmup, steps)."""

    name: str
    description: str
    d_model: int = 128
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_mlp: int = 256
    steps: int = 1500
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup: int = 200
    weight_decay: float = 0.01
    clip: float = 1.0
    pool_size: int = 40000
    seed: int = 0
    half_weights: bool = True  # stored in float16, computed in float32 (assets/ under 60 MB), measured on those

    def config(self, vocab: Vocabularies) -> Seq2SeqConfig:
        return Seq2SeqConfig(src_vocab_size=vocab.source.vocab_size, tgt_vocab_size=vocab.target.vocab_size,
                             d_model=self.d_model, n_heads=self.n_heads, n_encoder_layers=self.n_encoder_layers,
                             n_decoder_layers=self.n_decoder_layers, d_mlp=self.d_mlp)


PRESETS = {p.name: p for p in (
    Seq2SeqPreset("tailish", "English -> Tailish (verb last, noun phrases mirrored, -i plural, -ta past): "
                             "2 encoder + 2 decoder layers"),
    Seq2SeqPreset("tiny-test", "a tiny encoder–decoder for tests", d_model=32, n_heads=2, n_encoder_layers=1,
                  n_decoder_layers=1, d_mlp=64, steps=40, batch_size=16, warmup=5, pool_size=200),
)}


# ---------------------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------------------

@dataclass
class TranslationBatch:
    src: torch.Tensor  # [B, S] source ids, padded
    src_valid: torch.Tensor  # [B, S] True on real source tokens
    decoder_input: torch.Tensor  # [B, T] [BOS] y_1 .. y_{T-1}, padded
    targets: torch.Tensor  # [B, T] y_1 .. [EOS], IGNORE on padding
    alignments: list[list[int]]  # per sentence, the source index of each target token ([EOS] -> source [EOS])


def make_batch(pairs: list[Pair], vocab: Vocabularies) -> TranslationBatch:
    encoded = [vocab.encode(pair) for pair in pairs]
    pad, bos = vocab.source.pad_id, vocab.target.bos_id
    src = pad_sequence([torch.tensor(s) for s, _, _ in encoded], batch_first=True, padding_value=pad)
    valid = pad_sequence([torch.ones(len(s), dtype=torch.bool) for s, _, _ in encoded], batch_first=True)
    decoder_input = pad_sequence([torch.tensor([bos, *t[:-1]]) for _, t, _ in encoded], batch_first=True,
                                 padding_value=vocab.target.pad_id)
    targets = pad_sequence([torch.tensor(t) for _, t, _ in encoded], batch_first=True, padding_value=IGNORE)
    return TranslationBatch(src, valid, decoder_input, targets, [a for _, _, a in encoded])


def batches(preset: Seq2SeqPreset, vocab: Vocabularies, seed: int) -> Iterator[TranslationBatch]:
    """Endless random batches drawn with `seed` from a pool of training pairs (never held-out sentences)."""
    pool = translation.generate_pairs(preset.pool_size, TRAIN_SEED)
    generator = torch.Generator().manual_seed(seed)
    while True:
        indices = torch.randint(len(pool), (preset.batch_size,), generator=generator).tolist()
        yield make_batch([pool[i] for i in indices], vocab)


def loss_of(model: Seq2SeqTransformer, batch: TranslationBatch) -> torch.Tensor:
    """Teacher forcing: cross-entropy of every next target word given the true prefix and the source."""
    logits = model(batch.src, batch.decoder_input, src_valid=batch.src_valid).logits  # [B, T, V]
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)


def train_steps(model: Seq2SeqTransformer, preset: Seq2SeqPreset, vocab: Vocabularies) -> Iterator[StepStats]:
    """Train `model` in place, yielding each step's statistics."""
    torch.manual_seed(preset.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.learning_rate, weight_decay=preset.weight_decay)
    model.train()
    for step, batch in zip(range(preset.steps), batches(preset, vocab, preset.seed)):
        rate = learning_rate(step, preset)
        for group in optimizer.param_groups:
            group["lr"] = rate
        loss = loss_of(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), preset.clip)
        optimizer.step()
        yield StepStats(step, loss.item(), rate, float(grad_norm))
    model.eval()


# ---------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Evaluation:
    n: int
    exact_match: float  # greedy output == reference, [EOS] included
    token_accuracy: float  # teacher forcing: argmax == reference word, over every target token
    alignment: np.ndarray  # [decoder layer, head] mean cross-attention weight on the aligned source token
    chance: float  # the same for uniform attention: the mean of 1 / S

    def to_dict(self) -> dict:
        layer, head = np.unravel_index(int(self.alignment.argmax()), self.alignment.shape)
        return {"n": self.n, "exact_match": round(self.exact_match, 4), "token_accuracy": round(self.token_accuracy, 4),
                "alignment": {"best": {"layer": int(layer), "head": int(head),
                                       "score": round(float(self.alignment.max()), 4)},
                              "per_head": [[round(float(x), 4) for x in row] for row in self.alignment],
                              "chance": round(self.chance, 4)}}


@torch.no_grad()
def cross_patterns(model: Seq2SeqTransformer, batch: TranslationBatch) -> torch.Tensor:
    """Every decoder layer's cross-attention under teacher forcing: [B, layers, H, T, S]."""
    recorder = Recorder(True)
    memory = model.encode(batch.src, batch.src_valid, recorder)
    model.decode(batch.decoder_input, memory, batch.src_valid, recorder)
    return torch.stack([recorder.tensors[f"decoder.blocks.{layer}.cross_attn.hook_pattern"][0]
                        for layer in range(model.cfg.n_decoder_layers)], dim=1)


@torch.no_grad()
def evaluate(model: Seq2SeqTransformer, pairs: list[Pair], vocab: Vocabularies, batch_size: int = 100) -> Evaluation:
    model.eval()
    exact = correct = tokens = 0
    mass, chance = [], []
    for start in range(0, len(pairs), batch_size):
        batch = make_batch(pairs[start:start + batch_size], vocab)
        logits = model(batch.src, batch.decoder_input, src_valid=batch.src_valid).logits
        real = batch.targets != IGNORE
        correct += int(((logits.argmax(-1) == batch.targets) & real).sum())
        tokens += int(real.sum())
        generated = model.generate(batch.src, vocab.target.bos_id, vocab.target.eos_id, batch.src_valid)
        exact += sum(ours == row[real_row].tolist()
                     for ours, row, real_row in zip(generated, batch.targets, real))
        patterns = cross_patterns(model, batch).numpy()
        for b, alignment in enumerate(batch.alignments):
            mass.append(alignment_mass(patterns[b, ..., :len(alignment), :], alignment) * len(alignment))
            chance.append(len(alignment) / int(batch.src_valid[b].sum()))
    return Evaluation(len(pairs), exact / len(pairs), correct / tokens, np.sum(mass, axis=0) / tokens,
                      float(np.sum(chance)) / tokens)


# ---------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------

def train_preset(preset: Seq2SeqPreset, out_dir: Path = SEQ2SEQ_DIR, progress: bool = True,
                 n_heldout: int = N_HELDOUT) -> Path:
    """Train from scratch, evaluate on held-out sentences, save weights + card; returns the card's path."""
    vocab = translation.vocabularies()
    torch.manual_seed(preset.seed)
    model = Seq2SeqTransformer(preset.config(vocab))
    curve: list[tuple[int, float]] = []
    started = time.perf_counter()
    bar = tqdm(train_steps(model, preset, vocab), total=preset.steps, desc=preset.name, disable=not progress)
    for stats in bar:
        if stats.step % 25 == 0 or stats.step == preset.steps - 1:
            curve.append((stats.step, round(stats.loss, 4)))
            bar.set_postfix(loss=f"{stats.loss:.3f}", lr=f"{stats.learning_rate:.1e}")
    seconds = round(time.perf_counter() - started, 1)
    training = {"steps": preset.steps, "batch_size": preset.batch_size, "learning_rate": preset.learning_rate,
                "warmup": preset.warmup, "seed": preset.seed, "pool_size": preset.pool_size, "seconds": seconds,
                "threads": torch.get_num_threads(), "parameters": model.n_parameters, "loss_curve": curve,
                **({"stored": "float16"} if preset.half_weights else {})}
    card = Seq2SeqCard(preset.name, "translation", model.cfg, preset.description, training=training)
    path = save_seq2seq(model, card, out_dir, half=preset.half_weights)
    reevaluate(preset.name, out_dir, n_heldout)  # on the weights as stored (rounded, for half_weights)
    return path


def reevaluate(name: str, directory: Path = SEQ2SEQ_DIR, n_heldout: int = N_HELDOUT) -> dict:
    """Measure a saved model again, on its weights as stored, and rewrite its card's metrics (the card alone)."""
    model, card = load_seq2seq(name, directory)
    card.metrics = {"heldout": evaluate(model, translation.generate_pairs(n_heldout, HELDOUT_SEED),
                                        translation.vocabularies()).to_dict()}
    write_card(card, directory)
    return card.metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.training.train_seq2seq", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tailish", choices=sorted(PRESETS))
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--evaluate", action="store_true", help="only re-measure the saved model")
    parser.add_argument("--out", type=Path, default=SEQ2SEQ_DIR)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    if args.list:
        for preset in PRESETS.values():
            print(f"{preset.name}\t{preset.steps} steps\t{preset.description}")
        return 0
    torch.set_num_threads(args.threads)
    if args.evaluate:
        print(reevaluate(args.preset, args.out))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    translation.build_target_tokenizer().save(str(translation.TARGET_TOKENIZER_PATH))
    path = train_preset(PRESETS[args.preset], args.out)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
