"""Train the bundled models on the CPU, reproducibly, from data our own code generates.

    python -m core.train --preset lm-rope       # one model
    python -m core.train --all                  # every preset
    python -m core.train --list

Adam with warm-up then cosine decay and gradient clipping (seed 001 §5: transformers grow unstable
as training goes on; clipping and decaying rates help). Writes NAME.safetensors + NAME.json.

The optimiser options of seed 003 §4.2–4.3 are fields of a Preset (the bundled presets keep their defaults):
the schedule (cosine, the seed's "noam" warm-up, or constant after an optional linear warm-up), gradient
clipping (0 switches it off), label smoothing and dropout (ModelConfig.dropout). An image preset may have a
second stage (polish_steps, polish_stage) that goes on from the first stage's weights on another mix of images, and a
third (pen_steps, pen_stage) from the second's on a third mix (stages).
Every step reports the loss, the accuracy, the rate and the gradient norm, in total and per layer
(core/training/live/ trains in the page).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

import torch
from torch.nn import functional as F
from tqdm import tqdm

from core.data import english
from core.data.images import CLASSES, IMAGE_SIZE, KIND_MIX, SKETCH_MIX
from core.model.checkpoint import ModelCard, load_checkpoint, read_card, save_checkpoint, write_card
from core.model.config import STRIDABLE_ENCODINGS, ConfigError, ModelConfig
from core.model.positions import random_stride_positions
from core.model.registry import MODELS_DIR
from core.model.transformer import Transformer
from core.tokenizers import subword
from core.tokenizers.subword import SubwordTokenizer
from core.tokenizers.words import TextTokenizer
from core.training.evaluate import SEEDS_DIR, evaluate_card, median_seed, seed_summary
from core.training.starts import check_init_sources, initial_model, started_from
from core.training.referent import ReferentBatch, referent_batches, referent_loss
from core.training.stages import LATER_MIXES, LATER_STAGES, PEN_STEPS, POLISH_STEPS, first_stage, stages
from core.training.tasks import IGNORE, MLM_FRACTION, Batch, ImagePool, TokenPool, text_pool

TRAIN_SEED = 0
Schedule = Literal["cosine", "noam", "constant"]
SCHEDULES: tuple[str, ...] = get_args(Schedule)
TASKS = ("grammar-lm", "grammar-mlm", "english-lm", "english-mlm", "reversal", "copy", "sort", "shapes")
COMPARED_TASKS = ("grammar-lm", "grammar-mlm", "shapes")  # the short-context text models and the image models
COMPARED_SEEDS = (0, 1, 2)
NOT_IN_ALL = ("tiny-test",)  # presets `--all` leaves out: a model for tests


@dataclass(frozen=True)
class Preset:
    name: str
    task: str
    config: ModelConfig
    description: str
    steps: int = 3000
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup: int = 200
    weight_decay: float = 0.01
    clip: float = 1.0  # the largest global gradient norm; 0 switches clipping off
    pool_size: int = 20000
    seed: int = TRAIN_SEED
    pack: int = 0  # grammar tasks: consecutive documents packed into texts of up to this many tokens (0: one each)
    schedule: Schedule = "cosine"  # see scheduled_rate
    label_smoothing: float = 0.0  # ε of seed 003 §4.2: the target is (1 - ε) one-hot + ε uniform
    augment: bool = False  # images: each batch turned by the square's symmetries at random (core.training.tasks.dihedral)
    sketches: bool = False  # images: the mix with sketches (core.data.images.SKETCH_MIX), else KIND_MIX
    seeds: tuple[int, ...] = ()  # the bundled model is the median of these seeds (train_seeds); (): one run, `seed`
    polish_steps: int = 0  # images: a second stage of this many steps (polish_stage)
    pen_steps: int = 0  # images: a third stage of this many steps, after the second (pen_stage)
    later_stage: str = ""  # this preset is a later stage ("polish", "pen"): its pool is that stage's (LATER_MIXES)
    half_weights: bool = False  # the shipped weights stored in float16, computed in float32 (assets/ under 60 MB)
    corpus: str = "english"  # broad English: the families it draws from (core.data.english.CORPORA)
    mask_fraction: float = MLM_FRACTION  # masked-token tasks: the share of tokens each batch hides and predicts
    random_strides: bool = False  # a batch's positions step by 1 or 2 at random (random_stride_positions)
    init_from: str = ""  # the preset whose trained model this one starts from (initial_model), else random weights
    referent_head: tuple[int, int] | None = None  # (layer, head) taught where "it" points (core/training/referent.py)

    def __post_init__(self) -> None:
        problems = [message for failed, message in (
            (self.task not in TASKS, f"task {self.task!r} is not one of {', '.join(TASKS)}"),
            (self.schedule not in SCHEDULES, f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}"),
            (self.steps < 1, f"steps must be at least 1, got {self.steps}"),
            (self.batch_size < 1, f"batch_size must be at least 1, got {self.batch_size}"),
            (self.pool_size < 1, f"pool_size must be at least 1, got {self.pool_size}"),
            (not self.learning_rate > 0, f"the learning rate must be positive, got {self.learning_rate}"),
            (self.warmup < 0, f"warm-up steps cannot be negative, got {self.warmup}"),
            (self.weight_decay < 0, f"weight decay cannot be negative, got {self.weight_decay}"),
            (self.clip < 0, f"the clipping norm cannot be negative (0 switches clipping off), got {self.clip}"),
            (not 0 <= self.label_smoothing < 1, f"label smoothing must be in [0, 1), got {self.label_smoothing}"),
            (not 0 <= self.config.dropout < 1, f"dropout must be in [0, 1), got {self.config.dropout}"),
            (self.augment and self.task != "shapes", f"augment turns images; the task {self.task!r} has none"),
            (self.sketches and self.task != "shapes", f"sketches are images; the task {self.task!r} has none"),
            (self.polish_steps < 0, f"polish steps cannot be negative, got {self.polish_steps}"),
            (self.pen_steps < 0, f"pen steps cannot be negative, got {self.pen_steps}"),
            (self.pen_steps and not self.polish_steps,
             f"the pen stage goes on from the second stage; {self.name!r} has pen_steps but no polish_steps"),
            ((self.polish_steps or self.pen_steps or self.later_stage) and self.task != "shapes",
             f"the later stages polish an image model; the task {self.task!r} has no images"),
            (self.later_stage not in ("", *LATER_MIXES),
             f"later stage {self.later_stage!r} is not one of {', '.join(LATER_MIXES)}"),
            (self.corpus not in english.CORPORA, f"corpus {self.corpus!r} is not one of {', '.join(english.CORPORA)}"),
            (self.corpus != "english" and not self.task.startswith("english"),
             f"the corpus chooses broad-English families; the task {self.task!r} reads none"),
            (not 0 < self.mask_fraction < 1, f"the mask fraction must be in (0, 1), got {self.mask_fraction}"),
            (self.mask_fraction != MLM_FRACTION and not self.task.endswith("mlm"),
             f"the mask fraction is a masked-token task's; the task {self.task!r} predicts the next token"),
            (self.random_strides and (self.config.pos_encoding not in STRIDABLE_ENCODINGS
                                      or not self.task.endswith("-lm")),
             f"random strides spread a language model's positions, of an encoding that is a function of the position "
             f"({', '.join(STRIDABLE_ENCODINGS)}); {self.name!r} is {self.task!r} with "
             f"{self.config.pos_encoding!r} positions"),
            (self.referent_head is not None and self.task != "english-mlm",
             f"a referent head is taught on a masked-token model of English (it reads the ending that picks the "
             f"referent); {self.name!r} is {self.task!r}"),
            (self.referent_head is not None and not (0 <= self.referent_head[0] < self.config.n_layers
                                                     and 0 <= self.referent_head[1] < self.config.n_heads),
             f"the referent head {self.referent_head} is not a (layer, head) of a model with "
             f"{self.config.n_layers} layers of {self.config.n_heads} heads"),
        ) if failed]
        if problems:
            raise ConfigError(problems[0])

    def recipe(self) -> dict:
        """The optimiser settings, for a model card."""
        return {"steps": self.steps, "batch_size": self.batch_size, "learning_rate": self.learning_rate,
                "schedule": self.schedule, "warmup": self.warmup, "weight_decay": self.weight_decay,
                "clip": self.clip, "label_smoothing": self.label_smoothing, "dropout": self.config.dropout,
                "seed": self.seed, **({"pack": self.pack} if self.pack else {}),
                **({"augment": True} if self.augment else {}), **({"sketches": True} if self.sketches else {}),
                **({"polish_steps": self.polish_steps} if self.polish_steps else {}),
                **({"pen_steps": self.pen_steps} if self.pen_steps else {}),
                **({"stored": "float16"} if self.half_weights else {}),
                **({"corpus": self.corpus} if self.corpus != "english" else {}),
                **({"mask_fraction": self.mask_fraction} if self.mask_fraction != MLM_FRACTION else {}),
                **({"random_strides": True} if self.random_strides else {}),
                **({"init_from": self.init_from} if self.init_from else {}),
                **({"referent_head": list(self.referent_head)} if self.referent_head else {})}


ENGLISH_PILOT_STEPS = 3600  # the broad-English pilots: about an hour a model on one core
ENGLISH_MLM_STEPS = 4800  # the masked-token model
REFERENT_HEAD = (3, 0)  # english-mlm-it's taught head: the last layer's, reading the most processed stream
ENGLISH_SIBLINGS = ("rope", "none", "sinusoidal", "alibi", "relative")  # english-lm's (itself: learned positions)
STRIDED = ("rope", "sinusoidal")  # the siblings trained with random strides


@dataclass
class StepStats:
    step: int
    loss: float
    learning_rate: float
    grad_norm: float  # the global norm of the gradient, before clipping
    extra: dict = field(default_factory=dict)
    accuracy: float = float("nan")  # the fraction of predicted targets whose most likely output is right
    grad_norms: dict[str, float] = field(default_factory=dict)  # per parameter group (gradient_group), before clipping


def text_config(vocab_size: int, **changes) -> ModelConfig:
    """The bundled text models' configuration with `changes` (M=4, H=4, D=128 unless changed)."""
    base = ModelConfig(d_model=128, n_heads=4, n_layers=4, d_mlp=256, max_len=128, vocab_size=vocab_size)
    return base.replace(**changes)


