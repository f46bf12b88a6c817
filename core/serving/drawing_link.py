"""A drawing on the image page's grid as a short URL value, and back: the link that reopens the same drawing.

The grid (True = ink) is packed row by row, eight cells a byte, first cell in the high bit (numpy's packbits), and
written in URL-safe base64 without padding: a 16 x 16 grid is 32 bytes, 43 characters. A link's value is untrusted:
its length is checked before anything is decoded, and only the one spelling that encode_drawing writes is read, so a
drawing has exactly one link value. assets/web/drawing.js writes and reads the same spelling.
"""

from __future__ import annotations

import base64
import binascii
import math
import re

import numpy as np

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


class DrawingLinkError(ValueError):
    """A link's drawing value that is not a drawing on this grid; the message says why, in one line."""


def link_length(side: int) -> int:
    """How many characters a side x side drawing takes in a link."""
    return math.ceil(math.ceil(side * side / 8) * 4 / 3)


def encode_drawing(cells: np.ndarray) -> str:
    """A square boolean grid as its link value."""
    packed = np.packbits(np.asarray(cells, dtype=bool).ravel()).tobytes()
    return base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_drawing(value: str, side: int) -> np.ndarray:
    """The side x side boolean grid a link's value encodes; DrawingLinkError if it is not one."""
    expected = link_length(side)
    if len(value) != expected:  # checked first: nothing longer is ever decoded
        raise DrawingLinkError(f"a drawing is {expected} characters long, this one is {len(value)}")
    if not _ALPHABET.fullmatch(value):
        raise DrawingLinkError("a drawing is written with letters, digits, '-' and '_' only")
    try:
        packed = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as error:
        raise DrawingLinkError("this drawing's characters do not decode") from error
    cells = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=side * side).astype(bool)
    if encode_drawing(cells) != value:  # spare bits set: not a value this app wrote
        raise DrawingLinkError("this drawing's last character is not one this app writes")
    return cells.reshape(side, side)
