"""The mask × position encoding × "apply as" toggles, every combination, on the bundled models (assets/models): each
runs the mask and encoding asked for, said in one note, and none ends without charts (issue 14 §2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.model import registry
from core.model.recording import Recording
from core.model.registry import quality
from pages.ui.store import Setting, get_recording
from pages.ui.toggles import MASK_CHOICES, ablation_encodings, chosen_setting, trained_encodings

ROOT = Path(__file__).resolve().parent.parent
TEXT_PAGE = str(ROOT / "pages" / "text_explorer.py")
IMAGE_PAGE = str(ROOT / "pages" / "image_lab.py")
CARDS = registry.list_cards()
TEXT_CARDS = [card for card in CARDS if card.task in registry.TEXT_TASKS]
TEXT = "the keys to the old cabinet are on the table ."
APPLY = ("ablation", "trained model")


@pytest.fixture(autouse=True)
def bundled_models(monkeypatch):
    monkeypatch.delenv("ATTENTION_LAB_MODELS_DIR", raising=False)  # the real models: lm-relative among them


def choices(card, apply: str) -> list[tuple[str | None, str | None]]:
    """Every (mask, encoding) the toggles offer on `card` (None: the model's own)."""
    encodings = ablation_encodings(card) if apply == "ablation" else trained_encodings(TEXT_CARDS, card)
    return [(mask, pe) for mask in (None, *MASK_CHOICES) for pe in (None, *encodings[1:])]


@pytest.mark.parametrize("card", TEXT_CARDS, ids=lambda card: card.name)
@pytest.mark.parametrize("apply", APPLY)
def test_every_choice_runs_the_asked_mask_and_encoding(card, apply):
    for mask, pe in choices(card, apply):
        setting, note = chosen_setting(TEXT_CARDS, card, mask, pe, 3, 2, apply == "trained model")
        recording = get_recording(setting, TEXT)
        assert isinstance(recording, Recording), (card.name, apply, mask, pe, recording)
        if pe is not None:
            assert recording.meta["pe"] == pe
        if mask is not None:
            assert recording.meta["mask"].split("(")[0] == mask
        if setting.model != card.name:  # another model: the note names it, with its held-out figures
            shown = next(c for c in TEXT_CARDS if c.name == setting.model)
            assert f"**{setting.model}** (held-out: {quality(shown)})" in note
        elif apply == "trained model" and note is None:  # no note: nothing was changed
            assert (recording.meta["pe"], recording.meta["mask"]) == (card.config.pos_encoding, card.config.mask)


def test_trained_encoding_with_an_untrained_mask_is_that_model_ablated():
    """The reported case: trained model, relative, then mask window: lm-relative with the window as an ablation."""
    lm_rope = next(card for card in TEXT_CARDS if card.name == "lm-rope")
    setting, note = chosen_setting(TEXT_CARDS, lm_rope, "window", "relative", 3, 2, trained=True)
    assert setting == Setting("lm-relative", "window", 3, 2, None)
    assert note.startswith("Showing **lm-relative**") and "mask window as an ablation" in note


def page_notes(at: AppTest) -> list[str]:
    return [info.value for info in at.info if info.value.startswith(("Showing", "No bundled model"))]


def assert_charts(at: AppTest, where) -> None:
    assert not at.exception, (where, [e.value for e in at.exception])
    assert not at.error, (where, [e.value for e in at.error])
    assert len(at.get("plotly_chart")) + len(at.get("bidi_component")) > 0, (where, "no chart")


@pytest.fixture(scope="module")
def explorer():
    """One text explorer for the module: the combinations follow each other as a class would click them."""
    return AppTest.from_file(TEXT_PAGE, default_timeout=60).run()


@pytest.mark.parametrize("model", ["lm-rope", "mlm-learned", "sort"])
@pytest.mark.parametrize("apply", APPLY)
@pytest.mark.parametrize("mask", ["own", *MASK_CHOICES])
def test_text_explorer_shows_charts_for_every_combination(explorer, model, apply, mask):
    at = explorer
    at.selectbox(key="model").select(model).run()
    at.radio(key="apply").set_value(apply).run()
    at.selectbox(key="pe").select("own").run()
    at.selectbox(key="mask").select(mask).run()
    assert_charts(at, (model, apply, mask))
    for index in range(len(at.selectbox(key="pe").options)):
        at.selectbox(key="pe").select_index(index).run()
        pe = at.selectbox(key="pe").value
        where = (model, apply, mask, pe)
        assert_charts(at, where)
        assert len(page_notes(at)) <= 1, (where, page_notes(at))  # one line, never two that disagree
        running = next(c.value for c in at.caption if c.value.startswith("Running:"))
        if pe != "own":
            assert f"encoding {pe}" in running, (where, running)
        if mask != "own":
            assert f"· mask {mask}" in running, (where, running)
    at.selectbox(key="pe").set_value("own").run()
    at.radio(key="apply").set_value("ablation" if apply == "trained model" else "trained model").run()
    assert_charts(at, (model, mask, "apply switched back"))


@pytest.mark.parametrize("apply", APPLY)
def test_image_lab_shows_charts_for_every_encoding(apply):
    at = AppTest.from_file(IMAGE_PAGE, default_timeout=60).run()
    at.radio(key="apply").set_value(apply).run()
    for index in range(len(at.selectbox(key="pe").options)):
        pe = at.selectbox(key="pe").select_index(index).run().selectbox(key="pe").value
        assert not at.exception and not at.error, (apply, pe, [e.value for e in at.exception or at.error])
        assert at.get("plotly_chart"), (apply, pe)


def test_recordings_are_computed_in_the_recorder_thread(monkeypatch):
    """pages.ui.store.recorder: every session's recorded passes run in its one thread (its memory faulted in up
    front), with the numbers record_text gives anywhere."""
    import threading

    import pages.ui.store as store

    real, threads = store.record_text, []

    def record_text(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "record_text", record_text)
    text = "the recorder thread reads this sentence ."
    recording = get_recording(Setting("lm-rope"), text)
    assert len(threads) == 1 and threads[0].startswith("recorder")  # the main worker or the cheap passes' one
    # its prefault, freed at the top of whichever malloc arena the thread was given, stays below the threshold at
    # which glibc gives a heap's free top back (the main arena gave it back at 256 MiB)
    from core.serving.allocator import TOP_PAD, TRIM_THRESHOLD
    assert store.RESULTS_MB * 2**20 + TOP_PAD < TRIM_THRESHOLD
    model, card = registry.load_model("lm-rope")
    here = real(model, text, card=card)
    for layer in range(recording.n_layers):
        np.testing.assert_array_equal(recording.pattern(layer), here.pattern(layer))


def browser_label(box, held: str) -> str:
    """The option a browser shows in a selectbox: a selectbox's value travels as its label, and Streamlit sends it
    (set_value) only when it changed; otherwise the browser keeps the label it held."""
    return box.proto.raw_value if box.proto.set_value else held


@pytest.mark.parametrize("new_model", ["mlm-learned", "lm-alibi"])
def test_toggles_name_the_new_models_own_mask_and_encoding(new_model):
    """The reported case: lm-rope, then mlm-learned (or lm-alibi) in the sidebar: the Mask and Position encoding
    boxes said "model's own (causal)" and "model's own (rope)" while the page ran the new model's own."""
    at = AppTest.from_file(TEXT_PAGE, default_timeout=60).run()
    at.selectbox(key="model").select("lm-rope").run()
    held = {key: at.selectbox(key=key).options[at.selectbox(key=key).index] for key in ("mask", "pe")}
    at.selectbox(key="model").select(new_model).run()
    assert_charts(at, new_model)
    cfg = next(card for card in TEXT_CARDS if card.name == new_model).config
    shown = {key: browser_label(at.selectbox(key=key), held[key]) for key in ("mask", "pe")}
    assert shown == {"mask": f"model's own ({cfg.mask})", "pe": f"model's own ({cfg.pos_encoding})"}
    running = next(c.value for c in at.caption if c.value.startswith("Running:"))
    assert f"mask {cfg.mask} (own)" in running and f"encoding {cfg.pos_encoding} (own)" in running, running
