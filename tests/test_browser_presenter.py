"""A projector's 1024×768, normal and in presenter mode (issue 37), in the real app (bundled models) in the system
Chromium: formulas fit their column, the logit lens's guesses do not run together, figure 2's strip titles clear the
tick labels above them, and the mask editor's labels grow with presenter mode.

Run with `pytest -m browser tests/test_browser_presenter.py`. Shares the server and browser of
tests/test_browser_layout.py; screenshots go to $ATTENTION_LAB_SCREENSHOTS when it is set."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser import CHROMIUM, ERROR
from test_browser_layout import browser, open_page, screenshot, server  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]

MODES = pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
TOUCH_PX = 0.5  # two boxes overlapping by less than this only touch
KATEX_OVERHANG_PX = 2  # KaTeX's sub- and superscripts overhang the formula's box by 2 px, short formulas' too
# Formulas wider than their box, which scrolls sideways and hides the rest.
WIDE_FORMULAS = f"""() => [...document.querySelectorAll('[data-testid="stMain"] .katex-display')]
  .filter(el => el.scrollWidth > el.clientWidth + {KATEX_OVERHANG_PX})
  .map(el => [el.scrollWidth - el.clientWidth, el.querySelector('.katex-mathml').textContent.slice(0, 40)])"""
LENS = ("[...document.querySelectorAll('.js-plotly-plot')]"
        ".find(c => c.querySelector('.cbtitle')?.textContent === 'p(top)')")
FIGURE2 = ("[...document.querySelectorAll('.js-plotly-plot')]"
           ".find(c => [...c.querySelectorAll('.annotation-text')].some(a => a.textContent.startsWith('vec(')))")
MASK_GRID = "document.querySelector('[data-testid=\"stVegaLiteChart\"]')"


@pytest.fixture(scope="module")
def page(browser):
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    page.set_default_timeout(90_000)
    yield page
    page.close()


def visit(page, url: str, path: str, presenter: bool, chart: str | None = None) -> None:
    """Open `path` of the app at `url` in the mode asked for; wait for `chart` (a JS expression finding it)."""
    open_page(page, f"{url}/{path}{'&' if '?' in path else '?'}presenter={'true' if presenter else 'false'}")
    if chart:  # drawn, and a plotly chart resized to its column
        page.wait_for_function(f"""() => {{ const chart = {chart}, svg = chart?.querySelector('svg');
            const fitted = () => Math.abs(svg.getBoundingClientRect().width - chart.getBoundingClientRect().width) < 2;
            return svg && (!chart.matches('.js-plotly-plot') || fitted()); }}""")
    assert page.locator(ERROR).count() == 0


def boxes(page, chart: str, selector: str) -> list[dict]:
    """The bounding boxes (and texts) of the elements `selector` in `chart`."""
    return page.evaluate(f"""() => [...({chart}).querySelectorAll('{selector}')].map(el => {{
        const r = el.getBoundingClientRect();
        return {{text: el.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}}; }})""")


def overlapping(first: list[dict], second: list[dict]) -> list[tuple[str, str]]:
    """The pairs of distinct boxes, one from each list, that overlap."""
    return [(a["text"], b["text"]) for a in first for b in second if a is not b
            and min(a["right"], b["right"]) - max(a["left"], b["left"]) > TOUCH_PX
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > TOUCH_PX]


@MODES
@pytest.mark.parametrize("path", ["residual_stream", "token_norm", "maths?maths_step=all+steps"])
def test_formulas_fit_the_column(server, page, path, presenter):
    """The residual stream's formula was cut after "⇒ ‖x" in presenter mode (249 px behind a scroll, 18 px without
    it); TokenNorm's and several of the maths page's were wider than their column too. And every formula parses:
    the maths page showed its queries' and keys' as red source (x_n_{q,h}, a double subscript)."""
    visit(page, server, path, presenter)
    assert page.locator(".katex-display").count() >= 1 and page.locator(".katex-error").count() == 0
    assert page.evaluate(WIDE_FORMULAS) == []


@MODES
def test_logit_lens_guesses_stay_apart(server, page, presenter):
    """At 1024×768 in presenter mode the guesses of neighbouring cells ran together ("strangedoctors")."""
    visit(page, server, "residual_stream", presenter, LENS)
    screenshot(page, f"presenter_residual_stream_{'presenter' if presenter else 'normal'}")
    guesses = boxes(page, LENS, ".heatmap-label text")
    assert len(guesses) >= 12
    assert overlapping(guesses, guesses) == []
    chart = boxes(page, LENS, "svg.main-svg")[0]
    title = boxes(page, LENS, ".g-ytitle text")[0]
    assert chart["top"] <= title["top"] and title["bottom"] <= chart["bottom"] and chart["left"] <= title["left"]
    assert overlapping([title], boxes(page, LENS, ".ytick text")) == []


@MODES
@pytest.mark.parametrize("notation", ["common", "paper"])
def test_figure2_titles_clear_each_other_and_the_tick_labels(server, page, notation, presenter):
    """Figure 2 in common notation (the default): each strip's title sat on the tick labels of the strip above; in
    paper notation the titles over the narrow columns ran into each other."""
    visit(page, server, f"image_lab?notation={notation}", presenter, FIGURE2)
    screenshot(page, f"presenter_image_lab_{notation}_{'presenter' if presenter else 'normal'}")
    titles = boxes(page, FIGURE2, ".annotation-text")
    ticks = boxes(page, FIGURE2, 'g[class$="tick"] text')
    assert len(titles) == 5 and len(ticks) >= 20
    assert overlapping(titles, titles + ticks) == []


def test_mask_editor_labels_grow_in_presenter_mode(server, page):
    """The mask grid (an Altair chart, which presenter mode's plotly scaling never reached) kept its 12 px labels."""
    sizes = {}
    for presenter in (False, True):
        visit(page, server, "masks_lab", presenter, MASK_GRID)
        screenshot(page, f"presenter_masks_lab_{'presenter' if presenter else 'normal'}")
        sizes[presenter] = page.evaluate(f"""() => [...({MASK_GRID}).querySelectorAll('.role-axis-label text')]
            .map(el => parseFloat(getComputedStyle(el).fontSize))""")
        assert len(sizes[presenter]) >= 2 * 12  # every query's and every key's label
    assert min(sizes[True]) >= 1.5 * max(sizes[False])


@MODES
@pytest.mark.parametrize("path", ["", "image_lab"])
def test_the_sidebar_shows_the_whole_model_name(server, page, path, presenter):
    """The sidebar's model drop-down (an input, which cannot wrap) cut "lm-rope (agreement 100%)" at 1024 px."""
    visit(page, server, path, presenter)
    field = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.locator("input")
    field.wait_for()
    assert field.evaluate("el => el.scrollWidth <= el.clientWidth"), field.input_value()


ALIBI = ("[...document.querySelectorAll('.js-plotly-plot')]"
         ".find(c => c.querySelector('.gtitle')?.textContent.startsWith('alibi: bias per head'))")


def test_alibi_panels_grow_in_presenter_mode(server, page):
    """Four ALiBi heads side by side left each panel about 80 px wide on a projector; presenter mode puts two a row."""
    widths = {}
    for presenter in (False, True):
        visit(page, server, "positions_lab", presenter, ALIBI)
        widths[presenter] = page.evaluate(f"""() => [...({ALIBI}).querySelectorAll('.heatmaplayer image')]
            .map(el => el.getBoundingClientRect().width)""")
        assert len(widths[presenter]) == 4  # one panel per head
    assert min(widths[True]) >= 1.5 * max(widths[False])
