"""The class session in the browser (core/serving/classroom.py holds the rules): the sidebar's Class panel (start,
join, follow, locks, preload, summary), the live answers of every predict-then-reveal prompt (pages/ui/lessons.py
calls `prompt_in_class`), and the polling that brings a student's page to the teacher's reveals and view.

URL parameters: `class` (the class code: a join link is ?class=CODE) and `follow` (1: follow the teacher). The
teacher key never enters a URL: the teacher's browser keeps it in the session and in a cookie, so a reload stays
the teacher. A student is the browser id of pages/ui/browser.py.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import re
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from core.serving.classroom import (
    CLASS_HOURS,
    MAX_STUDENTS,
    NICKNAME_CHARS,
    ClassError,
    Classroom,
    PromptSummary,
    Reveal,
    normalise_code,
    tally,
)
from core.serving.classroom_store import open_store
from core.serving.classroom_summary import summary_csv, summary_html
from pages.ui.browser import browser_id
from pages.ui.download import download_text
from pages.ui.presentation import font_scale
from pages.ui.safety import literal
from pages.ui.widgets import BIND

TEACHER_COOKIE = "attention_lab_teacher"
TEACHER_TICK_S = 1.0  # how often the teacher's page shares its view and redraws the live answers
STUDENT_TICK_S = 1.0  # how often a student's page looks for a reveal, the teacher's view and the locks
NAVIGATE_AGAIN_S = 6.0  # a navigation to the same view is sent again only after this long (it may have been lost)
OWN_PARAMS = ("class", "follow", "presenter")  # a student's own: never taken from the teacher
# The sidebar's and the text pages' shared controls, offered for locking on every page (with the page's own
# parameters that its URL holds now).
LOCKABLE = ("model", "text", "notation", "layer", "head", "mask", "pe")
LOCK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,40}")  # a control's key that may name a CSS class


@st.cache_resource(show_spinner=False)
def classroom() -> Classroom:
    """The server's class store (ATTENTION_LAB_CLASS_STORE; README "A class session")."""
    return Classroom(open_store())


@dataclass(frozen=True)
class Member:
    """This session in a class: the code, and the teacher key for the teacher (None for a student)."""

    code: str
    key: str | None = None

    @property
    def teacher(self) -> bool:
        return self.key is not None


def member() -> Member | None:
    return st.session_state.get("class_member")


def _teacher_cookie() -> tuple[str, str] | None:
    try:
        sent = st.context.cookies.get(TEACHER_COOKIE, "")
    except (AttributeError, RuntimeError):
        return None
    if not isinstance(sent, str):
        return None
    code, _, key = sent.partition(".")
    return (code, key) if code and key else None


def _set_teacher_cookie(value: str) -> None:
    days = CLASS_HOURS * 3600
    st.html(f"<script>document.cookie = '{TEACHER_COOKIE}={value}; path=/; max-age={days}; SameSite=Strict';"
            "</script>", unsafe_allow_javascript=True)


def _start() -> None:
    try:
        code, key = classroom().start()
    except ClassError as error:
        st.session_state["class_error"] = str(error)
        return
    st.session_state["class_member"] = Member(code, key)
    st.session_state["class"] = code
    st.session_state["class_set_cookie"] = f"{code}.{key}"


def _join() -> None:
    try:
        code = classroom().join(st.session_state.get("class") or "", browser_id(),
                                st.session_state.get("class_nickname") or "")
    except ClassError as error:
        st.session_state["class_error"] = str(error)
        return
    st.session_state["class_member"] = Member(code)
    st.session_state["class"] = code


def _leave() -> None:
    ended = member()
    if ended and ended.teacher:
        try:
            classroom().end(ended.code, ended.key)
        except ClassError:
            pass
        st.session_state["class_set_cookie"] = ""
    st.session_state.pop("class_member", None)
    st.session_state["class"] = ""
    st.session_state["follow"] = False


def _rejoin() -> None:
    """A new session (a reload, a new tab) of a browser that is in the class its link names takes its place again:
    the teacher by the teacher cookie, a student by the browser id."""
    if member() is not None or not st.session_state.get("class"):
        return
    room = classroom()
    try:
        code = room.check(st.session_state["class"])
    except ClassError:
        return
    cookie = _teacher_cookie()
    if cookie and cookie[0] == code and room.is_teacher(code, cookie[1]):
        st.session_state["class_member"] = Member(code, cookie[1])
    elif room.is_student(code, browser_id()):
        st.session_state["class_member"] = Member(code)


