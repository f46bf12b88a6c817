"""The encoder–decoder page in the real app (`streamlit run app.py`) in the system Chromium, on the bundled
encoder–decoder of assets/seq2seq.

Run with `pytest -m browser tests/test_browser_cross_attention.py`. Reuses the server, page and screenshot fixtures of
tests/test_browser.py; screenshots also go to $ATTENTION_LAB_SCREENSHOTS when it is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_browser import (ANY_CHART, CHART, CHROMIUM, ERROR, chart_titles, page, server, shoot,  # noqa: F401
                          wait_idle)

APP = Path(__file__).resolve().parent.parent / "app.py"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
              pytest.mark.skipif('url_path="cross_attention"' not in APP.read_text(),
                                 reason="app.py's navigation does not list the encoder–decoder page")]


def charts_drawn(page, at_least: int) -> None:
    """Until `at_least` charts are drawn: plotly (cross-attention) and canvas heatmaps (the heads' self-attention)."""
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= {at_least}")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0


def reveal_both(page) -> None:
    """Click Reveal on the two prompts: the charts that answer them wait for it."""
    for question in ("Will free generation write the reference", "Which English word will cross-attention"):
        box = page.get_by_test_id("stVerticalBlock").filter(has_text=question).last  # the innermost: the box
        box.get_by_role("button", name="Reveal").click()
        wait_idle(page)


def test_encoder_decoder_page_in_the_browser(server, page, shoot):
    page.goto(f"{server}/cross_attention")
    charts_drawn(page, 2)  # the decoder's self-attention on the reference, and the encoder's
    assert page.locator(ANY_CHART).count() == 2 and page.get_by_text("The model, free (greedy) generation").count() == 0
    shoot(page, "cross_attention_0_before_reveal")
    reveal_both(page)
    charts_drawn(page, 5)
    assert page.get_by_text("measured: free generation writes the reference word for word").count() == 1
    assert page.locator(f"{CHART} .legendtext").filter(has_text="true alignment").count() == 2
    shoot(page, "cross_attention_1_default")

    # the decoder head picker: both cross-attention charts follow, and the URL keeps it
    before = chart_titles(page)
    page.get_by_test_id("stRadio").filter(has_text="Decoder head").get_by_text("H0", exact=True).click()
    page.wait_for_function("() => location.search.includes('dec_head=H0')")
    charts_drawn(page, 5)
    after = chart_titles(page)
    assert after != before and any(title.endswith("H0") and "teacher forcing" in title for title in after)

    # switch the true alignment off: its squares leave both charts
    page.get_by_text("True alignment", exact=True).click()
    page.wait_for_function("() => location.search.includes('overlay=false')")
    charts_drawn(page, 5)
    assert page.locator(f"{CHART} .legendtext").filter(has_text="true alignment").count() == 0

    # a sentence longer than any trained noun phrase: the page says whether free generation holds on
    page.get_by_role("button", name="three adjectives (never trained on)").click()
    page.wait_for_function("() => location.search.includes('source=')")
    charts_drawn(page, 2)
    reveal_both(page)  # another sentence: asked afresh
    charts_drawn(page, 5)
    assert "tiny old red key" in page.get_by_role("textbox", name="English sentence (the source)").input_value()
    shoot(page, "cross_attention_2_three_adjectives")

    # a word outside the grammar: read as [UNK] and flagged as the text explorer flags it, translated freely
    box = page.get_by_role("textbox", name="English sentence (the source)")
    box.fill("the zebra runs .")
    box.press("Enter")
    page.get_by_text("are read as [UNK] (marked ⟨…⟩?): zebra").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "cross_attention_3_unknown_word")


def overlaps(page) -> list[str]:
    """The titles of the plotly charts whose title a toolbar (modebar) button covers."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{CHART}')].flatMap(chart => {{
        const title = chart.querySelector('.gtitle');
        if (!title) return [];
        const t = title.getBoundingClientRect();
        const hit = [...chart.querySelectorAll('.modebar-btn')].some(button => {{
            const b = button.getBoundingClientRect();
            return b.width > 0 && b.left < t.right && t.left < b.right && b.top < t.bottom && t.top < b.bottom;
        }});
        return hit ? [title.textContent] : [];
    }})""")


@pytest.mark.parametrize("presenter", ["false", "true"])
def test_no_toolbar_covers_a_cross_attention_title(server, page, presenter):
    """At 1440×900 the two cross-attention charts share the width: the zoom buttons covered their titles' end."""
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{server}/cross_attention?presenter={presenter}")
    charts_drawn(page, 2)
    reveal_both(page)
    charts_drawn(page, 5)
    assert sum(": reads" in title for title in chart_titles(page)) == 2  # the cross-attention charts
    assert overlaps(page) == []
