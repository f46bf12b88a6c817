"""The training process of a live run (core/training/live/runs.py starts it): it trains a RunSpec with
core/training/train.py's own step (train_steps) and sends, one message at a time, every step's loss, accuracy,
learning rate and gradient norms, at chosen steps a Snapshot of the model on one fixed held-out example (its attention
patterns, TokenNorm statistics and residual norms, from the model's own recording), and the trained weights at the end.

Why a process: a training thread would share the server's interpreter lock with every page, and two of them slowed
the text explorer's toggle about fourfold (tests/benchmarks/load_test.py). A process holds its own lock, uses one
torch thread and runs at a lower priority (TRAINING_NICENESS), so pages stay responsive. Processes come from a fork
server started clean, so they inherit none of the server's threads.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from core.data import algorithmic, grammar
from core.data.images import HELDOUT_SEED as IMAGE_HELDOUT_SEED
from core.data.images import generate_dataset
from core.lessons.analysis import induction_score, mirrored_score, previous_token_attention
from core.lessons.vision import record_image
from core.model.recording import Recording, block_hook
from core.model.run import record_text, tokenizer
from core.model.transformer import Transformer
from core.training.live.spec import RunSpec
from core.training.tasks import ImagePool, TokenPool
from core.training.train import Preset, StepStats, make_pool, train_steps

PROBE_LENGTH = 6  # the snapshot example's input length on the algorithmic tasks
SNAPSHOTS = 40  # about this many snapshots per run, evenly spaced, plus the initial weights
PATTERN_THRESHOLD = 0.5  # a head's pattern score from which the pattern counts as formed
# A training process's niceness: the lowest priority, so the server's pages get the CPU first (at 10, Linux's
# scheduler still gave each run about a tenth of a core that a page was waiting for).
TRAINING_NICENESS = 19
# "normal": runs train at the server's own priority. For a test suite on a machine busy with other work: there a
# SCHED_IDLE run gets no CPU at all (0.1 steps/s beside two busy processes) and every test that trains hits its run's
# time cap (issue 36). A server keeps the default, "idle": pages first.
PRIORITY_VARIABLE = "ATTENTION_LAB_TRAINING_PRIORITY"


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
    """The pattern followed on this task's probe (core.lessons.analysis scores), or None when there is no single one."""
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
    masked: np.ndarray  # [N, N] bool, the cells the mask hides (scores −inf), the same for every head

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
                        np.array([np.linalg.norm(recording[name], axis=-1).mean() for name in streams]), scores,
                        np.isneginf(recording.scores(0)[0]))  # drawn grey and hatched, as on every other page
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
    niceness: int | None  # None where the system cannot say
    idle: bool  # scheduled SCHED_IDLE: run only on CPU time that nothing else wants


def training_gives_way() -> bool:
    """Whether runs train only on the CPU time that pages leave (lower_priority), as they do unless
    ATTENTION_LAB_TRAINING_PRIORITY is "normal"."""
    return os.environ.get(PRIORITY_VARIABLE, "idle") != "normal"


def current_priority() -> Priority:
    """The calling thread's niceness (None where the system cannot say) and whether it is SCHED_IDLE."""
    native = threading.get_native_id()
    try:
        nice: int | None = os.getpriority(os.PRIO_PROCESS, native)
    except (AttributeError, OSError):
        nice = None
    try:
        idle = os.sched_getscheduler(native) == os.SCHED_IDLE
    except (AttributeError, OSError):
        idle = False
    return Priority(nice, idle)


