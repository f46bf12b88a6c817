"""The app makes no request that leaves the machine: every page, on the bundled models, in the system Chromium.

A classroom may have no internet, and a page that fetches an icon or a font from a CDN tells a third party who is
using it. Run with `pytest -m browser tests/test_browser_offline.py`."""

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from test_browser import CHROMIUM, ERROR, page, serve_app, wait_idle  # noqa: F401 (fixtures)

from core.model.registry import MODELS_DIR

ROOT = Path(__file__).resolve().parent.parent
PAGE_PATHS = [""] + re.findall(r'url_path="([^"]+)"', (ROOT / "app.py").read_text())  # "" is the default page
LOCAL = {"127.0.0.1", "localhost", "::1"}
pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app as a class gets it: the bundled models of assets/."""
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def outside(url: str) -> bool:
    """Whether a request for `url` would leave the machine (data: and blob: URLs never do)."""
    parsed = urlparse(url)
    return parsed.scheme not in ("data", "blob") and parsed.hostname not in LOCAL


def test_outside_is_told_apart():
    assert outside("https://fonts.gstatic.com/s/i/x.svg") and outside("http://10.0.0.1/p.png")
    assert not any(map(outside, ("http://127.0.0.1:8501/_stcore/health", "data:image/png;base64,AA", "blob:x")))


def test_no_page_fetches_anything_from_outside(server, page):
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    assert len(PAGE_PATHS) >= 10  # every page of app.py's navigation
    for path in PAGE_PATHS:
        page.goto(f"{server}/{path}")
        page.get_by_test_id("stSidebarNav").wait_for()
        wait_idle(page)
        assert page.locator(ERROR).count() == 0, path
        page.wait_for_timeout(500)  # late requests: icons, fonts, images
        fetched = [url for url in requests if outside(url)]
        assert not fetched, f"/{path} fetched from outside the machine: {fetched}"
    assert any(urlparse(url).path.startswith("/_stcore/") for url in requests)  # the listener saw the app's own