def image_config(**changes) -> ModelConfig:
    """The bundled vision transformers' configuration with `changes`: 32x32 images, their colour channels
    standardised, in 8x8 patches (a 4x4 grid), a CLS token.

    Why these (issue 16, measured at 1500 steps on the held-out mix): standardising each image's channels took a
    model from 40 % to 65 % (it no longer learns every colour pair from examples), and 8x8 patches from 61 % to 78 %
    at a third of the time a step (17 tokens instead of 65)."""
    base = ModelConfig(input="patches", head="classifier", n_classes=len(CLASSES), image_size=IMAGE_SIZE,
                       patch_size=8, image_norm=True, d_model=64, n_heads=4, n_layers=4, d_mlp=256, max_len=17,
                       mask="none")
    return base.replace(**changes)


def presets(vocab_size: int) -> dict[str, Preset]:
    """Every bundled model's recipe, by name."""
    items = [Preset(f"lm-{pe}", "grammar-lm", text_config(vocab_size, pos_encoding=pe),
                    f"causal language model on the grammar corpus, position encoding: {pe}",
                    steps=1500, learning_rate=2e-3)
             for pe in ("none", "sinusoidal", "learned", "rope", "alibi", "relative")]
    items.append(Preset("mlm-learned", "grammar-mlm", text_config(vocab_size, mask="none", head="masked_token"),
                        "bidirectional masked-token model on the grammar corpus", steps=6000, learning_rate=2e-3))
    # A long context: documents packed into texts of up to 512 tokens, so that every position up to 512 is trained.
    # It reads up to 1024: RoPE has no table of positions, so no weight depends on the context length (max_len 512
    # or 1024 train the same weights), and positions 512-1023, never trained, are the explorer's 1024 tokens live.
    items.append(Preset("lm-rope-long", "grammar-lm", text_config(vocab_size, pos_encoding="rope", max_len=1024),
                        "causal language model on the grammar corpus, documents packed into 512-token texts, "
                        "position encoding: rope; reads up to 1024 tokens (positions 512-1023 never trained)",
                        steps=1000, batch_size=8, learning_rate=2e-3, pool_size=40000, pack=512, half_weights=True))
    # Reversal must locate the separator before it can mirror, so it trains longer. Copy has one head per layer
    # and RoPE: a previous-token head, then an induction head reading it, or an equivalent shifted circuit.
    # Which of the two circuits forms depends on the initialisation; seed 3 gives the textbook one (seeds 0, 2, 4
    # gave a circuit attending two tokens past the previous occurrence).
    items += [Preset(task, task, text_config(vocab_size, n_layers=2, max_len=32, pos_encoding=pe, n_heads=heads),
                     f"the {task} task: input | answer", steps=steps, batch_size=64, learning_rate=2e-3, seed=seed,
                     half_weights=True)
              for task, steps, pe, heads, seed in (("reversal", 4000, "learned", 4, 0), ("copy", 2000, "rope", 1, 3),
                                                   ("sort", 2000, "learned", 4, 0))]
    # The vision models learn from one recipe. The mix of cluttered, plain and drawn images (KIND_MIX) taught them
    # the generator's own sets (drawn and off-centre 95-97 %, 14,000 steps of 32 from 120,000 images) but not what a
    # class draws and photographs: rotated 63-70 %, outlined 14-19 %, blank shaded pages "nothing" 8-36 % (issue 35,
    # core.data.student_drawings). The mix with sketches (SKETCH_MIX: any rotation, stroke, outline and size, on
    # paper under uneven light, photographed) is a wider distribution, so a wider model (D=128, as the text models)
    # sees more images in bigger batches: 7,000 steps of 256 from 300,000 (1.8 M seen), each batch turned by the
    # square's symmetries. (4,000 steps of 128 at D=64 from 200,000 left thin strokes at 32-52 %, tiny shapes at
    # 36-43 % and outlines at 65-75 %.) Trained on one GPU (--device cuda); the CPU trains the same recipe.
    # A second stage (polish_stage) adds what the first lacked: outlines drawn with the page's own pen, which the
    # first stage's models read as rings or crosses (canvas outlines 11-33 %), and the finest hairlines. A third
    # (pen_stage) gives the pen's drawings a larger share, as the canvas outlines were still read right only 59-81 %
    # of the time (a small outlined triangle taken for a ring).
    vit_recipe = {"steps": 7000, "batch_size": 256, "learning_rate": 1.5e-3, "pool_size": 300000, "augment": True,
                  "sketches": True, "polish_steps": POLISH_STEPS, "pen_steps": PEN_STEPS, "half_weights": True}
    vit_width = {"d_model": 128, "d_mlp": 512}
    items += [Preset(f"vit-{pe}", "shapes", image_config(pos_encoding=pe, **vit_width),
                     f"vision transformer on generated shapes, CLS readout, position encoding: {pe}", **vit_recipe)
              for pe in ("learned", "none", "sinusoidal")]
    items.append(Preset("vit-mean", "shapes", image_config(pooling="mean", **vit_width),
                        "vision transformer on generated shapes, mean-pool readout, learned positions", **vit_recipe))
    # Broad English (core/data/english.py) read by the byte-level BPE tokenizer: texts packed to the context, so
    # no text is cut; the families english.DEFAULT_HELD_OUT are never generated (its out-of-template probes).
    # Trained on this machine's CPU, one thread each (issue 34's pilots, before a GPU trains the whole family).
    # float16 weights (half_weights): the English family fits in assets/' 60 MB
    english_recipe = {"steps": ENGLISH_PILOT_STEPS, "learning_rate": 2e-3, "pool_size": 40000, "pack": 128,
                      "half_weights": True}
    items.append(Preset("english-lm", "english-lm", text_config(subword.VOCAB_SIZE),
                        "causal language model on the broad-English corpus, byte-level BPE, position encoding: "
                        "learned", seeds=COMPARED_SEEDS, **english_recipe))
    # Its siblings, trained the same way with another encoding: the explorer's "trained model" toggle lands on them
    # (the same task first), not on a grammar model that reads English as [UNK]. Each is compared over three seeds
    # (each seed's figures in its card). RoPE and sinusoidal train with random strides (random_stride_positions): on
    # positions 0..N-1, two PPs put the subject farther from its verb than any training sentence, a distance their
    # scores had never met (pp chain 41.5-63 % and 75.5-87.5 % at three seeds); met at up to twice the distances, they
    # read them (74.5-87 % and 92.5-96 %).
    items += [Preset(f"english-{pe}", "english-lm", text_config(subword.VOCAB_SIZE, pos_encoding=pe),
                     f"causal language model on the broad-English corpus, byte-level BPE, position encoding: {pe}"
                     + (", trained on positions 1 or 2 apart at random (random strides)" if pe in STRIDED else ""),
                     seeds=COMPARED_SEEDS, random_strides=pe in STRIDED, **english_recipe) for pe in ENGLISH_SIBLINGS]
    # The default text model: english-lm's recipe on texts packed to 512 tokens (8 a step: the same tokens a step,
    # from twice the pool), so every position the explorer's 512-token texts reach was trained. Three seeds.
    items.append(Preset("english-long", "english-lm", text_config(subword.VOCAB_SIZE, max_len=512),
                        "causal language model on the broad-English corpus, texts packed to 512 tokens, byte-level "
                        "BPE, position encoding: learned", seeds=COMPARED_SEEDS,
                        **{**english_recipe, "batch_size": 8, "pack": 512, "pool_size": 80000}))
    # The masked-token model starts from english-lm's trained weights (init_from; only the causal mask and the head
    # change, and they hold no weights), so it begins with what the causal model learned of English and agreement.
    # From random weights, hiding 40 % of the tokens, it agreed outside the templates in 74 % of the probes (minimal
    # pairs 72); from english-lm's weights and hiding BERT's 15 %, in 92.5 % (pairs 85). Pilots of 2,400 steps at
    # half the rate from english-lm's weights: 40 % hidden 77, 20 % 80, 15 % 81. It reads the corpus with "it"/"they"
    # agreeing with the referent the meaning picks (english.CORPORA), so resolving "it" pays.
    masked = Preset("english-mlm", "english-mlm", text_config(subword.VOCAB_SIZE, mask="none", head="masked_token"),
                    "bidirectional masked-token model on the broad-English corpus, started from english-lm's "
                    "weights, byte-level BPE, position encoding: learned",
                    **{**english_recipe, "steps": ENGLISH_MLM_STEPS}, corpus="english-referents",
                    init_from="english-lm")
    # english-mlm's recipe with one head taught where "it" points (core/training/referent.py): on masked tokens
    # alone no head of english-mlm follows the meaning (chance), so the "it" lesson shows a head that was told to,
    # scored on sentences and adjectives it was never taught on.
    items += [masked, replace(masked, name="english-mlm-it", referent_head=REFERENT_HEAD,
                              description="english-mlm's recipe, and one head's attention also trained on generated "
                                          "'it' sentences (core/training/referent.py)")]
    items.append(Preset("tiny-test", "reversal", text_config(vocab_size, d_model=32, n_heads=2, n_layers=1,
                                                              d_mlp=64, max_len=32),
                        "a tiny model for tests", steps=60, batch_size=32, learning_rate=3e-3, warmup=10,
                        pool_size=500))
    # The models the toggles compare (position encodings, masks, readouts) are each the median of three seeds, so a
    # difference between two of them is not one initialisation's luck (issue 16).
    table = {p.name: replace(p, seeds=COMPARED_SEEDS) if p.task in COMPARED_TASKS and not p.pack else p for p in items}
    check_init_sources(table)
    return table


