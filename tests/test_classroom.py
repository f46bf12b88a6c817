"""The class store and its rules (core/serving/classroom.py), on both stores: SQLite (the default) and Redis (a
private redis-server). Concurrency, expiry, limits, who may act as the teacher, and the summary."""

from __future__ import annotations

import csv
import io
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.serving import classroom
from core.serving.classroom import ClassError, Classroom, Reveal
from core.serving.classroom_store import RedisStore, SQLiteStore, open_store
from core.serving.classroom_summary import summary_csv, summary_html
from tests.class_stores import redis_server

OPTIONS = ["about ×2", "about ×4", "about ×8"]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "classes.sqlite3")
    store = RedisStore(request.getfixturevalue("redis_url"))
    store.redis.flushdb()
    return store


class Clock:
    def __init__(self):
        import time

        self.t = time.time()

    def __call__(self):
        return self.t


def browser() -> str:
    return uuid.uuid4().hex


def test_the_setting_chooses_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_USER_DIR", str(tmp_path))
    default = open_store("")
    assert isinstance(default, SQLiteStore) and default.path == tmp_path / "classes.sqlite3"
    assert isinstance(open_store("redis://127.0.0.1:1/0"), RedisStore)  # connects only when used
    with pytest.raises(ValueError, match="ATTENTION_LAB_CLASS_STORE"):
        open_store("mysql://x")


def test_a_class_from_start_to_summary(store):
    room = Classroom(store)
    code, key = room.start()
    assert classroom.CODE.fullmatch(code) and room.is_teacher(code, key)
    students = [browser() for _ in range(5)]
    for i, b in enumerate(students):
        assert room.join(code.lower(), b, f"  Ann   {i} ") == code  # a code typed in lower case joins
    assert room.students(code)[students[0]] == "Ann 0"
    room.ask(code, key, "predict_double", "When N doubles?", OPTIONS)
    for b, a in zip(students, ["about ×4", "about ×4", "about ×2", "about ×8", "about ×2"]):
        room.answer(code, b, "predict_double", a)
    room.answer(code, students[4], "predict_double", "about ×4")  # changed before the reveal
    assert classroom.tally(room.answers(code, "predict_double"), OPTIONS) == {"about ×2": 1, "about ×4": 3,
                                                                             "about ×8": 1}
    room.reveal(code, key, "predict_double", Reveal("When N doubles?", tuple(OPTIONS), "about ×4",
                                                    "time grew **×3.9**", 1.0))
    with pytest.raises(ClassError, match="answers are closed"):
        room.answer(code, students[2], "predict_double", "about ×4")
    [summary] = room.summary(code, key)
    assert (summary.answered, summary.right, summary.answer) == (5, 3, "about ×4")
    rows = list(csv.DictReader(io.StringIO(summary_csv([summary]))))
    assert [(r["answer"], r["count"], r["is_right"]) for r in rows] == [
        ("about ×2", "1", "false"), ("about ×4", "3", "true"), ("about ×8", "1", "false")]
    assert rows[0]["measured"] == "time grew ×3.9"
    page = summary_html([summary], "Class")
    assert "<svg" in page and "3 of 5 right" in page and "Ann" not in page  # no nickname in the summary


def test_free_text_answers_count_together(store):
    room = Classroom(store)
    code, key = room.start()
    a, b, c = browser(), browser(), browser()
    for who, answer in [(a, "Mean 0, SD 1"), (b, "mean 0,  sd 1 "), (c, "<b>x</b>")]:
        room.join(code, who)
        room.answer(code, who, "predict_standardised", answer)
    room.reveal(code, key, "predict_standardised", Reveal("After TokenNorm?", None, None, "mean 0", 2.0))
    [summary] = room.summary(code, key)
    assert summary.counts == {"mean 0, sd 1": 2, "<b>x</b>": 1} and summary.right is None
    assert "&lt;b&gt;x&lt;/b&gt;" in summary_html([summary], "t") and "<b>x</b>" not in summary_html([summary], "t")