def class_panel(page: str) -> None:
    """The sidebar's Class panel, drawn by app.py for every page (`page`: the page's url_path), and for a member
    of a class the polling fragment (the teacher's shares the view; a student's follows the reveals and the view)."""
    st.session_state["class_drawn"] = {}  # the prompts this run draws: id -> (widget key, question asked, revealed?)
    wanted = None  # where a student following the teacher goes now
    browser_id()
    in_class = bool(st.session_state.get("class") or st.query_params.get("class"))
    with st.sidebar.expander(":material/groups: Class", expanded=in_class):
        st.text_input("Class code", key="class", bind=BIND, max_chars=12, placeholder="ABC7K2",
                      help="The code your teacher shows. A join link fills it in.")
        _rejoin()
        error = st.session_state.pop("class_error", None)
        if error:
            st.error(literal(error), icon=":material/error:")
        cookie = st.session_state.pop("class_set_cookie", None)
        if cookie is not None:
            _set_teacher_cookie(cookie)
        now = member()
        if now is not None and normalise_code(st.session_state.get("class") or "") != now.code:
            st.session_state.pop("class_member")  # the code in the box changed: join that class instead
            now = None
        if now is None:
            _outside_panel()
        elif now.teacher:
            _teacher_panel(now, page)
        else:
            _student_panel(now, page)
            wanted = st.session_state.pop("class_navigate", None)
            if wanted is not None:
                _navigate(page, *wanted)
    if wanted is not None and st.session_state.get("follow"):
        # The navigation's own run draws the teacher's view: drawing this page's old view first would double the
        # cost of a move, 30 students at once (a student who only has locked controls keeps their page's state).
        st.caption(":material/visibility: Going to your teacher's view…")
        st.stop()


def _outside_panel() -> None:
    code = st.session_state.get("class") or ""
    if code:
        try:
            classroom().check(code)
        except ClassError as error:
            st.warning(literal(str(error)), icon=":material/link_off:")
            return
        st.text_input("Nickname (optional)", key="class_nickname", max_chars=NICKNAME_CHARS,
                      help="Shown to your teacher only; nothing personal is needed.")
        st.button("Join the class", key="class_join", on_click=_join, icon=":material/login:", type="primary")
    else:
        st.caption("Teaching? Start a class: your students join with its code or link, answer the prompts live "
                   "and can follow your screen.")
        st.button("Start a class", key="class_start", on_click=_start, icon=":material/co_present:")


def _join_link(code: str, page: str) -> str:
    """The link that opens the app's first page with the class's code filled in (the address the teacher's
    browser uses, so it works wherever the class reaches that too)."""
    try:
        url = st.context.url or ""
    except (AttributeError, RuntimeError):
        url = ""
    base = url.split("?")[0].split("#")[0]
    if page and base.endswith("/" + page):
        base = base[: -len(page)]
    return f"{base.rstrip('/')}/?{urlencode({'class': code})}"


def _qr_png(link: str) -> bytes:
    import segno  # drawn here, offline

    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=5, border=2)
    return out.getvalue()


def _teacher_panel(now: Member, page: str) -> None:
    room = classroom()
    link = _join_link(now.code, page)
    st.markdown(f"Class code **{now.code}** · join at")
    st.code(link, language=None)
    st.image(_qr_png(link), caption="The join link as a QR code", width=180)
    shareable = sorted(k for k in st.query_params.to_dict() if k not in OWN_PARAMS
                       and k not in st.session_state.get("class_prompt_keys", ()))
    view = room.view(now.code)
    locked = list(view.locked) if view else []
    options = list(LOCKABLE) + sorted(set(shareable) | set(locked) - set(LOCKABLE))
    st.multiselect("Lock for the class", options, default=locked, key="class_locks",
                   on_change=_lock, args=(now,),
                   help="Students' pages keep your value of these controls (for example text and model); the "
                        "rest stays free.")
    _preload()
    _teacher_tick(now, page)
    st.button("End the class", key="class_end", on_click=_leave, icon=":material/logout:")


def _lock(now: Member) -> None:
    try:
        classroom().lock(now.code, now.key, st.session_state.get("class_locks") or [])
    except ClassError as error:
        st.session_state["class_error"] = str(error)


