"""Live training: a small transformer trained in a process of its own while a page of the server watches it.

A LiveRun trains one model, described by a RunSpec, with core/train.py's own step (train_steps), in a child process
(train_run), and keeps what a class looks at: every step's loss, accuracy, learning rate and gradient norm (in total
and per layer), and at chosen steps a Snapshot of the model on one fixed held-out example (its attention
patterns, TokenNorm statistics and residual norms, from the model's own recording). The process sends each of them
as a message, and the trained weights at the end; a thread of the server reads them. A page reads a consistent
copy with `view()`, asks it to `stop()` (the step under way finishes, then a last snapshot is taken) and, once it
has ended, to `save()` it into the user directory as a model every page can open (core/registry.py).

Why a process: a training thread would share the server's interpreter lock with every page, and two of them slowed
the text explorer's toggle about fourfold (tests/benchmarks/load_test.py). A process holds its own lock, uses one
torch thread and runs at a lower priority (TRAINING_NICENESS), so pages stay responsive. Processes come from a fork
server started clean, so they inherit none of the server's threads.

The LiveRegistry (one per process: RUNS) bounds how many runs train at once and gives each owner (a browser, all
its tabs) one run at a time; it outlives page reruns and page switches because it lives in this module. Only a run's
owner may stop or save it. A run that no page has watched for IDLE_SECONDS stops by itself, and a run's steps are
capped by its model's size (MAX_WORK) so that one takes minutes. Saved runs have quotas per browser and per server.
Nothing here imports Streamlit.
"""

from __future__ import annotations

import hashlib
import io
import math
import multiprocessing
import os
import queue
import shutil
import sys
import threading
import time
import types
import uuid
import zipfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from core import registry
from core.analysis import induction_score, mirrored_score, previous_token_attention
from core.checkpoint import ModelCard, save_checkpoint
from core.config import ConfigError, ModelConfig
from core.data import algorithmic, grammar
from core.data.images import CLASSES as IMAGE_CLASSES
from core.data.images import HELDOUT_SEED as IMAGE_HELDOUT_SEED
from core.data.images import generate_dataset
from core.model import Transformer
from core.record import record_text, tokenizer
from core.recording import Recording, block_hook
from core.tasks import ImagePool, TokenPool
from core.train import Preset, StepStats, image_config, make_pool, scheduled_rate, text_config, train_steps
from core.vision import record_image

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
PROBE_LENGTH = 6  # the snapshot example's input length on the algorithmic tasks
SNAPSHOTS = 40  # about this many snapshots per run, evenly spaced, plus the initial weights
PATTERN_THRESHOLD = 0.5  # a head's pattern score from which the pattern counts as formed
MAX_RUNNING = int(os.environ.get("ATTENTION_LAB_MAX_RUNS", "2"))  # runs training at once in one server
MAX_KEPT = 12  # runs kept in memory (finished ones dropped oldest first)
# A run no page has watched for this long stops (it is kept: saveable). More than 60 s: after 5 minutes Chrome fires a
# hidden tab's timers (the page's 2 s poll) once a minute, and a tab in the background still watches its run.
IDLE_SECONDS = 90.0
# A run's work: steps x batch x context tokens x layers x D², about what its matrix products cost. The budget lets the
# largest recipe (the warm-up lesson's, 16.8e9) through and caps a run at a few minutes on one core of the 2-core
# development machine: the default (2.1 M a step) trains about 35 steps/s alone, so 20e9 is about 5 minutes.
MAX_WORK = 20e9
# A training process's niceness: the lowest priority, so the server's pages get the CPU first (at 10, Linux's
# scheduler still gave each run about a tenth of a core that a page was waiting for).
TRAINING_NICENESS = 19
MAX_SAVED_PER_BROWSER = 10  # saved runs (all of them, however old) one browser may have on the server
MAX_SAVED_BYTES_PER_BROWSER = 100 * 2**20
MAX_SAVED_RUNS = 300  # saved runs on the server, every browser's together
MAX_SAVED_BYTES = 2 * 2**30


class ServerBusyError(RuntimeError):
    """Too many runs are training on this server."""


class SessionBusyError(RuntimeError):
    """This owner (a browser, in any of its tabs) already has a run training."""


class RunStateError(RuntimeError):
    """The run is not in a state that allows this (e.g. saving one still training, or one already saved)."""


