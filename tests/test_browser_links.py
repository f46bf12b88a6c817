"""Text from a user or a link never becomes a link: Streamlit's markdown autolinks bare addresses (GFM) even when
pages.ui.safety.literal has escaped them, so literal breaks them with an invisible joiner; here a real browser shows
the text as typed and no link. Run with `pytest -m browser tests/test_browser_links.py`."""

import urllib.parse
from pathlib import Path

import pytest
from test_browser import CHROMIUM, page, server  # noqa: F401 (fixtures)

from pages.ui.safety import LINK_BREAK

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]

ADDRESSES = "see https://evil.example/login www.evil.example and me@evil.example"
MAIN = '[data-testid="stMain"]'


def test_an_address_in_a_link_shows_as_typed_and_never_as_a_link(server, page):
    page.goto(f"{server}/live_training?run={urllib.parse.quote(ADDRESSES)}")  # the page names the run it lacks
    page.wait_for_function(f"() => [...document.querySelectorAll('{MAIN} [data-testid=\"stMarkdownContainer\"]')]"
                           ".some(el => el.innerText.includes('evil'))")
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")  # the run finished
    assert ADDRESSES in page.locator(MAIN).inner_text().replace(LINK_BREAK, "")  # the joiners show as nothing
    links = page.eval_on_selector_all(f"{MAIN} a[href]", "els => els.map(el => el.href)")
    assert all(href.startswith(server) for href in links), links  # the headings' own anchors only