def _preload() -> None:
    """The teacher's lesson examples, one text a line, recorded now on this server's model so that the class's first
    view of each is instant."""
    from core.model import registry
    from pages.ui.store import Setting, get_recording

    st.text_area("Lesson examples", key="class_examples", height=80,
                 placeholder="one text a line", help="Recorded now with the model in the sidebar, so that when "
                                                    "the class opens them the first view is instant.")
    if st.button("Preload the examples", key="class_preload", icon=":material/bolt:"):
        model = st.session_state.get("model") or registry.DEFAULT_TEXT_MODEL
        texts = [line.strip() for line in (st.session_state.get("class_examples") or "").splitlines() if line.strip()]
        start = time.perf_counter()
        refused = [text for text in texts if isinstance(get_recording(Setting(model), text), str)]
        st.caption(f"Preloaded {len(texts) - len(refused)} of {len(texts)} examples on {literal(model)} in "
                   f"{time.perf_counter() - start:.1f} s." + (f" Refused: {len(refused)}." if refused else ""))


@st.fragment(run_every=TEACHER_TICK_S)
def _teacher_tick(now: Member, page: str) -> None:
    """Every TEACHER_TICK_S: share the teacher's view (page and URL parameters but their own) when it changed, and
    say how many students joined."""
    room = classroom()
    prompts = set(st.session_state.get("class_prompt_keys", ()))
    params = {k: v for k, v in st.query_params.to_dict().items() if k not in OWN_PARAMS and k not in prompts}
    shared = (page, params)
    try:
        if st.session_state.get("class_shared") != shared:
            room.show(now.code, now.key, page, params)
            st.session_state["class_shared"] = shared
        summary = room.summary(now.code, now.key)
    except ClassError as error:
        st.warning(literal(str(error)), icon=":material/error:")
        return
    st.caption(f":material/groups: {len(room.students(now.code))} of at most {MAX_STUDENTS} students joined.")
    _summary_downloads(now.code, summary)


def _summary_downloads(code: str, summary: list[PromptSummary]) -> None:
    """The class's answers so far, as a page and as a table (redrawn each tick: a click saves the latest)."""
    stamp = time.strftime("%Y-%m-%d")
    download_text("Summary (HTML)", summary_html(summary, f"Class {code}, {stamp}"),
                  f"class-{code}-{stamp}.html", "text/html", key="class_html")
    download_text("Answers (CSV)", summary_csv(summary), f"class-{code}-{stamp}.csv", "text/csv", key="class_csv")


def _student_panel(now: Member, page: str) -> None:
    nickname = classroom().students(now.code).get(browser_id(), "")
    st.markdown(f"In class **{now.code}**" + (f" as {literal(nickname)}" if nickname else ""))
    st.toggle("Follow the teacher", key="follow", bind=BIND,
              help="Your page shows what your teacher's shows: the page, the text, the model, the layer, the head "
                   "and the toggles. Turn it off to explore on your own.")
    st.button("Leave the class", key="class_leave", on_click=_leave, icon=":material/logout:")
    _student_tick(now, page)


def _grey_out(locked) -> None:
    """Show the locked controls greyed and take no clicks (the lock would undo a change anyway). Streamlit gives a
    keyed widget's box the class st-key-<key>; a key that is not a plain name (a link can put any parameter in the
    teacher's address) is left as it is."""
    boxes = [f".st-key-{key}" for key in locked if LOCK_NAME.fullmatch(key)]
    if boxes:
        st.html(f"<style>{', '.join(boxes)} {{ opacity: 0.45; pointer-events: none; }}</style>")


def _navigation_due(wanted: tuple[str, dict[str, str]]) -> bool:
    """Whether to navigate to `wanted` now: not if the same navigation was sent less than NAVIGATE_AGAIN_S ago."""
    target = json.dumps(wanted, sort_keys=True)
    sent = st.session_state.get("class_navigated")
    if sent and sent[0] == target and time.monotonic() - sent[1] < NAVIGATE_AGAIN_S:
        return False
    st.session_state["class_navigated"] = (target, time.monotonic())
    return True


