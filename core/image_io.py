"""Turn an uploaded file (untrusted bytes) into a model-ready RGB array.

The upload is checked before anything is decoded: byte size, then format and
pixel dimensions from the header, so a decompression bomb is refused without
ever being decompressed. Whatever Pillow can decode is converted to 8-bit RGB,
centre-cropped to a square and resized; every conversion is recorded in
``LoadedImage.notes`` so the app can tell the user what happened. Any problem
surfaces as :class:`ImageInputError` with a one-line message, never as another
exception.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_PIXELS = 40_000_000
MIN_SIDE = 8
# JPEGs are decoded at a reduced scale (1/2 .. 1/8) as long as both sides stay
# at least this many times the target size: cheap, and plenty for a tiny output.
_DRAFT_FACTOR = 4

# Pillow's own bomb guard (process-wide): refuse in Image.open what we refuse anyway.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS

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


class ImageInputError(ValueError):
    """An upload that cannot be used; ``str()`` is a one-line message for the user."""


@dataclass
class LoadedImage:
    """A decoded upload ready for the model.

    ``original_size`` is (width, height) as the image is displayed, i.e. after
    its EXIF orientation. ``notes`` lists every conversion applied, in order.
    """

    array: np.ndarray  # uint8 [size, size, 3] RGB
    original_size: tuple[int, int]
    notes: list[str] = field(default_factory=list)


def load_image(data: bytes, size: int = 32) -> LoadedImage:
    """Decode untrusted ``data`` into a ``size`` x ``size`` RGB image, or raise ImageInputError."""
    _check_upload_bytes(data)
    try:
        return _decode(data, size)
    except ImageInputError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageInputError(
            f"The image has too many pixels; the limit is {MAX_PIXELS // 1_000_000} megapixels."
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


def _check_dimensions(width: int, height: int) -> None:
    """Refuse images too large to decode safely or too small to show anything."""
    if width * height > MAX_PIXELS:
        raise ImageInputError(
            f"The image is {width}×{height} pixels; the limit is "
            f"{MAX_PIXELS // 1_000_000} megapixels."
        )
    if min(width, height) < MIN_SIDE:
        raise ImageInputError(
            f"The image is only {width}×{height} pixels; "
            f"it must be at least {MIN_SIDE}×{MIN_SIDE}."
        )


def _decode(data: bytes, size: int) -> LoadedImage:
    """Open, check, decode and convert; may raise any Pillow error (wrapped by the caller)."""
    with _open(data) as image:
        width, height = image.size
        _check_dimensions(width, height)
        notes: list[str] = []
        if image.format in _ANIMATED_FORMATS and getattr(image, "is_animated", False):
            notes.append(f"used the first frame of an animated {image.format}")
        orientation = image.getexif().get(ExifTags.Base.Orientation)
        sideways = orientation in _SIDEWAYS_ORIENTATIONS
        original_size = (height, width) if sideways else (width, height)
        image.draft(None, (size * _DRAFT_FACTOR, size * _DRAFT_FACTOR))
        image.load()
        upright = _apply_orientation(image, orientation, notes)
        rgb = _to_rgb(upright, notes)
        square = _fit_square(rgb, size, original_size, notes)
        array = np.array(square, dtype=np.uint8)
        return LoadedImage(array=array, original_size=original_size, notes=notes)


def _apply_orientation(image: Image.Image, orientation: object, notes: list[str]) -> Image.Image:
    """Rotate/flip as the EXIF orientation tag says, so the image is upright."""
    if orientation not in _ORIENTATION_NOTES:
        return image
    notes.append(_ORIENTATION_NOTES[orientation])
    return ImageOps.exif_transpose(image)


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


def _fit_square(
    image: Image.Image, size: int, original_size: tuple[int, int], notes: list[str]
) -> Image.Image:
    """Centre-crop to a square and resize to ``size`` x ``size``."""
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    if original_size != (size, size):
        crop = "" if original_size[0] == original_size[1] else " (centre crop to square first)"
        notes.append(
            f"resized from {original_size[0]}×{original_size[1]} to {size}×{size}{crop}"
        )
    return image.resize(
        (size, size),
        Image.Resampling.LANCZOS,
        box=(left, top, left + side, top + side),
        reducing_gap=3.0,
    )