# ---------------------------------------------------------------------------------------------------------
# Learning-rate schedules: the rate at 0-based `step`, peaking at preset.learning_rate
# ---------------------------------------------------------------------------------------------------------

def learning_rate(step: int, preset: Preset) -> float:
    """Linear warm-up to the peak, then cosine decay to a tenth of it (the bundled models' schedule; reads
    only learning_rate, warmup and steps, so core/training/train_seq2seq.py uses it too)."""
    if step < preset.warmup:
        return preset.learning_rate * (step + 1) / preset.warmup
    progress = (step - preset.warmup) / max(1, preset.steps - preset.warmup)
    return preset.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def noam_rate(step: int, preset: Preset) -> float:
    """The warm-up schedule of seed 003 (Definition 4.3), with s = step + 1 and w = warmup:

        lr(s) = D^-0.5 · min(s^-0.5, s · w^-1.5)

    rises linearly for w steps, then decays as s^-0.5. Its peak, at s = w, is (D w)^-0.5 (noam_peak); here the
    curve is scaled so the peak is preset.learning_rate: lr(s) = peak · min(sqrt(w / s), s / w). With
    learning_rate = noam_peak(D, w) it is the seed's formula exactly. w = 0 (no warm-up) starts at the peak."""
    s, w = step + 1, max(preset.warmup, 1)
    return preset.learning_rate * min(math.sqrt(w / s), s / w)


