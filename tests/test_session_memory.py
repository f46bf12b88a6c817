"""A session holds no recording between its runs (issue 36): Streamlit keeps a fragment's arguments for as long as
the session lives, and two minutes after its browser has gone, so the explorer's fragments, given the Recording
itself, kept each session's last one alive (156 MB for a 990-word text on lm-rope-long). Only the store keeps
recordings, within its budget."""

from __future__ import annotations

import gc
import time

import pytest
from conftest import PAGES, ok

from core.model.recording import Recording
from pages.ui import store

TEXT = "the cat sees the dog"


def live_recordings() -> list[Recording]:
    """The recordings of TEXT still alive (other tests' fixtures may hold recordings of their own)."""
    gc.collect()
    return [obj for obj in gc.get_objects() if isinstance(obj, Recording) and obj.meta.get("text") == TEXT]


def recordings_left_after(seconds: float = 10.0) -> list[Recording]:
    """live_recordings(), once none is left or `seconds` have passed: the store's recorder thread drops its last
    job (whose future holds the result) only when it looks for the next one, a moment after the page has it."""
    deadline = time.monotonic() + seconds
    while (live := live_recordings()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return live


@pytest.mark.parametrize("view", ["Attention pattern", "One score, step by step", "Head view", "Rollout"])
def test_the_explorers_fragments_keep_no_recording_alive(app, view):
    at = app(str(PAGES / "text_explorer.py"), text=TEXT, view=view, compare="true", mask="none")
    ok(at)
    assert live_recordings(), "the store keeps what the run recorded"
    store._results.clear()  # the store lets go of every recording
    assert recordings_left_after() == []  # the session's fragments only know what to ask the store for
    at.radio(key="layer").set_value(1).run()  # a fragment rerun asks the store again: recomputed
    ok(at)
    assert live_recordings()


def test_a_handle_hands_the_same_recording_while_it_lives_then_asks_the_store(monkeypatch):
    setting = store.Setting("lm-rope")
    asked = []
    monkeypatch.setattr(store, "get_recording", lambda s, text: asked.append((s, text)) or "the model is gone")
    recording = Recording.__new__(Recording)
    handle = store.Recorded(setting, TEXT, recording)
    assert handle.get() is recording and asked == []
    del recording
    gc.collect()
    with pytest.raises(LookupError, match="the model is gone"):  # on a page: the message, and the run ends
        handle.get()
    assert asked == [(setting, TEXT)]
