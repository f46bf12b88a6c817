"""What the image page shows, as pure functions of an image and a bundled vision model (no Streamlit).

Seed 001 §1.1, figure 2 and footnote 19: an image is split into N patches p_n, each vectorised (vec) and mapped by a
learned matrix W to a D-dimensional token, and a position embedding e_n is added:

    x_n^(0) = W p_n + e_n          (nn.Linear also adds a bias b: what the model computes is W p_n + b + e_n)

§4.2: a learned CLS token sits at n = 0 and the class is read from x_0^(M) after the last block. The "vit-mean"
model has no CLS token: it averages x_n^(M) over all patches instead, so "where the readout looks" is the mean
over every query row of A, not one row.

Token positions n follow the recording: with a CLS token, n = 0 is CLS and patch k (row-major, 0-based) is n = k + 1;
without one, patch k is n = k. Attention arrays are in the common layout of the recording, [query, key].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

from core.data.images import CLASSES, downsample_mask, generate_dataset, mask_grid  # noqa: F401 (the page draws)
from core.lessons.analysis import rollout
from core.model.config import PARAMETER_FREE_ENCODINGS
from core.model.patches import images_to_tensor, patch_grid, patchify
from core.model.recording import Recording
from core.model.transformer import Transformer

IMAGE_ENCODINGS = ("none", "sinusoidal", "learned")  # those an image model can use (1-D ones are refused)


@dataclass
class ImageRecording:
    """One image run through a vision model: the recording, the class probabilities and the image itself."""

    recording: Recording
    image: np.ndarray  # uint8 [H, W, 3], what was fed to the model
    probabilities: np.ndarray  # [classes], softmax of the logits
    classes: tuple[str, ...] = CLASSES

    @property
    def predicted(self) -> int:
        return int(np.argmax(self.probabilities))

    @property
    def predicted_class(self) -> str:
        return self.classes[self.predicted] if self.predicted < len(self.classes) else str(self.predicted)


@dataclass
class PatchToken:
    """Figure 2 for one patch: the pixels, vec(p_n), W p_n (+ b), e_n and x_n = W p_n + e_n, all read from the
    recording, with the checks that they agree with the model's weights and with the stream entering block 0."""

    patch: int  # 0-based patch number, row-major
    token: int  # its position n in the sequence (patch + 1 with a CLS token)
    row: int
    col: int
    pixels: np.ndarray  # [p, p, C] floats in [0, 1]
    vec: np.ndarray  # [C*p*p], vec(p_n) in the model's (C, p, p) order
    embedded: np.ndarray  # [D], W p_n + b: row n of hook_embed
    position: np.ndarray  # [D], e_n: row n of hook_pos_embed (zeros with no additive encoding)
    token_vector: np.ndarray  # [D], x_n^(0): row n of blocks.0.hook_resid_pre
    embed_error: float  # max |W vec(p_n) + b - hook_embed[n]|, recomputed from the weights
    sum_error: float  # max |hook_embed[n] + hook_pos_embed[n] - x_n^(0)|
    encoding: str = "learned"


@dataclass
class ReadoutAttention:
    """Where the readout looks in every layer and head, on the patch grid."""

    grid: np.ndarray  # [M, H, rows, cols]: weight on each patch
    cls_self: np.ndarray | None  # [M, H]: weight the CLS query keeps on itself (None without CLS)
    source: str  # how it was read, in words
    notes: list[str] = field(default_factory=list)


def token_of_patch(cfg, patch: int) -> int:
    """The sequence position n of 0-based patch number `patch`."""
    return patch + int(cfg.uses_cls)


def grid_shape(cfg) -> tuple[int, int]:
    return patch_grid(cfg.image_size, cfg.image_size, cfg.patch_size)


def image_encodings(own: str) -> list[str]:
    """Encodings an image model can be run with as an ablation: its own first, then the parameter-free ones
    that make sense for patches."""
    return [own] + [pe for pe in IMAGE_ENCODINGS if pe != own and pe in PARAMETER_FREE_ENCODINGS]


def fit_image(image: np.ndarray, size: int) -> np.ndarray:
    """A square uint8 [S, S, 3] image at the size a model reads, [size, size, 3]: our 32-pixel samples and drawings
    scaled up pixel by pixel (nearest) for a pretrained ViT of 224, anything larger scaled down smoothly."""
    if image.shape[0] == size:
        return image
    resample = Image.NEAREST if image.shape[0] < size else Image.BILINEAR
    return np.asarray(Image.fromarray(image).resize((size, size), resample))


