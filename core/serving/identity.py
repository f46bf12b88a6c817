"""Which browser a request comes from, in a form a script cannot mint at will (issue 36, finding 5): the browser id
the app keeps in a cookie is signed with a secret of the server (HMAC-SHA256), so a client cannot choose one (nor
take another's), and new ids are rationed per client address, so a script that sends no cookie cannot become a new
browser on every connection: past the ration, the cookie-less sessions of that address share one id (one training
run at a time, one saved-run quota). Nothing here imports Streamlit (pages/ui/browser.py sets and reads the cookie).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections import deque
from pathlib import Path

TOKEN_HEX = 32  # a browser's id: 128 random bits
SIGNATURE_HEX = 32  # the cookie's signature: HMAC-SHA256, 128 bits of it
SECRET_FILE = ".identity_secret"  # in the user directory, which every replica shares
NEW_PER_ADDRESS = 60  # new browser ids one address may get in WINDOW_SECONDS: a class of 30 behind one NAT, twice
# saved runs one address may make in WINDOW_SECONDS: a class of 30 behind one NAT saving two each. Each browser's
# quota (core/training/live/runs.py) alone let a script that changes its id save 300 runs in 321 s (issue 36)
SAVES_PER_ADDRESS = 60
WINDOW_SECONDS = 3600.0


def load_secret(folder: Path) -> bytes:
    """The server's signing secret: read from `folder`/SECRET_FILE, created there (owner-only) by the first replica
    that needs it. Where the folder cannot be written, a secret of this process (ids then last until a restart)."""
    path = folder / SECRET_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return secrets.token_bytes(32)
    else:
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
    try:
        text = path.read_text().strip()
    except OSError:
        return secrets.token_bytes(32)
    return bytes.fromhex(text) if len(text) == 64 else secrets.token_bytes(32)


class Signer:
    """Browser ids as cookie values "<id>.<signature>", and back."""

    def __init__(self, secret: bytes):
        self._secret = secret

    def _signature(self, token: str) -> str:
        return hmac.new(self._secret, token.encode(), hashlib.sha256).hexdigest()[:SIGNATURE_HEX]

    def sign(self, token: str) -> str:
        return f"{token}.{self._signature(token)}"

    def verify(self, cookie: str) -> str | None:
        """The id a cookie value carries when this server signed it, else None (a forged, altered or foreign one)."""
        token, _, signature = cookie.partition(".")
        if len(token) > 64 or not hmac.compare_digest(signature, self._signature(token)):
            return None
        return token


def new_token() -> str:
    return secrets.token_hex(TOKEN_HEX // 2)


def address_token(address: str) -> str:
    """The one id that an address's cookie-less sessions share once its ration of new ids is spent."""
    return "address-" + hashlib.sha256(address.encode()).hexdigest()[:24]


class AddressLimiter:
    """At most `per_address` of something (new browser ids, saved runs) for one client address in any `window`
    seconds (a sliding window)."""

    def __init__(self, per_address: int = NEW_PER_ADDRESS, window: float = WINDOW_SECONDS, max_addresses: int = 10_000):
        self.per_address, self.window, self.max_addresses = per_address, window, max_addresses
        self._issued: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, address: str, now: float | None = None) -> bool:
        """Whether `address` may have one more now (counted when it may)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._issued) >= self.max_addresses:  # forget the idle ones: bounded memory, whoever connects
                for stale in [a for a, times in self._issued.items() if not times or now - times[-1] > self.window]:
                    del self._issued[stale]
            times = self._issued.setdefault(address, deque())
            while times and now - times[0] > self.window:
                times.popleft()
            if len(times) >= self.per_address:
                return False
            times.append(now)
            return True