def _navigate(current_page: str, page: str, params: dict[str, str]) -> None:
    """Bring this browser to `page` with `params` as a Back or Forward would: Streamlit then reads the bound
    widgets' values from the URL (a parameter not in it: the widget's default), in the same session."""
    target = json.dumps([page, params], sort_keys=True)
    # A component's frame (same origin) runs its script each time its content changes, in a fragment's run too.
    script = f"""<script>/* {hashlib.sha1(f"{target}{time.monotonic()}".encode()).hexdigest()} */
const app = window.parent, current = {json.dumps(current_page)}, page = {json.dumps(page)};
const search = {json.dumps(urlencode(params))};
let base = app.location.pathname;
if (current && base.endsWith("/" + current)) base = base.slice(0, -current.length);
if (!base.endsWith("/")) base += "/";
app.history.pushState(null, "", base + page + (search ? "?" + search : ""));
app.dispatchEvent(new app.PopStateEvent("popstate"));
</script>"""
    st.iframe(script, height=1)


def _wanted_view(page: str, mine: dict[str, str], follow: bool, view) -> tuple[str, dict[str, str]] | None:
    """Where a student's page should be (page, URL parameters), or None where it is: the teacher's view when
    following, else their own with the locked parameters set to the teacher's."""
    if view is None:
        return None
    own = {k: v for k, v in mine.items() if k in OWN_PARAMS or k in st.session_state.get("class_prompt_keys", ())}
    if follow:
        # "follow" as the session has it: a run can come before the address has the switch's new value, and a
        # move to an address without it would read the switch's default (off) back from it: following ends
        wanted = (view.page, {**view.params, **own, "follow": "true"})
    else:
        params = {k: v for k, v in mine.items() if k not in view.locked}
        params.update({k: view.params[k] for k in view.locked if k in view.params})
        wanted = (page, params)
    return None if wanted == (page, mine) else wanted


@st.fragment(run_every=STUDENT_TICK_S)
def _student_tick(now: Member, page: str) -> None:
    """Every STUDENT_TICK_S: reveal on this page what the teacher revealed, and bring the page to the teacher's view
    (following) or to their locked values. Says which it does."""
    room = classroom()
    try:
        room.check(now.code)
    except ClassError as error:
        st.warning(literal(str(error)), icon=":material/link_off:")
        return
    view = room.view(now.code)
    follow = bool(st.session_state.get("follow"))
    if view and view.locked:
        st.caption(":material/lock: Locked by your teacher: " + ", ".join(literal(k) for k in view.locked))
        _grey_out(view.locked)
    if follow:
        st.caption(":material/visibility: Following the teacher's page" if view else
                   ":material/hourglass_empty: Waiting for the teacher's page")
    wanted = _wanted_view(page, st.query_params.to_dict(), follow, view)
    if wanted is not None and _navigation_due(wanted):
        # a history navigation started from a fragment's run is lost: the page's next full run starts it
        st.session_state["class_navigate"] = wanted
        st.rerun(scope="app")
    reveals = room.reveals(now.code)
    # a prompt the last full run drew hidden: asked again until a run draws it revealed (a lost rerun is retried)
    newly = [(key, asked) for prompt, (key, asked, shown) in st.session_state.get("class_drawn", {}).items()
             if prompt in reveals and not shown]
    for key, asked in newly:
        st.session_state[f"{key}__revealed"] = asked
    if newly:
        st.rerun(scope="app")


# --- the prompts ----------------------------------------------------------------------------------------------

def prompt_id(key: str, asked: str) -> str:
    """A prompt of a class is its widget key and the question asked (another token or head: another prompt)."""
    return f"{key}_{hashlib.sha1(asked.encode()).hexdigest()[:10]}"


def prompt_in_class(key: str, question: str, options: list[str] | None, asked: str) -> str | None:
    """Called by every predict-then-reveal prompt as it is drawn: its id in this session's class (None outside a
    class). The teacher's records the question for the summary."""
    now = member()
    if now is None:
        return None
    prompt = prompt_id(key, asked)
    shown = st.session_state.get(f"{key}__revealed") == asked  # drawn revealed (pages/ui/lessons.py's key)
    st.session_state.setdefault("class_drawn", {})[prompt] = (key, asked, shown)
    keys = st.session_state.setdefault("class_prompt_keys", set())
    keys.add(key)
    asked_ids = st.session_state.setdefault("class_asked", set())
    if now.teacher and prompt not in asked_ids:
        try:
            classroom().ask(now.code, now.key, prompt, question, options)
            asked_ids.add(prompt)
        except ClassError as error:
            st.warning(literal(str(error)), icon=":material/error:")
    return prompt


