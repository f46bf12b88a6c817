"""Untrusted text in and out: what a user or a link supplies is shown through one escaping helper (`literal`), a
link's non-finite numbers are dropped before any widget is built, and an input error is one clear box.
"""

from __future__ import annotations

import math
import re
import string

import streamlit as st
from streamlit.runtime.state.session_state_proxy import get_session_state

from core.serving.visible import make_visible

INERT = set(",;'\"?%@/=")  # ASCII punctuation that neither markdown, LaTeX, HTML nor Streamlit obeys on one line
MARKUP = re.compile(f"([{re.escape(''.join(sorted(set(string.punctuation) - INERT)))}])")
# Streamlit's markdown (GFM) turns http://…, www.… and a@b.c into links even when escaped: it finds them in the text
# after escapes are undone. A word joiner (invisible, no break) after ://, www and @ leaves no such pattern.
LINK_BREAK = "\u2060"
AUTOLINK_START = re.compile(r"://|www(?=\.)|@", re.IGNORECASE)


def literal(text: str, *, markdown: bool = True) -> str:
    """Text a user or a link supplied (or a message quoting it), shown as typed: the one way such text reaches
    st.markdown, captions, alerts, labels and widget options. Control and bidi characters (ESC, a newline, U+202E)
    are written as their escapes (core/serving/visible.py); with `markdown` (text Streamlit renders: markdown, captions,
    alerts, labels, radio options) every ASCII punctuation character that markdown, LaTeX ($), HTML (<, &) or
    Streamlit (:red[…], :material/…:) could obey is backslash-escaped (CommonMark lets a backslash escape each),
    so *, [x](…), `, $x$ and <img> show, never act, and a LINK_BREAK after each ://, www and @ keeps an address
    text, never a link (it shows as nothing). markdown=False for what a widget shows as plain text (a drop-down's
    options), where a backslash would show."""
    shown = make_visible(str(text))
    if not markdown:
        return shown
    return MARKUP.sub(r"\\\1", AUTOLINK_START.sub(lambda start: start.group() + LINK_BREAK, shown))


def _non_finite(value: str) -> bool:
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def drop_non_finite_numbers() -> None:
    """Remove link values such as inf, -inf, nan or 1e309 before any widget is built, with a note naming them.
    Streamlit turns a bound number input's URL value into a number before page code runs, and a value with no
    finite number crashes it (OverflowError in its deserializer); the widget then starts from its default."""
    dropped = sorted(key for key, value in st.query_params.items() if _non_finite(value))
    if dropped:
        # Widgets are seeded from the link's initial values, a copy st.query_params does not change: drop them from
        # both (Streamlit's own call after a page change does the same for another page's parameters).
        with get_session_state().query_params() as params:
            for key in dropped:
                del params[key]
            params.set_initial_query_params_from_current()
        st.info(literal(f"The link's {', '.join(dropped)} held no finite number, so the default is used instead."),
                icon=":material/link_off:")


def show_input_error(message: str) -> None:
    """The reason a text or setting cannot be run, as an error box (the message may quote what was typed, so it
    is shown literally); the text stays in its box to edit."""
    st.error(f"**Can't run this:** {literal(message)}", icon="⚠️")
