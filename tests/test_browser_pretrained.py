"""A user's pretrained GPT-2 in the real app and browser: a tiny random one in the tests' Hugging Face cache
(tests/conftest.py), which the server inherits. Run with `pytest -m browser tests/test_browser_pretrained.py`."""

from pathlib import Path

import pytest
from pretrained_models import cache_model
from test_browser import CHART, CHROMIUM, ERROR, HEATMAP, page, serve_app, shoot, wait_idle  # noqa: F401 (fixtures)

from core.model.registry import MODELS_DIR

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]
REPO = "tiny-org/browser-gpt2"
VIT = "tiny-org/browser-vit"


@pytest.fixture(scope="module")
def server(tmp_path_factory, hf_cache):
    """The app on the bundled models, with a tiny GPT-2 and a tiny ViT in its Hugging Face cache."""
    cache_model(REPO, "gpt2")
    cache_model(VIT, "vit")
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def test_the_text_explorer_opens_a_cached_gpt2_and_its_ablation_recomputes(server, page, shoot):
    page.goto(f"{server}/?model=hf:{REPO}")
    page.locator(HEATMAP).first.wait_for()
    wait_idle(page)
    shoot(page, "pretrained-gpt2-explorer")
    assert page.locator(ERROR).count() == 0
    assert "with <|endoftext|> first" in page.get_by_test_id("stMain").inner_text()
    assert REPO in page.get_by_test_id("stSidebar").inner_text()  # the picker's and the caption's source
    page.get_by_role("combobox", name="Position encoding").click()  # GPT-2's learned positions switched off: parameter-free
    page.get_by_role("option", name="none").click()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert "encoding none" in page.get_by_test_id("stMain").inner_text()
    shoot(page, "pretrained-gpt2-positions-off")


def test_the_image_page_opens_a_cached_vit(server, page, shoot):
    page.goto(f"{server}/image_lab?model=hf:{VIT}")
    page.get_by_text("From patch to token").wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 3")  # image, bars, figure 2
    wait_idle(page)
    shoot(page, "pretrained-vit-image-page")
    assert page.locator(ERROR).count() == 0
    main = page.get_by_test_id("stMain").inner_text()
    assert f"hf:{VIT} says" in main and "to the 16×16 this model reads" in main