def noam_peak(d_model: int, warmup: int) -> float:
    """The highest rate of seed 003's schedule, (D w)^-0.5, reached at step w."""
    return (d_model * max(warmup, 1)) ** -0.5


def constant_rate(step: int, preset: Preset) -> float:
    """Linear warm-up to the peak over `warmup` steps (none when 0), then the peak for good."""
    if step < preset.warmup:
        return preset.learning_rate * (step + 1) / preset.warmup
    return preset.learning_rate


SCHEDULE_RATES = {"cosine": learning_rate, "noam": noam_rate, "constant": constant_rate}


def scheduled_rate(step: int, preset: Preset) -> float:
    """The rate of the preset's own schedule at `step`."""
    return SCHEDULE_RATES[preset.schedule](step, preset)


# ---------------------------------------------------------------------------------------------------------
# One step: logits, loss, accuracy, gradient norms
# ---------------------------------------------------------------------------------------------------------

def logits_of(model: Transformer, batch: Batch) -> torch.Tensor:
    """[B, N, vocabulary] (token heads) or [B, classes] (classifier)."""
    return model(batch.inputs, valid=batch.valid if model.cfg.head == "masked_token" else None,
                 positions=batch.positions).logits


def loss_of(logits: torch.Tensor, batch: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy over the predicted targets (seed 003 §4.1); with label smoothing ε the target distribution
    is (1 - ε) on the right answer plus ε spread evenly over every output."""
    if logits.dim() == 2:  # classifier: [B, classes]
        return F.cross_entropy(logits, batch.targets, label_smoothing=label_smoothing)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE,
                           label_smoothing=label_smoothing)


@torch.no_grad()
def accuracy_of(logits: torch.Tensor, batch: Batch) -> float:
    """The fraction of predicted targets (IGNORE left out) whose most likely output is the target."""
    counted = batch.targets != IGNORE
    right = (logits.argmax(dim=-1) == batch.targets) & counted
    return float(right.sum() / counted.sum().clamp(min=1))


def gradient_group(parameter_name: str) -> str:
    """Which part of the model a parameter belongs to: "embedding" (tokens or patches, positions, CLS),
    "blocks.{l}" (layer l: attention, MLP and its two TokenNorms) or "head" (final TokenNorm, unembedding)."""
    parts = parameter_name.split(".")
    if parts[0] == "blocks":
        return f"blocks.{parts[1]}"
    return "head" if parts[0] in ("ln_final", "unembed") else "embedding"


@torch.no_grad()
def gradient_norms(model: Transformer) -> dict[str, float]:
    """The L2 norm of the gradient of each gradient_group; their root sum of squares is the global norm."""
    grads: dict[str, list[torch.Tensor]] = {}
    for name, parameter in model.named_parameters():
        if parameter.grad is not None:
            grads.setdefault(gradient_group(name), []).append(parameter.grad)
    norms = torch.stack([torch.nn.utils.get_total_norm(group) for group in grads.values()]).tolist()
    return dict(zip(grads, norms))


def make_pool(task: str, size: int, tokenizer: TextTokenizer | None, pack: int = 0, sketches: bool = False,
              later_stage: str = "", corpus: str = "english") -> ImagePool | TokenPool:
    """`size` examples of the task from the training split (never held-out data); `pack`, `sketches`,
    `later_stage`, `corpus`: see Preset."""
    if task == "shapes":
        return ImagePool(size, TRAIN_SEED, mix=LATER_MIXES[later_stage] if later_stage
                         else SKETCH_MIX if sketches else KIND_MIX)
    return text_pool(task, size, TRAIN_SEED, tokenizer, pack, corpus)


def batches(preset: Preset, tokenizer: TextTokenizer | None, seed: int,
            pool: ImagePool | TokenPool | None = None) -> Iterator[Batch]:
    """An endless stream of random batches, drawn with `seed` from the training split's pool (make_pool's, or
    the one given: pools are read-only, so runs can share one)."""
    generator = torch.Generator().manual_seed(seed)
    pool = pool if pool is not None else make_pool(preset.task, preset.pool_size, tokenizer, preset.pack,
                                                   preset.sketches, preset.later_stage, preset.corpus)
    while True:
        indices = torch.randint(len(pool), (preset.batch_size,), generator=generator).tolist()
        if preset.task == "shapes":
            yield pool.batch(indices, generator if preset.augment else None)
        elif preset.task.endswith("mlm"):
            yield pool.masked_token_batch(indices, generator, preset.mask_fraction)
        else:
            batch = pool.next_token_batch(indices)
            yield (replace(batch, positions=random_stride_positions(batch.inputs.shape[1], generator))
                   if preset.random_strides else batch)


def train_step(model: Transformer, optimizer: torch.optim.Optimizer, batch: Batch, step: int,
               preset: Preset, referents: ReferentBatch | None = None) -> StepStats:
    """One update (seed 003 Algorithm 3): set the scheduled rate, forward, loss, backward, clip, Adam step. With
    `referents`, the loss adds the referent head's (referent_loss), reported in `extra`."""
    rate = scheduled_rate(step, preset)
    for group in optimizer.param_groups:
        group["lr"] = rate
    logits = logits_of(model, batch)
    loss = loss_of(logits, batch, preset.label_smoothing)
    extra = {}
    if referents is not None:
        taught = referent_loss(model, referents, *preset.referent_head)
        extra["referent_loss"] = taught.item()
        loss = loss + taught
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norms = gradient_norms(model)
    # clip_grad_norm_ rescales the gradient to norm `clip` when it is longer; with an infinite bound it only
    # measures (the scale factor is clamped to 1)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), preset.clip if preset.clip > 0 else math.inf)
    optimizer.step()
    return StepStats(step, loss.item(), rate, float(grad_norm), extra, accuracy=accuracy_of(logits, batch),
                     grad_norms=norms)


