"""Turn an uploaded file (untrusted bytes) into a model-ready RGB array.

The upload is checked before anything is decoded: byte size, then format and pixel dimensions from the header, so a
decompression bomb is refused without ever being decompressed. What may be decoded is bounded by what it costs: a
PNG, GIF, BMP or WebP is decoded in full (4 bytes a pixel), so at most ``MAX_PIXELS``; a JPEG is decoded at
1/2 .. 1/8 scale (``Image.draft``), so a 12-megapixel phone photo costs a few MB. Right after decoding, the centre
square (the whole picture, to frame its drawing) is converted and shrunk strip by strip, so no second full-size copy
is made; at most ``MAX_CONCURRENT_DECODES`` uploads decode at once, process-wide. Whatever Pillow can decode is
converted to 8-bit RGB, centre-cropped (or framed around its drawing: core.serving.framing) to a square and resized;
every conversion is recorded in ``LoadedImage.notes`` so the app can tell the user what happened. Any problem
surfaces as :class:`ImageInputError` with a one-line message, never as another exception.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from PIL import ExifTags, Image, UnidentifiedImageError

from core.serving.framing import frame_drawing

ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
# Decoded in full: a 4K screenshot (3840x2160) at most, about 32 MB at 4 bytes a pixel.
MAX_PIXELS = 3840 * 2160
# A JPEG is decoded at up to 1/8 scale, so it may claim more: a 24-megapixel camera
# photo. A progressive JPEG still holds all its coefficients while it decodes, about
# 3 bytes a pixel, so it may claim what a phone's camera takes, 12 megapixels.
MAX_JPEG_PIXELS = 6000 * 4000
MAX_PROGRESSIVE_JPEG_PIXELS = 4000 * 3000
# libwebp decodes into its own buffers beside Pillow's, about 16 bytes a pixel: a lossless 3840x2160 WebP of 400
# bytes peaked at 131 MB (issue 36). A full-HD WebP peaks at 36 MB, as the largest PNG does.
MAX_WEBP_PIXELS = 1920 * 1080
# Pillow reads a PNG's chunks up to its pixels when it opens the file, before the decode slots: 300,000 text chunks
# cost 0.8 CPU-s (issue 36). A picture has a few dozen (an APNG two a frame); past these the file is refused from a
# scan of the chunk headers alone, which stops at the limit.
MAX_PNG_CHUNKS = 4096
MIN_SIDE = 8
# JPEGs are decoded at a reduced scale (1/2 .. 1/8) as long as both sides stay
# at least this many times the target size: cheap, and plenty for a tiny output.
# Other formats are shrunk by whole factors (Image.reduce) to about that size.
_DRAFT_FACTOR = 4
# The picture is converted and shrunk in strips of about this many pixels.
_STRIP_PIXELS = 1 << 18
# Uploads decoding at once in this process, and how long another waits for a turn.
MAX_CONCURRENT_DECODES = 2
DECODE_WAIT_SECONDS = 3.0
_DECODE_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_DECODES)
NO_DRAWING_NOTE = "found no drawing to frame (nothing differs from the page's light), so read the centre square"

# Pillow's own bomb guard (process-wide): it warns above this and refuses in
# Image.open above twice this, before our own, format-aware check.
Image.MAX_IMAGE_PIXELS = MAX_JPEG_PIXELS
_JPEG_FORMATS = ("JPEG", "MPO")  # MPO: a phone's JPEG with extra preview images

_ALLOWED_NAMES = "PNG, JPEG, GIF, BMP or WebP"
# Formats whose extra frames are animation. (A JPEG's extra MPO images are previews.)
_ANIMATED_FORMATS = ("GIF", "PNG", "WEBP")
_SIXTEEN_BIT_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
_MODE_NOTES = {
    "1": "converted from 1-bit black and white",
    "L": "converted from grayscale",
    "LA": "converted from grayscale",
    "P": "converted from palette colours",
    "PA": "converted from palette colours",
    "CMYK": "converted from CMYK",
    **{mode: "scaled 16-bit to 8-bit" for mode in _SIXTEEN_BIT_MODES},
}
_ORIENTATION_NOTES = {
    **dict.fromkeys((2, 4), "mirrored by its EXIF orientation"),
    **dict.fromkeys((3, 5, 6, 7, 8), "rotated by its EXIF orientation"),
}
_SIDEWAYS_ORIENTATIONS = (5, 6, 7, 8)  # these swap width and height
_TRANSPOSES = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


class ImageInputError(ValueError):
    """An upload that cannot be used; ``str()`` is a one-line message for the user."""


class ImageBusyError(ImageInputError):
    """Every decoding slot stayed taken: the same file may work in a moment (so do not cache this answer)."""


@dataclass
class LoadedImage:
    """A decoded upload ready for the model.

    ``original_size`` is (width, height) as the image is displayed, i.e. after
    its EXIF orientation. ``notes`` lists every conversion applied, in order.
    """

    array: np.ndarray  # uint8 [size, size, 3] RGB
    original_size: tuple[int, int]
    notes: list[str] = field(default_factory=list)


def load_image(data: bytes, size: int = 32, frame: bool = False) -> LoadedImage:
    """Decode untrusted ``data`` into a ``size`` x ``size`` RGB image, or raise ImageInputError. ``frame``: cut a
    square around the drawing and thicken its thin strokes before the shrink (core.serving.framing), as the image
    page does by default."""
    _check_upload_bytes(data)
    try:
        return _decode(data, size, frame)
    except ImageInputError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageInputError(
            f"The image has too many pixels: at most {_megapixels(MAX_PIXELS)} megapixels "
            f"({_megapixels(MAX_JPEG_PIXELS)} for a JPEG)."
        ) from exc
    except Exception as exc:  # Pillow raises many exception types on malformed files
        raise ImageInputError(
            "The image could not be read: the file is damaged or truncated."
        ) from exc


def _check_upload_bytes(data: bytes) -> None:
    """Refuse empty or oversized uploads before touching Pillow."""
    if not data:
        raise ImageInputError("The file is empty.")
    if len(data) > MAX_UPLOAD_BYTES:
        raise ImageInputError(
            f"The file is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB."
        )


def _open(data: bytes) -> Image.Image:
    """Identify the file from its header, trying only the allowed formats' parsers."""
    try:
        return Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
    except UnidentifiedImageError as exc:
        raise ImageInputError(
            f"This file is not a supported image; please upload a {_ALLOWED_NAMES} image."
        ) from exc


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _check_png_chunks(data: bytes) -> None:
    """Refuse a PNG of more than MAX_PNG_CHUNKS chunks, counting from their headers (4-byte length, 4-byte type,
    the data, a 4-byte CRC) and stopping at IEND, the end of the data, or the limit."""
    if not data.startswith(PNG_SIGNATURE):
        return
    at, chunks = len(PNG_SIGNATURE), 0
    while at + 8 <= len(data) and data[at + 4:at + 8] != b"IEND":
        chunks += 1
        if chunks > MAX_PNG_CHUNKS:
            raise ImageInputError(f"The PNG holds more than {MAX_PNG_CHUNKS} chunks (a picture has a few dozen): "
                                  "save it again without its extra data.")
        at += 12 + int.from_bytes(data[at:at + 4], "big")


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1_000_000:.1f}".removesuffix(".0")


