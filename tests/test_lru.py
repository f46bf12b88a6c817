"""The byte-bounded store that shares recordings between sessions (core/serving/lru.py), and the read-only arrays that
make sharing safe (core/model/recording.py)."""

import threading

import numpy as np
import pytest
import torch

from core.model.run import record_text
from core.serving.lru import ByteLRU, size_of
from tests.tiny_models import tiny_model


def block(kib: int) -> np.ndarray:
    return np.zeros(kib * 1024, dtype=np.uint8)


def test_size_of_counts_array_and_tensor_data_and_containers():
    assert size_of(np.zeros((10, 10), dtype=np.float32)) == 400
    assert size_of(torch.zeros(10, 10, dtype=torch.float64)) == 800
    assert size_of((np.zeros(100, dtype=np.uint8), np.zeros(50, dtype=np.uint8))) >= 150


def test_a_hit_returns_the_stored_object_itself_and_does_not_recompute():
    store, calls = ByteLRU(1 << 20), []
    first = store.get_or_compute("k", lambda: calls.append(1) or block(1))
    again = store.get_or_compute("k", lambda: calls.append(1) or block(1))
    assert again is first and calls == [1]


def test_least_recently_used_is_dropped_once_the_bytes_exceed_the_budget():
    store = ByteLRU(3 * 1024 + 512)  # room for three 1 KiB blocks
    for key in "abc":
        store.get_or_compute(key, lambda: block(1))
    store.get_or_compute("a", lambda: block(1))  # a is now the most recent
    store.get_or_compute("d", lambda: block(1))  # over budget: b, the least recent, goes
    assert "b" not in store and all(key in store for key in "acd")
    assert store.nbytes <= store.max_bytes and len(store) == 3


def test_a_value_larger_than_the_budget_is_returned_but_not_kept():
    store = ByteLRU(1024)
    store.get_or_compute("small", lambda: block(0))
    big = store.get_or_compute("big", lambda: block(4))
    assert big.nbytes == 4096 and "big" not in store and "small" in store


def test_threads_share_one_store_and_the_byte_count_stays_consistent():
    store = ByteLRU(64 * 1024)

    def work(offset: int) -> None:
        for i in range(200):
            store.get_or_compute((offset + i) % 97, lambda: block(1))

    threads = [threading.Thread(target=work, args=(k * 13,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = sum(size_of(key) + size_of(store.get_or_compute(key, lambda: None)) for key in list(store._items))
    assert store.nbytes == held <= store.max_bytes


def test_recorded_arrays_are_read_only_so_a_shared_recording_cannot_be_changed():
    model = tiny_model()
    recording = record_text(model, "the dog runs .")
    pattern = recording.pattern(0)
    with pytest.raises(ValueError, match="read-only"):
        pattern[0, 0, 0] = 0.5
    assert recording.nbytes == sum(t.element_size() * t.nelement() for t in recording.tensors.values())
    np.testing.assert_allclose(recording.pattern(0).sum(-1), 1.0, atol=1e-6)  # untouched


def test_a_key_counts_in_the_budget_as_its_value_does():
    store = ByteLRU(1 << 20)
    store.get_or_compute("x" * 100_000, lambda: block(0))
    assert store.nbytes >= 100_000  # the key's text, not only the empty value


def test_an_over_long_text_is_refused_before_the_shared_store_sees_it():
    from core.model.registry import DEFAULT_TEXT_MODEL
    from core.model.run import MAX_TEXT_CHARS
    from pages.ui.store import Setting, _results, get_recording

    store = _results()
    before = (store.nbytes, len(store))
    message = get_recording(Setting(DEFAULT_TEXT_MODEL), "x" * (MAX_TEXT_CHARS + 1))
    assert isinstance(message, str) and "shorten" in message
    assert (store.nbytes, len(store)) == before


def test_store_keys_are_fixed_size_hashes_and_an_equal_call_still_hits():
    from pages.ui.store import _results, shared_result

    calls = []

    @shared_result
    def echo(text: str) -> np.ndarray:
        calls.append(text)
        return block(1)

    text = "the cat " * 1000
    first = echo(text)
    assert echo(text) is first and calls == [text] and echo(text + "!") is not first
    assert all(isinstance(key, bytes) and len(key) == 32 for key in _results()._items)



def test_values_no_one_asked_for_lately_are_dropped_the_idlest_first(monkeypatch):
    """Issue 36: a spike's recordings stayed until newer ones pushed them out; the memory sweeper drops idle ones."""
    from types import SimpleNamespace

    from core.serving import lru

    clock = [100.0]
    monkeypatch.setattr(lru, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    store = ByteLRU(1 << 20)
    block = np.ones(1024, dtype=np.uint8)
    for key, when in (("old", 100.0), ("asked again", 110.0), ("new", 120.0)):
        clock[0] = when
        store.get_or_compute(key, lambda: block)
    clock[0] = 125.0
    store.get_or_compute("asked again", lambda: None)  # a hit: used now, so the most recent
    assert store.drop_idle(30, now=129.0) == 0 and len(store) == 3
    assert store.drop_idle(20, now=129.0) == 1024 + size_of("old") and "old" not in store  # idle 29 s; "new" 9 s
    assert store.drop_idle(5, now=129.0) == 1024 + size_of("new") and "new" not in store  # "asked again": 4 s
    assert "asked again" in store
    assert store.nbytes == 1024 + size_of("asked again")
