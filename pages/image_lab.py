"""Image attention: see a small vision transformer cut an image into patches, turn them into tokens and attend.

Seed 001 §1.1 figure 2 (x_n = W p_n + e_n) and §4.2 (a CLS token at n = 0, the class read from x_0 after the last
block). The numbers come from core/lessons/vision.py (a recording of one forward pass); this page only renders them.

URL parameters (all widgets but the upload are bound: a link cannot carry a file): model, notation (sidebar);
source, sample, frame (an upload's framing), start, ink, background, drawing (the drawn grid, pages/ui/drawing.py),
pe, apply, layer, head, patch, rollout_from, opacity.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import streamlit as st  # noqa: E402
from streamlit.delta_generator import DeltaGenerator  # noqa: E402

from core.data.images import (CLASSES, DRAW_CELLS, HELDOUT_SEED, IMAGE_SIZE, NOTHING, SHAPES, TEST_SETS,  # noqa: E402
                              generate_test_set, mask_grid, template_cells)
from core.figures.canvas import image_overlay_spec  # noqa: E402
from core.figures.images import class_probability_bars, figure2_strip, image_with_grid  # noqa: E402
from core.lessons.vision import (ImageRecording, confidence_note, image_encodings, patch_attention, patch_token,  # noqa: E402
                                 readout_attention, record_image, rollout_grid)
from core.model import registry  # noqa: E402
from core.model.checkpoint import ModelCard  # noqa: E402
from core.model.config import ConfigError  # noqa: E402
from core.serving.image_io import (MAX_JPEG_PIXELS, MAX_PIXELS, MAX_UPLOAD_BYTES, ImageBusyError,  # noqa: E402
                                   ImageInputError, LoadedImage, load_image)
from pages.ui.drawing import drawing_canvas, drop_drawing_link, start_drawing  # noqa: E402
from pages.ui.heatmap import heatmap  # noqa: E402
from pages.ui.models import (IMAGE_PRETRAINED, OPENED, get_model, is_pretrained, model_cards, models_dir,  # noqa: E402
                             open_linked_model, open_pretrained_model, pick_model)
from pages.ui.presentation import plotly_chart  # noqa: E402
from pages.ui.safety import literal, show_input_error  # noqa: E402
from pages.ui.toggles import APPLY_LABELS, OWN, chosen_setting, resend_on_model_change  # noqa: E402
from pages.ui.widgets import BIND, keep_in_range, layer_head_picker, notation_switch  # noqa: E402

IMAGE_TASKS = ("shapes",)
DEFAULT_MODEL = "vit-learned"
SAMPLE_COUNT = 500  # held-out samples offered by index
UPLOAD_TYPES = ["png", "jpg", "jpeg", "gif", "bmp", "webp"]
SOURCES = {"sample": "a generated sample", "upload": "an uploaded image", "draw": "a drawing"}
TEST_SET_LABELS = {"mix": "the training mix", "cluttered": "cluttered backgrounds", "plain": "plain backgrounds",
                   "drawn": "drawings on the grid", "off-centre": "shapes off-centre, small or large",
                   "nothing": "empty images"}
FRAME_HELP = ("Before the shrink to the model's size: cut a square around what is drawn, and thicken lines thinner "
              "than one of the model's pixels, as a person looks at the drawing and not at the paper "
              "(core/serving/framing.py). Off: the centre square is shrunk whole, and a small or thinly drawn shape "
              "nearly vanishes, or one off to a side is cut away.")
PLOT_CONFIG = {"displaylogo": False}
NO_BAR = {"displaylogo": False, "displayModeBar": False}


# ---------------------------------------------------------------------------------------------------------
# Cached data
# ---------------------------------------------------------------------------------------------------------

def image_cards() -> list[ModelCard]:
    """The image models' cards, bundled then saved runs (read each run: models appear while training finishes),
    then the user's pretrained ViTs (core/model/pretrained.py)."""
    opened = tuple(st.session_state.get(OPENED, ()))
    return model_cards(IMAGE_TASKS) + [card for card in registry.pretrained_cards(opened)
                                       if card.task in IMAGE_PRETRAINED]