class NotOwnerError(PermissionError):
    """Only the browser that started a run may stop or save it; anyone else only watches."""

    def __init__(self, action: str):
        super().__init__(f"only the browser that started this run can {action} it; you are watching it read-only")


class QuotaError(RuntimeError):
    """Saving would pass a saved-run quota (per browser or per server)."""


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
    about 35 steps/s alone, fewer while the server also draws the page)."""

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
RECIPES: dict[str, dict] = {  # starting points for the page: the RunSpec fields that differ from the default
    "tiny reversal (default)": {},
    # learned (absolute) positions level off near 0.8 on reversal (3000 steps); relative ones solve it: batch
    # accuracy 1.0 after about 700 steps, 23 s alone on the 2-core machine (tests/benchmarks/bench_training.py)
    "reversal, relative positions: solved in ~30 s": dict(pos_encoding="relative", steps=1000),
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


# ---------------------------------------------------------------------------------------------------------
# The example every snapshot looks at, and the pattern each task should form
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskPattern:
    """A textbook head a task should grow, and its score: pattern [N, N] of one head -> a number in [0, 1]."""

    name: str
    description: str
    score: Callable[[np.ndarray], float]


def task_pattern(task: str) -> TaskPattern | None:
    """The pattern followed on this task's probe (core.analysis scores), or None when there is no single one."""
    if task == "reversal":
        return TaskPattern("mirrored", "the anti-diagonal: answer token i reads input token L+1−i, the one it copies",
                           lambda pattern: mirrored_score(pattern, PROBE_LENGTH))
    if task == "copy":
        return TaskPattern("induction", "the induction head: the repeated x_i reads x_{i+1}, the token after its "
                           "first occurrence", lambda pattern: induction_score(pattern, PROBE_LENGTH))
    if task == "grammar-lm":
        return TaskPattern("previous token", "the previous-token head: each word reads the word before it",
                           lambda pattern: float(previous_token_attention(pattern)))
    return None


@lru_cache(maxsize=8)
def probe_text(task: str) -> str:
    """A fixed held-out example (never trained on) of a text task."""
    if task == "grammar-lm":
        return grammar.generate_documents(1, grammar.HELDOUT_SEED)[0]
    return algorithmic.generate(task, 1, algorithmic.HELDOUT_SEED, PROBE_LENGTH, PROBE_LENGTH)[0].text


@lru_cache(maxsize=1)
def probe_image() -> np.ndarray:
    """A fixed held-out image, uint8 [32, 32, 3]."""
    return generate_dataset(1, IMAGE_HELDOUT_SEED)[0][0]


def record_probe(model: Transformer, task: str) -> Recording:
    """The model's recording of the task's probe, in eval mode, tokens in meta["tokens"]."""
    if task == "shapes":
        recording = record_image(model, probe_image()).recording
        n = recording.n_tokens
        recording.meta["tokens"] = ["CLS", *(str(i) for i in range(1, n))] if model.cfg.uses_cls else \
            [str(i) for i in range(1, n + 1)]
        return recording
    return record_text(model, probe_text(task))


@lru_cache(maxsize=4)
def shared_pool(task: str, size: int) -> ImagePool | TokenPool:
    """The training pool of a task, built once per process (runs only read it)."""
    return make_pool(task, size, None if task == "shapes" else tokenizer())


# ---------------------------------------------------------------------------------------------------------
# What a run keeps
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Snapshot:
    """The model on the probe after `step` updates (0: the initial weights), `seconds` after the run started."""

    step: int
    seconds: float
    patterns: np.ndarray  # [M, H, N, N] A of every head, rows sum to 1
    norm_scale: dict[str, float]  # per TokenNorm ("blocks.0.ln1", …, "ln_final"): the mean over tokens of σ_n
    resid_norm: np.ndarray  # [M + 1] mean over tokens of ||x_n||: the input of block 0, then after each block
    scores: np.ndarray | None  # [M, H] the task pattern's score of every head (None: the task has none)

    @property
    def best_score(self) -> float:
        return float(np.max(self.scores)) if self.scores is not None else float("nan")


