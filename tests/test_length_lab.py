"""Past the training length (core/lessons/length_lab.py): texts longer than any seen in training, loss at each position."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import tiny_model
from torch.nn import functional as F

from core.lessons.length_lab import (LengthRun, least_rise, long_pattern, long_texts, loss_by_position, measured_rise,
                                     trained_length, with_context)
from core.lessons.predictions import Grade
from core.tokenizers.words import TextTokenizer


def test_long_texts_are_held_out_documents_packed_to_the_exact_length():
    tokenizer = TextTokenizer()
    ids = long_texts(150, 3)
    assert ids.shape == (3, 150) and (ids[:, 0] == tokenizer.bos_id).all()
    assert (ids == tokenizer.token_to_id(".")).sum(1).min() >= 3  # several sentences one after another


def test_the_training_length_is_the_longest_training_document():
    assert 40 <= trained_length() <= 80 and trained_length(pack=512) == 512


def test_a_longer_context_keeps_the_weights_and_the_numbers():
    model = tiny_model(pos_encoding="rope", max_len=32)
    longer = with_context(model, 96)
    assert longer.cfg.max_len == 96 and longer.cfg.replace(max_len=32) == model.cfg
    ids = torch.randint(5, 100, (2, 32))
    torch.testing.assert_close(longer(ids).logits, model(ids).logits, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="table of 32"):
        with_context(tiny_model(pos_encoding="learned", max_len=32), 33)


def test_loss_by_position_is_the_cross_entropy_at_each_position():
    model = tiny_model(pos_encoding="alibi", max_len=16)
    ids = torch.randint(5, 100, (3, 40))
    loss = loss_by_position(model, ids)
    with torch.no_grad():
        logits = with_context(model, 40)(ids).logits
    expected = F.cross_entropy(logits[:, 6], ids[:, 7], reduction="mean")  # position 7, predicted at 6
    assert loss.shape == (39,) and loss[6] == pytest.approx(float(expected), rel=1e-5)


def test_grading_names_the_prediction_and_the_measured_ratios():
    flat = LengthRun("a", "alibi", 4, np.array([1.0, 2.0, 2.0, 2.1, 2.0, 2.1]))
    risen = LengthRun("r", "rope", 4, np.array([1.0, 2.0, 2.0, 3.0, 3.2, 3.4]))  # positions 2 and 3: the baseline
    assert not flat.rose() and risen.rose() and risen.ratio == pytest.approx(3.2 / 2.0)
    assert least_rise([risen, flat]) == "alibi"
    words = measured_rise([risen, flat])
    assert "alibi ×1.03, rope ×1.60" in words and "alibi kept it within 10%" in words and "past position 4" in words
    assert Grade("alibi", least_rise([flat, risen]), words).right
    wrong = Grade("rope", least_rise([flat, risen]), words)
    assert "(no encoding kept it within 10%)" in measured_rise([risen])  # "none" would read as the encoding none
    assert not wrong.right and "the answer here is **alibi**" in wrong.sentence()


def test_the_long_pattern_is_the_recorded_one_at_positions_past_the_context():
    model = tiny_model(pos_encoding="rope", max_len=16)
    ids = torch.randint(5, 100, (40,))
    pattern = long_pattern(model, ids, 1, 1)
    assert pattern.shape == (40, 40) and np.allclose(pattern.sum(-1), 1, atol=1e-5)
    assert (np.triu(pattern, 1) == 0).all()  # causal: no query reads a later key


def test_the_lesson_hides_its_answer_until_reveal_and_grades_this_run(app):
    from conftest import figures, ok, shows
    page = str(Path(__file__).resolve().parent.parent / "pages" / "positions_lab.py")
    at = app(page, timeout=120)
    ok(at)
    assert at.radio(key="predict_extrapolation").options == ["rope"]  # the tiny models: lm-rope; learned is left out
    assert not any(shows(f, "never seen in training") for f in figures(at))
    at.radio(key="predict_extrapolation").set_value("rope").run()
    at.button(key="predict_extrapolation__reveal").click().run()
    ok(at)
    graded = [m.value for m in at.markdown if "You said **rope**" in m.value]
    assert graded and graded[0].endswith("**Right.**") and "rope ×" in graded[0]
    loss_chart = next(f for f in figures(at) if shows(f, "rope (lm-rope)"))
    y = loss_chart["data"][0]["y"]  # a binary array: {"dtype", "bdata"}
    losses = np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
    assert len(losses) == 4 * trained_length() - 1 and np.isfinite(losses).all() and (losses > 0).all()
    assert any(shows(f, "never seen in training") and shows(f, "lm-rope · L0 H0") for f in figures(at))
