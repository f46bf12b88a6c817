"""Which browser a session is (issue 36, finding 5): signed browser ids a client cannot choose or alter
(core/serving/identity.py), new ids rationed per client address, and the page's cookie (pages/ui/browser.py)."""

from __future__ import annotations

from conftest import PAGES
from streamlit.testing.v1 import AppTest

from core.serving import identity
from core.serving.identity import AddressLimiter, Signer, address_token, load_secret
from pages.ui import browser


def test_a_signed_id_reads_back_and_a_forged_or_altered_one_does_not(tmp_path):
    signer = Signer(load_secret(tmp_path))
    token = identity.new_token()
    cookie = signer.sign(token)
    assert signer.verify(cookie) == token
    assert signer.verify(token) is None  # the unsigned ids of before, or one a script made up
    assert signer.verify("0" * 32 + "." + "0" * 32) is None
    assert signer.verify(cookie[:-1] + ("0" if cookie[-1] != "0" else "1")) is None
    assert signer.verify("f" * 32 + cookie[32:]) is None  # another id under this one's signature
    assert Signer(load_secret(tmp_path / "other server")).verify(cookie) is None


def test_the_secret_is_made_once_owner_only_and_shared_by_every_replica(tmp_path):
    first = load_secret(tmp_path)
    assert load_secret(tmp_path) == first and len(first) == 32
    assert (tmp_path / identity.SECRET_FILE).stat().st_mode & 0o077 == 0


def test_new_ids_are_rationed_per_address_over_a_sliding_window():
    limiter = AddressLimiter(per_address=3, window=60, max_addresses=2)
    assert [limiter.allow("10.0.0.1", now=t) for t in (0, 1, 2, 3)] == [True, True, True, False]
    assert limiter.allow("10.0.0.2", now=3)  # another address has its own ration
    assert limiter.allow("10.0.0.1", now=61)  # the first id has left the window
    assert limiter.allow("10.0.0.3", now=200)  # past max_addresses the idle ones are forgotten
    assert len(limiter._issued) <= 2


def page_session(monkeypatch, tmp_path, cookie: str = "", address: str | None = None) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(browser, "_sent_cookie", lambda: cookie)
    monkeypatch.setattr(browser, "client_address", lambda: address)
    at = AppTest.from_file(str(PAGES / "live_training.py"), default_timeout=60).run()
    assert not at.exception
    return at


def test_the_page_keeps_a_signed_id_and_replaces_a_forged_one(monkeypatch, tmp_path):
    browser._signer.clear()
    at = page_session(monkeypatch, tmp_path)
    mine = at.session_state["browser_id"]
    signed = browser._signer().sign(mine)
    assert signed in at.get("html")[0].proto.body  # the cookie the page sets carries the signature
    assert page_session(monkeypatch, tmp_path, cookie=signed).session_state["browser_id"] == mine
    forged = page_session(monkeypatch, tmp_path, cookie="0" * 32).session_state["browser_id"]
    assert forged not in (mine, "0" * 32)


def test_past_its_ration_an_address_shares_one_id(monkeypatch, tmp_path):
    browser._limiter.clear()
    monkeypatch.setattr(browser, "AddressLimiter", lambda: AddressLimiter(per_address=2))
    ids = [page_session(monkeypatch, tmp_path, address="203.0.113.9").session_state["browser_id"] for _ in range(4)]
    assert len(set(ids[:2])) == 2 and ids[2] == ids[3] == address_token("203.0.113.9")
    assert page_session(monkeypatch, tmp_path, address="203.0.113.10").session_state["browser_id"] != ids[3]
    browser._limiter.clear()