def is_student() -> bool:
    now = member()
    return now is not None and not now.teacher


def is_teacher() -> bool:
    now = member()
    return now is not None and now.teacher


def closed(prompt: str) -> bool:
    """Whether the class's answers to `prompt` are closed (the teacher revealed it)."""
    now = member()
    return now is not None and prompt in classroom().reveals(now.code)


def send_answer(key: str, prompt: str) -> None:
    """on_change of a student's prediction: the answer goes to the class, under this browser's id."""
    now = member()
    value = st.session_state.get(key)
    try:
        classroom().answer(now.code, browser_id(), prompt, None if value is None else str(value))
    except ClassError as error:
        st.session_state["class_error"] = str(error)


def publish_reveal(prompt: str, question: str, options: list[str] | None, answer: str | None,
                   measured: str) -> None:
    """The teacher revealed `prompt`: the class's answers close and every student's page reveals it."""
    now = member()
    published = st.session_state.setdefault("class_published", set())
    if prompt in published:
        return
    try:
        classroom().reveal(now.code, now.key, prompt, Reveal(question, None if options is None else tuple(options),
                                                             answer, measured, time.time()))
        published.add(prompt)
    except ClassError as error:
        st.warning(literal(str(error)), icon=":material/error:")


def _answers_chart(prompt: str, options: list[str] | None, right: str | None = None) -> None:
    now = member()
    room = classroom()
    answers = room.answers(now.code, prompt)
    counts = tally(answers, options)
    joined = len(room.students(now.code))
    said = f"**{len(answers)} of {joined}** students answered"
    if right is not None:
        said += f"; **{counts.get(right, 0)}** chose {literal(right)}"
    st.markdown(f":material/bar_chart: The class: {said}.")
    if counts:
        spec = answers_spec(tuple(counts.items()), right, font_scale())
        st.vega_lite_chart(copy.deepcopy(spec), key=f"class_chart_{prompt}", height=spec["height"] + 60)  # + axis


@functools.lru_cache(maxsize=256)
def answers_spec(counts: tuple[tuple[str, int], ...], right: str | None, scale: float) -> dict:
    """The chart's Vega-Lite spec, made once for each count: after a reveal every student's page draws the same
    chart at once, and Altair takes about 50 ms to make and check one (30 students: 1.5 s of the server's time)."""
    return answers_chart(dict(counts), right, scale).to_dict()


def answers_chart(counts: dict[str, int], right: str | None, scale: float):
    """A bar per answer (in the prompt's order; a typed one as typed, control characters as escapes), its count
    beside it; after the reveal the right one in green (Okabe-Ito), before it every bar alike."""
    import altair as alt  # charts import altair: only a class pays for it

    shown = pd.DataFrame({"answer": [literal(answer, markdown=False) for answer in counts],
                          "students": list(counts.values()),
                          "right": [answer == right for answer in counts]})
    base = alt.Chart(shown).encode(
        y=alt.Y("answer:N", sort=None, title=None, axis=alt.Axis(labelLimit=420, labelFontSize=12 * scale)),
        x=alt.X("students:Q", title="students", axis=alt.Axis(tickMinStep=1, format="d", labelFontSize=11 * scale,
                                                              titleFontSize=11 * scale)))
    bars = base.mark_bar(height=int(18 * scale)).encode(
        color=alt.Color("right:N", scale=alt.Scale(domain=[False, True], range=["#0072B2", "#009E73"]), legend=None))
    labels = base.mark_text(align="left", dx=4, fontSize=12 * scale).encode(text="students:Q")
    return (bars + labels).properties(height=int(len(counts) * 34 * scale + 10))


@st.fragment(run_every=TEACHER_TICK_S)
def live_answers(prompt: str, options: list[str] | None) -> None:
    """The teacher's live histogram of the class's answers and how many answered, redrawn every TEACHER_TICK_S;
    nothing in it says which answer is right."""
    _answers_chart(prompt, options)


def class_answers(prompt: str, options: list[str] | None) -> None:
    """After the reveal, for the teacher and every student: the class's answers next to what was measured."""
    reveal = classroom().reveals(member().code).get(prompt)
    _answers_chart(prompt, options, reveal.answer if reveal else None)
