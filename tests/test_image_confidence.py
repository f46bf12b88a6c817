"""The note that a label is a guess (issue 35): shown when the top probability is low or the model's readout lies
far from every class it learned; absent on the drawing templates."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw
from streamlit.testing.v1 import AppTest

from core.data.images import CLASSES, mask_grid, template_cells
from core.lessons.vision import (
    UNSURE_BELOW,
    confidence_note,
    familiarity,
    readout_vectors,
    record_image,
)
from core.model.checkpoint import load_checkpoint
from core.model.registry import MODELS_DIR, card_path
from core.serving.image_io import load_image

PAGE = str(MODELS_DIR.parent.parent / "pages" / "image_lab.py")


def face_png(seed: int) -> bytes:
    """A face-like picture (hair, skin, eyes, nose, mouth on a coloured wall, camera noise), 256 x 256 PNG."""
    rng = np.random.default_rng(seed)
    picture = Image.new("RGB", (256, 256), tuple(int(c) for c in rng.integers(60, 200, 3)))
    draw = ImageDraw.Draw(picture)
    draw.ellipse((40, 30, 216, 250), fill=(224, 172, 140))
    draw.pieslice((36, 10, 220, 150), 180, 360, fill=(70, 45, 30))
    for x in (95, 160):
        draw.ellipse((x - 14, 110, x + 14, 128), fill=(255, 255, 255))
        draw.ellipse((x - 6, 113, x + 6, 125), fill=(60, 40, 20))
    draw.polygon([(128, 130), (118, 175), (138, 175)], fill=(200, 140, 110))
    draw.arc((90, 170, 166, 215), 20, 160, fill=(150, 50, 50), width=6)
    noisy = np.asarray(picture).astype(float) + rng.normal(0, 6, (256, 256, 3))
    buffer = io.BytesIO()
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(card_path(name, MODELS_DIR))[0] for name in ("vit-learned", "vit-sinusoidal",
                                                                                "vit-mean")}


def test_a_template_gets_no_note(models):
    for label in range(len(CLASSES)):
        run = record_image(models["vit-learned"], mask_grid(template_cells(label)))
        assert confidence_note(models["vit-learned"], run) is None, CLASSES[label]


def test_a_face_the_model_is_unsure_of_is_called_a_guess(models):
    """vit-mean calls this face a bar, but with less than UNSURE_BELOW of the probability."""
    model = models["vit-mean"]
    run = record_image(model, load_image(face_png(4)).array)
    note = confidence_note(model, run)
    assert run.probabilities.max() < UNSURE_BELOW and note is not None and note.unsure
    assert f"only {run.probabilities.max():.0%}" in note.text and "guess" in note.text


def test_a_face_far_from_every_class_is_called_unfamiliar(models):
    """vit-sinusoidal is 93 % sure this face is a square, but what it reads lies farther from every class centre
    than 99 % of its training images do."""
    model = models["vit-sinusoidal"]
    image = load_image(face_png(2)).array
    note = confidence_note(model, record_image(model, image))
    assert note is not None and note.unfamiliar and not note.unsure
    reference = familiarity(model)
    distance = np.linalg.norm(readout_vectors(model, image[None])[0] - reference.centres, axis=1).min()
    assert distance == pytest.approx(note.distance) and distance > reference.threshold
    assert "unlike the drawings and shapes it learned from" in note.text


def test_the_page_shows_the_note_on_a_face_and_not_on_a_template():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["source"] = "upload"
    at.run()
    at.file_uploader(key="upload").set_value(("face.png", face_png(3), "image/png")).run()  # unfamiliar to vit-learned
    assert not at.exception
    assert any("The model is guessing here" in w.value for w in at.warning)
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["source"] = "draw"
    at.query_params["start"] = "circle"
    at.run()
    assert not at.exception and not any("guessing" in w.value for w in at.warning)