def take_snapshot(model: Transformer, task: str, step: int, seconds: float) -> tuple[Snapshot, list[str]]:
    """A Snapshot of the model (switched to eval mode for the recording; the caller resumes training) and the
    probe's tokens. Every number is read from the model's own recording of one forward pass."""
    model.eval()
    recording = record_probe(model, task)
    m = model.cfg.n_layers
    patterns = recording.patterns().astype(np.float32)
    norms = [f"blocks.{layer}.{ln}" for layer in range(m) for ln in ("ln1", "ln2")]
    norms += ["ln_final"] if model.ln_final is not None else []
    streams = [block_hook(0, "hook_resid_pre")] + [block_hook(layer, "hook_resid_post") for layer in range(m)]
    pattern = task_pattern(task)
    scores = None if pattern is None else np.array([[pattern.score(head) for head in layer] for layer in patterns])
    snapshot = Snapshot(step, seconds, patterns,
                        {name: float(recording[f"{name}.hook_scale"].mean()) for name in norms},
                        np.array([np.linalg.norm(recording[name], axis=-1).mean() for name in streams]), scores)
    return snapshot, list(recording.meta["tokens"])


HISTORY_FIELDS = ("step", "loss", "accuracy", "learning_rate", "grad_norm")


@dataclass(frozen=True)
class RunView:
    """A consistent copy of a run's state for display. history: HISTORY_FIELDS -> [steps done] (step is
    1-based: the number of updates made); grad_norms: group ("embedding", "blocks.0", …, "head") -> [steps]."""

    run_id: str
    spec: RunSpec
    owner: str
    status: str  # starting, training, finished, stopped, diverged, failed
    message: str  # why it failed or diverged, else ""
    seconds: float
    history: dict[str, np.ndarray]
    grad_norms: dict[str, np.ndarray]
    snapshots: tuple[Snapshot, ...]
    tokens: tuple[str, ...]  # the probe's tokens
    threads: int  # torch threads the run trained with
    saved_as: str | None

    @property
    def alive(self) -> bool:
        return self.status in ("starting", "training")

    @property
    def steps_done(self) -> int:
        return len(self.history["step"])

    @property
    def progress(self) -> float:
        return self.steps_done / self.spec.steps

    @property
    def steps_per_second(self) -> float:
        return self.steps_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def pattern(self) -> TaskPattern | None:
        return task_pattern(self.spec.task)

    def pattern_formed(self, threshold: float = PATTERN_THRESHOLD) -> Snapshot | None:
        """The first snapshot whose best head scores at least `threshold` on the task pattern, if any."""
        return next((s for s in self.snapshots if s.scores is not None and s.best_score >= threshold), None)

    def snapshot_at(self, step: int) -> Snapshot:
        """The last snapshot taken at or before `step` (the first one for earlier steps)."""
        earlier = [s for s in self.snapshots if s.step <= step]
        return earlier[-1] if earlier else self.snapshots[0]


# ---------------------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Priority:
    niceness: int | None  # None where the system does not allow setting it
    idle: bool  # scheduled SCHED_IDLE: run only on CPU time that nothing else wants


def lower_priority(niceness: int = TRAINING_NICENESS) -> Priority:
    """Make the calling thread nicer and, where Linux allows, SCHED_IDLE (Linux gives each thread its own niceness
    and policy; a training process has one thread that trains, and processes started from a thread inherit both),
    so the server's pages get the CPU first. At niceness 19 alone a page's thread waking up could still wait for a
    training thread's time slice: the toggles' p95 under a class's training was 1.7-1.9x that of a quiet class.
    A SCHED_IDLE thread gives way at once."""
    native = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, native, max(os.getpriority(os.PRIO_PROCESS, native), niceness))
        nice: int | None = os.getpriority(os.PRIO_PROCESS, native)
    except (AttributeError, OSError):
        nice = None
    try:
        os.sched_setscheduler(native, os.SCHED_IDLE, os.sched_param(0))
        idle = os.sched_getscheduler(native) == os.SCHED_IDLE
    except (AttributeError, OSError):
        idle = False
    return Priority(nice, idle)


def snapshot_steps(steps: int) -> set[int]:
    """The update counts after which a snapshot is taken: about SNAPSHOTS, evenly spaced, and the last one."""
    every = max(1, math.ceil(steps / SNAPSHOTS))
    return set(range(every, steps + 1, every)) | {steps}


# ---------------------------------------------------------------------------------------------------------
# The training process: what it sends its LiveRun, one message at a time
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Started:
    threads: int  # torch threads the process trains with
    priority: Priority


@dataclass(frozen=True)
class Stepped:
    stats: StepStats
    seconds: float


@dataclass(frozen=True)
class Snapped:
    snapshot: Snapshot
    tokens: list[str]