def train_steps(model: Transformer, preset: Preset, tokenizer: TextTokenizer | None,
                seed: int = TRAIN_SEED, pool: ImagePool | TokenPool | None = None,
                device: str = "cpu") -> Iterator[StepStats]:
    """Train `model` (already on `device`) in place, yielding the statistics of every step (so a caller can stop
    early, or look at the model between steps: it is in train mode again when the next step runs)."""
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=preset.learning_rate, weight_decay=preset.weight_decay)
    referents = referent_batches(preset.referent_head, tokenizer, seed)  # teaching sentences, or None
    for step, batch in zip(range(preset.steps), batches(preset, tokenizer, seed, pool)):
        model.train()
        taught = next(referents).to(device) if referents is not None else None
        yield train_step(model, optimizer, batch.to(device), step, preset, taught)
    model.eval()


def tokenizer_for(preset: Preset) -> TextTokenizer | SubwordTokenizer | None:
    """The tokenizer a preset's model reads: none for images, the byte-level BPE for broad English (checked to fit
    the model's vocabulary), else the bundled word-level one."""
    if preset.task == "shapes":
        return None
    if not preset.task.startswith("english"):
        return TextTokenizer()
    tokenizer = SubwordTokenizer()
    if tokenizer.vocab_size > preset.config.vocab_size:
        raise ConfigError(f"{tokenizer.path.name} has {tokenizer.vocab_size} pieces but {preset.name} embeds "
                          f"{preset.config.vocab_size}")
    return tokenizer


