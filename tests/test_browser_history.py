"""Back and the address bar (issue: "Back showed /image_lab five times", "Back landed on /maths with the default
sentence", "image_lab?model=lm-rope"): one history entry per page visit, Back and Forward restore each page as it
was left, and a page's address holds only its own state. On the bundled models (the image page needs a ViT).
Run with `pytest -m browser tests/test_browser_history.py`."""

import re
import urllib.parse
from pathlib import Path

import pytest
from test_browser import CHROMIUM, ERROR, page, serve_app  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]

TYPED = "the dog near the boxes is red ."
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
VIT_PICKED = ("() => document.querySelector('[data-testid=\"stSidebar\"] [data-testid=\"stSelectbox\"] input')"
              "?.value.startsWith('vit-')")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from core.model.registry import MODELS_DIR

    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("history") / "streamlit.log") as url:
        yield url


def address(page) -> tuple[str, dict[str, str]]:
    url = urllib.parse.urlparse(page.url)
    return url.path, dict(urllib.parse.parse_qsl(url.query))


TITLES = {"/": "Text explorer", "/maths": "The maths, step by step", "/image_lab": "Image attention",
          "/residual_stream": "Residual stream"}


def wait_for_address(page, path: str, **params: str) -> None:
    """Until the address is `path` with these parameters (values: their start), and that page has been drawn and
    its run has finished (a Back pressed while a page still runs races Streamlit's own navigation, as a person's
    would)."""
    checks = " && ".join(f"(q.get({key!r}) || '').startsWith({value!r})" for key, value in params.items()) or "true"
    page.wait_for_function(f"() => {{ const q = new URLSearchParams(location.search); "
                           f"return location.pathname === {path!r} && {checks}; }}")
    page.wait_for_function(f"() => document.querySelector('[data-testid=\"stMain\"] h1')?.textContent"
                           f".startsWith({TITLES[path]!r})")
    page.wait_for_function(IDLE)


def shows(page, text: str, model: str) -> None:
    """The page shows `text` in its text box and the model `model` (Playwright's expect waits for both)."""
    from playwright.sync_api import expect

    expect(page.locator("textarea").first).to_have_value(text)
    expect(page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.locator("input")).to_have_value(
        re.compile(f"^{re.escape(model)}"))


def go(page, link: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=link).click()


def test_one_entry_per_page_and_back_restores_each_page_as_it_was_left(server, page):
    page.goto(server)
    box = page.locator("textarea").first
    box.wait_for()
    start = page.evaluate("history.length")
    box.fill(TYPED)
    box.press("Control+Enter")
    wait_for_address(page, "/", text=TYPED)
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.click()
    page.get_by_role("option", name="lm-alibi").first.click()
    wait_for_address(page, "/", text=TYPED, model="lm-alibi")

    go(page, "The maths, step by step")
    wait_for_address(page, "/maths", text=TYPED, model="lm-alibi")
    go(page, "Image attention")
    wait_for_address(page, "/image_lab")
    page.wait_for_function(VIT_PICKED)
    assert address(page)[1].get("model", "vit-").startswith("vit-"), page.url  # no text model in the image page's URL
    assert "text" not in address(page)[1], page.url
    go(page, "Residual stream")
    wait_for_address(page, "/residual_stream", text=TYPED, model="lm-alibi")  # the text models' choice comes back
    shows(page, TYPED, "lm-alibi")
    assert page.evaluate("history.length") == start + 3  # one entry per page visit, none per widget written

    page.go_back()
    wait_for_address(page, "/image_lab")
    page.wait_for_function(VIT_PICKED)
    page.go_back()
    wait_for_address(page, "/maths", text=TYPED, model="lm-alibi")
    shows(page, TYPED, "lm-alibi")
    page.go_back()
    wait_for_address(page, "/", text=TYPED, model="lm-alibi")
    shows(page, TYPED, "lm-alibi")
    page.go_forward()
    wait_for_address(page, "/maths", text=TYPED, model="lm-alibi")
    shows(page, TYPED, "lm-alibi")
    assert page.locator(ERROR).count() == 0