def _pixel_limit(image: Image.Image) -> tuple[int, str, str]:
    """(most pixels the image may have, its kind for a message, advice) by what decoding it costs."""
    if image.format == "WEBP":
        return (MAX_WEBP_PIXELS, "a WebP",
                f" (a JPEG may have {_megapixels(MAX_JPEG_PIXELS)}): shrink it or save it as a JPEG")
    if image.format not in _JPEG_FORMATS:
        return (MAX_PIXELS, f"a {image.format}",
                f" (a JPEG may have {_megapixels(MAX_JPEG_PIXELS)}): shrink it or save it as a JPEG")
    if image.info.get("progressive"):
        return MAX_PROGRESSIVE_JPEG_PIXELS, "a progressive JPEG", ": shrink it"
    return MAX_JPEG_PIXELS, "a JPEG", ": shrink it"


def _check_dimensions(image: Image.Image) -> None:
    """Refuse images too costly to decode or too small to show anything (from the header alone)."""
    width, height = image.size
    limit, kind, advice = _pixel_limit(image)
    if width * height > limit:
        raise ImageInputError(
            f"The image is {width}×{height} pixels ({_megapixels(width * height)} megapixels); "
            f"the limit for {kind} is {_megapixels(limit)} megapixels{advice}."
        )
    if min(width, height) < MIN_SIDE:
        raise ImageInputError(
            f"The image is only {width}×{height} pixels; "
            f"it must be at least {MIN_SIDE}×{MIN_SIDE}."
        )


@contextmanager
def _decode_slot() -> Iterator[None]:
    """Hold one of the process's decoding slots, waiting briefly for one; ImageBusyError if none frees."""
    if not _DECODE_SLOTS.acquire(timeout=DECODE_WAIT_SECONDS):
        raise ImageBusyError(
            "The server is busy reading other uploads; please try again in a moment."
        )
    try:
        yield
    finally:
        _DECODE_SLOTS.release()


def _decode(data: bytes, size: int, frame: bool) -> LoadedImage:
    """Open and check from the header, then decode in one of the slots; may raise any Pillow error (wrapped by
    the caller)."""
    _check_png_chunks(data)
    with _open(data) as image:
        _check_dimensions(image)
        with _decode_slot():
            return _decode_checked(image, size, frame)


