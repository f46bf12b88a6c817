"""The image page under AppTest, on tiny random ViTs (tests/vision_models.py), so it runs in seconds."""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import charts, drawn
from PIL import Image, ImageDraw
from streamlit.testing.v1 import AppTest
from upload_files import encode, flat_png, header_only_png, many_frame_gif
from vision_models import write_tiny_vits

from core.data.images import (CLASSES, DRAW_CELLS, HELDOUT_SEED, SHAPES, TEST_SETS, generate_dataset, generate_test_set,
                              mask_grid, template_cells)
from core.lessons.vision import record_image
from core.model.checkpoint import load_checkpoint, update_metrics
from core.serving.drawing_link import decode_drawing, encode_drawing

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "image_lab.py")
N_CHARTS = 7  # image, probabilities, figure 2, CLS one head, CLS every head, rollout, one patch


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return write_tiny_vits(tmp_path_factory.mktemp("vit_models"))


@pytest.fixture
def app(models_dir, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MODELS_DIR", str(models_dir))

    def start(**params: str) -> AppTest:
        at = AppTest.from_file(PAGE, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        return at.run()
    return start


def png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def text_of(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    return "\n".join(parts + [h.value for h in at.subheader])


def test_page_renders_a_sample(app):
    at = app()
    ok(at)
    assert len(charts(at)) == N_CHARTS
    labels = generate_dataset(1, HELDOUT_SEED)[1]
    assert f"of the training mix: **{CLASSES[labels[0]]}**" in text_of(at)
    assert "vit-learned" in text_of(at) and "position encoding in use: **learned**" in text_of(at)
    assert at.selectbox(key="patch").value == 37  # the middle patch, n = 1 + 4*8 + 4
    assert "Where the CLS token looks" in text_of(at)
    assert all(drawn(at, key) for key in ("cls_chart", "cls_all_chart", "rollout_chart", "patch_chart"))  # canvas


def test_switching_sample_layer_head_and_patch(app):
    at = app()
    at.number_input(key="sample").set_value(7).run()
    ok(at)
    assert "#7" in text_of(at)
    at.radio(key="layer").set_value(1).run()
    at.radio(key="head").set_value(1).run()
    at.selectbox(key="patch").set_value(10).run()
    ok(at)
    assert "**Layer 1, head 1**" in text_of(at)
    assert "Where patch n = 10 attends" in text_of(at)
    at.radio(key="rollout_from").set_value("patch").run()
    ok(at)
    assert "rollout row of patch 9" in text_of(at)
    assert len(charts(at)) == N_CHARTS


def test_url_parameters_set_the_view(app):
    at = app(sample="3", layer="L1", head="H0", patch="64: row 7, column 7", notation="paper")
    ok(at)
    assert at.number_input(key="sample").value == 3 and at.selectbox(key="patch").value == 64
    assert at.radio(key="layer").value == 1 and at.radio(key="head").value == 0
    assert "Paper notation" in text_of(at) and "column 0 of A" in text_of(at)


def test_position_encoding_ablation(app):
    at = app()
    at.selectbox(key="pe").set_value("none").run()
    ok(at)
    text = text_of(at)
    assert "Ablation" in text and "position encoding in use: **none**" in text
    assert "e_n = 0" in text


def test_position_encoding_switches_to_the_trained_model(app):
    at = app(apply="trained model")
    at.selectbox(key="pe").set_value("sinusoidal").run()
    ok(at)
    text = text_of(at)
    assert "Showing **vit-sinusoidal**" in text and "position encoding in use: **sinusoidal**" in text
    assert "**vit-sinusoidal** says" in text


def test_mean_pooling_model_says_it_has_no_cls(app):
    at = app(model="vit-mean")
    ok(at)
    text = text_of(at)
    assert "No CLS token" in text and "Where the readout looks" in text
    assert at.selectbox(key="patch").value == 36  # patches start at n = 0
    assert len(charts(at)) == N_CHARTS


def test_upload_of_a_png(app):
    at = app(source="upload")
    ok(at)
    assert len(charts(at)) == 0 and "Choose an image file" in text_of(at)
    image = np.repeat(np.repeat(generate_dataset(1, 5)[0][0], 2, axis=0), 2, axis=1)  # 64 x 64
    at.file_uploader(key="upload").set_value(("shape.png", png_bytes(image), "image/png")).run()
    ok(at)
    assert len(charts(at)) == N_CHARTS
    assert "resized from 64×64 to 32×32" in text_of(at)
    assert "upload “shape\\.png”" in text_of(at)


def test_a_bad_upload_shows_the_loaders_message(app):
    at = app(source="upload")
    junk = np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    at.file_uploader(key="upload").set_value(("photo.png", junk, "image/png")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1 and "Can't use this file" in at.error[0].value
    assert "not a supported image" in at.error[0].value
    assert len(charts(at)) == 0


@pytest.mark.parametrize("test_set", TEST_SETS)
def test_a_sample_of_each_test_set_with_the_models_accuracy_on_it_from_its_card(app, models_dir, test_set):
    card = models_dir / "vit-learned.json"
    update_metrics(card, {"test_sets": {name: (index + 1) / 10 for index, name in enumerate(TEST_SETS)}})
    at = app(sample_set=test_set, sample="3")
    ok(at)
    labels = generate_test_set(test_set, 4, HELDOUT_SEED)[1]
    shown = text_of(at)
    assert "**#3** of" in shown and f"**{CLASSES[labels[3]]}**" in shown
    assert f"classifies {(TEST_SETS.index(test_set) + 1) / 10:.0%} of this set's 500 images right" in shown


def canvas(at: AppTest) -> dict:
    """What the page gives the drawing canvas (pages/ui/drawing.py): its drawing as a link value, colours, side."""
    [element] = [e for e in at.get("bidi_component") if e.proto.component_name == "attention_lab.drawing"]
    return json.loads(element.proto.json)


def predictions(at: AppTest) -> list[str]:
    """The model's verdicts on the page (a drawing's is also beside the canvas)."""
    return [m.value for m in at.markdown if " says " in m.value]


def test_the_drawing_templates_are_centred_shapes_and_start_blank(app):
    at = app(source="draw", start="triangle")
    ok(at)
    np.testing.assert_array_equal(decode_drawing(canvas(at)["cells"], DRAW_CELLS),
                                  template_cells(CLASSES.index("triangle")))
    assert at.query_params["drawing"] == canvas(at)["cells"]
    assert at.selectbox(key="start").options == ["blank", *SHAPES]


def test_drawing(app):
    at = app(source="draw", start="cross")
    ok(at)
    assert len(charts(at)) == N_CHARTS and canvas(at)
    assert f"a drawing ({template_cells(CLASSES.index('cross')).sum()} cells painted)" in text_of(at)
    at.selectbox(key="start").set_value("blank").run()  # a new start replaces the drawing
    ok(at)
    assert "a drawing (0 cells painted)" in text_of(at)
    assert canvas(at)["cells"] == at.query_params["drawing"] == "A" * 43
    at.segmented_control(key="source").set_value("sample").run()  # the drawing leaves the link with the canvas
    ok(at)
    assert "drawing" not in at.query_params


def test_a_drawing_link_reopens_the_drawing_and_its_prediction(app, models_dir):
    """The link's drawing, not the start's template, is on the canvas and is what the model reads: the page's
    verdict is the model's on that image (the same tiny model run here)."""
    grid = np.zeros((DRAW_CELLS, DRAW_CELLS), dtype=bool)
    grid[2:14, 7:9] = True  # a bar
    value = encode_drawing(grid)
    at = app(source="draw", start="cross", drawing=value, ink="#FF0000", background="#0000FF")
    ok(at)
    assert canvas(at) == {"cells": value, "reset": 0, "side": DRAW_CELLS, "ink": "#ff0000", "background": "#0000ff"}
    assert at.query_params["drawing"] == value
    assert "a drawing (24 cells painted)" in text_of(at)
    model, _ = load_checkpoint(models_dir / "vit-learned.json")
    run = record_image(model, mask_grid(grid, 32, ink=(255, 0, 0), background=(0, 0, 255)))
    said = f"**vit-learned** says **{run.predicted_class}** ({run.probabilities[run.predicted]:.1%})"
    assert predictions(at) == ["**Prediction**  \n" + said, said]  # beside the canvas, and in *Prediction*
    second, third = np.argsort(run.probabilities)[::-1][1:3]
    assert (f"Next: {run.classes[second]} {run.probabilities[second]:.1%}, {run.classes[third]} "
            f"{run.probabilities[third]:.1%}.") in text_of(at)


@pytest.mark.parametrize("value", ["x" * 5000, "A" * 42, "A" * 42 + "B", "<b>hi</b>" + "A" * 34,
                                   "A" * 41 + "=="])
def test_a_bad_drawing_link_gives_a_note_and_a_blank_grid(app, value):
    at = app(source="draw", start="cross", drawing=value)
    ok(at)
    [warning] = [w for w in at.warning if "guessing" not in w.value]  # a random tiny model's label is also a guess
    assert warning.value.startswith("This link's drawing can't be read (") and "starts blank" in warning.value
    assert value not in warning.value
    assert canvas(at)["cells"] == at.query_params["drawing"] == "A" * 43
    assert "a drawing (0 cells painted)" in text_of(at)


def test_an_upload_says_a_link_cannot_carry_it(app):
    at = app(source="upload")
    ok(at)
    assert any("cannot carry the uploaded file" in c.value for c in at.caption)


def test_no_image_model_yet(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MODELS_DIR", str(tmp_path))
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception
    assert "No bundled image model yet" in at.info[0].value


# --- uploads: decoded once, bounded, and any file answered with a message (issue 15, finding 6) ---------------

@pytest.fixture
def load_calls(monkeypatch) -> list[int]:
    """Each call of core.serving.image_io.load_image from the page, as the byte size of the file it decoded."""
    import core.serving.image_io as image_io
    calls: list[int] = []
    original = image_io.load_image

    def counting(data, *args, **kwargs):
        calls.append(len(data))
        return original(data, *args, **kwargs)
    monkeypatch.setattr(image_io, "load_image", counting)
    return calls


def test_an_upload_is_decoded_once_across_reruns(app, load_calls):
    at = app(source="upload")
    image = generate_dataset(3, 11)[0][2]  # a sample no other test uploads, so no other test cached it
    at.file_uploader(key="upload").set_value(("once.png", png_bytes(image), "image/png")).run()
    ok(at)
    assert len(charts(at)) == N_CHARTS and len(load_calls) == 1
    at.radio(key="layer").set_value(1).run()
    at.radio(key="head").set_value(1).run()
    at.selectbox(key="patch").set_value(5).run()
    ok(at)
    assert at.radio(key="layer").value == 1 and len(charts(at)) == N_CHARTS
    assert len(load_calls) == 1, "reruns reuse the decoded image"
    other = generate_dataset(3, 11)[0][1]
    at.file_uploader(key="upload").set_value(("other.png", png_bytes(other), "image/png")).run()
    ok(at)
    assert len(load_calls) == 2, "another file is decoded"


def _small_drawing_png() -> bytes:
    """A 256-pixel page with a small ring drawn off-centre in pencil."""
    picture = Image.new("RGB", (256, 256), (246, 244, 236))
    ImageDraw.Draw(picture).ellipse((150, 40, 200, 90), outline=(90, 90, 95), width=4)
    return encode(picture, "PNG")


def test_an_upload_is_framed_around_its_drawing_unless_the_toggle_is_off(app, load_calls):
    at = app(source="upload")
    assert at.toggle(key="frame").value is True
    at.file_uploader(key="upload").set_value(("ring.png", _small_drawing_png(), "image/png")).run()
    ok(at)
    framed = text_of(at)
    assert "framed the drawing" in framed and len(charts(at)) == N_CHARTS
    at.toggle(key="frame").set_value(False).run()
    ok(at)
    assert "framed the drawing" not in text_of(at) and len(charts(at)) == N_CHARTS
    assert len(load_calls) == 2, "the unframed image is decoded anew"
    assert app(source="upload", frame="false").toggle(key="frame").value is False, "a link carries the choice"


def test_a_busy_server_asks_to_try_again_and_the_retry_works(app, monkeypatch):
    import core.serving.image_io as image_io
    monkeypatch.setattr(image_io, "DECODE_WAIT_SECONDS", 0.05)
    at = app(source="upload")
    image = generate_dataset(3, 11)[0][0]
    held = 0
    try:
        while image_io._DECODE_SLOTS.acquire(blocking=False):
            held += 1
        at.file_uploader(key="upload").set_value(("busy.png", png_bytes(image), "image/png")).run()
    finally:
        for _ in range(held):
            image_io._DECODE_SLOTS.release()
    assert not at.exception and len(at.error) == 1 and "busy" in at.error[0].value
    at.run()  # "try again": the busy answer was not cached
    ok(at)
    assert len(charts(at)) == N_CHARTS


@functools.cache
def _garbage_files() -> dict[str, tuple[str, bytes, str]]:
    """Files that must be refused: (file name, bytes, what the message says)."""
    png = png_bytes(generate_dataset(1, 5)[0][0])
    return {
        "random-bytes": ("noise.png", np.random.default_rng(1).bytes(5000), "not a supported image"),
        "truncated-png": ("cut.png", png[: len(png) // 2], "damaged or truncated"),
        "text-named-png": ("notes.png", b"Dear class,\nthis is not a picture.\n" * 20, "not a supported image"),
        "zero-bytes": ("empty.png", b"", "empty"),
        "svg": ("logo.png", b'<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">'
                            b'<circle cx="32" cy="32" r="20"/></svg>', "not a supported image"),
        "html": ("page.png", b"<!doctype html><html><body><script>alert(1)</script></body></html>",
                 "not a supported image"),
        "bomb-png": ("bomb.png", header_only_png(30_000, 30_000), "megapixels"),
        "39.7MP-png": ("flat.png", flat_png(7300, 5440), "megapixels"),
        "tiny": ("dot.png", encode(Image.new("RGB", (4, 4)), "PNG"), "at least 8×8"),
    }


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("case", list(_garbage_files()))
def test_any_bad_file_gets_a_clear_message(app, case):
    name, data, message = _garbage_files()[case]
    at = app(source="upload")
    at.file_uploader(key="upload").set_value((name, data, "image/png")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1 and "Can't use this file" in at.error[0].value
    assert message in at.error[0].value and "Traceback" not in at.error[0].value
    assert len(charts(at)) == 0


def test_a_gif_of_many_frames_uses_its_first(app):
    at = app(source="upload")
    at.file_uploader(key="upload").set_value(("clip.gif", many_frame_gif(300), "image/gif")).run()
    ok(at)
    assert len(charts(at)) == N_CHARTS
    assert "used the first frame of an animated GIF" in text_of(at)

