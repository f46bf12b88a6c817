"""Which browser this is: an id kept in a cookie, the same in all its tabs, that owns live-training runs and
counts saved runs against its quota.
"""

from __future__ import annotations

import re
import uuid

import streamlit as st

BROWSER_COOKIE = "attention_lab_browser"
BROWSER_ID = re.compile(r"[0-9a-f]{32}")
BROWSER_DAYS = 180  # how long a browser keeps its id (its runs' ownership and its saved-run quota)


def _sent_cookie() -> str:
    """The browser id cookie the session's first request sent ("" when none, or outside a browser)."""
    try:
        sent = st.context.cookies.get(BROWSER_COOKIE, "")
    except (AttributeError, RuntimeError):
        return ""
    return sent if isinstance(sent, str) else ""


def browser_id() -> str:
    """An id for this browser, the same in all its tabs and after a reload: the one its cookie holds, else a new
    one that a small script stores in the cookie, so the next tab or reload sends it. Owns live runs (one at a time
    per browser) and counts saved runs against the browser's quota. Call it on every run: it sets the cookie on the
    runs of a session that did not send it."""
    sent = _sent_cookie()
    if "browser_id" not in st.session_state:
        st.session_state["browser_id"] = sent if BROWSER_ID.fullmatch(sent) else uuid.uuid4().hex
    current = st.session_state["browser_id"]
    if sent != current:
        st.html(f"<script>document.cookie = '{BROWSER_COOKIE}={current}; path=/; "
                f"max-age={BROWSER_DAYS * 86400}; SameSite=Strict';</script>", unsafe_allow_javascript=True)
    return current