@dataclass(frozen=True)
class Ended:
    status: str  # finished, stopped, diverged or failed
    message: str
    seconds: float
    weights: dict[str, np.ndarray] | None  # the trained model's state dict (None when it was never built)


Message = Started | Stepped | Snapped | Ended


def train_run(spec: RunSpec, stop, watched, idle_seconds: float, send: Callable[[Message], None]) -> None:
    """Train the run described by `spec` in this process, sending every step, snapshot and the end to `send`.
    `stop` is set to ask for a stop; `watched.value` is the time.monotonic() at which a page last showed the run
    (CLOCK_MONOTONIC: the same clock in every process). A failure is sent as the run's end, never raised."""
    started, model = time.perf_counter(), None
    try:
        torch.set_num_threads(1)
        send(Started(torch.get_num_threads(), lower_priority()))
        preset = spec.preset()
        pool = shared_pool(spec.task, preset.pool_size)
        torch.manual_seed(spec.seed)
        model = Transformer(preset.config)
        send(Snapped(*take_snapshot(model, spec.task, 0, time.perf_counter() - started)))
        status, message = _train_loop(model, preset, pool, started, stop, watched, idle_seconds, send)
    except Exception as error:  # a run's failure is shown on its page, never raised into the server
        status, message = "failed", f"{type(error).__name__}: {error}"
    # numpy arrays, not tensors: torch would share a tensor's memory with the receiver, gone once this process ends
    weights = None if model is None else {name: tensor.detach().numpy().copy()
                                          for name, tensor in model.state_dict().items()}
    send(Ended(status, message, time.perf_counter() - started, weights))


def _train_loop(model: Transformer, preset: Preset, pool, started: float, stop, watched, idle_seconds: float,
                send: Callable[[Message], None]) -> tuple[str, str]:
    when = snapshot_steps(preset.steps)
    steps = train_steps(model, preset, None if preset.task == "shapes" else tokenizer(), preset.seed, pool)
    try:
        for stats in steps:
            done = stats.step + 1
            send(Stepped(stats, time.perf_counter() - started))
            if not math.isfinite(stats.loss):
                return "diverged", (f"the loss became {stats.loss} at step {done}: training diverged (a smaller "
                                    "learning rate, a warm-up or gradient clipping may help)")
            idle = time.monotonic() - watched.value > idle_seconds
            if done in when or stop.is_set() or idle:
                send(Snapped(*take_snapshot(model, preset.task, done, time.perf_counter() - started)))
                model.train()
            if done == preset.steps:
                return "finished", ""
            if stop.is_set():
                return "stopped", ""
            if idle:
                return "stopped", (f"stopped after step {done}: no page had shown it for {idle_seconds:g} s. It is "
                                   "kept: save it, or start a new run.")
    finally:
        steps.close()
    return "finished", ""


def _train_in_child(spec: RunSpec, stop, watched, idle_seconds: float, outbox) -> None:
    """The training process's entry point: train_run, sending into the queue `outbox`."""
    train_run(spec, stop, watched, idle_seconds, outbox.put)


@lru_cache(maxsize=1)
def _processes():
    """Where training processes come from: a fork server, started clean (no server threads to inherit) with this
    module imported once, so a run starts in a fraction of a second."""
    context = multiprocessing.get_context("forkserver")
    # imported once by the fork server, not again by every run: this module, and torch._dynamo, which an
    # optimizer's first construction imports (3-4 s)
    context.set_forkserver_preload(["core.live", "torch._dynamo"])
    return context


_main_lock = threading.Lock()


@contextmanager
def _main_hidden():
    """multiprocessing makes a new process import the parent's __main__ first; under Streamlit that is the page
    script the server ran last (any session's), which would then run, bare, in the training process or the fork
    server. Their entry points import by name, so hide __main__ while they start."""
    with _main_lock:
        saved = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved


def warm_up() -> None:
    """Start the fork server now: its imports (seconds of CPU) then happen when the server starts (app.py), not
    while a class waits for its first run. Call it from a thread of its own: the thread is made nicer first (Linux
    gives each thread its niceness), so the fork server, which inherits it, takes the CPU only when pages do not."""
    from multiprocessing import forkserver

    lower_priority()
    _processes()
    with _main_hidden():
        forkserver.ensure_running()


# ---------------------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------------------

