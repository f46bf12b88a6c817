"""The recorder shared fairly between sessions (issue 36, finding 3; core/serving/scheduler.py): one waiting pass
per session, the cheapest next, none starved, memory given back after a long text's pass."""

from __future__ import annotations

import threading

import pytest

from core.serving import allocator
from core.serving.scheduler import FairScheduler, Superseded


def blocked(scheduler: FairScheduler) -> threading.Event:
    """Hold the worker in a job until the returned event is set (so that the next jobs all wait)."""
    started, release = threading.Event(), threading.Event()
    scheduler.submit("holder", 0, lambda: (started.set(), release.wait(30)))
    assert started.wait(30)
    return release


def test_the_cheapest_waiting_pass_runs_next_whoever_asked_first():
    scheduler = FairScheduler(aging_seconds=60, lanes=(float("inf"),))
    release = blocked(scheduler)
    order = []
    futures = [scheduler.submit(f"attacker-{i}", 1000 ** 2, lambda i=i: order.append(f"long {i}")) for i in range(4)]
    futures.append(scheduler.submit("student", 16 ** 2, lambda: order.append("short")))
    release.set()
    for future in futures:
        future.result(timeout=30)
    assert order[0] == "short" and sorted(order[1:]) == [f"long {i}" for i in range(4)]


def test_a_session_has_one_waiting_pass_a_newer_one_replaces_it():
    scheduler = FairScheduler(lanes=(float("inf"),))
    release = blocked(scheduler)
    older = scheduler.submit("s", 1, lambda: "older")
    newer = scheduler.submit("s", 1, lambda: "newer")
    assert scheduler.waiting() == 1
    with pytest.raises(Superseded):
        older.result(timeout=30)
    release.set()
    assert newer.result(timeout=30) == "newer"


def test_a_pass_that_has_waited_long_enough_goes_before_cheaper_newer_ones():
    scheduler = FairScheduler(aging_seconds=0.0, lanes=(float("inf"),))  # every waiting pass is old: first come, first served
    release = blocked(scheduler)
    order = []
    futures = [scheduler.submit("long", 1e9, lambda: order.append("long")),
               scheduler.submit("short", 1, lambda: order.append("short"))]
    release.set()
    for future in futures:
        future.result(timeout=30)
    assert order == ["long", "short"]


def test_a_short_sentence_never_waits_for_a_long_texts_pass_under_way():
    scheduler = FairScheduler()  # the main worker and the cheap passes' one
    started, release = threading.Event(), threading.Event()
    long = scheduler.submit("attacker", 4 * 1000 ** 2, lambda: (started.set(), release.wait(30)))
    assert started.wait(30)
    assert scheduler.runs_for("attacker") and not scheduler.runs_for("student")
    assert scheduler.submit("student", 4 * 16 ** 2, lambda: "short").result(timeout=30) == "short"
    waiting = scheduler.submit("attacker-2", 4 * 1000 ** 2, lambda: "long 2")
    assert not waiting.done()  # the cheap lane takes no long pass
    release.set()
    long.result(timeout=30)
    assert waiting.result(timeout=30) == "long 2"


def test_expensive_passes_get_at_most_their_share_of_the_time_cheap_ones_never_wait():
    import time

    scheduler = FairScheduler(expensive_share=0.5)
    ends, starts = [], []

    def expensive():
        starts.append(time.monotonic())
        time.sleep(0.3)
        ends.append(time.monotonic())

    first = scheduler.submit("a", 4 * 1000 ** 2, expensive)
    first.result(timeout=30)
    second = scheduler.submit("b", 4 * 1000 ** 2, expensive)
    cheap_done = scheduler.submit("c", 4 * 16 ** 2, time.monotonic).result(timeout=30)
    second.result(timeout=30)
    assert starts[1] - ends[0] >= 0.3 * 0.95  # rested as long as the first took
    assert cheap_done < starts[1]  # a short sentence did not wait for the rest


def test_an_error_reaches_the_caller_and_the_worker_goes_on():
    scheduler = FairScheduler()
    with pytest.raises(ZeroDivisionError):
        scheduler.submit("s", 1, lambda: 1 / 0).result(timeout=30)
    assert scheduler.submit("s", 1, lambda: 42).result(timeout=30) == 42


def test_the_sweeper_sweeps_only_when_memory_has_grown_past_its_margin():
    import numpy as np

    swept = threading.Event()
    sweeper = allocator.MemorySweeper(every=0.05, margin=64 << 20, sweep=swept.set)
    assert not swept.wait(0.5)  # nothing grew
    if allocator.resident_bytes() == 0:
        pytest.skip("no /proc/self/statm here")
    held = np.ones(96 << 20, dtype=np.uint8)  # 96 MB touched: past the margin
    assert swept.wait(30) and sweeper.sweeps >= 1
    del held
    assert allocator.trim() in (True, False)  # glibc: True; elsewhere nothing to do