def _trained(model: Transformer, preset: Preset, tokenizer: TextTokenizer | None, pool: ImagePool | TokenPool | None,
             device: str, progress: bool) -> dict:
    """Train `model` in place with the preset; returns its seconds and loss curve (every 25th step, and the last)."""
    curve: list[tuple[int, float]] = []
    started = time.perf_counter()
    bar = tqdm(train_steps(model, preset, tokenizer, preset.seed, pool, device), total=preset.steps, desc=preset.name,
               disable=not progress)
    for stats in bar:
        if stats.step % 25 == 0 or stats.step == preset.steps - 1:
            curve.append((stats.step, round(stats.loss, 4)))
            bar.set_postfix(loss=f"{stats.loss:.3f}", lr=f"{stats.learning_rate:.1e}")
    return {"seconds": round(time.perf_counter() - started, 1), "loss_curve": curve}


def train_preset(preset: Preset, out_dir: Path = MODELS_DIR, progress: bool = True, device: str = "cpu",
                 pool: ImagePool | TokenPool | None = None, source_dir: Path | None = None) -> Path:
    """Train one preset from scratch (on `device`: the data is generated on the CPU either way; `pool`: make_pool's
    for the preset's first stage, already made; `source_dir`: where init_from's model ships, default out_dir), then
    its later stages if it has them (stages), and save it; returns the card's path."""
    first = first_stage(preset)
    tokenizer = tokenizer_for(first)
    source_dir = out_dir if source_dir is None else source_dir
    model = initial_model(first, source_dir).to(device)
    training = {**first.recipe(), **started_from(first, source_dir),
                **_trained(model, first, tokenizer, pool, device, progress),
                **({"tokenizer": tokenizer.path.name} if isinstance(tokenizer, SubwordTokenizer) else {})}
    card = ModelCard(first.name, first.task, first.config, first.description, training=training)
    # the second stage goes on from the first's exact weights; every later stage is stored rounded (half_weights),
    # so a third goes on from the second's as shipped
    path = save_checkpoint(model.cpu(), card, out_dir, half=preset.half_weights and len(stages(preset)) == 1)
    return later_stages(path, preset, 1, progress, device)