class LiveRun:
    """One model trained in its own process for its `owner` (a browser): a process, not a thread of the server, so
    that training holds neither the server's interpreter lock nor, being nicer, the CPU that pages need. Start it
    with `start()`; read it with `view()`; pages that show it call `watch()`, and a run no page has watched for
    `idle_seconds` stops by itself (kept, saveable). Only its owner may `stop()` or `save()` it: anyone else gets
    NotOwnerError."""

    def __init__(self, run_id: str, spec: RunSpec, owner: str, idle_seconds: float = IDLE_SECONDS):
        self.run_id, self.spec, self.owner = run_id, spec, owner
        self.idle_seconds = idle_seconds
        self.created = time.monotonic()
        processes = _processes()
        self._watched = processes.Value("d", self.created, lock=False)  # a float: one writer at a time suffices
        self._stop = processes.Event()
        self._queue = processes.Queue()
        self._process = processes.Process(target=_train_in_child, name=f"live-run-{run_id}", daemon=True,
                                          args=(spec, self._stop, self._watched, idle_seconds, self._queue))
        self._receiver = threading.Thread(target=self._receive, name=f"live-run-{run_id}", daemon=True)
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._status, self._message, self._seconds, self._threads = "starting", "", 0.0, 0
        self._priority = Priority(None, False)
        # arrays of spec.steps filled step by step: a view copies their first _steps_done values (every poll of
        # every page that shows the run reads a view; converting lists of floats took 1.3 ms at 3000 steps)
        self._history = {name: np.empty(spec.steps) for name in HISTORY_FIELDS}
        self._grad_norms: dict[str, np.ndarray] = {}
        self._steps_done = 0
        self._snapshots: list[Snapshot] = []
        self._tokens: list[str] = []
        self._model: Transformer | None = None
        self._saved_as: str | None = None

    def start(self) -> None:
        with _main_hidden():
            self._process.start()
        self._receiver.start()

    def owned_by(self, owner: str | None) -> bool:
        return owner is not None and owner == self.owner

    def stop(self, owner: str) -> None:
        """Ask the run to stop after the step under way (it then takes a last snapshot); NotOwnerError unless
        `owner` started it."""
        if not self.owned_by(owner):
            raise NotOwnerError("stop")
        self._stop.set()

    def watch(self) -> None:
        """A page shows the run now: it keeps training (see idle_seconds)."""
        self._watched.value = time.monotonic()

    def unwatched_for(self) -> float:
        return time.monotonic() - self._watched.value

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the run has ended and everything it sent is read; True when it has."""
        self._receiver.join(timeout)
        return not self._receiver.is_alive()

    @property
    def priority(self) -> Priority:
        """The training process's niceness and whether it is SCHED_IDLE, once it runs (None and False before)."""
        return self._priority

    def view(self) -> RunView:
        with self._lock:
            return RunView(
                self.run_id, self.spec, self.owner, self._status, self._message, self._seconds,
                {name: values[:self._steps_done].copy() for name, values in self._history.items()},
                {name: values[:self._steps_done].copy() for name, values in self._grad_norms.items()},
                tuple(self._snapshots), tuple(self._tokens), self._threads, self._saved_as)

    # what the process sends ----------------------------------------------------------------------------------

    def _receive(self) -> None:
        """Read the process's messages until it ends (or dies without saying so: the run then failed)."""
        while True:
            try:
                message = self._queue.get(timeout=1.0)
            except queue.Empty:
                if self._process.is_alive():
                    continue
                message = self._last_word()
            self._apply(message)
            if isinstance(message, Ended):
                break
        self._process.join(timeout=5)

    def _last_word(self) -> Message:
        """What a process that has exited left in the queue, else the news that it died without ending the run."""
        try:
            return self._queue.get(timeout=1.0)
        except queue.Empty:
            return Ended("failed", f"the training process ended unexpectedly (exit code {self._process.exitcode})",
                         self._seconds, None)

    def _apply(self, message: Message) -> None:
        if isinstance(message, Stepped):
            self._add_stats(message.stats, message.seconds)
        elif isinstance(message, Snapped):
            with self._lock:
                self._snapshots.append(message.snapshot)
                self._tokens = message.tokens
        elif isinstance(message, Started):
            self._priority = message.priority
            with self._lock:
                self._status, self._threads = "training", message.threads
        else:
            model = None
            if message.weights is not None:
                model = Transformer(self.spec.preset().config)
                model.load_state_dict({name: torch.from_numpy(array) for name, array in message.weights.items()})
                model.eval()
            with self._lock:
                self._model = model
                self._status, self._message, self._seconds = message.status, message.message, message.seconds

    def _add_stats(self, stats: StepStats, seconds: float) -> None:
        with self._lock:
            done = self._steps_done
            for name, value in (("step", stats.step + 1), ("loss", stats.loss), ("accuracy", stats.accuracy),
                                ("learning_rate", stats.learning_rate), ("grad_norm", stats.grad_norm)):
                self._history[name][done] = value
            for group, value in stats.grad_norms.items():
                if group not in self._grad_norms:
                    self._grad_norms[group] = np.full(self.spec.steps, np.nan)
                self._grad_norms[group][done] = value
            self._steps_done, self._seconds = done + 1, seconds

    # saving --------------------------------------------------------------------------------------------------

    def save(self, name: str, owner: str, reserved: Iterable[str] = ()) -> Path:
        """Save the trained model as the user run `name`: NAME/NAME.safetensors + NAME/NAME.json in the user
        directory. Written into a temporary folder, then renamed into place, so a run is listed whole or not at
        all. Only the run's owner may save it (NotOwnerError), only once (RunStateError) and only a finished or
        stopped run; a name that is taken (or in `reserved`, the bundled models' names) is refused, and so is a
        save past a quota (QuotaError). Messages name the run, never a folder of the server. Returns the card's
        path."""
        if not self.owned_by(owner):
            raise NotOwnerError("save")
        with self._save_lock:  # two clicks at once: one saves, the other is told it is saved
            view = self.view()
            if view.saved_as is not None:
                raise RunStateError(f"this run is already saved, as {view.saved_as!r}")
            if view.status not in ("finished", "stopped") or self._model is None:
                raise RunStateError(f"only a finished or stopped run can be saved; this one is {view.status}")
            check_run_name(name, reserved)
            check_quota(owner)
            write_run(self._model, self._card(name, view), name)
            with self._lock:
                self._saved_as = name
        return registry.user_card_path(name)

    def _card(self, name: str, view: RunView) -> ModelCard:
        every = max(1, view.steps_done // 200)
        curve = [(int(step), round(float(loss), 4)) for step, loss in
                 zip(view.history["step"][::every], view.history["loss"][::every])]
        training = {**self.spec.preset().recipe(), "origin": registry.USER_RUN_ORIGIN, "run": self.run_id,
                    "saved_by": owner_tag(self.owner),
                    "steps_done": view.steps_done, "status": view.status, "seconds": round(view.seconds, 1),
                    "loss_curve": curve}
        return ModelCard(name, self.spec.task, self.spec.config(), f"your run: {self.spec.describe()}",
                         training=training)


def check_run_name(name: str, reserved: Iterable[str] = ()) -> None:
    """ValueError unless `name` can be a new saved run's name."""
    if not registry.RUN_NAME.fullmatch(name):
        raise ValueError("a run's name is 1 to 48 lowercase letters, digits, - or _, starting with a letter "
                         f"or digit (got {name!r})")
    if name in set(reserved):
        raise ValueError(f"{name!r} is a bundled model's name; choose another")
    if registry.user_dir().joinpath(name).exists():
        raise ValueError(f"a saved run is already called {name!r}; choose another name")


def owner_tag(owner: str) -> str:
    """What a saved run's card keeps of the browser that saved it (for its quota): a hash, not the id itself."""
    return hashlib.sha256(owner.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SavedUsage:
    """Saved runs on the server: how many and their bytes, all of them and those of one browser."""

    runs: int
    bytes: int
    runs_of_browser: int
    bytes_of_browser: int


def saved_usage(owner: str) -> SavedUsage:
    """Count the saved runs in the user directory, and those `owner`'s browser saved (by their cards)."""
    tag = owner_tag(owner)
    runs = total = mine = mine_bytes = 0
    for card in registry.user_cards():
        size = registry.run_bytes(card.name)
        runs, total = runs + 1, total + size
        if card.training.get("saved_by") == tag:
            mine, mine_bytes = mine + 1, mine_bytes + size
    return SavedUsage(runs, total, mine, mine_bytes)


def check_quota(owner: str) -> None:
    """QuotaError when one more saved run would pass a quota: per browser (MAX_SAVED_PER_BROWSER runs,
    MAX_SAVED_BYTES_PER_BROWSER) or per server (MAX_SAVED_RUNS, MAX_SAVED_BYTES). A run is a few MB at most."""
    usage = saved_usage(owner)
    if usage.runs_of_browser >= MAX_SAVED_PER_BROWSER or usage.bytes_of_browser >= MAX_SAVED_BYTES_PER_BROWSER:
        raise QuotaError(f"this browser has saved {usage.runs_of_browser} runs ({usage.bytes_of_browser / 2**20:.1f} "
                         f"MB), the most one browser may keep here ({MAX_SAVED_PER_BROWSER} runs, "
                         f"{MAX_SAVED_BYTES_PER_BROWSER / 2**20:.0f} MB). Download this run instead, or ask your "
                         "teacher to remove old ones.")
    if usage.runs >= MAX_SAVED_RUNS or usage.bytes >= MAX_SAVED_BYTES:
        raise QuotaError(f"the server keeps {usage.runs} saved runs ({usage.bytes / 2**20:.0f} MB), as many as it "
                         f"may ({MAX_SAVED_RUNS} runs, {MAX_SAVED_BYTES / 2**30:.0f} GB). Download this run instead, "
                         "or ask your teacher to remove old ones.")


def write_run(model: Transformer, card: ModelCard, name: str) -> None:
    """Write a run into a temporary folder of the user directory and rename it into place (atomic on one file
    system; a name taken meanwhile fails). ValueError naming the run, never a server path, when it cannot."""
    root = registry.user_dir()
    root.mkdir(parents=True, exist_ok=True)
    temporary = root / f".{name}.{uuid.uuid4().hex[:8]}{registry.TEMPORARY_SUFFIX}"
    target = root / name
    try:
        save_checkpoint(model, card, temporary)
        temporary.rename(target)
    except OSError as error:
        if target.exists():
            raise ValueError(f"a saved run was called {name!r} just before yours; choose another name") from error
        raise ValueError(f"could not save {name!r}: {error.strerror or type(error).__name__}") from error
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    registry.forget_user_cards()


def archive(card_path: Path) -> bytes:
    """A saved run's folder (its card and weights) as the bytes of a .zip, to download."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive_file:
        for path in sorted(card_path.parent.iterdir()):
            archive_file.write(path, f"{card_path.parent.name}/{path.name}")
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------------------
# Every run of the server
# ---------------------------------------------------------------------------------------------------------

@dataclass
class LiveRegistry:
    """The runs of one server: at most `max_running` train at once, one per owner (a browser); `max_kept` stay
    readable; a run no page watches for `idle_seconds` stops."""

    max_running: int = MAX_RUNNING
    max_kept: int = MAX_KEPT
    idle_seconds: float = IDLE_SECONDS
    _runs: dict[str, LiveRun] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, spec: RunSpec, owner: str) -> LiveRun:
        """Start a run for `owner`; SessionBusyError if it already has one training, ServerBusyError if the
        server has max_running training."""
        with self._lock:
            running = [run for run in self._runs.values() if run.view().alive]
            mine = [run for run in running if run.owner == owner]
            if mine:
                raise SessionBusyError(f"this browser is already training run {mine[0].run_id[:6]} (in this tab or "
                                       "another): stop it or let it finish first")
            if len(running) >= self.max_running:
                raise ServerBusyError(f"the server is busy: {len(running)} runs are training (at most "
                                      f"{self.max_running} at once). Try again when one has finished.")
            ended = sorted((run for run in self._runs.values() if run not in running), key=lambda run: run.created)
            for run in ended[: max(0, len(self._runs) + 1 - self.max_kept)]:
                del self._runs[run.run_id]
            run = LiveRun(uuid.uuid4().hex[:12], spec, owner, self.idle_seconds)
            self._runs[run.run_id] = run
        run.start()
        return run

    def get(self, run_id: str | None) -> LiveRun | None:
        with self._lock:
            return self._runs.get(run_id or "")

    def runs(self) -> list[LiveRun]:
        """Every run still kept, oldest first."""
        with self._lock:
            return sorted(self._runs.values(), key=lambda run: run.created)

    def runs_of(self, owner: str) -> list[LiveRun]:
        """The owner's runs still kept, oldest first."""
        return [run for run in self.runs() if run.owner == owner]

    def training_of(self, owner: str) -> LiveRun | None:
        """The owner's run still training, if any."""
        return next((run for run in self.runs_of(owner) if run.view().alive), None)

    def running(self) -> int:
        with self._lock:
            return sum(run.view().alive for run in self._runs.values())


RUNS = LiveRegistry()
