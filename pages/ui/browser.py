"""Which browser this is: an id kept in a signed cookie, the same in all its tabs, that owns live-training runs and
counts saved runs against its quota. The signature and the ration of new ids per client address are
core/serving/identity.py's: a script can neither choose an id nor mint a new one on every connection.
"""

from __future__ import annotations

import os

import streamlit as st

from core.model import registry
from core.serving.identity import (SAVES_PER_ADDRESS, WINDOW_SECONDS, AddressLimiter, Signer, address_token,
                                   load_secret, new_token)

BROWSER_COOKIE = "attention_lab_browser"
BROWSER_DAYS = 180  # how long a browser keeps its id (its runs' ownership and its saved-run quota)
TRUSTED_PROXY_ENV = "ATTENTION_LAB_TRUSTED_PROXY"  # "1": behind nginx, whose X-Real-IP names the client


@st.cache_resource
def _signer() -> Signer:
    """One per process, its secret shared by every replica through the user directory."""
    return Signer(load_secret(registry.user_dir()))


@st.cache_resource
def _limiter() -> AddressLimiter:
    return AddressLimiter()


@st.cache_resource
def _save_limiter() -> AddressLimiter:
    return AddressLimiter(per_address=SAVES_PER_ADDRESS)


def save_refusal() -> str | None:
    """Why this browser's network may not save one more run now (SAVES_PER_ADDRESS an hour per client address,
    whatever browser ids it shows), or None, counting this save."""
    address = client_address()
    if address is None or _save_limiter().allow(address):
        return None
    return (f"this network has saved {SAVES_PER_ADDRESS} run{'s' * (SAVES_PER_ADDRESS != 1)} in the last "
            f"{WINDOW_SECONDS / 3600:g} hour, as many as the server takes from one network. Save again later, or ask "
            "your teacher.")


def _sent_cookie() -> str:
    """The browser id cookie the session's first request sent ("" when none, or outside a browser)."""
    try:
        sent = st.context.cookies.get(BROWSER_COOKIE, "")
    except (AttributeError, RuntimeError):
        return ""
    return sent if isinstance(sent, str) else ""


def client_address() -> str | None:
    """The client's address: nginx's X-Real-IP where the app sits behind it ($ATTENTION_LAB_TRUSTED_PROXY=1: a
    client reaching the app directly could write that header itself), else the connection's. None on this computer
    (localhost) and outside a browser: nothing to ration there."""
    try:
        if os.environ.get(TRUSTED_PROXY_ENV) == "1":
            return st.context.headers.get("X-Real-IP") or None
        return st.context.ip_address
    except (AttributeError, RuntimeError):
        return None


def _issue_id() -> str:
    """A new browser id, or the address's shared one once it has had its ration of new ids."""
    address = client_address()
    if address is None or _limiter().allow(address):
        return new_token()
    return address_token(address)


def browser_id() -> str:
    """An id for this browser, the same in all its tabs and after a reload: the one its signed cookie holds, else a
    new one (rationed per address) that a small script stores, signed, in the cookie, so the next tab or reload sends
    it. Owns live runs (one at a time per browser) and counts saved runs against the browser's quota. Call it on
    every run: it sets the cookie on the runs of a session that did not send it."""
    signer = _signer()
    sent = _sent_cookie()
    if "browser_id" not in st.session_state:
        st.session_state["browser_id"] = signer.verify(sent) or _issue_id()
    current = st.session_state["browser_id"]
    cookie = signer.sign(current)
    if sent != cookie:
        st.html(f"<script>document.cookie = '{BROWSER_COOKIE}={cookie}; path=/; "
                f"max-age={BROWSER_DAYS * 86400}; SameSite=Strict';</script>", unsafe_allow_javascript=True)
    return current