def _decode_checked(image: Image.Image, size: int, frame: bool) -> LoadedImage:
    """Decode the first frame (a JPEG at a reduced scale) and convert it. Everything here may decode: a PNG's
    EXIF may follow its pixels, so Pillow decodes it to read the orientation."""
    width, height = image.size
    notes: list[str] = []
    if image.format in _ANIMATED_FORMATS and getattr(image, "is_animated", False):
        notes.append(f"used the first frame of an animated {image.format}")
    image.draft(None, (size * _DRAFT_FACTOR, size * _DRAFT_FACTOR))
    orientation = image.getexif().get(ExifTags.Base.Orientation)
    sideways = orientation in _SIDEWAYS_ORIENTATIONS
    original_size = (height, width) if sideways else (width, height)
    if orientation in _ORIENTATION_NOTES:
        notes.append(_ORIENTATION_NOTES[orientation])
    image.load()  # the first frame only
    shrunk = _shrink(image, size * _DRAFT_FACTOR, notes, whole=frame)
    upright = shrunk.transpose(_TRANSPOSES[orientation]) if orientation in _TRANSPOSES else shrunk
    framing = None
    if frame:
        upright, framing = frame_drawing(upright, size)
        note = framing.note(original_size) if framing else NO_DRAWING_NOTE
        notes.extend([note] if note else [])  # a drawing that fills a square picture, unthickened: nothing to say
    final = _fit_square(upright, size, original_size, notes, framed=framing is not None and framing.cropped)
    return LoadedImage(array=np.array(final, dtype=np.uint8), original_size=original_size, notes=notes)


def _shrink(image: Image.Image, least: int, notes: list[str], whole: bool) -> Image.Image:
    """The centre square (or, ``whole``, the whole picture) as RGB, shrunk by a whole factor while its shorter side
    stays at least ``least``.

    Converted and shrunk a strip at a time, so the only full-size buffer is the decoded image itself. (The centre
    square of a rotated image is the rotated centre square, so this may come before the EXIF orientation.)
    """
    width, height = image.size
    side = min(width, height)
    cut_width, cut_height = (width, height) if whole else (side, side)
    left, top = (width - cut_width) // 2, (height - cut_height) // 2
    factor = max(1, side // least)
    rows = max(1, _STRIP_PIXELS // (cut_width * factor)) * factor
    out = Image.new("RGB", (-(-cut_width // factor), -(-cut_height // factor)))
    for start in range(0, cut_height, rows):
        strip = image.crop((left, top + start, left + cut_width, top + min(start + rows, cut_height)))
        strip_notes: list[str] = []
        out.paste(_to_rgb(strip, strip_notes).reduce(factor), (0, start // factor))
        notes.extend(note for note in strip_notes if note not in notes)
    return out


def _to_rgb(image: Image.Image, notes: list[str]) -> Image.Image:
    """Convert any decoded mode to 8-bit RGB, flattening transparency onto white."""
    if image.mode not in ("RGB", "RGBA"):
        notes.append(_MODE_NOTES.get(image.mode, f"converted from {image.mode} colours"))
    if image.mode in _SIXTEEN_BIT_MODES:
        image = _sixteen_to_eight_bit(image)
    if image.mode in _ALPHA_MODES or "transparency" in image.info:
        return _flatten_onto_white(image, notes)
    return image.convert("RGB")


def _sixteen_to_eight_bit(image: Image.Image) -> Image.Image:
    """Scale 16-bit grayscale (0..65535) to 8-bit; Pillow's own convert would clip at 255."""
    values = np.clip(np.asarray(image), 0, 65535).astype(np.uint32)
    return Image.fromarray(((values + 128) // 257).astype(np.uint8))


def _flatten_onto_white(image: Image.Image, notes: list[str]) -> Image.Image:
    """Composite over white; note it only if some pixel is actually not opaque."""
    rgba = image.convert("RGBA")
    if rgba.getchannel("A").getextrema()[0] < 255:
        notes.append("flattened transparency onto white")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def _fit_square(image: Image.Image, size: int, original_size: tuple[int, int], notes: list[str],
                framed: bool = False) -> Image.Image:
    """Resize the (already square) image to ``size`` x ``size``, noting the original size and crop (``framed``: the
    square was cut around the drawing, as the note before this one says)."""
    if framed and image.size != (size, size):
        notes.append(f"resized that square to {size}×{size}")
    elif not framed and original_size != (size, size):
        crop = "" if original_size[0] == original_size[1] else " (centre crop to square first)"
        notes.append(
            f"resized from {original_size[0]}×{original_size[1]} to {size}×{size}{crop}"
        )
    if image.size == (size, size):
        return image
    return image.resize((size, size), Image.Resampling.LANCZOS, reducing_gap=3.0)
