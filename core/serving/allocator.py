"""Keep freed memory in the process, so that a forward pass does not fault every page of its tensors in afresh.

glibc's malloc hands blocks of 128 KiB and more straight to the kernel (mmap) and gives them back when freed, and it
returns the free top of its heap as soon as 128 KiB of it lie unused. A recorded forward pass keeps every
intermediate (at N = 1024, 4 layers: about 140 MB), the recording is dropped a moment later, and the next pass
then touches all of those pages anew: on this app's servers (virtual machines, where a page fault costs
microseconds) that was half the time of the recorded forward at N = 1024 and a third at N = 256, more than the
attention itself (issue 18, measured in tests/benchmarks/bench_peers.py).

Raising the two thresholds keeps such blocks in the heap and reuses them: what a server holds is then its peak,
which it needed anyway, and at most TRIM_THRESHOLD more per malloc arena.

That reuses what a pass frees. A server that keeps its recordings (pages/ui/store.py, up to its store's budget) frees
nothing until the store is full, so each new recording faulted its pages in: 11 000 faults, 150 ms of a 200 ms
pass at 512 tokens in the app, against 40 ms without them (issue 18). `prefault` touches the store's budget once,
up front, in the one thread that records, and frees it: that thread's arena then hands out pages already in place.
For as long as glibc keeps them: a thread arena can be shared, and glibc unmaps a heap of it that falls empty when
any of its threads frees into it (Python's threads do as they exit). Under the load test's 30 sessions most of the
256 MiB went back within 10 s; in the browser benchmark a 512-token pass faulted 0–5 000 pages (once 14 000).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
import time

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # blocks up to 32 MiB come from the heap: a [4, 1024, 1024] float32 pattern is 16 MiB
TRIM_THRESHOLD = 512 << 20  # the heap's free top is given back beyond 512 MiB: more than prefault's 256 MiB
TOP_PAD = 64 << 20  # grown 64 MiB at a time (a thread arena's whole heap), and as much kept when a heap is trimmed
PREFAULT_BLOCK = 16 << 20  # prefault's blocks: under MMAP_THRESHOLD, so they come from the arena's heap


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (see the module's docstring); False where the C library is not glibc (macOS,
    Windows, musl), which is left as it is."""
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(parameter, value) == 1 for parameter, value in (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))


def prefault(nbytes: int) -> bool:
    """Allocate `nbytes` from the calling thread's malloc arena, write every page, free it all: the arena keeps those
    pages (keep_freed_memory's thresholds), so what this thread allocates next, up to `nbytes`, does not fault them
    in one by one. False, doing nothing, where keep_freed_memory cannot set glibc's thresholds."""
    if not keep_freed_memory():
        return False
    libc = _libc()
    libc.malloc.argtypes, libc.malloc.restype = (ctypes.c_size_t,), ctypes.c_void_p
    libc.free.argtypes, libc.free.restype = (ctypes.c_void_p,), None
    blocks = [libc.malloc(PREFAULT_BLOCK) for _ in range(-(-nbytes // PREFAULT_BLOCK))]
    try:
        for block in blocks:
            if block:
                ctypes.memset(block, 0, PREFAULT_BLOCK)
    finally:
        for block in blocks:
            libc.free(block)  # free(NULL) does nothing
    return all(blocks)


def trim() -> bool:
    """Give the free memory of every malloc arena back to the system (glibc's malloc_trim(0)): after a spike of long
    recordings a server returns to its baseline (issue 36: it stayed at 2.1 GB after an attack, with
    keep_freed_memory's thresholds keeping what the spike freed). False where the C library has no malloc_trim."""
    try:
        malloc_trim = _libc().malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes, malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    malloc_trim(0)
    return True


def resident_bytes() -> int:
    """The process's resident memory now (Linux's /proc/self/statm; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


SWEEP_SECONDS = 5.0  # how often the sweeper looks
SWEEP_MARGIN = 128 << 20  # resident memory this far above what the last sweep left starts a sweep
LATE_SWEEP_SECONDS = 30.0  # and this often while the process holds SWEEP_MARGIN more than when the sweeper started


class MemorySweeper:
    """A thread that, every `every` seconds, where the process holds `margin` bytes more than its last sweep left,
    collects garbage (the server runs no collection after each script run: pages' reruns leave reference cycles
    behind, an interrupted run's traceback holding its recording) and trims every malloc arena (keep_freed_memory's
    thresholds let each script thread's arena keep up to TRIM_THRESHOLD freed). Memory freed later (a closed
    session's, a cache entry dropped) does not raise the resident size: every `late` seconds, while it is `margin`
    above what it was when the sweeper started, a sweep runs anyway. Under 4 sessions sending long texts a server
    grew to 2.4 GB and stayed at 2.1 GB once they had gone (issue 36); what it sweeps is memory no one holds.
    `sweep` is called with no argument (tests pass a counting one)."""

    def __init__(self, every: float = SWEEP_SECONDS, margin: int = SWEEP_MARGIN, sweep=None,
                 late: float = LATE_SWEEP_SECONDS):
        self.every, self.margin, self.late = every, margin, late
        self._sweep = sweep or self.collect_and_trim
        self.floor = self.start = resident_bytes()
        self.sweeps = 0
        self._thread = threading.Thread(target=self._run, name="memory-sweeper", daemon=True)
        self._thread.start()

    @staticmethod
    def collect_and_trim() -> None:
        gc.collect()
        trim()

    def _run(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(self.every)
            now = resident_bytes()
            grown = now > self.floor + self.margin
            if grown or (now > self.start + self.margin and time.monotonic() - last >= self.late):
                self._sweep()
                self.sweeps += 1
                self.floor, last = resident_bytes(), time.monotonic()
