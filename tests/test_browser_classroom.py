"""A class session in the real app and the system Chromium (issue 39): a teacher and five students, each a browser of
its own. The students join from the link, follow the teacher to the TokenNorm page and answer its prompt; the
teacher's histogram counts them; the teacher's Reveal reveals on every student's page with the class's answers;
the followers follow the teacher to a second page and a toggle; a locked text reaches a student who does not
follow; the summary downloads. Run once on the embedded SQLite store and once on a Redis server (the shared store
of docker-compose.yml, here a private redis-server).

Run with `pytest -m browser tests/test_browser_classroom.py`; screenshots go to $ATTENTION_LAB_SCREENSHOTS when set.
"""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from class_stores import redis_server
from test_browser import CHROMIUM, ERROR, _build_models, click_until, serve_app, switch_on
from test_browser_layout import browser  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]

STUDENTS = 5
WAIT_MS = 60_000  # a class's polls take a second; a busy machine may take many
PROMPT = "After TokenNorm (before γ and β)"
ANSWERS = ["mean 0 and std 1, for every token", "they still differ from token to token",
           "mean 0 and std 1, for every token", "mean 0, but the std differs", "mean 0 and std 1, for every token"]
SIDEBAR = '[data-testid="stSidebar"]'


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def server(request, tmp_path_factory):
    """The app on tiny models with its class store: SQLite in a temporary user folder, or a Redis server."""
    models = _build_models(tmp_path_factory.mktemp("models"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path_factory.mktemp("user")))
        if request.param == "redis":
            with redis_server(tmp_path_factory.mktemp("redis")) as url:
                patch.setenv("ATTENTION_LAB_CLASS_STORE", url)
                with serve_app(models, tmp_path_factory.mktemp("server") / "streamlit.log") as app:
                    yield app
        else:
            patch.delenv("ATTENTION_LAB_CLASS_STORE", raising=False)
            with serve_app(models, tmp_path_factory.mktemp("server") / "streamlit.log") as app:
                yield app