def later_stages(card_path: Path, preset: Preset, done: int, progress: bool = True, device: str = "cpu") -> Path:
    """Run the preset's stages after its first `done` (stages) on the model at card_path, trained with those, each
    saved in place, its card's training with the recipe up to that stage and the stage's seconds and loss curve
    (polish_*, pen_*). Returns the card's path."""
    for name, through in stages(preset)[done:]:
        model, card = load_checkpoint(card_path)
        stats = _trained(model.to(device), LATER_STAGES[name](through), None, None, device, progress)
        ran = {f"{name}_{key}": value for key, value in stats.items()}
        card.training = {**card.training, **through.recipe(), **ran}
        card_path = save_checkpoint(model.cpu(), card, card_path.parent, half=preset.half_weights)
    return card_path


def trained_with(card_path: Path, preset: Preset) -> bool:
    """Whether the card at card_path is of a model trained with exactly this preset's recipe and configuration (so a
    multi-seed training that was interrupted, or extended by a seed, trains only what it lacks)."""
    if not card_path.is_file() or not card_path.with_suffix(".safetensors").is_file():
        return False
    card = read_card(card_path)
    recipe = preset.recipe()
    return (card.config == preset.config and card.task == preset.task
            and {key: card.training.get(key) for key in recipe} == recipe
            and all(card.training.get(key, 0) == getattr(preset, key) for key in ("polish_steps", "pen_steps")))


