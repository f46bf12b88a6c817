"""A least-recently-used store bounded by the bytes its values hold, shared by threads without copying.

Recordings are large (53 MB at 512 tokens on lm-rope-long) and read many times: a cache that pickles each value
on the way in and copies it on the way out (Streamlit's st.cache_data) spent more time doing that than the
forward pass took. This store keeps the objects themselves; whoever reads a value must not change it
(Recording hands out read-only arrays for that reason).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


def size_of(value: Any) -> int:
    """About how many bytes `value` holds: what has an `nbytes` (arrays, tensors, a Recording) by its data,
    containers by their items."""
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    if isinstance(value, (tuple, list, set, frozenset)):
        return sys.getsizeof(value) + sum(size_of(item) for item in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(size_of(k) + size_of(v) for k, v in value.items())
    return sys.getsizeof(value)


class ByteLRU:
    """Values by key, the least recently used dropped first once they and their keys hold more than `max_bytes`
    together (a key counts too: one that holds a long text is as heavy as its value; pages/ui/store.py keys by a
    hash for that reason).

    A value larger than the whole budget is returned but not kept. Thread-safe: the lock guards the
    bookkeeping only, so two threads asking for one missing key may both compute it (the last one is kept)."""

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int, float]] = OrderedDict()  # value, size, last use
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """The bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value stored under `key`, computing and storing it first when it is missing."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                value, size, _ = self._items[key]
                self._items[key] = (value, size, time.monotonic())
                return value
        value = compute()
        self._put(key, value, size_of(key) + size_of(value))
        return value

    def _put(self, key: Hashable, value: Any, size: int) -> None:
        with self._lock:
            if key in self._items:
                self._bytes -= self._items.pop(key)[1]
            if size > self.max_bytes:
                return
            self._items[key] = (value, size, time.monotonic())
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._bytes -= self._items.popitem(last=False)[1][1]

    def drop_idle(self, seconds: float, now: float | None = None) -> int:
        """Drop the values no one has asked for in the last `seconds` (time.monotonic()); the bytes dropped. A
        server that kept a spike's recordings until newer ones pushed them out held 180 MB more than before the
        spike a minute after it (issue 36)."""
        now = time.monotonic() if now is None else now
        dropped = 0
        with self._lock:
            while self._items and now - next(iter(self._items.values()))[2] > seconds:
                dropped += self._items.popitem(last=False)[1][1]  # least recently used first: the idlest
            self._bytes -= dropped
        return dropped