def record_image(model: Transformer, image: np.ndarray, pe: str | None = None, meta: dict | None = None,
                 classes: Sequence[str] | None = None) -> ImageRecording:
    """Run one square uint8 [S, S, 3] image through `model` (pe: None for its own encoding, or an ablation), first
    fitted to the size it reads (fit_image; meta "resized_from" says so). classes: the names of its outputs
    (a pretrained model's own labels); ours by default."""
    cfg = model.cfg
    if cfg.input != "patches":
        raise ValueError("this is not an image model (its input is tokens)")
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[0] != image.shape[1] or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"the model takes square uint8 RGB images, got {image.dtype} {image.shape}")
    fitted = fit_image(image, cfg.image_size)
    with torch.no_grad():
        output = model(images_to_tensor(fitted[None]), pe=pe, record=True)
    recording = output.recording
    recording.meta.update(meta or {})
    if fitted is not image:
        recording.meta["resized_from"] = image.shape[0]
    probabilities = torch.softmax(output.logits[0].double(), dim=-1).numpy()
    if classes is None:  # "nothing" came last, so a model trained before it (six classes) reads the same list
        classes = CLASSES[:cfg.n_classes] if cfg.n_classes <= len(CLASSES) else tuple(map(str, range(cfg.n_classes)))
    return ImageRecording(recording, fitted.copy(), probabilities, tuple(classes))


def patch_token(model: Transformer, run: ImageRecording, patch: int) -> PatchToken:
    """Figure 2 for 0-based patch number `patch`: its pixels, vec(p_n), W p_n + b, e_n and x_n^(0), read from the
    recording and checked against the patch-embedding weights and the input of block 0."""
    cfg = model.cfg
    rows, cols = grid_shape(cfg)
    if not 0 <= patch < rows * cols:
        raise ValueError(f"patch {patch} does not exist: the image has {rows * cols} patches (0..{rows * cols - 1})")
    rec = run.recording
    n = token_of_patch(cfg, patch)
    shown = patchify(images_to_tensor(run.image[None]), cfg.patch_size)[0, patch]  # [C*p*p] in [0, 1], (C, p, p)
    # what the patch embedding read: the image itself, or its standardised channels (cfg.image_norm)
    vec = (patchify(torch.tensor(rec["hook_image_norm"])[None], cfg.patch_size)[0, patch] if cfg.image_norm
           else shown)
    with torch.no_grad():
        recomputed = model.patch_embed(vec).numpy()
    embedded, position = rec["hook_embed"][n], rec["hook_pos_embed"][n]
    token_vector = rec["blocks.0.hook_resid_pre"][n] if cfg.n_layers else embedded + position
    p, c = cfg.patch_size, cfg.channels
    pixels = shown.numpy().reshape(c, p, p).transpose(1, 2, 0)
    row, col = divmod(patch, cols)
    return PatchToken(patch, n, row, col, pixels, vec.numpy(), embedded, position, token_vector,
                      float(np.abs(recomputed - embedded).max()),
                      float(np.abs(embedded + position - token_vector).max()),
                      rec.meta.get("pe", cfg.pos_encoding))


def readout_attention(run: ImageRecording) -> ReadoutAttention:
    """Attention from the readout to every patch, per layer and head, on the patch grid [M, H, rows, cols].

    With a CLS token: row 0 of A (the CLS query), keys 1..N; what CLS keeps on itself is returned apart. Without
    one (mean pooling): the mean over every query row of A, since the class is read from the mean of all tokens."""
    rec = run.recording
    cfg = rec.config
    rows, cols = grid_shape(cfg)
    patterns = rec.patterns()  # [M, H, N, N]
    m, h = patterns.shape[:2]
    if cfg.uses_cls:
        grid = patterns[:, :, 0, 1:].reshape(m, h, rows, cols)
        return ReadoutAttention(grid, patterns[:, :, 0, 0], "row 0 of A: the CLS query's weights on the patches")
    grid = patterns.mean(axis=2).reshape(m, h, rows, cols)
    return ReadoutAttention(grid, None, "mean over all query rows of A (this model has no CLS token; it "
                                        "classifies from the mean of all tokens)",
                            ["No CLS token: the readout is the mean over all patch tokens, so the map shows "
                             "the attention every query gives each patch, averaged over the queries."])


def patch_attention(run: ImageRecording, layer: int, head: int, patch: int) -> tuple[np.ndarray, float | None]:
    """Where 0-based patch `patch` attends in one head: its query row of A on the patch grid [rows, cols], and
    the weight it gives the CLS token (None without CLS)."""
    rec = run.recording
    cfg = rec.config
    rows, cols = grid_shape(cfg)
    row = rec.pattern(layer)[head, token_of_patch(cfg, patch)]
    if cfg.uses_cls:
        return row[1:].reshape(rows, cols), float(row[0])
    return row.reshape(rows, cols), None


