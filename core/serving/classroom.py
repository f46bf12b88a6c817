"""A class session: a teacher starts a class and gets a short code; students join it from their browsers; every
"predict, then reveal" prompt collects one answer per student browser until the teacher reveals it; students may
follow the teacher's view; the teacher may lock controls; at the end a summary of each prompt.

Who may do what is checked here, not only by the page:
- The teacher is whoever holds the teacher key, a random secret made at the start; the store keeps only its SHA-256,
  compared with hmac.compare_digest. A join link carries the class code only.
- A student is a browser id the server issued (the browser cookie, pages/ui/browser.py); an answer is stored under
  the id of the browser that sent it, so no one answers for another browser. Answers close when the prompt is revealed.
- A class ends CLASS_HOURS after it starts (or when its teacher ends it); a server holds at most MAX_CLASSES live
  classes and a class at most MAX_STUDENTS students.
Pure Python over a Store (core/serving/classroom_store.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass

from core.serving.classroom_store import Store

MAX_CLASSES = 50  # live classes on one server (or one shared store)
MAX_STUDENTS = 60  # browsers in one class
MAX_PROMPTS = 200  # prompts one class may answer
CLASS_HOURS = 8  # a class ends this long after it starts: a link from last week opens nothing
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 6
CODE = re.compile(f"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}")
NICKNAME_CHARS = 24
ANSWER_CHARS = 200
PROMPT_ID = re.compile(r"[A-Za-z0-9_]{1,80}")
VIEW_CHARS = 40_000  # the teacher's page and URL parameters, as JSON (texts are capped at 20,000 characters)


class ClassError(ValueError):
    """A request the class refuses, with the message to show."""


@dataclass(frozen=True)
class Reveal:
    """What the teacher's run measured when they revealed a prompt: the question, its options (None: free text),
    the option the run makes right (None: no verdict) and the measurement in words."""

    question: str
    options: tuple[str, ...] | None
    answer: str | None
    measured: str
    at: float

    def to_json(self) -> str:
        return json.dumps({"question": self.question, "options": self.options, "answer": self.answer,
                           "measured": self.measured, "at": self.at})

    @staticmethod
    def from_json(text: str) -> Reveal:
        data = json.loads(text)
        options = data["options"]
        return Reveal(data["question"], None if options is None else tuple(options), data["answer"],
                      data["measured"], data["at"])


@dataclass(frozen=True)
class View:
    """The teacher's page (its url_path, "" for the first page) and its URL parameters, and the parameters the
    class may not change (`locked`)."""

    page: str
    params: dict[str, str]
    locked: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptSummary:
    """One prompt at the end: its question, the class's answers counted, what was measured, the right option and
    how many gave it (None when the prompt has no verdict or was never revealed)."""

    prompt: str
    question: str
    counts: dict[str, int]
    measured: str
    answer: str | None
    right: int | None

    @property
    def answered(self) -> int:
        return sum(self.counts.values())


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def normalise_code(code: str) -> str:
    """A code as typed ("ab c-d2 3") in its stored form ("ABCD23")."""
    return re.sub(r"[\s-]", "", code or "").upper()


def same_text(answer: str) -> str:
    """A free-text answer as it is counted: case and runs of spaces do not matter."""
    return " ".join(answer.split()).casefold()


def tally(answers: dict[str, str], options: list[str] | tuple[str, ...] | None) -> dict[str, int]:
    """The class's answers (browser -> answer) counted: for a prompt with `options`, every option in their order
    (0 for one no one chose); for free text, the answers that differ only in case or spaces together, most given
    first."""
    if options is None:
        return dict(Counter(same_text(answer) for answer in answers.values()).most_common())
    counts = Counter(answers.values())
    return {option: counts[option] for option in options}


class Classroom:
    """The class operations over a store; `now` is the clock (a test moves it)."""

    def __init__(self, store: Store, now=time.time):
        self.store = store
        self.now = now

    # --- the teacher ---------------------------------------------------------------------------------
    def start(self) -> tuple[str, str]:
        """A new class: its code (to show the class) and its teacher key (kept by the teacher's browser only)."""
        key = secrets.token_urlsafe(24)
        for _ in range(20):  # 31^6 ≈ 9e8 codes: a clash is rare, several in a row mean the store is full
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            record = {"teacher": _digest(key), "started": self.now()}
            if self.store.create(code, record, self.now() + CLASS_HOURS * 3600, MAX_CLASSES):
                return code, key
            if self.store.record(code) is None:
                break  # the code was free, so the server is full
        raise ClassError(f"This server already runs {MAX_CLASSES} classes, its most: end one, or wait until one "
                         f"ends ({CLASS_HOURS} hours after it started).")

    def is_teacher(self, code: str, key: str | None) -> bool:
        record = self.store.record(code)
        return bool(record and key) and hmac.compare_digest(record["teacher"], _digest(key))

    def _as_teacher(self, code: str, key: str | None) -> None:
        if not self.is_teacher(code, key):
            raise ClassError("Only the class's teacher can do this.")

    def show(self, code: str, key: str, page: str, params: dict[str, str]) -> None:
        """The teacher's current page and URL parameters, for the students who follow."""
        self._as_teacher(code, key)
        view = json.dumps({"page": page, "params": params})
        if len(view) > VIEW_CHARS:
            raise ClassError("This view's link is too long to share with the class.")
        self.store.put(code, "view", "view", view)

    def lock(self, code: str, key: str, names: list[str]) -> None:
        """Lock URL parameters `names` for the class: students' pages keep the teacher's values for them."""
        self._as_teacher(code, key)
        self.store.put(code, "view", "locked", json.dumps(sorted(set(names))))

    def reveal(self, code: str, key: str, prompt: str, reveal: Reveal) -> None:
        """Reveal `prompt` to the class with what the teacher's run measured; its answers close."""
        self._as_teacher(code, key)
        self._check_prompt(prompt)
        if not self.store.put(code, "reveals", prompt, reveal.to_json(), max_fields=MAX_PROMPTS):
            raise ClassError(f"This class has revealed {MAX_PROMPTS} prompts, its most.")

    def ask(self, code: str, key: str, prompt: str, question: str, options: list[str] | None) -> None:
        """Record the question `prompt` asks (for the summary), once."""
        self._as_teacher(code, key)
        self._check_prompt(prompt)
        if prompt not in self.store.table(code, "questions"):
            self.store.put(code, "questions", prompt, json.dumps({"question": question, "options": options}),
                           max_fields=MAX_PROMPTS)

    def summary(self, code: str, key: str) -> list[PromptSummary]:
        """Every prompt the teacher asked or revealed, in the order revealed (then asked): the question, the
        answers counted, the measurement, the right option and how many gave it."""
        self._as_teacher(code, key)
        questions = {prompt: json.loads(text) for prompt, text in self.store.table(code, "questions").items()}
        reveals = {prompt: Reveal.from_json(text) for prompt, text in self.store.table(code, "reveals").items()}
        order = sorted(reveals, key=lambda p: reveals[p].at) + [p for p in questions if p not in reveals]
        summaries = []
        for prompt in order:
            shown = reveals.get(prompt)
            asked = questions.get(prompt, {})
            question = shown.question if shown else asked["question"]
            options = shown.options if shown else asked["options"]
            counts = tally(self.answers(code, prompt), options)
            answer = shown.answer if shown else None
            right = None if answer is None else counts.get(answer if options else same_text(answer), 0)
            summaries.append(PromptSummary(prompt, question, counts, shown.measured if shown else "not revealed",
                                           answer, right))
        return summaries

    def end(self, code: str, key: str) -> None:
        self._as_teacher(code, key)
        self.store.end(code)

    # --- a student -----------------------------------------------------------------------------------
    def check(self, code: str) -> str:
        """The stored form of `code` if a class with it runs; else ClassError saying why not."""
        code = normalise_code(code)
        if not CODE.fullmatch(code):
            raise ClassError(f"A class code is {CODE_LENGTH} letters and digits, like {CODE_ALPHABET[:3]}7K2.")
        if self.store.record(code) is None:
            raise ClassError(f"No class {code} is running: it has ended (classes end {CLASS_HOURS} hours after they "
                             "start), or the code is mistyped. Ask your teacher for the code or a new link.")
        return code

    def join(self, code: str, browser: str, nickname: str = "") -> str:
        """Join class `code` as `browser` (the server-issued browser id) under an optional nickname; returns the
        stored code. Joining again changes the nickname."""
        code = self.check(code)
        nickname = " ".join(nickname.split())[:NICKNAME_CHARS]
        if not self.store.put(code, "students", browser, nickname, max_fields=MAX_STUDENTS):
            raise ClassError(f"Class {code} is full: it has {MAX_STUDENTS} students, its most.")
        return code

    def is_student(self, code: str, browser: str) -> bool:
        return browser in self.store.table(code, "students")

    def students(self, code: str) -> dict[str, str]:
        """browser id -> nickname ("" if none)."""
        return self.store.table(code, "students")

    def answer(self, code: str, browser: str, prompt: str, answer: str | None) -> None:
        """`browser`'s answer to `prompt` (None withdraws it as an empty answer is not kept); refused once the
        prompt is revealed or for a browser that has not joined."""
        self._check_prompt(prompt)
        if not self.is_student(code, browser):
            raise ClassError("Join the class before you answer.")
        answer = (answer or "")[:ANSWER_CHARS]
        if not self.store.put(code, f"answers:{prompt}", browser, answer, unless=("reveals", prompt)):
            raise ClassError("The teacher has revealed this prompt: answers are closed.")

    def answers(self, code: str, prompt: str) -> dict[str, str]:
        """browser id -> answer, the empty ones left out."""
        return {browser: a for browser, a in self.store.table(code, f"answers:{prompt}").items() if a}

    def reveals(self, code: str) -> dict[str, Reveal]:
        return {prompt: Reveal.from_json(text) for prompt, text in self.store.table(code, "reveals").items()}

    def view(self, code: str) -> View | None:
        """The teacher's last view and the locked parameters (None before the teacher showed any page)."""
        table = self.store.table(code, "view")
        if "view" not in table:
            return None
        view = json.loads(table["view"])
        return View(view["page"], view["params"], tuple(json.loads(table.get("locked", "[]"))))

    @staticmethod
    def _check_prompt(prompt: str) -> None:
        if not PROMPT_ID.fullmatch(prompt):
            raise ClassError("Not a prompt of this app.")