def train_seed(preset: Preset, seed: int, seeds_dir: Path = SEEDS_DIR, progress: bool = True,
               device: str = "cpu", source_dir: Path = MODELS_DIR) -> dict:
    """Train the preset with `seed` into seeds_dir/seed-K/, unless a model of exactly that recipe is there (one trained
    with its first stages only gets the rest: stages), and evaluate it on held-out data; returns its figures. A preset
    with init_from starts from the model shipped in source_dir, not from that seed of it."""
    seeded = replace(preset, seed=seed)
    path = seeds_dir / f"seed-{seed}" / f"{preset.name}.json"
    if not trained_with(path, seeded):
        done = max((count for count, (_, through) in enumerate(stages(seeded), 1) if trained_with(path, through)),
                   default=0)
        path = (later_stages(path, seeded, done, progress, device) if done
                else train_preset(seeded, seeds_dir / f"seed-{seed}", progress, device, source_dir=source_dir))
    return evaluate_card(path, tokenizer_for(preset))


def ship_median(preset: Preset, per_seed: dict[int, dict], out_dir: Path = MODELS_DIR,
                seeds_dir: Path = SEEDS_DIR) -> Path:
    """Copy the median seed's model (by per_seed, each seed's figures) from seeds_dir into out_dir, with every seed's
    figures, their mean and spread in its card. Returns its card's path."""
    import shutil

    chosen = median_seed(per_seed)
    source = seeds_dir / f"seed-{chosen}" / f"{preset.name}.safetensors"
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, out_dir / source.name)
    card = read_card(source.with_suffix(".json"))
    card.metrics = {**per_seed[chosen], **seed_summary(per_seed), "shipped_seed": chosen}
    return write_card(card, out_dir)


def train_seeds(preset: Preset, seeds: list[int], out_dir: Path = MODELS_DIR, seeds_dir: Path = SEEDS_DIR,
                progress: bool = True, device: str = "cpu") -> Path:
    """Train and evaluate the preset once per seed (train_seed), and ship the median seed (ship_median)."""
    per_seed = {seed: train_seed(preset, seed, seeds_dir, progress, device, out_dir) for seed in seeds}
    return ship_median(preset, per_seed, out_dir, seeds_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.train", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", action="append", default=[], help="a preset name (repeatable)")
    parser.add_argument("--all", action="store_true", help="train every bundled preset")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--out", type=Path, default=MODELS_DIR)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="where the model trains, e.g. cuda (a GPU's numbers differ "
                        "from the CPU's in the last bits, so a model trained there is the same recipe, not the same "
                        "weights)")
    parser.add_argument("--seeds-dir", type=Path, default=SEEDS_DIR)
    parser.add_argument("--seeds", type=int, nargs="+", help="train once per seed (into assets/seeds/seed-K/), "
                        "evaluate each and ship the median seed with every seed's figures (default: the preset's "
                        "own seeds, e.g. 0 1 2 for the compared models, else one run)")
    parser.add_argument("--jobs", type=int, default=1, help="train this many runs at a time, each seed a run of its "
                        "own, in worker processes of --threads threads each (default 1: one after another)")
    args = parser.parse_args(argv)
    table = presets(TextTokenizer().vocab_size)
    if args.list:
        for preset in table.values():
            seeds = f"seeds {' '.join(map(str, preset.seeds))}" if preset.seeds else f"seed {preset.seed}"
            steps = " + ".join(str(n) for n in (preset.steps, preset.polish_steps, preset.pen_steps) if n)
            print(f"{preset.name}\t{preset.task}\t{steps} steps\t{seeds}\t{preset.description}")
        return 0
    names = [name for name in table if name not in NOT_IN_ALL] if args.all else args.preset
    unknown = [name for name in names if name not in table]
    if unknown or not names:
        parser.error(f"unknown preset(s): {', '.join(unknown)}" if unknown else "give --preset NAME or --all")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    runs = [(table[name], tuple(args.seeds or table[name].seeds)) for name in names]
    runs.sort(key=lambda run: run[0].init_from in names)  # a model another starts from trains first
    if args.jobs > 1:
        from core.training.parallel import train_in_parallel

        for path in train_in_parallel(runs, args.jobs, args.out, args.seeds_dir, args.device, args.threads or 1):
            print(f"saved {path}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    for preset, seeds in runs:
        path = (train_seeds(preset, list(seeds), args.out, seeds_dir=args.seeds_dir, device=args.device) if seeds
                else train_preset(preset, args.out, device=args.device))
        print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
