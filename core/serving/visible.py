"""Characters that would act instead of showing, made visible: control characters (ESC, newline, tab…), format
characters (the bidi overrides U+202E and U+2066–U+2069, zero-width ones), line and paragraph separators. Each is
written as its escape, \\x1b or \\u202e, so that what a user or a link supplied is shown as typed and cannot turn
the text around it (a right-to-left override) or a terminal's colours. Nothing here imports Streamlit."""

from __future__ import annotations

import unicodedata


def is_invisible(char: str) -> bool:
    """Control, format, surrogate or unassigned (Unicode category C*), or a line or paragraph separator."""
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


def escaped(char: str) -> str:
    """The character's escape as Python writes it: \\n, \\t, \\r; \\x1b below U+0100, else \\u202e
    (\\U0001xxxx past U+FFFF)."""
    return char.encode("unicode_escape").decode("ascii")


def make_visible(text: str) -> str:
    """`text` with every invisible character replaced by its escape; every other character kept."""
    return "".join(escaped(char) if is_invisible(char) else char for char in text)
