"""What a live-training run trains: the tasks, encodings and masks a page offers, a run's limits (LIMITS, and
MAX_WORK: a run's steps are capped by its model's size, so that one takes minutes), the RunSpec a page fills in, the
recipes it starts from, and how to read a run's accuracy. Nothing here trains or imports Streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.data import algorithmic
from core.data.images import CLASSES as IMAGE_CLASSES
from core.model.config import ConfigError, ModelConfig
from core.model.run import tokenizer
from core.training.train import Preset, image_config, scheduled_rate, text_config

TASKS = ("reversal", "copy", "sort", "grammar-lm", "shapes")
TASK_LABELS = {
    "reversal": "reversal: 3 1 4 | 4 1 3",
    "copy": "copy (induction): 3 1 4 | 3 1 4",
    "sort": "sort: 3 1 4 | 1 3 4",
    "grammar-lm": "grammar language model",
    "shapes": "images: shapes (ViT)",
}
TEXT_ENCODINGS = ("learned", "sinusoidal", "rope", "alibi", "relative", "none")
IMAGE_ENCODINGS = ("learned", "sinusoidal", "none")
TEXT_MASKS = ("causal", "window", "strided")  # a next-token head may not see the token it predicts
IMAGE_MASKS = ("none", "window")  # the CLS token reads every patch; the window is two-sided
CONTEXT = {"reversal": 32, "copy": 32, "sort": 32, "grammar-lm": 64}  # tokens: 2 x 12 symbols + | + [BOS] fit in 32
IMAGE_TOKENS = image_config().n_patches + 1  # CLS + the patches
POOL_SIZES = {"grammar-lm": 5000, "shapes": 2000}  # training examples drawn from; 5000 for the algorithmic tasks
LIMITS = {"n_layers": (1, 6), "n_heads": (1, 8), "d_model": (8, 256), "steps": (1, 20000), "batch_size": (1, 256)}
# A run's work: steps x batch x context tokens x layers x D², about what its matrix products cost. The budget lets the
# largest recipe (the warm-up lesson's, 16.8e9) through and caps a run at a few minutes on one core of the 2-core
# development machine: the default (2.1 M a step) trains about 35 steps/s alone, so 20e9 is about 5 minutes.
MAX_WORK = 20e9


# ---------------------------------------------------------------------------------------------------------
# What to train
# ---------------------------------------------------------------------------------------------------------

def masks_for(task: str) -> tuple[str, ...]:
    """The masks a task can train with, its default first."""
    return IMAGE_MASKS if task == "shapes" else TEXT_MASKS


def encodings_for(task: str) -> tuple[str, ...]:
    """The position encodings a task can train with, the default (learned) first."""
    return IMAGE_ENCODINGS if task == "shapes" else TEXT_ENCODINGS


def step_work(task: str, n_layers: int, d_model: int, batch_size: int) -> int:
    """One training step's work: batch x context tokens x layers x D² (MAX_WORK bounds a run's)."""
    tokens = IMAGE_TOKENS if task == "shapes" else CONTEXT.get(task, max(CONTEXT.values()))
    return batch_size * tokens * n_layers * d_model ** 2


def max_steps(task: str, n_layers: int, d_model: int, batch_size: int) -> int:
    """The most steps a run of this model and batch may train (MAX_WORK), within LIMITS: minutes, not hours."""
    low, high = LIMITS["steps"]
    return max(low, min(high, int(MAX_WORK // step_work(task, n_layers, d_model, batch_size))))


@dataclass(frozen=True)
class RunSpec:
    """A run's task, model and optimiser, checked at construction (ConfigError says what is wrong).

    The default is the tiny preset: reversal with M=2 layers of H=2 heads, D=32, pre-LN, learned positions,
    Adam at 3e-3 with 50 warm-up steps then cosine decay, clipping at 1. Its mirrored (anti-diagonal) head scores
    0.5 after 480 steps, 15 s on one thread of the 2-core development machine (tests/benchmarks/bench_training.py;
    about 35 steps/s alone, fewer while the server also draws the page), but it learns only part of the task
    (batch accuracy 0.50, 0.68, 0.43 after its 1200 steps at seeds 0-2): the page starts from DEFAULT_RECIPE."""

    task: str = "reversal"
    n_layers: int = 2  # M
    n_heads: int = 2  # H
    d_model: int = 32  # D; the MLP is 4D wide
    pos_encoding: str = "learned"
    mask: str = "causal"
    norm: str = "pre"
    learning_rate: float = 3e-3  # the schedule's peak
    schedule: str = "cosine"
    warmup: int = 50  # 0: no warm-up
    clip: float = 1.0  # 0: no clipping
    label_smoothing: float = 0.0
    dropout: float = 0.0
    weight_decay: float = 0.01
    steps: int = 1200
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"task {self.task!r} is not one of {', '.join(TASKS)}")
        for name, (low, high) in LIMITS.items():
            if not low <= getattr(self, name) <= high:
                raise ConfigError(f"{name} must be between {low} and {high} here, got {getattr(self, name)}")
        if self.mask not in masks_for(self.task):
            raise ConfigError(f"the {self.task} task takes the masks {', '.join(masks_for(self.task))}, "
                              f"not {self.mask!r}")
        if self.pos_encoding not in encodings_for(self.task):
            raise ConfigError(f"the {self.task} task takes the position encodings "
                              f"{', '.join(encodings_for(self.task))}, not {self.pos_encoding!r}")
        self.preset()  # ModelConfig and Preset check the rest (head size, schedule, rates) with their reasons
        if self.steps > self.max_steps():
            raise ConfigError(f"this model and batch may train at most {self.max_steps():,} steps here (so that a "
                              f"run takes minutes, not hours), got {self.steps:,}: fewer steps, a smaller batch or "
                              "a smaller model")

    def max_steps(self) -> int:
        return max_steps(self.task, self.n_layers, self.d_model, self.batch_size)

    def config(self) -> ModelConfig:
        size = dict(n_layers=self.n_layers, n_heads=self.n_heads, d_model=self.d_model, d_mlp=4 * self.d_model,
                    pos_encoding=self.pos_encoding, mask=self.mask, norm=self.norm, dropout=self.dropout)
        if self.task == "shapes":
            return image_config(window_causal=False, **size)
        return text_config(tokenizer().vocab_size, max_len=CONTEXT[self.task], window_causal=True, **size)

    def preset(self) -> Preset:
        return Preset("live", self.task, self.config(), self.describe(), steps=self.steps,
                      batch_size=self.batch_size, learning_rate=self.learning_rate, warmup=self.warmup,
                      weight_decay=self.weight_decay, clip=self.clip, pool_size=POOL_SIZES.get(self.task, 5000),
                      seed=self.seed, schedule=self.schedule, label_smoothing=self.label_smoothing)

    def describe(self) -> str:
        warmup = f"{self.warmup} warm-up steps" if self.warmup else "no warm-up"
        clip = f"clip {self.clip:g}" if self.clip else "no clipping"
        return (f"{self.task}, M={self.n_layers} H={self.n_heads} D={self.d_model}, {self.norm}-LN, "
                f"{self.pos_encoding} positions, {self.mask} mask; lr {self.learning_rate:g} {self.schedule}, "
                f"{warmup}, {clip}, label smoothing {self.label_smoothing:g}, dropout {self.dropout:g}, "
                f"{self.steps} steps of {self.batch_size}, seed {self.seed}")


# Seed 004: post-LN needs a warm-up. Reversal with relative positions, M=4 H=4 D=64, a constant rate of 2e-3, 1000
# steps (batch accuracy, mean of the last 50 steps, seeds 0 1 2): post-LN without a warm-up stays at the guessing
# level (0.111, 0.112, 0.111; loss 3.02 for good), with 300 warm-up steps it learns the task (0.987, 0.964, 0.982);
# pre-LN without one learned it at seeds 0 and 1 (0.988, 0.991) and was still on its way at seed 2 (0.245).
# tests/benchmarks/bench_training.py --compare-norms --seeds 0 1 2 measures it again.
WARMUP_LESSON = dict(task="reversal", pos_encoding="relative", n_layers=4, n_heads=4, d_model=64,
                     learning_rate=2e-3, schedule="constant", steps=1000)
# The page's first demo: the tiny preset with relative positions. Its batch accuracy (mean of 25 steps) first reaches
# LEARNED_ACCURACY after 635, 409 and 393 of its 1000 steps at seeds 0-2 and ends at 1.0 (at seeds 3-8 too, but for
# seed 7: 0.47; 800 steps left seed 0 at 0.44). One free core trains 40-80 steps/s: 12-25 s a run. Through the page's
# worker (tests/benchmarks/bench_training.py), which yields the CPU to anything else, the 2-core development machine
# under a load of 4-7 took 17 s, 50 s and 277 s (3.6 steps/s). No head forms the reversal's mirrored pattern on the
# probe (best score 0.16): relative positions solve it another way.
DEFAULT_RECIPE = "tiny reversal (default): learned in about 30 s"
RECIPES: dict[str, dict] = {  # starting points for the page, DEFAULT_RECIPE first: the RunSpec fields that differ
    DEFAULT_RECIPE: dict(pos_encoding="relative", steps=1000),
    # learned (absolute) positions level off on reversal: RunSpec's docstring
    "reversal, learned positions: partly learned": {},
    "post-LN, no warm-up": dict(WARMUP_LESSON, norm="post", warmup=0),
    "post-LN, with warm-up": dict(WARMUP_LESSON, norm="post", warmup=300),
    "pre-LN, no warm-up": dict(WARMUP_LESSON, norm="pre", warmup=0),
    "copy: an induction head": dict(task="copy", n_heads=1, pos_encoding="rope", steps=1500),
    "grammar language model": dict(task="grammar-lm", d_model=64, steps=800),
    "images: shapes": dict(task="shapes", mask="none", steps=500),
}


LEARNED_ACCURACY = 0.95  # batch accuracy from which an algorithmic or image task counts as learned


@dataclass(frozen=True)
class AccuracyGuide:
    """What a task's batch accuracy means: `guess`, the accuracy of a model that has learned only the easy part
    (nan: no such level), `learned`, the level from which the task counts as learned (nan: none, a language has
    no single right next word), and the sentence that says so."""

    guess: float
    learned: float
    text: str

    def verdict(self, accuracy: float) -> str:
        """"learned", "partly" (clearly above the guess), "not yet", or "" when the task has no such levels."""
        if math.isnan(self.learned):
            return ""
        return "learned" if accuracy >= self.learned else "partly" if accuracy >= 1.5 * self.guess else "not yet"


def accuracy_guide(task: str) -> AccuracyGuide:
    """The levels of batch accuracy that say whether a run learned its task, computed from the task's data."""
    if task == "shapes":
        guess = 1 / len(IMAGE_CLASSES)
        return AccuracyGuide(guess, LEARNED_ACCURACY, f"Guessing one of the {len(IMAGE_CLASSES)} classes scores "
                             f"{guess:.2f}; a model that has learned them scores close to 1.")
    if task == "grammar-lm":
        return AccuracyGuide(math.nan, math.nan, "A sentence can go on in many ways, so even a perfect model guesses "
                             "many next words wrong: accuracy stays far below 1. Watch the loss fall from "
                             f"ln V = {math.log(tokenizer().vocab_size):.1f} (a uniform guess over the vocabulary).")
    lengths = range(algorithmic.MIN_LENGTH, algorithmic.MAX_LENGTH + 1)
    guess = float(np.mean([1 / length for length in lengths]))
    return AccuracyGuide(guess, LEARNED_ACCURACY, f"Copying a random one of the input's symbols scores about "
                         f"{guess:.2f} (inputs of {lengths.start} to {lengths.stop - 1} symbols): models often sit "
                         f"there first. A model that has learned the {task} scores close to 1, its loss near 0.")


def rate_curve(spec: RunSpec) -> np.ndarray:
    """The learning rate of every step of the run, [steps], from its schedule."""
    preset = spec.preset()
    return np.array([scheduled_rate(step, preset) for step in range(spec.steps)])


