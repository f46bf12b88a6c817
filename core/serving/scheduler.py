"""The one thread that runs every session's recorded forward passes, shared fairly (issue 36, finding 3).

A first-in-first-out queue let 4 sessions sending distinct 1000-token texts to lm-rope-long (7 s a pass on a busy
machine) move every other student's p95 from 0.45 s to 6.1 s: each of their passes waited behind all of theirs. Here

- a session has at most one pass waiting: a newer one replaces it (the page that asked for the older one has been
  rerun already), and the replaced one's caller gets Superseded;
- the waiting pass that costs least runs next (cost: what the caller estimates, layers × tokens²), so a class's
  short sentences pass an expensive text instead of queueing behind it; a pass that has waited AGING_SECONDS runs
  before any newer one, so an expensive one is never starved;
- a second worker takes only cheap passes (up to CHEAP_COST: a 4-layer model on 256 tokens), so a short sentence
  never waits for a long text's pass under way (7 s at 1000 tokens on lm-rope-long, on a busy machine);
- expensive passes together get at most half of the time (EXPENSIVE_SHARE): after one that took d seconds the next
  waits d more. A long text's pass is not the whole of its cost: its page then draws charts of a million cells, in
  the server's one interpreter, which every other session waits on; 4 sessions asking without pause had 2.4 such
  pages drawn a second and every other student's toggles slowed eightfold (issue 36);
(After a spike of long texts, core/serving/allocator.py's MemorySweeper gives the freed memory back.)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

AGING_SECONDS = 10.0  # a pass waiting this long goes before every pass that came after it
CHEAP_COST = 4 * 256 ** 2  # the most a pass of the cheap lane may cost (layers x tokens²)
EXPENSIVE_SHARE = 0.5  # the most of the time that passes costing more than CHEAP_COST may take, together


class Superseded(RuntimeError):
    """The session asked for another pass before this one started: its page no longer wants this one."""

    def __init__(self) -> None:
        super().__init__("this request was replaced by a newer one of the same page")


@dataclass(order=True)
class _Job:
    cost: float
    seq: int
    session: str = field(compare=False)
    work: Callable[[], Any] = field(compare=False)
    future: Future = field(compare=False)
    queued: float = field(compare=False)


class FairScheduler:
    """Worker threads, one per lane (`lanes`: the most a job of each may cost; the first takes any); jobs by
    session, the cheapest waiting one a lane may take next (see the module docstring)."""

    def __init__(self, name: str = "recorder", aging_seconds: float = AGING_SECONDS,
                 lanes: tuple[float, ...] = (float("inf"), CHEAP_COST), expensive_share: float = EXPENSIVE_SHARE):
        self.aging_seconds, self.expensive_share = aging_seconds, expensive_share
        self._rest_until = 0.0  # no expensive pass starts before this (time.monotonic())
        self._waiting: dict[str, _Job] = {}  # session -> its one waiting job
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._running: dict[int, str] = {}  # lane -> the session whose job it runs
        self._threads = [threading.Thread(target=self._serve, args=(lane, most), daemon=True,
                                          name=name if lane == 0 else f"{name}-{lane}")
                         for lane, most in enumerate(lanes)]
        for thread in self._threads:
            thread.start()

    def submit(self, session: str, cost: float, work: Callable[[], Any]) -> Future:
        """Run `work` for `session` when its turn comes; a job of this session still waiting is superseded."""
        future: Future = Future()
        job = _Job(float(cost), next(self._seq), session, work, future, time.monotonic())
        with self._ready:
            replaced = self._waiting.pop(session, None)
            self._waiting[session] = job
            self._ready.notify_all()
        if replaced is not None and replaced.future.set_running_or_notify_cancel():
            replaced.future.set_exception(Superseded())
        return future

    def waiting(self) -> int:
        with self._ready:
            return len(self._waiting)

    def runs_for(self, session: str) -> bool:
        """Whether a job of `session` is running now."""
        with self._ready:
            return session in self._running.values()

    def _next(self, most: float) -> _Job | None:
        """Under the lock: of the jobs costing at most `most` (an expensive one only once the expensive passes have
        rested), the oldest past AGING_SECONDS, else the cheapest (then the oldest); None when there is none."""
        now = time.monotonic()
        eligible = [job for job in self._waiting.values()
                    if job.cost <= most and (job.cost <= CHEAP_COST or now >= self._rest_until)]
        if not eligible:
            return None
        aged = [job for job in eligible if now - job.queued >= self.aging_seconds]
        job = min(aged, key=lambda j: j.seq) if aged else min(eligible)
        del self._waiting[job.session]
        return job

    def _serve(self, lane: int, most: float) -> None:
        while True:
            with self._ready:
                while (job := self._next(most)) is None:
                    # a job may be waiting for the expensive passes' rest to end: look again then
                    self._ready.wait(max(0.01, self._rest_until - time.monotonic()) if self._waiting else None)
                self._running[lane] = job.session
            started = time.monotonic()
            if job.future.set_running_or_notify_cancel():
                try:
                    job.future.set_result(job.work())
                except BaseException as error:  # noqa: BLE001 - handed to the caller, who asked for this job
                    job.future.set_exception(error)
            with self._ready:
                if job.cost > CHEAP_COST:
                    took = time.monotonic() - started
                    self._rest_until = time.monotonic() + took * (1 / self.expensive_share - 1)
                del self._running[lane]
                self._ready.notify_all()