def test_a_student_cannot_act_as_the_teacher(store):
    room = Classroom(store)
    code, key = room.start()
    student = browser()
    room.join(code, student)
    for wrong in [None, "", code, student, key[:-1] + ("A" if key[-1] != "A" else "B")]:
        assert not room.is_teacher(code, wrong)
        with pytest.raises(ClassError, match="Only the class's teacher"):
            room.reveal(code, wrong, "p", Reveal("q", None, None, "m", 0.0))
        with pytest.raises(ClassError, match="Only the class's teacher"):
            room.lock(code, wrong, ["text"])
        with pytest.raises(ClassError, match="Only the class's teacher"):
            room.show(code, wrong, "maths", {"text": "x"})
        with pytest.raises(ClassError, match="Only the class's teacher"):
            room.summary(code, wrong)
    _other_code, other_key = room.start()
    assert not room.is_teacher(code, other_key)  # another class's teacher key is not this class's
    assert key not in str(store.record(code))  # the store keeps only the key's hash


def test_answers_are_kept_per_browser_and_only_for_members(store):
    room = Classroom(store)
    code, _ = room.start()
    with pytest.raises(ClassError, match="Join the class"):
        room.answer(code, browser(), "p", "x")
    with pytest.raises(ClassError, match="Not a prompt"):
        room.answer(code, browser(), "../p", "x")


def test_many_threads_answering_lose_no_answer(store):
    room = Classroom(store)
    code, _key = room.start()
    students = [browser() for _ in range(classroom.MAX_STUDENTS)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda b: room.join(code, b), students))
        # every student changes their answer twice, the students all at once: the last answer counts
        list(pool.map(lambda job: [room.answer(code, job[1], "p", OPTIONS[(job[0] + turn) % 3]) for turn in range(3)],
                      enumerate(students)))
    answers = room.answers(code, "p")
    assert len(answers) == len(students)
    assert answers == {b: OPTIONS[(i + 2) % 3] for i, b in enumerate(students)}


def test_a_reveal_racing_answers_closes_them_all(store):
    room = Classroom(store)
    code, key = room.start()
    students = [browser() for _ in range(20)]
    for b in students:
        room.join(code, b)
    accepted, start = [], threading.Barrier(21)

    def answer(b):
        start.wait()
        try:
            room.answer(code, b, "p", "x")
            accepted.append(b)
        except ClassError:
            pass

    threads = [threading.Thread(target=answer, args=(b,)) for b in students]
    for t in threads:
        t.start()
    start.wait()
    room.reveal(code, key, "p", Reveal("q", None, None, "m", 0.0))
    for t in threads:
        t.join()
    assert set(room.answers(code, "p")) == set(accepted)  # every accepted answer is kept, none after


def test_limits_on_classes_and_students(store, monkeypatch):
    monkeypatch.setattr(classroom, "MAX_CLASSES", 3)
    monkeypatch.setattr(classroom, "MAX_STUDENTS", 4)
    room = Classroom(store)
    codes = [room.start()[0] for _ in range(3)]
    with pytest.raises(ClassError, match="already runs 3 classes"):
        room.start()
    members = [browser() for _ in range(4)]
    for b in members:
        room.join(codes[0], b)
    with pytest.raises(ClassError, match="is full"):
        room.join(codes[0], browser())
    room.join(codes[0], members[0], "new name")  # a member joining again is not a new student
    assert room.students(codes[0])[members[0]] == "new name"


def test_classes_expire(store):
    clock = Clock()
    room = Classroom(store, now=clock)
    code, _key = room.start()
    room.join(code, browser())
    clock.t -= classroom.CLASS_HOURS * 3600 + 1  # a class started more than CLASS_HOURS ago
    old, old_key = room.start()
    with pytest.raises(ClassError, match=f"No class {old} is running"):
        room.join(old, browser())
    assert not room.is_teacher(old, old_key)
    with pytest.raises(ClassError, match="6 letters"):
        room.check("nope")
    assert room.check(code) == code


def test_a_restart_keeps_the_answers(store):
    room = Classroom(store)
    code, _key = room.start()
    student = browser()
    room.join(code, student)
    room.answer(code, student, "p", "x")
    again = SQLiteStore(store.path) if isinstance(store, SQLiteStore) else RedisStore(store.url)  # a new process's
    assert Classroom(again).answers(code, "p") == {student: "x"}


def test_the_view_and_locks(store):
    room = Classroom(store)
    code, key = room.start()
    assert room.view(code) is None
    room.show(code, key, "maths", {"text": "a b", "layer": "1"})
    room.lock(code, key, ["text", "text", "model"])
    view = room.view(code)
    assert (view.page, view.params, view.locked) == ("maths", {"text": "a b", "layer": "1"}, ("model", "text"))
    room.end(code, key)
    with pytest.raises(ClassError, match="No class"):
        room.check(code)