def rollout_grid(run: ImageRecording, source: int | None = None) -> tuple[np.ndarray, float | None, str]:
    """Attention rollout through all layers from the readout (source None) or from 0-based patch `source`, on the
    patch grid [rows, cols]; with the share left on the CLS token (None without CLS) and a description."""
    rec = run.recording
    cfg = rec.config
    rows, cols = grid_shape(cfg)
    rolled = rollout(rec.patterns())  # [N, N], rows sum to 1
    if source is not None:
        row, what = rolled[token_of_patch(cfg, source)], f"rollout row of patch {source} (token n = " \
                                                         f"{token_of_patch(cfg, source)})"
    elif cfg.uses_cls:
        row, what = rolled[0], "rollout row 0: what the CLS token at the top draws on"
    else:
        row, what = rolled.mean(axis=0), "mean of all rollout rows (no CLS token: the readout averages every token)"
    if cfg.uses_cls:
        return row[1:].reshape(rows, cols), float(row[0]), what
    return row.reshape(rows, cols), None, what


# ---------------------------------------------------------------------------------------------------------
# How far to trust the label (issue 35): unsure, or an image unlike any the model learned from
# ---------------------------------------------------------------------------------------------------------

UNSURE_BELOW = 0.6  # a top probability below this is called unsure
REFERENCE_IMAGES, REFERENCE_SEED = 2100, 3  # images of the training mix (a seed no training or test set uses)
FAMILIAR_QUANTILE = 0.99  # an image is unfamiliar when its readout is farther from every class than 99 % of those


@dataclass(frozen=True)
class Familiarity:
    """The readout vectors' class centres on the reference images and how far from them a familiar image lies."""

    centres: np.ndarray  # [classes, D], the mean readout of each class's reference images
    threshold: float  # FAMILIAR_QUANTILE of the reference images' distance to their nearest centre


@torch.no_grad()
def readout_vectors(model: Transformer, images: np.ndarray, pe: str | None = None) -> np.ndarray:
    """What the classifier's linear map reads for each uint8 image [B, H, W, 3] (pe: as record_image's): the final
    CLS token, or the mean of the final tokens (vit-mean), [B, D]."""
    seen = []
    handle = model.unembed.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    try:
        model(images_to_tensor(images), pe=pe)
    finally:
        handle.remove()
    return seen[0].numpy()


def _nearest_distance(vectors: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return np.linalg.norm(vectors[:, None] - centres[None], axis=-1).min(axis=1)  # [B]


@lru_cache(maxsize=8)
def familiarity(model: Transformer) -> Familiarity:
    """The model's readouts of REFERENCE_IMAGES images drawn as its training images are (core.data.images, the
    training mix, another seed): each class's centre and the distance within which 99 % of them lie."""
    images, labels, _ = generate_dataset(REFERENCE_IMAGES, REFERENCE_SEED)
    vectors = readout_vectors(model, images)
    centres = np.stack([vectors[labels == label].mean(axis=0) for label in range(model.cfg.n_classes)])
    return Familiarity(centres, float(np.quantile(_nearest_distance(vectors, centres), FAMILIAR_QUANTILE)))


@dataclass(frozen=True)
class ConfidenceNote:
    """Why the label should not be taken at its word: `unsure` (top probability below UNSURE_BELOW) and/or
    `unfamiliar` (the readout farther from every class centre than `threshold`); text for the page."""

    unsure: bool
    unfamiliar: bool
    top_probability: float
    distance: float
    threshold: float

    @property
    def text(self) -> str:
        reasons = []
        if self.unfamiliar:
            reasons.append("this image is unlike the drawings and shapes it learned from: what it reads lies "
                           "farther from every class than it does for 99 % of its training images")
        if self.unsure:
            reasons.append(f"its top class has only {self.top_probability:.0%} of the probability")
        return "The model is guessing here: " + "; and ".join(reasons) + ". Read the label as a guess, not a fact."


def confidence_note(model: Transformer, run: ImageRecording, pe: str | None = None) -> ConfidenceNote | None:
    """A note when the model's label should not be trusted (ConfidenceNote), else None; pe: the encoding the run
    used (record_image's). For our own vision models (a pretrained one has other classes and no reference images
    here)."""
    reference = familiarity(model)
    distance = float(_nearest_distance(readout_vectors(model, run.image[None], pe), reference.centres)[0])
    top = float(run.probabilities.max())
    note = ConfidenceNote(top < UNSURE_BELOW, distance > reference.threshold, top, distance, reference.threshold)
    return note if note.unsure or note.unfamiliar else None