def lower_priority(niceness: int = TRAINING_NICENESS) -> Priority:
    """Make the calling thread nicer and, where Linux allows, SCHED_IDLE (Linux gives each thread its own niceness
    and policy; a training process has one thread that trains, and processes started from a thread inherit both),
    so the server's pages get the CPU first. At niceness 19 alone a page's thread waking up could still wait for a
    training thread's time slice: the toggles' p95 under a class's training was 1.7-1.9x that of a quiet class.
    A SCHED_IDLE thread gives way at once."""
    native = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, native, max(os.getpriority(os.PRIO_PROCESS, native), niceness))
    except (AttributeError, OSError):
        pass  # current_priority then reads the niceness left as it was
    try:
        os.sched_setscheduler(native, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    return current_priority()


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


def train_run(spec: RunSpec, stop, watched, idle_seconds: float, send: Callable[[Message], None],
              max_seconds: float = math.inf, gives_way: bool = True) -> None:
    """Train the run described by `spec` in this process, sending every step, snapshot and the end to `send`.
    `stop` is set to ask for a stop; `watched.value` is the time.monotonic() at which a page last showed the run
    (CLOCK_MONOTONIC: the same clock in every process); a run stops after `max_seconds` of training whatever its
    steps (the step cap counts model work, not a busy server's slower steps); `gives_way`: at lower_priority's
    priority first. A failure is sent as the run's end, never raised."""
    started, model = time.perf_counter(), None
    try:
        torch.set_num_threads(1)
        send(Started(torch.get_num_threads(), lower_priority() if gives_way else current_priority()))
        preset = spec.preset()
        pool = shared_pool(spec.task, preset.pool_size)
        torch.manual_seed(spec.seed)
        model = Transformer(preset.config)
        send(Snapped(*take_snapshot(model, spec.task, 0, time.perf_counter() - started)))
        status, message = _train_loop(model, preset, pool, started, stop, watched, (idle_seconds, max_seconds), send)
    except Exception as error:  # a run's failure is shown on its page, never raised into the server
        status, message = "failed", f"{type(error).__name__}: {error}"
    # numpy arrays, not tensors: torch would share a tensor's memory with the receiver, gone once this process ends
    weights = None if model is None else {name: tensor.detach().numpy().copy()
                                          for name, tensor in model.state_dict().items()}
    send(Ended(status, message, time.perf_counter() - started, weights))


def _train_loop(model: Transformer, preset: Preset, pool, started: float, stop, watched,
                limits: tuple[float, float], send: Callable[[Message], None]) -> tuple[str, str]:
    idle_seconds, max_seconds = limits
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
            late = time.perf_counter() - started > max_seconds
            if done in when or stop.is_set() or idle or late:
                send(Snapped(*take_snapshot(model, preset.task, done, time.perf_counter() - started)))
                model.train()
            if done == preset.steps:
                return "finished", ""
            if stop.is_set():
                return "stopped", ""
            if idle:
                return "stopped", (f"stopped after step {done}: no page had shown it for {idle_seconds:g} s. It is "
                                   "kept: save it, or start a new run.")
            if late:
                return "stopped", (f"stopped after step {done}: a run trains for at most {max_seconds / 60:g} "
                                   "minutes on this server. It is kept: save it, or start a smaller run.")
    finally:
        steps.close()
    return "finished", ""


def train_in_child(spec: RunSpec, stop, watched, idle_seconds: float, outbox, max_seconds: float,
                   gives_way: bool) -> None:
    """The training process's entry point: train_run, sending into the queue `outbox`."""
    train_run(spec, stop, watched, idle_seconds, outbox.put, max_seconds, gives_way)


@lru_cache(maxsize=1)
def process_context():
    """Where training processes come from: a fork server, started clean (no server threads to inherit) with this
    module imported once, so a run starts in a fraction of a second."""
    context = multiprocessing.get_context("forkserver")
    # imported once by the fork server, not again by every run: this module, and torch._dynamo, which an
    # optimizer's first construction imports (3-4 s)
    context.set_forkserver_preload(["core.training.live.worker", "torch._dynamo"])
    return context


_main_lock = threading.Lock()


@contextmanager
def main_hidden():
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

    if training_gives_way():
        lower_priority()
    process_context()
    with main_hidden():
        forkserver.ensure_running()


