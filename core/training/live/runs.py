"""Live runs and the server's registry of them: who owns a run, how many train at once, and saved runs' quotas.

A LiveRun trains one model, described by a RunSpec (core/training/live/spec.py), in a child process
(core/training/live/worker.py), and keeps what a class looks at; a thread of the server reads the process's
messages. A page reads a consistent copy with `view()`, asks it to `stop()` (the step under way finishes, then a last
snapshot is taken) and, once it has ended, to `save()` it into the user directory as a model every page can open
(core/model/registry.py).

The LiveRegistry (one per process: RUNS) bounds how many runs train at once and gives each owner (a browser, all
its tabs) one run at a time; it outlives page reruns and page switches because it lives in this module. Only a run's
owner may stop or save it. A run that its owner's page has not shown for IDLE_SECONDS stops by itself (another
browser watching a ?run= link keeps nothing alive), and so does one that has trained MAX_SECONDS. Saved runs have quotas
per browser and per server. Nothing here imports Streamlit.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import shutil
import threading
import time
import uuid
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from core.model import registry
from core.model.checkpoint import ModelCard, save_checkpoint
from core.model.transformer import Transformer
from core.training.live.spec import RunSpec
from core.training.live.worker import (HISTORY_FIELDS, Ended, Message, Priority, RunView, Snapped, Snapshot, Started,
                                       Stepped, main_hidden, process_context, train_in_child, training_gives_way)
from core.training.train import StepStats

MAX_RUNNING = int(os.environ.get("ATTENTION_LAB_MAX_RUNS", "2"))  # runs training at once in one server
MAX_KEPT = 12  # runs kept in memory (finished ones dropped oldest first)
# A run no page has watched for this long stops (it is kept: saveable). More than 60 s: after 5 minutes Chrome fires a
# hidden tab's timers (the page's 2 s poll) once a minute, and a tab in the background still watches its run.
IDLE_SECONDS = 90.0
# A run trains for at most this long, whatever its steps: MAX_WORK caps the model's work, but a busy server's steps
# are slower (the largest run the cap allows trained 14 min alone, 26-38 min beside 30 students; issue 36).
MAX_SECONDS = float(os.environ.get("ATTENTION_LAB_MAX_RUN_SECONDS", "360"))
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
        super().__init__(f"only the browser that started this run can {action} it" +
                         ("; you are watching it read-only" if action in ("stop", "save") else ""))


class QuotaError(RuntimeError):
    """Saving would pass a saved-run quota (per browser or per server)."""



# ---------------------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------------------

class LiveRun:
    """One model trained in its own process for its `owner` (a browser): a process, not a thread of the server, so
    that training holds neither the server's interpreter lock nor, being nicer, the CPU that pages need. Start it
    with `start()`; read it with `view()`; pages that show it call `watch()`, and a run no page has watched for
    `idle_seconds` stops by itself (kept, saveable). Only its owner may `stop()` or `save()` it: anyone else gets
    NotOwnerError."""

    def __init__(self, run_id: str, spec: RunSpec, owner: str, idle_seconds: float = IDLE_SECONDS,
                 max_seconds: float = MAX_SECONDS):
        self.run_id, self.spec, self.owner = run_id, spec, owner
        self.idle_seconds, self.max_seconds = idle_seconds, max_seconds
        self.created = time.monotonic()
        processes = process_context()
        self._watched = processes.Value("d", self.created, lock=False)  # a float: one writer at a time suffices
        self._stop = processes.Event()
        self._queue = processes.Queue()
        self._process = processes.Process(target=train_in_child, name=f"live-run-{run_id}", daemon=True,
                                          args=(spec, self._stop, self._watched, idle_seconds, self._queue,
                                                max_seconds, training_gives_way()))
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
        with main_hidden():
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

    def watch(self, owner: str | None) -> None:
        """A page shows the run now: it keeps training (see idle_seconds) when that page is its owner's; another
        browser's view of a shared link keeps nothing alive."""
        if self.owned_by(owner):
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


SHARE_ALL_ENV = "ATTENTION_LAB_SHARE_RUNS"  # "1": every browser's menu lists every saved run (one user's own app)


def saved_by(card: ModelCard, owner: str) -> bool:
    """Whether `owner`'s browser saved this run."""
    return card.training.get("saved_by") == owner_tag(owner)


def visible_runs(cards: Iterable[ModelCard], owner: str) -> list[ModelCard]:
    """The saved runs a browser's model menus list: its own, and those the teacher shares (registry.set_shared);
    every one where $ATTENTION_LAB_SHARE_RUNS=1. A student's run names are not every other student's menu (a
    script that saved 300 runs had grown every menu to 313 entries of its chosen names: issue 36, finding 6)."""
    every = os.environ.get(SHARE_ALL_ENV) == "1"
    return [card for card in cards if every or card.training.get("shared") or saved_by(card, owner)]


def delete_saved_run(name: str, owner: str | None, teacher: bool = False) -> None:
    """Remove a saved run: its owner's browser may, and the teacher (`teacher`: the command line on the server,
    `python -m core.training.live.runs --delete NAME`). The folder is renamed away first (it vanishes from every
    menu at once), then removed. ValueError for a run that is not saved here, NotOwnerError for another's run."""
    card = next((card for card in registry.user_cards() if card.name == name), None)
    if card is None:
        raise ValueError(f"there is no saved run called {name!r}")
    if not teacher and (owner is None or not saved_by(card, owner)):
        raise NotOwnerError("delete")
    root = registry.user_dir()
    doomed = root / f".{name}.{uuid.uuid4().hex[:8]}{registry.TEMPORARY_SUFFIX}"
    try:
        (root / name).rename(doomed)
    except OSError as error:
        raise ValueError(f"could not delete {name!r}: {error.strerror or type(error).__name__}") from None
    shutil.rmtree(doomed, ignore_errors=True)
    if card.training.get("shared"):
        registry.set_shared(name, False)
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
    readable; a run its owner's page has not shown for `idle_seconds`, or one that has trained `max_seconds`,
    stops."""

    max_running: int = MAX_RUNNING
    max_kept: int = MAX_KEPT
    idle_seconds: float = IDLE_SECONDS
    max_seconds: float = MAX_SECONDS
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
            run = LiveRun(uuid.uuid4().hex[:12], spec, owner, self.idle_seconds, self.max_seconds)
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


def main(argv: list[str] | None = None) -> int:
    """The teacher's command line on the server: list the saved runs, share one with every browser or stop sharing
    it, delete one."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.training.live.runs", description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="every saved run, its size, and whether it is shared")
    action.add_argument("--share", metavar="NAME", help="list this run in every browser's model menu")
    action.add_argument("--unshare", metavar="NAME", help="list it only in the menus of the browser that saved it")
    action.add_argument("--delete", metavar="NAME", help="remove this saved run")
    args = parser.parse_args(argv)
    names = {card.name for card in registry.user_cards()}
    name = args.share or args.unshare or args.delete
    if name is not None and name not in names:
        parser.error(f"there is no saved run called {name!r}")
    if args.list:
        for card in registry.user_cards():
            shared = "shared" if card.training.get("shared") else "own"
            print(f"{card.name}\t{registry.run_bytes(card.name) / 2**20:.1f} MB\t{shared}")
    elif args.delete:
        delete_saved_run(args.delete, None, teacher=True)
    else:
        registry.set_shared(name, bool(args.share))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