def new_page(browser):
    """A browser of its own (its own cookies: its own browser id), at a laptop's size."""
    page = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True).new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def shot(page, name: str) -> None:
    folder = os.environ.get("ATTENTION_LAB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"class_{name}.png"), full_page=True)


def on_page(page, title: str) -> None:
    page.wait_for_function(f"() => document.querySelector('[data-testid=\"stMain\"] h1')?.textContent === {title!r}")


def open_class_panel(page) -> None:
    panel = page.locator(f"{SIDEBAR} details", has_text="Class code").first
    panel.wait_for()
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()


def wait_text(page, text: str, within=None) -> None:
    """Wait for `text` to show (in the locator `within`, else anywhere); if it does not, fail with what the page shows
    instead (its address, sidebar and `within`)."""
    try:
        (within or page).get_by_text(text).wait_for()
    except PlaywrightTimeout:
        shown = "" if within is None else f"\nand the box shows:\n{within.inner_text(timeout=5_000)}"
        raise AssertionError(f"{text!r} not shown at {page.url}; the sidebar shows:\n"
                             f"{page.locator(SIDEBAR).inner_text(timeout=5_000)}{shown}") from None


def url_param(page, name: str) -> str | None:
    return page.evaluate(f"() => new URLSearchParams(location.search).get({name!r})")


def wait_param(page, name: str, value: str) -> None:
    page.wait_for_function(f"() => new URLSearchParams(location.search).get({name!r}) === {value!r}")


def prompt_box(page):
    return page.locator('[data-testid="stVerticalBlock"]', has_text=PROMPT).last


def download(page, button: str) -> str:
    """The text of the file the sidebar's download `button` gives."""
    with page.expect_download() as got:
        page.locator(SIDEBAR).get_by_role("button", name=button).click()
    return Path(got.value.path()).read_text()


def chosen(box) -> list[str]:
    """The options a multiselect `box` shows as chosen (its tags)."""
    return box.locator("[data-tag]").evaluate_all("tags => tags.map(tag => tag.getAttribute('aria-label'))")


def pick_option(page, box, name: str, deadline_s: float = 90) -> None:
    """Open the drop-down `box` and pick the option `name`, until it is the one option chosen. The class panel reruns
    every second: a rerun that lands between the click that opens the list and the click on the option closes the
    list (open it again), and one that redraws the list under the pointer may choose a neighbour (take it off)."""
    option = page.get_by_role("option", name=name, exact=True)
    end = time.monotonic() + deadline_s
    while chosen(box) != [name]:
        try:
            for other in set(chosen(box)) - {name}:
                box.get_by_role("button", name=f"Remove {other}", exact=True).click(timeout=3000)
            if name not in chosen(box):
                box.click()
                option.click(timeout=3000)
        except PlaywrightTimeout:
            pass  # a rerun redrew the box: look again
        if time.monotonic() > end:
            raise AssertionError(f"{name!r} not chosen in the drop-down; it shows {chosen(box)}")


def test_a_class_thinks_together(server, browser):
    teacher = new_page(browser)
    teacher.goto(f"{server}/token_norm?presenter=true")
    on_page(teacher, "TokenNorm")
    open_class_panel(teacher)
    click_until(teacher.get_by_role("button", name="Start a class"),
                teacher.get_by_role("button", name="End the class"))
    teacher.wait_for_function("() => new URLSearchParams(location.search).get('class')")
    code = url_param(teacher, "class")
    teacher.get_by_text(f"Class code {code}").wait_for()
    link = teacher.locator(f"{SIDEBAR} code").first.inner_text()
    assert link.endswith(f"/?class={code}")
    teacher.locator(f'{SIDEBAR} img').first.wait_for()  # the QR code

    # Workshop mode: the lesson's examples are recorded before the class opens them (a too-long one is refused).
    teacher.get_by_label("Lesson examples", exact=True).fill("the dogs near the car are happy .\n\n"
                                                            "a cat that the boys see runs .\n" + "word " * 3000)
    teacher.get_by_role("button", name="Preload the examples").click()
    teacher.get_by_text("Preloaded 2 of 3 examples on").wait_for()
    teacher.get_by_text("Refused: 1.").wait_for()

    # A bad code and a code of no class get a message, not a page.
    stranger = new_page(browser)
    stranger.goto(f"{server}/?class=ZZZZZZ")
    stranger.get_by_text("No class ZZZZZZ is running").wait_for()
    stranger.context.close()

    # Five students join from the link (two with a nickname) and follow the teacher.
    students = []
    for i in range(STUDENTS):
        student = new_page(browser)
        student.goto(link)
        on_page(student, "Text explorer")
        if i < 2:
            student.get_by_label("Nickname (optional)", exact=True).fill(f"<b>Kid {i}</b>")
            student.get_by_label("Nickname (optional)", exact=True).press("Enter")
        click_until(student.get_by_role("button", name="Join the class"),
                    student.get_by_role("button", name="Leave the class"))
        switch_on(student, "Follow the teacher")
        students.append(student)
    for student in students:
        on_page(student, "TokenNorm")
        wait_text(student, "Following the teacher's page")
        assert url_param(student, "presenter") is None  # the teacher's presenter mode is the teacher's
    assert students[0].get_by_text("as <b>Kid 0</b>").count() == 1  # a nickname shows as typed, never as HTML
    teacher.get_by_text(f"{STUDENTS} of at most").wait_for()

    # Nothing a student has can act as the teacher: no Reveal, no teacher panel, no key.
    for student in students:
        assert prompt_box(student).get_by_role("button", name="Reveal").count() == 0
        assert student.get_by_role("button", name="Start a class").count() == 0
        assert student.get_by_text("Lock for the class").count() == 0
        assert not any(c["name"] == "attention_lab_teacher" for c in student.context.cookies())

    # They answer (one changes their mind); the teacher's histogram counts them, without the right answer.
    for student, answer in zip(students, ANSWERS):
        prompt_box(student).get_by_text(answer, exact=True).click()
    prompt_box(students[1]).get_by_text(ANSWERS[0], exact=True).click()
    box = prompt_box(teacher)
    box.get_by_text(f"{STUDENTS} of {STUDENTS} students answered").wait_for()
    teacher.wait_for_function("() => document.querySelector('[data-testid=\"stVegaLiteChart\"] canvas, "
                              "[data-testid=\"stVegaLiteChart\"] svg')")
    assert box.get_by_text("You said").count() == 0 and box.get_by_text("chose").count() == 0
    box.scroll_into_view_if_needed()
    shot(teacher, "presenter_histogram")

    # The teacher reveals: every student's page reveals, with the class's answers; answers close.
    click_until(box.get_by_role("button", name="Reveal"), box.get_by_text("students answered; 4 chose"))
    for student in students:
        revealed = prompt_box(student)
        wait_text(student, "You said", within=revealed)
        revealed.get_by_text(f"{STUDENTS} of {STUDENTS} students answered; 4 chose").wait_for()
        assert revealed.get_by_role("radio").first.is_disabled()
    assert students[0].locator(ERROR).count() == 0

    # Follow the teacher to a second page and a toggle.
    teacher.locator(f'{SIDEBAR} [data-testid="stSidebarNavLink"]', has_text="Text explorer").click()
    on_page(teacher, "Text explorer")
    for student in students:
        on_page(student, "Text explorer")
    teacher.get_by_text("Compare with the model's own setting", exact=True).click()
    wait_param(teacher, "compare", "true")
    for student in students:
        wait_param(student, "compare", "true")
        student.get_by_role("switch", name="Compare with the model's own setting").wait_for()
        student.wait_for_function("() => [...document.querySelectorAll('[role=switch]')].some(s => "
                                  "s.getAttribute('aria-label')?.startsWith('Compare') && s.checked)")
    shot(students[2], "student_following")

    # Lock the text: a student who does not follow gets the teacher's text, and keeps the rest free.
    free = students[0]
    free.get_by_text("Follow the teacher", exact=True).click()
    free.wait_for_function("() => !new URLSearchParams(location.search).get('follow')")
    text = "the cat sat on the mat ."
    teacher.get_by_label("Text", exact=True).fill(text)
    teacher.get_by_label("Text", exact=True).press("Control+Enter")
    wait_param(teacher, "text", text)
    pick_option(teacher, teacher.locator(f"{SIDEBAR} [data-testid='stMultiSelect']"), "text")
    teacher.locator('[data-testid="stMain"] h1').click()  # the list closes (Escape leaves the next click lost)
    wait_text(free, "Locked by your teacher: text")
    has_teachers_text = (f"() => document.querySelector('textarea')?.value === {text!r} && "
                         f"new URLSearchParams(location.search).get('text') === {text!r}")
    free.wait_for_function(has_teachers_text)  # the run the lock's navigation starts has drawn it, not only the URL
    # the locked box is greyed and takes no click; the rest is free
    free.wait_for_function("() => { const box = getComputedStyle(document.querySelector('.st-key-text')); "
                           "return box.pointerEvents === 'none' && Number(box.opacity) < 0.6; }")  # (it fades in)
    assert free.evaluate("() => getComputedStyle(document.querySelector('.st-key-compare')).pointerEvents") != "none"
    free.get_by_text("Compare with the model's own setting", exact=True).click()  # not locked: stays changed
    free.wait_for_function("() => new URLSearchParams(location.search).get('compare') !== 'true'")
    free.get_by_label("Text", exact=True).fill("a text of my own .")
    free.get_by_label("Text", exact=True).press("Control+Enter")
    free.wait_for_function(has_teachers_text)
    assert url_param(free, "compare") != "true"

    # The summary: the question, the answers counted, the measurement, how many were right; no nickname.
    open_class_panel(teacher)
    shot(teacher, "teacher_panel")
    rows = list(csv.DictReader(io.StringIO(download(teacher, "Answers (CSV)"))))
    counted = {row["answer"]: int(row["count"]) for row in rows if row["question"].startswith(PROMPT)}
    assert counted == {ANSWERS[0]: 4, ANSWERS[1]: 0, ANSWERS[3]: 1}
    assert {row["right"] for row in rows if row["question"].startswith(PROMPT)} == {"4"}
    page = download(teacher, "Summary (HTML)")
    assert PROMPT in page and "<svg" in page and "4 of 5 right" in page and "Kid" not in page
    for browser_page in [teacher, *students]:
        assert browser_page.locator(ERROR).count() == 0
        browser_page.context.close()