@st.cache_data(show_spinner=False, max_entries=len(TEST_SETS))
def held_out_samples(test_set: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Images, labels and masks of a held-out test set (never trained on): the images the model cards' accuracy on
    that set is measured on (core/training/evaluate.py)."""
    return generate_test_set(test_set, SAMPLE_COUNT, HELDOUT_SEED)


@st.cache_data(max_entries=64, show_spinner="Running the model…")
def run_image(model: str, image: np.ndarray, pe: str | None, directory: str) -> ImageRecording | str:
    """The recording of one image (cached by model, pixels and encoding), or why it cannot be run."""
    try:
        transformer, card = get_model(model, directory)
        return record_image(transformer, image, pe=pe, meta={"model": model}, classes=card.training.get("labels"))
    except (ConfigError, ValueError, registry.UnknownModelError) as error:
        return str(error)


@st.cache_data(max_entries=64, show_spinner=False)
def trust_note(model: str, image: np.ndarray, pe: str | None, directory: str) -> str | None:
    """The note that the label is a guess (core.lessons.vision.confidence_note), or None: for our own models."""
    transformer, card = get_model(model, directory)
    if is_pretrained(card):
        return None
    note = confidence_note(transformer, run_image(model, image, pe, directory), pe)
    return note.text if note else None


@st.cache_data(max_entries=32, show_spinner=False)
def decode_upload(data: bytes, size: int, frame: bool) -> LoadedImage | str:
    """An uploaded file as a size x size RGB image (the size the model reads), framed around its drawing or not
    (core.serving.framing), or why it can't be used: decoded once per file content and framing, so reruns (a layer,
    a head, a patch) reuse it. "Busy" is raised, not returned, so that it is not cached."""
    try:
        return load_image(data, size=size, frame=frame)
    except ImageBusyError:
        raise
    except ImageInputError as error:
        return str(error)


def read_upload(data: bytes, size: int, frame: bool) -> LoadedImage | str:
    """The decoded upload, or the loader's one-line message saying why it can't be used (now)."""
    try:
        return decode_upload(data, size, frame)
    except ImageBusyError as error:
        return str(error)


# ---------------------------------------------------------------------------------------------------------
# Widgets
# ---------------------------------------------------------------------------------------------------------

def image_model_picker(cards: list[ModelCard]) -> ModelCard:
    """The sidebar model picker (URL key `model`); stops the page with a note when there is no image model yet."""
    card = pick_model(
        cards, DEFAULT_MODEL, f"No bundled image model yet: vit-learned, vit-none, vit-sinusoidal and vit-mean appear "
        f"in `{models_dir()}` as training finishes (`python -m core.train`). Reload the page then.",
        "A bundled vision transformer: vit-<encoding> read the class from the CLS token; vit-mean averages all tokens "
        "instead. *Worst set* is its lowest accuracy over the six held-out test sets of the training generator (the "
        "sample *Kind* picker shows each set, with the model's accuracy on it); *worst drawing or photo condition* "
        "its lowest over drawings and photos made apart from that generator, as a class makes them, uploads framed "
        "as this page frames them (outlines drawn on this page's own grid are the hardest).", "image")
    cfg = card.config
    rows = cfg.image_size // cfg.patch_size
    readout = "CLS token at n = 0" if cfg.uses_cls else "mean over all tokens (no CLS)"
    st.sidebar.caption(f"Task {literal(card.task)}, position encoding **{cfg.pos_encoding}**, readout: {readout}. "
                       f"{card.description}  \n{cfg.image_size}×{cfg.image_size} image, {cfg.patch_size}×"
                       f"{cfg.patch_size} patches ({rows}×{rows} = {cfg.n_patches}) · M={cfg.n_layers} layers · "
                       f"H={cfg.n_heads} heads · D={cfg.d_model}  \n"
                       f"Held-out: {registry.quality(card) or 'not evaluated'}")
    return card


def choose_image(card: ModelCard) -> tuple[np.ndarray | None, str, int | None, DeltaGenerator | None]:
    """The input widgets. Returns (uint8 [32, 32, 3] image or None, a description, the true label if known, a place
    beside the input for the model's verdict, or None)."""
    source = st.segmented_control("Image", list(SOURCES), default="sample", key="source", bind=BIND, required=True,
                                  help="sample: " + SOURCES["sample"] + " (held out from training); upload: "
                                       "a PNG or JPEG of your own; draw: paint one on a grid.")
    source = source if source in SOURCES else "sample"
    size = card.config.image_size
    if source != "draw":
        drop_drawing_link()
    if source == "sample":
        return *choose_sample(card), None
    if source == "upload":
        uploaded = st.file_uploader(
            "Upload a PNG or JPEG (also GIF, BMP, WebP)", type=UPLOAD_TYPES, key="upload",
            max_upload_size=MAX_UPLOAD_BYTES // 2 ** 20,
            help=f"At most {MAX_UPLOAD_BYTES // 2 ** 20} MB and {MAX_PIXELS / 1e6:.1f} megapixels (a JPEG "
                 f"{MAX_JPEG_PIXELS / 1e6:.0f}). A square is cut around its drawing, wherever it is in the "
                 f"picture (the toggle below; off, or on a blank page, the centre square), and shrunk to "
                 f"{size}×{size} pixels, the size the model reads.")
        frame = st.toggle("Frame the drawing", value=not is_pretrained(card), key="frame", bind=BIND,
                          help=FRAME_HELP)
        st.caption("A link to this page cannot carry the uploaded file: whoever opens it uploads the image again.")
        if uploaded is None:
            st.info("Choose an image file above. " + (
                "The bundled models were trained on one simple shape (circle, square, triangle, cross, ring, bar) or "
                "none (\"nothing\"), on plain, cluttered or drawn backgrounds and as sketches on paper, "
                "photographed: a photo of one shape drawn with a thick pen works best, any other photo confuses them."
                if not is_pretrained(card) else f"{card.name} reads {size}×{size} photos."), icon="🖼️")
            return None, "", None, None
        loaded = read_upload(uploaded.getvalue(), size, frame is not False)
        if isinstance(loaded, str):
            st.error(f"**Can't use this file:** {loaded}", icon="⚠️")
            return None, "", None, None
        if loaded.notes:
            st.info("Converted for the model: " + "; ".join(loaded.notes) + ".", icon="ℹ️")
        return loaded.array, f"upload “{literal(uploaded.name)}”", None, None
    return drawing()


def choose_sample(card: ModelCard) -> tuple[np.ndarray, str, int]:
    """A held-out image of one of the test sets, by number, with the model's accuracy on that set."""
    col_set, col_index, col_note = st.columns([1.2, 1, 3])
    with col_set:
        test_set = st.selectbox("Kind", TEST_SETS, key="sample_set", bind=BIND,
                                help="The held-out test sets: " + "; ".join(
                                    f"{name}: {label}" for name, label in TEST_SET_LABELS.items()) + ".")
    test_set = test_set if test_set in TEST_SETS else TEST_SETS[0]
    images, labels, _ = held_out_samples(test_set)
    with col_index:
        keep_in_range("sample", 0, SAMPLE_COUNT - 1, "Sample number")
        index = st.number_input("Sample number", 0, SAMPLE_COUNT - 1, 0, key="sample", bind=BIND,
                                help=f"Held-out samples (seed {HELDOUT_SEED}), never seen in training.")
    index = int(np.clip(index or 0, 0, SAMPLE_COUNT - 1))
    with col_note:
        accuracy = card.metrics.get("test_sets", {}).get(test_set)
        measured = (f"{card.name} classifies {accuracy:.0%} of this set's {SAMPLE_COUNT} images right."
                    if accuracy is not None else "")
        st.markdown(f"Held-out sample **#{index}** of {TEST_SET_LABELS[test_set]}: "
                    f"**{CLASSES[labels[index]]}**  \n<small>Generated from seed {HELDOUT_SEED}, never trained on. "
                    f"{measured}</small>", unsafe_allow_html=True)
    return images[index], f"held-out sample #{index} ({CLASSES[labels[index]]})", int(labels[index])


def drawing() -> tuple[np.ndarray, str, None, DeltaGenerator]:
    """A drawing on the grid the model's image is made from (DRAW_CELLS cells a side, each 2 x 2 pixels): the canvas
    of pages/ui/drawing.py, in the URL as `drawing`; beside it, a place for the verdict (seen while drawing)."""
    col_start, col_ink, col_background = st.columns([2, 1, 1])
    with col_start:
        start = st.selectbox("Start from", ["blank", *SHAPES], key="start", bind=BIND, on_change=_start_over,
                             help="A blank grid, or that shape drawn in the middle of the grid. Choosing one "
                                  "replaces the drawing (Undo brings it back).")
    with col_ink:
        ink = st.color_picker("Ink", "#F0F0F0", key="ink", bind=BIND)
    with col_background:
        background = st.color_picker("Background", "#202020", key="background", bind=BIND)
    pixels = IMAGE_SIZE // DRAW_CELLS
    st.caption(f"Draw with the mouse, a finger or a pen: each cell is {pixels}×{pixels} pixels of the "
               f"{IMAGE_SIZE}×{IMAGE_SIZE} image. The model reads the drawing when a stroke ends; the link to this "
               "page carries it. Its classes: a circle is a filled disc and its outline a ring; a square, triangle or "
               "bar may be filled or outlined.")
    ink, background = _rgb(ink), _rgb(background)
    col_canvas, col_verdict = st.columns([2, 1], gap="large")
    with col_canvas:
        grid = drawing_canvas(DRAW_CELLS, _template(start), _css(ink), _css(background))
    image = mask_grid(grid, IMAGE_SIZE, ink=ink, background=background)
    return image, f"a drawing ({int(grid.sum())} cells painted)", None, col_verdict.empty()


def _template(start: str | None) -> np.ndarray:
    """The drawing "Start from" offers: a shape in the middle, or a blank grid."""
    return template_cells(CLASSES.index(start) if start in SHAPES else NOTHING)


def _start_over() -> None:
    """Callback: a new "Start from" replaces the drawing."""
    start_drawing(_template(st.session_state.get("start")))


def _css(rgb: tuple[int, int, int]) -> str:
    """A colour as the canvas's #rrggbb: the one the model's image has, whatever the picker was given."""
    return "#" + "".join(f"{value:02x}" for value in rgb)


def _rgb(colour: str | None) -> tuple[int, int, int]:
    text = (colour or "#000000").lstrip("#")
    try:
        return tuple(int(text[i:i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
    except ValueError:
        return (0, 0, 0)


def _pick_patch() -> None:
    """Callback: a click on a patch of the image chooses it (sets the patch picker, hence the URL)."""
    state = st.session_state.get("image_chart")
    points = state.selection.points if state is not None else []
    for point in points:
        custom = point.get("customdata")
        if custom:
            st.session_state["patch"] = int(custom[0])
            return


def _pick_patch_cell(first: int, cols: int, cell: dict | None) -> None:
    """Callback: a click on a patch of an attention map chooses it, as a click on the image does (the page reruns
    whole, since figure 2 shows it: see readout_and_patch). `first`: patch 0's token n; `cols`: patches a row."""
    if cell is not None:
        st.session_state["patch"] = first + int(cell["row"]) * cols + int(cell["column"])
        st.session_state["_patch_clicked"] = True


def _open_tile(cell: dict | None) -> None:
    """Callback: a click on a layer's and head's map among them all chooses that layer and head."""
    if cell is not None:
        st.session_state["layer"], st.session_state["head"] = int(cell["layer"]), int(cell["head"])


def overlay_chart(run: ImageRecording, grids: np.ndarray, key: str, title: str, **options) -> None:
    """Attention over the image's patches on the canvas chart (core.figures.canvas.image_overlay_spec): one map, a
    click on a patch chooses it; or every layer and head, a click opens that one."""
    first = int(run.recording.config.uses_cls)
    heatmap(image_overlay_spec(run.image, grids, first, **options), key=key,
            filename=f"{run.recording.meta.get('model', 'vit')}_{key.removesuffix('_chart')}", png_title=title,
            on_cell=_open_tile if grids.ndim == 4 else functools.partial(_pick_patch_cell, first, grids.shape[-1]))


def encoding_toggle(card: ModelCard, cards: list[ModelCard]) -> tuple[str, str | None, list[str]]:
    """The position-encoding toggle, as on the text explorer. Returns (model to run, pe ablation or None, notes)."""
    cfg = card.config
    col_pe, col_apply = st.columns([1, 1.3])
    alone = is_pretrained(card)  # a user's pretrained model has no sibling trained with another encoding
    resend_on_model_change(card, "pe")
    with col_apply:
        apply = st.radio("Apply a change as…", list(APPLY_LABELS), captions=list(APPLY_LABELS.values()),
                         key="apply", bind=BIND, horizontal=True, disabled=alone,
                         help="Ablation runs the same weights with another encoding (the model was not trained "
                              "for it). The other choice loads the bundled model that was trained with it."
                              + (" A pretrained model has no such sibling: its changes are ablations." if alone else ""))
        apply = "ablation" if alone else apply
    with col_pe:
        if apply == "trained model":
            trained = {c.config.pos_encoding for c in cards}
            others = [pe for pe in ("none", "sinusoidal", "learned") if pe != cfg.pos_encoding and pe in trained]
        else:
            others = image_encodings(cfg.pos_encoding)[1:]
        pe = st.selectbox("Position encoding e_n", [OWN, *others], key="pe", bind=BIND,
                          format_func=lambda p: f"model's own ({cfg.pos_encoding})" if p == OWN else p,
                          help="none: e_n = 0, the patches are an unordered set. sinusoidal: fixed sines and "
                               "cosines. learned: a trained vector per position.")
    choice = None if pe in (OWN, None) or pe == cfg.pos_encoding else pe
    if choice is None:
        return card.name, None, []
    setting, note = chosen_setting(cards, card, None, choice, cfg.window, cfg.stride, apply == "trained model")
    if note:
        return setting.model, setting.pe, [note]
    return card.name, choice, [f"Ablation: {card.name} was trained with {cfg.pos_encoding} positions and is now run "
                               f"with **{choice}** — the same weights, e_n replaced."]


@st.fragment
def readout_and_patch(run: ImageRecording, chosen: int, token_n: int, notation: str) -> None:
    """Where the readout looks, the rollout and where the chosen patch looks: a fragment, so a change of layer, head
    or rollout source reruns these charts alone (the whole page took the browser 1.4 s to redraw, issue 18). A
    click on a patch of a map chooses it for the whole page, so that one reruns the app."""
    if st.session_state.pop("_patch_clicked", False):
        st.rerun()
    cfg = run.recording.config
    attention = readout_attention(run)
    title = "Where the CLS token looks" if cfg.uses_cls else "Where the readout looks (mean over queries)"
    st.subheader(title)
    for note in attention.notes:
        st.info(note, icon="ℹ️")
    layer, head = layer_head_picker(cfg.n_layers, cfg.n_heads)
    query_word = (("$A_{0,n'}$, row 0 of A" if notation == "common" else "$A_{n',0}$, column 0 of A")
                  if cfg.uses_cls else ("the mean of every row of A" if notation == "common"
                                        else "the mean of every column of A"))
    col_one, col_all = st.columns([2, 3], gap="large")
    with col_one:
        self_note = (f" CLS keeps **{attention.cls_self[layer, head]:.1%}** on itself; the patches share the rest."
                     if attention.cls_self is not None else "")
        st.markdown(f"**Layer {layer}, head {head}**: {query_word}.{self_note}")
        overlay_chart(run, attention.grid[layer, head], "cls_chart", f"{title}: layer {layer}, head {head}")
    with col_all:
        st.markdown("**Every layer and head** (each panel scaled to its own maximum)")
        overlay_chart(run, attention.grid, "cls_all_chart", f"{title}: every layer and head",
                      selected_head=(layer, head), extra=attention.cls_self, extra_name="CLS keeps on itself")
    st.caption("Bright, opaque cells get much attention; small weights fade to transparent so the image shows "
               "through. Hover a patch for its weight" + (" (and, among every head, the weight CLS keeps on itself)"
                                                          if attention.cls_self is not None else "")
               + "; click a patch to choose it, or a layer's and head's map to open it.")

    # --- rollout and one patch --------------------------------------------------------------------------------
    col_rollout, col_patch = st.columns(2, gap="large")
    with col_rollout:
        st.subheader("Attention rollout")
        readout_label = "the CLS token" if cfg.uses_cls else "the readout (mean over tokens)"
        source = st.radio("Roll out from", ["readout", "patch"], key="rollout_from", bind=BIND, horizontal=True,
                          captions=[readout_label, f"the chosen patch, n = {token_n}"])
        grid, cls_share, what = rollout_grid(run, None if source != "patch" else chosen)
        overlay_chart(run, grid, "rollout_chart", f"Attention rollout from {what}", what="rollout",
                      selected_patch=chosen if source == "patch" else None)
        share = f" {cls_share:.1%} stays on the CLS token." if cls_share is not None else ""
        st.caption(f"Through all {cfg.n_layers} layers (Abnar & Zuidema 2020): each layer's heads averaged, the "
                   f"residual added as ½ I, rows renormalised and multiplied. Shown: {what}.{share}")
    with col_patch:
        st.subheader(f"Where patch n = {token_n} attends")
        weights, to_cls = patch_attention(run, layer, head, chosen)
        st.markdown(f"Layer {layer}, head {head}: "
                    + (f"row {token_n} of A" if notation == "common" else f"column {token_n} of $A_{{n',n}}$")
                    + (f"; **{to_cls:.1%}** goes to the CLS token." if to_cls is not None else "."))
        overlay_chart(run, weights, "patch_chart", f"Where patch n = {token_n} attends: layer {layer}, head {head}",
                      selected_patch=chosen)
        st.caption("The chosen patch is outlined. Change the layer and head above, or the patch in figure 2 above.")


def verdict(model_name: str, run: ImageRecording, true_label: int | None) -> str:
    """What the model says of the image, as markdown: its class and that class's probability, and whether it is right
    when the true class is known."""
    right = ""
    if true_label is not None:
        right = " ✓ correct" if run.predicted == true_label else f" ✗ (it is a {CLASSES[true_label]})"
    return f"**{model_name}** says **{run.predicted_class}** ({run.probabilities[run.predicted]:.1%}){right}"


def drawing_verdict(slot: DeltaGenerator, model_name: str, run: ImageRecording, note: str | None) -> None:
    """Beside the canvas, so a stroke's effect is seen without scrolling: the verdict, the note that it is a guess
    if it is one, and the next likeliest classes."""
    order = np.argsort(run.probabilities)[::-1]
    with slot.container():
        st.markdown("**Prediction**  \n" + verdict(model_name, run, None))
        if note:
            st.warning(note, icon="⚠️")
        st.caption("Next: " + ", ".join(f"{run.classes[i]} {run.probabilities[i]:.1%}" for i in order[1:3])
                   + ". The bars, the patches and the attention are below.")


# ---------------------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------------------

st.title("Image attention")
st.caption("A vision transformer cuts the image into patches, turns each patch into a token, x_n = W p_n + e_n "
           "(seed 001 §1.1, figure 2), and reads the class from a CLS token at n = 0 after the last block (§4.2).")
open_linked_model()
cards = image_cards()
card = image_model_picker(cards)
open_pretrained_model(IMAGE_PRETRAINED)
notation = notation_switch()

image, described, true_label, verdict_slot = choose_image(card)
if is_pretrained(card):  # our samples' labels are not among its classes
    true_label = None
model_name, pe, notes = encoding_toggle(card, cards)
for note in notes:
    st.info(note, icon="ℹ️")
if image is None:
    st.stop()

run = run_image(model_name, image, pe, str(models_dir()))
if isinstance(run, str):
    show_input_error(run)
    st.stop()
note = trust_note(model_name, image, pe, str(models_dir()))
if verdict_slot is not None:
    drawing_verdict(verdict_slot, model_name, run, note)
model, _ = get_model(model_name, str(models_dir()))
rec = run.recording
cfg = rec.config
patch = cfg.patch_size
rows = cols = cfg.image_size // patch
first = int(cfg.uses_cls)  # the token position of patch 0
n_patches = rows * cols
encoding = rec.meta.get("pe", cfg.pos_encoding)

# --- the image and the prediction ---------------------------------------------------------------------------
choices = list(range(first, first + n_patches))
col_image, col_prediction = st.columns([1, 1], gap="large")
with col_prediction:
    st.subheader("Prediction")
    st.markdown(verdict(model_name, run, true_label))
    if note:
        st.warning(note, icon="⚠️")
    plotly_chart(class_probability_bars(run.probabilities, run.classes, true_label), key="probability_chart",
                    config=NO_BAR)
    readout = ("the CLS token x₀ after the last block" if cfg.uses_cls
               else "the mean of all tokens after the last block (this model has no CLS token)")
    resized = (f", scaled from {rec.meta['resized_from']}×{rec.meta['resized_from']} to the {cfg.image_size}×"
               f"{cfg.image_size} this model reads" if "resized_from" in rec.meta else "")
    st.caption(f"Softmax over the {len(run.classes)} classes of a linear map of {readout}. Input: {described}"
               f"{resized}; position encoding in use: **{encoding}**.")
with col_image:
    st.subheader("The image, cut into patches")
    image_slot = st.empty()  # drawn once the patch is chosen below, so the chosen patch is outlined
    st.caption(f"{cfg.image_size}×{cfg.image_size} pixels cut into {n_patches} patches of {patch}×{patch}, "
               f"numbered by their token position n"
               + (" (n = 0 is the CLS token, which has no patch)." if first else ".")
               + " Click a patch (or pick it in figure 2 below) to choose it; it is outlined.")

# --- figure 2 ---------------------------------------------------------------------------------------------
st.subheader("From patch to token (seed 001, figure 2)")
col_choose, col_formula = st.columns([1, 2], vertical_alignment="bottom")
with col_choose:
    keep_in_range("patch", first, first + n_patches - 1, "Patch")
    token_n = st.selectbox("Patch (token n)", choices, key="patch", bind=BIND,
                           index=min(first + (rows // 2) * cols + cols // 2, choices[-1]) - first,
                           format_func=lambda n: f"{n}: row {(n - first) // cols}, column {(n - first) % cols}",
                           help="The patch shown here, outlined on the image, and used in 'where this patch "
                                "attends' below. Patches are numbered row by row"
                                + (", from n = 1: n = 0 is the CLS token." if first else "."))
token_n = int(token_n) if token_n in choices else choices[len(choices) // 2]
chosen = token_n - first
with col_formula:
    st.markdown(f"$$x_{{{token_n}}} = W\\,p_{{{token_n}}} + e_{{{token_n}}}$$")
plotly_chart(image_with_grid(run.image, patch, first, selected=chosen), image_slot, key="image_chart",
                        config=NO_BAR, on_select=_pick_patch, selection_mode="points")
token = patch_token(model, run, chosen)
plotly_chart(figure2_strip(token.pixels, token.vec, token.embedded, token.position, token.token_vector,
                              token.token, notation=notation, standardised=cfg.image_norm), key="figure2_chart",
             config=PLOT_CONFIG)
layout_note = ("Paper notation: each vector is a column, as in X (D × N) of seed 001."
               if notation == "paper" else "Common notation: each vector is a row, as in X (N × D).")
position_note = {"none": "This run has no position encoding: e_n = 0, so x_n = W p_n and the model sees the patches "
                         "as an unordered set.",
                 "sinusoidal": "e_n is fixed sines and cosines of the position n.",
                 "learned": "e_n is a vector learned for position n."}.get(encoding, "")
standardised = ("; first, each colour channel of the whole image is standardised (minus its mean over the image's "
                "pixels, divided by its spread), so the numbers say where the colours differ, not which colours they "
                "are" if cfg.image_norm else "")
st.caption(f"The {patch}×{patch}×{cfg.channels} patch is flattened to {token.vec.size} numbers (vec, in channel, "
           f"row, column order{standardised}), multiplied by the learned D×{token.vec.size} matrix W (plus its bias "
           f"b) to give D = {cfg.d_model} numbers, and e_n is added. {position_note} {layout_note} "
           f"Read from the recording; W p_n recomputed from the weights agrees to {token.embed_error:.1e}, and "
           f"W p_n + e_n equals the input of block 0 to {token.sum_error:.1e}.")

# --- where the readout looks, the rollout, one patch (a fragment) ------------------------------------------
readout_and_patch(run, chosen, token_n, notation)
