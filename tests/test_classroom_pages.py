"""The sidebar's Class panel and a prompt in a class (pages/ui/classroom.py, pages/ui/lessons.py) under AppTest: start
a class, bad and stale codes, join with a nickname shown as typed, a student's answer reaching the store under the
browser's id, and nothing on a student's page that reveals or locks."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ok

from core.serving.classroom import Classroom
from core.serving.classroom_store import open_store
from pages.ui import classroom

APP = str(Path(__file__).resolve().parent.parent / "app.py")
OPTION = "mean 0 and std 1, for every token"


@pytest.fixture
def room(tmp_path, monkeypatch):
    """A class store of this test's own (SQLite in a temporary user folder), as the app opens it."""
    monkeypatch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path))
    monkeypatch.delenv("ATTENTION_LAB_CLASS_STORE", raising=False)
    classroom.classroom.clear()
    yield Classroom(open_store())
    classroom.classroom.clear()


def sidebar_texts(at) -> str:
    return "\n".join(str(m.value) for m in at.sidebar.markdown) + "\n".join(str(w.value) for w in at.sidebar.warning)


def test_a_teacher_starts_a_class(app, room):
    at = app(APP)
    ok(at)
    at.button(key="class_start").click().run()
    ok(at)
    # (AppTest's tree loses the sidebar above a run_every fragment after a rerun: the browser test sees the panel)
    teacher = at.session_state["class_member"]
    assert room.check(teacher.code) == teacher.code and room.is_teacher(teacher.code, teacher.key)
    assert at.session_state["class"] == teacher.code  # the code box, bound to the URL


@pytest.mark.parametrize("code, message", [("ZZZZZZ", "No class ZZZZZZ is running"),
                                           ("no!", "A class code is 6 letters and digits")])
def test_a_bad_or_stale_code_says_so(app, room, code, message):
    at = app(APP, **{"class": code})
    ok(at)
    assert message in sidebar_texts(at)
    assert not [b for b in at.button if b.key == "class_join"]


def test_a_student_joins_answers_and_cannot_reveal(app, room):
    code, _ = room.start()
    at = app(APP, **{"class": code})
    at.text_input(key="class_nickname").set_value("<b>Ann</b>")
    at.button(key="class_join").click().run()
    ok(at)
    assert list(room.students(code).values()) == ["<b>Ann</b>"]
    assert at.session_state["class_member"].key is None  # a student holds no teacher key
    at.switch_page("pages/token_norm.py").run()
    ok(at)
    assert "predict_standardised__reveal" not in {b.key for b in at.button}  # the teacher reveals, not a student
    at.radio(key="predict_standardised").set_value(OPTION).run()
    ok(at)
    [prompt] = at.session_state["class_drawn"]
    browser = at.session_state["browser_id"]
    assert room.answers(code, prompt) == {browser: OPTION}


def test_a_followers_move_keeps_following_though_the_address_has_not_caught_up():
    """A tick can run before the address has the switch's new value (a loaded server): the move to the teacher's view
    carries follow=true as the session has it, or the page would read the switch's default (off) from the address
    and stop following (a CI failure: a student on the teacher's page, no longer following)."""
    from types import SimpleNamespace

    view = SimpleNamespace(page="token_norm", params={"text": "a b"}, locked=())
    assert classroom._wanted_view("text_explorer", {"class": "ABC123"}, True, view) == (
        "token_norm", {"text": "a b", "class": "ABC123", "follow": "true"})
    assert classroom._wanted_view("token_norm", {"class": "ABC123", "follow": "true", "text": "a b"}, True,
                                  view) is None  # there already: no move
