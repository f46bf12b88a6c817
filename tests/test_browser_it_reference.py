""""What does “it” refer to?" in a real browser, on the bundled english-mlm and on the page's default,
english-mlm-it: before Reveal no chart of attention is drawn; after it, the pronoun's row in both sentences and
every head's preference are (four Vega charts), with the grade. Screenshots (it-reference-before,
it-reference-revealed, it-reference-taught) go to $ATTENTION_LAB_SCREENSHOTS when it is set. Run with
`pytest -m browser tests/test_browser_it_reference.py`."""

from pathlib import Path

import pytest
from test_browser import CHROMIUM, ERROR, page, serve_app, shoot, wait_idle  # noqa: F401 (fixtures)

from core.model.registry import MODELS_DIR

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")]

VEGA = ".vega-embed svg"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(MODELS_DIR, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def reveal_following_the_meaning(page) -> None:
    page.get_by_text("(it follows the meaning)").first.click()
    wait_idle(page)
    page.get_by_role("button", name="Reveal").click()
    page.get_by_text("You said").first.wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{VEGA}').length >= 4")
    wait_idle(page)


def test_the_animal_and_the_street_in_the_browser(server, page, shoot):
    page.goto(f"{server}/it_reference?model=english-mlm")
    page.get_by_text("Sentence 2").first.wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0 and page.locator(VEGA).count() == 0  # nothing answers it yet
    shoot(page, "it-reference-before")
    reveal_following_the_meaning(page)
    assert page.locator(ERROR).count() == 0
    charts = page.locator(VEGA)
    assert charts.count() == 4
    for n in range(2):  # the first two, the rows of "it", name the two nouns among their bars' labels
        labels = charts.nth(n).inner_html()
        assert "animal" in labels and "street" in labels and "sentence" in labels
    shoot(page, "it-reference-revealed")


def test_the_taught_head_reads_the_animal_then_the_street(server, page, shoot):
    """The page's default model: its referent head's "it" reads the animal when the sentence ends "tired" and the
    street when it ends "wide", so following the meaning is graded right, and the reveal says the head was taught."""
    page.goto(f"{server}/it_reference")
    page.get_by_text("Sentence 2").first.wait_for()
    wait_idle(page)
    assert page.get_by_text("was taught").count() == 0
    reveal_following_the_meaning(page)
    assert page.locator(ERROR).count() == 0
    page.get_by_text("Right.").first.wait_for()
    page.get_by_text("was taught").first.wait_for()
    shoot(page, "it-reference-taught")
