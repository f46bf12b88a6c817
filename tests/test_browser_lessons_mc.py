"""The two lesson pages, "The maths, step by step" (/maths) and "Cost of attention" (/attention_cost), in the real app
(`streamlit run app.py`) in the system Chromium.

Run with `pytest -m browser tests/test_browser_lessons_mc.py`. Reuses the server, page and screenshot fixtures of
tests/test_browser.py (the app on small random models)."""

from pathlib import Path

import pytest

from test_browser import (ANY_CHART, CHART, CHROMIUM, ERROR, load, page, server, shoot,  # noqa: F401 (fixtures)
                          wait_idle)

APP = Path(__file__).resolve().parent.parent / "app.py"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium"),
              pytest.mark.skipif(not all(f'url_path="{p}"' in APP.read_text() for p in ("maths", "attention_cost")),
                                 reason="app.py's navigation does not list the maths and cost pages yet")]


def chart_text(page, index: int) -> str:
    return page.locator(CHART).nth(index).text_content()


def wait_for_chart_text(page, text: str) -> None:
    """Until the first chart has drawn `text` (plotly draws after the element appears)."""
    page.wait_for_function(f"() => document.querySelector('{CHART}')?.textContent.includes({text!r})")


def test_maths_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/maths", 1)  # step 1 alone: X
    assert page.get_by_text("The maths, step by step").count() >= 1
    assert page.get_by_text("Running example:").count() == 1 and page.locator(ANY_CHART).count() == 1
    shoot(page, "maths_1_default")
    page.get_by_role("button", name="Next").click()  # step 2: queries and keys
    page.wait_for_url("**maths_step=2*")
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= 2")
    wait_idle(page)
    assert page.locator(".katex").count() >= 2  # the formulas are typeset
    queries_before = chart_text(page, 0)
    page.get_by_text("H1", exact=True).click()
    page.wait_for_url("**head=H1**")
    wait_idle(page)
    assert chart_text(page, 0) != queries_before  # head 1's queries
    assert page.locator(ERROR).count() == 0
    load(page, f"{server}/maths?head=H1&maths_step=all+steps", 12)  # every step on one page
    assert page.locator(".katex").count() >= 10
    page.get_by_role("button", name="Reveal").nth(1).click()  # Σ_h V_h X A_h vs concatenate-then-project
    page.get_by_text("max |Σ_h V_h X A_h − concat form|").wait_for()
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "maths_2_head1_revealed")
    page.goto(f"{server}/maths?presenter=true&layer=L1&head=H1&maths_step=all+steps")
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= 12")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "maths_3_presenter_L1")


def test_cost_page_in_the_browser(server, page, shoot):
    load(page, f"{server}/attention_cost?max_n=256", 0)
    page.get_by_role("button", name="Measure on this machine").click()
    page.get_by_text("the chart and the table of times: shown when you reveal").wait_for()
    wait_idle(page)
    assert page.locator(ANY_CHART).count() == 0 and page.get_by_text("time slope").count() == 0
    shoot(page, "cost_0_measured_not_revealed")
    page.get_by_role("button", name="Reveal").nth(0).click()  # when N doubles…
    page.get_by_text("time slope").wait_for()
    wait_for_chart_text(page, "slope 2")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0 and page.get_by_text("softmax attention's time grew").count() == 1
    first = chart_text(page, 0)
    shoot(page, "cost_1_measured")
    page.get_by_text("Causal", exact=True).click()  # the toggle: another setting, measured anew
    page.wait_for_url("**causal=false**")
    wait_idle(page)
    page.get_by_role("button", name="Measure on this machine").click()
    page.get_by_text("time slope").wait_for()
    wait_for_chart_text(page, "slope 2")
    wait_idle(page)
    assert chart_text(page, 0) != first
    page.get_by_role("button", name="Reveal").nth(1).click()  # softmax vs linear on the model's head
    page.get_by_text("different kernel").wait_for()
    page.wait_for_function(f"() => document.querySelectorAll('{ANY_CHART}').length >= 4")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    shoot(page, "cost_2_comparison")
