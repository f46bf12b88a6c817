"""A classroom on one machine: 30 students typing and toggling on the text explorer at once, against one server.

    python tests/benchmarks/load_test.py [--sessions 30] [--minutes 5] [--think 5 25] [--json out.json]
    python tests/benchmarks/load_test.py --url http://127.0.0.1:8080 --pid 1234 --pid 1235   # a running server or LB

Without --url it starts `streamlit run app.py` (the bundled models) on a free loopback port and stops it at the end.
Each session speaks Streamlit's own websocket protocol, as the browser does (GET the page for its cookies, then
/_stcore/stream with protobuf BackMsg / ForwardMsg): it opens the default page (the text explorer), then, until the
time is up, waits a think time and does one of: type a new text (Ctrl+Enter), toggle the mask or the position
encoding, pick another layer or head (those two are fragment reruns, as in the browser). The client does not draw
anything, so the machine's cores go to the server; what is measured is the server's side of a classroom.

Reported: p50 / p95 / max latency per action (from sending the rerun to the server's `script_finished`), errors
(exception elements, error boxes, compile errors, disconnects, no answer in --timeout s: must be 0), the bytes sent
per interaction, and the server's memory (RSS from /proc, every --sample s) and CPU time over the run. Memory counts
as bounded when the peak of the second half of the run is at most BOUNDED_GROWTH above the peak of the first half
(caches fill early; st.cache_data / st.cache_resource have max_entries); runs shorter than JUDGE_MEMORY_MINUTES
report memory without that verdict. Exit status 0 only with no error and memory not found unbounded.
It ends by itself: after --minutes, in-flight actions finish (or time out), sessions close.

With --trainers N (and --two-tabs K) N more students open the live-training page with the app's browser cookie,
press Start and watch their run as the page polls it (K of them in a second tab of the same browser): the issue's
classroom is --trainers 5 --two-tabs 2. Compare the toggles' p95 (mask, pe) with a run without them. With
--uploaders N, N students on the image page upload, in turn, the 39.7-megapixel PNG of the issue and the largest PNG
the page accepts, clicking a layer twice after each ("upload", "upload layer").

Attacker mode (issue 36): --attackers 4 adds hostile students who send a new 990-word text to lm-rope-long as soon as
the last is answered, --flooder one who PUTs 5 MB files without pause from a page with no uploader (under file ids
it makes up and ones the server issued; the answers are counted by status), --after 60 samples the memory for a
minute after the class ends. The class's errors leave out the attackers' own; compare the toggles' p95, the peak
and the memory 60 s after with a run without attackers:
    python tests/benchmarks/load_test.py --sessions 10 --minutes 3 --think 2 8 --after 60
    python tests/benchmarks/load_test.py --sessions 10 --minutes 3 --think 2 8 --after 60 --attackers 4 --flooder
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for bench_browser, imported where it is needed

# What a student does, and how often (weights): type a sentence, toggle the mask or encoding, open a layer or head.
ACTIONS = {"text": 4, "mask": 2, "pe": 2, "layer": 1, "head": 1}
TRAINER_ACTIONS = ("train open", "start", "poll")  # what a training student does (--trainers)
TOGGLES = ("mask", "pe")  # the toggles of the goal: p95 under load within 1.5x of a quiet class
TEXT_SIZES = range(8, 65, 4)  # tokens with [BOS]: short classroom sentences, all within the bundled context (128)
TEXTS_PER_SIZE = 4
BOUNDED_GROWTH = 0.10  # second-half peak RSS may exceed the first-half peak by at most this fraction
# Shorter runs report memory without a verdict: at a classroom's pace (about 1.5 interactions/s on 2 cores) the
# recording cache (64 entries) and the sessions' own data take about 2 minutes to fill, so the first half of the
# run must be longer than that.
JUDGE_MEMORY_MINUTES = 5.0
BROWSER_COOKIE = "attention_lab_browser"  # pages/ui/browser.py: its value is signed by the server
ID_PREFIX = "$$ID-"  # Streamlit's widget ids: "$$ID-<hash>-<user key>"
FINISHED = ForwardMsg.ScriptFinishedStatus


# ---------------------------------------------------------------------------------------------------------
# Pure helpers: what went wrong in a message, latency and memory summaries
# ---------------------------------------------------------------------------------------------------------

def problems(msg: ForwardMsg) -> list[str]:
    """What a ForwardMsg shows that a student should never see: an exception element, an error box, a script
    that did not compile. Warnings and infos (e.g. unknown words) are not problems."""
    found = []
    if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
        element = msg.delta.new_element
        kind = element.WhichOneof("type")
        if kind == "exception" and not element.exception.is_warning:
            found.append(f"exception {element.exception.type}: {element.exception.message}"[:300])
        elif kind == "alert" and element.alert.format == element.alert.ERROR:
            found.append(f"error box: {element.alert.body}"[:300])
    elif msg.WhichOneof("type") == "script_finished" and msg.script_finished == FINISHED.FINISHED_WITH_COMPILE_ERROR:
        found.append("the script did not compile")
    elif msg.WhichOneof("type") == "session_event" and msg.session_event.HasField("script_compilation_exception"):
        found.append(f"compilation exception: {msg.session_event.script_compilation_exception.message}"[:300])
    return found


def latency_summary(seconds: list[float]) -> dict:
    """count, p50, p95 and max of a list of latencies (linear-interpolated percentiles); None when empty."""
    if not seconds:
        return {"count": 0, "p50_s": None, "p95_s": None, "max_s": None}
    p50, p95 = np.percentile(seconds, [50, 95])
    return {"count": len(seconds), "p50_s": float(p50), "p95_s": float(p95), "max_s": float(max(seconds))}


def memory_summary(samples: list[tuple[float, float]], growth: float = BOUNDED_GROWTH) -> dict:
    """samples: (seconds since start, RSS in MB). Start, peak, end and the peaks of the two halves of the run;
    bounded when the second half's peak is at most `growth` above the first half's."""
    if len(samples) < 2:
        raise ValueError("need at least two memory samples")
    middle = (samples[0][0] + samples[-1][0]) / 2
    first = max(mb for t, mb in samples if t <= middle)
    second = max(mb for t, mb in samples if t > middle)
    return {"start_mb": samples[0][1], "peak_mb": max(mb for _, mb in samples), "end_mb": samples[-1][1],
            "first_half_peak_mb": first, "second_half_peak_mb": second,
            "second_half_growth": second / first - 1, "bounded": second <= first * (1 + growth)}


# ---------------------------------------------------------------------------------------------------------
# One session: a browser tab as the server sees it
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Widget:
    id: str
    fragment_id: str  # "" outside a fragment
    options: list[str]  # selectbox / radio labels; [] for a text box
    value: str  # what the browser shows now


@dataclass
class Outcome:
    seconds: float
    bytes: int
    problems: list[str]


class Session:
    """One student's tab: Streamlit's websocket protocol, widget states kept as the browser keeps them."""

    def __init__(self, url: str, timeout: float, query: str = "", page: str = "", cookie: str = ""):
        self.url, self.timeout, self.query = url.rstrip("/"), timeout, query  # query: the URL's, e.g. "view=..."
        self.page, self.cookie = page, cookie  # page: its URL path ("" the default); cookie: name=value the app set
        self.fragments: set[str] = set()  # the fragments drawn in the last run (a polled panel is one)
        self.widgets: dict[str, Widget] = {}  # by user key
        self.states: dict[str, WidgetState] = {}  # by widget id: every value this tab has set
        self.messages: dict[str, bytes] = {}  # each keyed element's message in the last run, as sent
        self.page_hash = ""
        self.session_id = ""  # the server's id of this tab (uploads are addressed to it)
        self.cookies = ""  # the Cookie header the tab sends
        self.app_cookie = ""  # name=value of the browser id cookie the app's page script sets (signed by the server)
        self.ws = None

    async def open(self) -> Outcome:
        """Load the page (its cookies: XSRF, a load balancer's sticky cookie), connect, run the default page."""
        cookies = "; ".join(c for c in (await asyncio.to_thread(page_cookies, self.url), self.cookie) if c)
        self.cookies = cookies
        headers = {"Origin": self.url, **({"Cookie": cookies} if cookies else {})}
        started = time.perf_counter()
        self.ws = await connect(self.url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                                additional_headers=headers, max_size=None, open_timeout=self.timeout)
        outcome = await self._rerun("")
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def change(self, key: str, value: str) -> Outcome:
        """Set one widget (text box: Ctrl+Enter; selectbox / radio: a click) and wait for the rerun it causes."""
        widget = self.widgets[key]
        widget.value = value
        self.states[widget.id] = WidgetState(id=widget.id, string_value=value)
        return await self._rerun(widget.fragment_id)

    async def click(self, key: str) -> Outcome:
        """Press button `key`: its trigger is sent with this rerun only, as the browser does."""
        widget = self.widgets[key]
        self.states[widget.id] = WidgetState(id=widget.id, trigger_value=True)
        try:
            return await self._rerun(widget.fragment_id)
        finally:
            self.states.pop(widget.id, None)

    async def upload(self, key: str, name: str, data: bytes) -> Outcome:
        """Choose a file in file uploader `key`, as the browser does: ask the server where to put it (over the
        websocket), PUT it there (multipart, with the XSRF token), then rerun with the widget's new state. The
        outcome's seconds count all three."""
        widget = self.widgets[key]
        started = time.perf_counter()
        urls = await self.upload_urls(name)
        await asyncio.to_thread(put_file, self.url + urls.upload_url, self.cookies, name, data, self.timeout)
        state = WidgetState(id=widget.id)
        info = state.file_uploader_state_value.uploaded_file_info.add()
        info.name, info.size, info.file_id = name, len(data), urls.file_id
        info.file_urls.CopyFrom(urls)
        self.states[widget.id] = state
        outcome = await self._rerun(widget.fragment_id)
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def upload_urls(self, name: str):
        """Where to PUT a file (its file id, upload and delete URLs), asked over the websocket as the uploader does."""
        back = BackMsg()
        back.file_urls_request.request_id = f"{name}-{time.perf_counter()}"
        back.file_urls_request.file_names.append(name)
        back.file_urls_request.session_id = self.session_id
        await self.ws.send(back.SerializeToString())
        async with asyncio.timeout(self.timeout):
            while True:
                msg = ForwardMsg()
                msg.ParseFromString(await self.ws.recv())
                if msg.WhichOneof("type") == "file_urls_response":
                    return msg.file_urls_response.file_urls[0]

    async def poll(self) -> Outcome | None:
        """What a fragment with run_every does in the browser: rerun it by itself (None when none is drawn)."""
        if not self.fragments:
            return None
        return await self._rerun(sorted(self.fragments)[0], auto=True)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def _rerun(self, fragment_id: str, auto: bool = False) -> Outcome:
        back = BackMsg()
        back.rerun_script.page_script_hash = self.page_hash
        back.rerun_script.page_name = "" if self.page_hash else self.page
        back.rerun_script.is_auto_rerun = auto
        back.rerun_script.query_string = self.query
        back.rerun_script.fragment_id = fragment_id
        back.rerun_script.widget_states.widgets.extend(self.states.values())
        self.messages = {}
        if not fragment_id:
            self.fragments = set()
        started = time.perf_counter()
        await self.ws.send(back.SerializeToString())
        total, found = 0, []
        async with asyncio.timeout(self.timeout):
            while True:
                data = await self.ws.recv()
                total += len(data)
                msg = ForwardMsg()
                msg.ParseFromString(data)
                found += problems(msg)
                self._note(msg, data)
                finished = msg.WhichOneof("type") == "script_finished"
                if finished and msg.script_finished != FINISHED.FINISHED_EARLY_FOR_RERUN:
                    return Outcome(time.perf_counter() - started, total, found)

    def _note(self, msg: ForwardMsg, data: bytes) -> None:
        """Remember the page we are on, every keyed widget (id, fragment, options, value) and element message."""
        kind = msg.WhichOneof("type")
        if kind == "navigation":
            self.page_hash = msg.navigation.page_script_hash
        if kind == "new_session" and msg.new_session.initialize.session_id:
            self.session_id = msg.new_session.initialize.session_id
        if kind != "delta" or msg.delta.WhichOneof("type") != "new_element":
            return
        if msg.delta.fragment_id:
            self.fragments.add(msg.delta.fragment_id)
        element = msg.delta.new_element
        proto = getattr(element, element.WhichOneof("type") or "empty")
        if element.WhichOneof("type") == "html" and BROWSER_COOKIE + "=" in proto.body:
            self.app_cookie = BROWSER_COOKIE + "=" + proto.body.split(BROWSER_COOKIE + "=", 1)[1].split(";", 1)[0]
        element_id = getattr(proto, "id", "")
        if not element_id.startswith(ID_PREFIX):
            return
        key = element_id.split("-", 2)[2]
        self.messages[key] = data
        options = list(getattr(proto, "options", []))
        if key in self.widgets and self.widgets[key].id == element_id:
            self.widgets[key].options, self.widgets[key].fragment_id = options, msg.delta.fragment_id
            return
        self.widgets[key] = Widget(element_id, msg.delta.fragment_id, options, shown_value(element))


def shown_value(element) -> str:
    """The value a text box, selectbox or radio shows when drawn ("" for other elements)."""
    kind = element.WhichOneof("type")
    proto = getattr(element, kind)
    if kind == "text_area":
        return proto.value if proto.set_value else proto.default
    if kind in ("selectbox", "radio"):
        if proto.set_value:
            return proto.raw_value
        return proto.options[proto.default] if 0 <= proto.default < len(proto.options) else ""
    return ""


def put_file(url: str, cookies: str, name: str, data: bytes, timeout: float) -> None:
    """PUT one file to Streamlit's upload endpoint as the browser's uploader does (multipart form, XSRF header)."""
    boundary = "loadtest" + os.urandom(8).hex()
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    xsrf = dict(pair.split("=", 1) for pair in cookies.split("; ") if "=" in pair).get("_streamlit_xsrf", "").strip('"')
    request = urllib.request.Request(url, data=body, method="PUT", headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}", "Cookie": cookies, "X-Xsrftoken": xsrf})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read()


def page_cookies(url: str) -> str:
    """The cookies a browser gets with the page and its first health check, which sets the XSRF cookie that uploads
    need (name=value pairs for a Cookie header)."""
    cookies = []
    for path in ("/", "/_stcore/health"):
        with urllib.request.urlopen(url + path, timeout=30) as response:
            cookies += [header.split(";", 1)[0] for header in response.headers.get_all("Set-Cookie") or []]
    return "; ".join(cookies)


# ---------------------------------------------------------------------------------------------------------
# Students, the server's memory, the run
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Record:
    session: int
    action: str
    seconds: float | None  # None: no answer
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


def next_value(session: Session, key: str, texts: list[str], rng: random.Random) -> str:
    """A value for widget `key` other than the one shown: a new text, or another option."""
    widget = session.widgets[key]
    choices = [text for text in texts if text != widget.value] if key == "text" else \
        [option for option in widget.options if option != widget.value]
    return rng.choice(choices)


class Recorder:
    """One session's records, each under the action under way (`action`, set before it is awaited)."""

    def __init__(self, index: int, records: list[Record], action: str):
        self.index, self.records, self.action = index, records, action

    def add(self, outcome) -> None:
        self.records.append(Record(self.index, self.action, outcome.seconds, outcome.bytes, outcome.problems))

    def fail(self, problem: str) -> None:
        self.records.append(Record(self.index, self.action, None, problems=[problem]))


async def drive(session: Session, recorder: Recorder, timeout: float, script) -> None:
    """Run `script(recorder)` on the session; a timeout or a lost connection ends it (recorded against the action under
    way), and the session is closed."""
    try:
        await script(recorder)
    except TimeoutError:
        recorder.fail(f"no answer in {timeout} s")
    except (ConnectionClosed, OSError) as error:
        recorder.fail(f"disconnected: {type(error).__name__}: {error}")
    finally:
        try:
            await session.close()
        except (ConnectionClosed, OSError):
            pass


async def student(index: int, url: str, deadline: float, think: tuple[float, float], texts: list[str],
                  timeout: float, records: list[Record]) -> None:
    """One student: open the page, then interact until the deadline. A failure ends the session (counted)."""
    rng = random.Random(index)
    session = Session(url, timeout)

    async def browse(recorder: Recorder) -> None:
        recorder.add(await session.open())
        while True:
            await asyncio.sleep(rng.uniform(*think))
            if time.monotonic() >= deadline:
                break
            recorder.action = rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
            recorder.add(await session.change(recorder.action, next_value(session, recorder.action, texts, rng)))

    await drive(session, Recorder(index, records, "open"), timeout, browse)


TRAINER_QUERY = "tr_steps=5000"  # the default model (reversal, D=32) for about 5000 steps: longer than a class run
POLL_SECONDS = 2.0  # the live-training page's polling fragment (pages/live_training.py)


def trainer_browsers(trainers: int, two_tabs: int) -> list[int]:
    """The browser of each trainer session (an index): the first `two_tabs` browsers have two tabs each."""
    browsers = list(range(trainers))
    for i in range(min(two_tabs, trainers)):
        browsers.append(browsers[i])
    return browsers


async def trainer(index: int, url: str, deadline: float, cookie: asyncio.Future, first_tab: bool, timeout: float,
                  records: list[Record]) -> None:
    """A student training on the live-training page: open it, press Start, then watch the run as the page's
    fragment polls it, until the deadline. Records "train open", "start" and "poll"; a busy server or a second tab
    of a browser that already trains (an info or warning box) is not an error. The browser's first tab opens
    without a cookie and passes on the signed one the page sets (`cookie`); its second tab waits for it."""
    session = Session(url, timeout, query=TRAINER_QUERY, page="live_training",
                      cookie="" if first_tab else await cookie)

    async def train(recorder: Recorder) -> None:
        outcome = await session.open()
        if first_tab:
            cookie.set_result(session.app_cookie)
        recorder.add(outcome)
        recorder.action = "start"
        recorder.add(await session.click("tr_start"))
        recorder.action = "poll"
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            outcome = await session.poll()
            if outcome is not None:
                recorder.add(outcome)

    await drive(session, Recorder(index, records, "train open"), timeout, train)
    if first_tab and not cookie.done():  # the first tab failed before the page set its cookie: the second goes on
        cookie.set_result("")


UPLOADER_ACTIONS = ("upload open", "upload", "upload layer")  # what an uploading student does (--uploaders)
REFUSED = "Can't use this file:"  # the image page's message for a file it refuses (the 39.7 MP one)


def upload_files() -> list[tuple[str, bytes]]:
    """What the issue's uploading students choose, in turn: the 39.7-megapixel PNG of 154 KB (refused from its header
    since issue 15) and the largest PNG the page accepts (8.3 megapixels), each a few hundred KB."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from upload_files import flat_png  # tests/upload_files.py: Pillow-made files

    return [("huge-39.7MP.png", flat_png(7300, 5440)), ("largest-8.3MP.png", flat_png(3840, 2160))]


async def uploader(index: int, url: str, deadline: float, think: tuple[float, float], files: list[tuple[str, bytes]],
                   timeout: float, records: list[Record]) -> None:
    """A student on the image page who uploads large pictures, then clicks through the layers, until the deadline."""
    rng = random.Random(index)
    session = Session(url, timeout, query="source=upload", page="image_lab")

    async def upload(recorder: Recorder) -> None:
        recorder.add(await session.open())
        turn = index
        while time.monotonic() < deadline:
            recorder.action = "upload"
            outcome = await session.upload("upload", *files[turn % len(files)])
            outcome.problems = [p for p in outcome.problems if REFUSED not in p]  # the page says why: expected
            recorder.add(outcome)
            turn += 1
            for _ in range(2):
                await asyncio.sleep(rng.uniform(*think))
                if "layer" in session.messages:  # drawn in the last run: the upload was accepted
                    recorder.action = "upload layer"
                    recorder.add(await session.change("layer", next_value(session, "layer", [], rng)))
            await asyncio.sleep(rng.uniform(*think))

    await drive(session, Recorder(index, records, "upload open"), timeout, upload)


ATTACK_ACTIONS = ("attack open", "attack", "flood open", "flood")  # the hostile students' (--attackers, --flooder)
ATTACK_MODEL = "lm-rope-long"  # the bundled model with the longest context (1024 tokens)
ATTACK_WORDS = 990  # words of an attacker's text: about 1000 tokens, within that context


def attack_text(seed: int) -> str:
    """A long text no one sent before (grammar documents of its own seed), cut to ATTACK_WORDS words."""
    from core.data.grammar import generate_documents

    words: list[str] = []
    while len(words) < ATTACK_WORDS:
        words += " ".join(generate_documents(40, seed=seed * 1000 + len(words))).split()
    return " ".join(words[:ATTACK_WORDS])


async def attacker(index: int, url: str, deadline: float, timeout: float, records: list[Record]) -> None:
    """The issue's hostile student: on the text explorer with ATTACK_MODEL, sends a new long text as soon as the
    last one is answered, until the deadline ("attack")."""
    session = Session(url, timeout, query=f"model={ATTACK_MODEL}")

    async def attack(recorder: Recorder) -> None:
        recorder.add(await session.open())
        recorder.action = "attack"
        sent = 0
        while time.monotonic() < deadline:
            recorder.add(await session.change("text", attack_text(100 * index + sent)))
            sent += 1

    await drive(session, Recorder(index, records, "attack open"), timeout, attack)


async def flooder(index: int, url: str, deadline: float, timeout: float, records: list[Record],
                  statuses: dict[str, int]) -> None:
    """The issue's upload flood: from the text explorer (no uploader on it), PUT 5 MB files as fast as the server
    answers, each under a file id made up and under one the server issued ("flood"); `statuses` counts the answers
    (204 accepted, 400 unknown id, 413 too many, 503 the server's share full)."""
    session = Session(url, timeout)
    data = os.urandom(5 * 2**20 - 4096)

    async def put(file_id: str) -> None:
        upload = f"{url}/_stcore/upload_file/{session.session_id}/{file_id}"
        started = time.perf_counter()
        try:
            await asyncio.to_thread(put_file, upload, session.cookies, "flood.png", data, timeout)
            status = "204"
        except urllib.error.HTTPError as error:
            status = str(error.code)
        statuses[status] = statuses.get(status, 0) + 1
        records.append(Record(index, "flood", time.perf_counter() - started, len(data)))

    async def flood(recorder: Recorder) -> None:
        recorder.add(await session.open())
        while time.monotonic() < deadline:
            await put(os.urandom(16).hex())
            await put((await session.upload_urls("flood.png")).file_id)

    await drive(session, Recorder(index, records, "flood open"), timeout, flood)


def proc_text(pid: int, name: str) -> str:
    """/proc/PID/NAME; a server that has exited ends the run with that said."""
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except FileNotFoundError:
        raise RuntimeError(f"server process {pid} is gone (crashed or stopped during the run)") from None


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc/PID/status (VmRSS), in MB."""
    for line in proc_text(pid, "status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/PID/stat."""
    fields = proc_text(pid, "stat").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sample_memory(pids: list[int], every: float, stop: asyncio.Event, samples: dict[int, list]) -> None:
    started = time.monotonic()
    while True:
        for pid in pids:
            samples[pid].append((round(time.monotonic() - started, 2), round(rss_mb(pid), 1)))
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except TimeoutError:
            pass


async def warm_up(urls: list[str], timeout: float) -> dict[str, float]:
    """Open the page once on each server, as the teacher does before class (imports, model load): seconds each."""
    seconds = {}
    for url in urls:
        session = Session(url, timeout)
        try:
            outcome = await session.open()
        finally:
            await session.close()
        if outcome.problems:
            raise RuntimeError(f"{url}: the page shows problems before the class starts: {outcome.problems}")
        seconds[url] = outcome.seconds
    return seconds


async def classroom(url: str, pids: list[int], sessions: int, minutes: float, think: tuple[float, float],
                    ramp: float, timeout: float, sample: float, texts: list[str], warm: list[str],
                    browsers: list[int] = (), uploaders: int = 0, attackers: int = 0, flood: bool = False,
                    after: float = 0.0) -> dict:
    idle_mb = {pid: rss_mb(pid) for pid in pids}
    warm_s = await warm_up(warm, timeout)
    records: list[Record] = []
    samples: dict[int, list] = {pid: [] for pid in pids}
    cpu_start = {pid: cpu_seconds(pid) for pid in pids}
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_memory(pids, sample, stop, samples))
    started = time.monotonic()
    deadline = started + 60 * minutes

    async def delayed(index: int) -> None:
        await asyncio.sleep(ramp * index / sessions)
        await student(index, url, deadline, think, texts, timeout, records)

    cookies = {browser: asyncio.get_running_loop().create_future() for browser in browsers}
    trainers = (trainer(sessions + i, url, deadline, cookies[browser], browsers.index(browser) == i, timeout, records)
                for i, browser in enumerate(browsers))
    files = upload_files() if uploaders else []
    uploading = (uploader(sessions + len(browsers) + i, url, deadline, think, files, timeout, records)
                 for i in range(uploaders))
    first = sessions + len(browsers) + uploaders
    attacking = [attacker(first + i, url, deadline, timeout, records) for i in range(attackers)]
    statuses: dict[str, int] = {}
    if flood:
        attacking.append(flooder(first + attackers, url, deadline, timeout, records, statuses))
    await asyncio.gather(*(delayed(index) for index in range(sessions)), *trainers, *uploading, *attacking)
    elapsed = time.monotonic() - started
    await asyncio.sleep(after)  # the memory is still sampled: does it come back once the class (and attack) is over?
    stop.set()
    await sampler
    result = report(records, samples, {pid: cpu_seconds(pid) - cpu_start[pid] for pid in pids}, elapsed,
                    dict(url=url, sessions=sessions, minutes=minutes, think_s=list(think), ramp_s=ramp,
                         trainer_tabs=len(browsers), trainer_browsers=len(set(browsers)), uploaders=uploaders,
                         attackers=attackers, flood=flood, after_s=after))
    result["warm_up_s"] = warm_s
    result["flood_statuses"] = statuses
    for pid, server in result["server"].items():
        server["idle_mb_before_warm_up"] = idle_mb[int(pid)]
    return result


def report(records: list[Record], samples: dict[int, list], cpu: dict[int, float], elapsed: float,
           settings: dict) -> dict:
    answered = [r for r in records if r.seconds is not None]
    interactions = [r for r in answered if r.action in ACTIONS]  # the students' (toggles, texts)
    errors = [r for r in records if r.problems and r.action not in ATTACK_ACTIONS]  # the class's, not the attackers'
    attack_errors = [r for r in records if r.problems and r.action in ATTACK_ACTIONS]
    result = {"settings": settings, "elapsed_s": elapsed,
              "latency": {action: latency_summary([r.seconds for r in answered if r.action == action])
                          for action in ("open", *ACTIONS, *TRAINER_ACTIONS, *UPLOADER_ACTIONS, *ATTACK_ACTIONS)},
              "errors": len(errors), "error_examples": [asdict(r) for r in errors[:10]],
              "attacker_errors": len(attack_errors), "attacker_error_examples": [asdict(r) for r in attack_errors[:3]],
              "interactions_per_s": len(interactions) / elapsed,
              "kb_per_interaction": float(np.mean([r.bytes for r in interactions]) / 1024) if interactions else None,
              "server": {}}
    # the "toggle": the mask and the position encoding together, twice the samples of either for its p95
    result["latency"]["toggles (mask, pe)"] = latency_summary([r.seconds for r in answered if r.action in TOGGLES])
    result["latency"]["all interactions"] = latency_summary([r.seconds for r in interactions])
    for pid, series in samples.items():
        during = [sample for sample in series if sample[0] <= elapsed]  # the class; after it: --after's samples
        result["server"][str(pid)] = {"cpu_s": cpu[pid], "memory": memory_summary(during), "rss_mb": series,
                                      "baseline_mb": series[0][1], "after_mb": series[-1][1]}
    judged = settings["minutes"] >= JUDGE_MEMORY_MINUTES
    result["memory_bounded"] = all(s["memory"]["bounded"] for s in result["server"].values()) if judged else None
    return result


def print_report(result: dict) -> None:
    s = result["settings"]
    print(f"\n{s['sessions']} sessions for {s['minutes']} min against {s['url']} (think {s['think_s'][0]:g}-"
          f"{s['think_s'][1]:g} s), {s.get('trainer_tabs', 0)} training tabs of {s.get('trainer_browsers', 0)} "
          f"browsers and {s.get('uploaders', 0)} uploading students; "
          f"{result['interactions_per_s']:.2f} interactions/s, "
          f"{result['kb_per_interaction'] or 0:.0f} KB sent per interaction")
    print("warm-up (one page load per server before the clock, not counted): "
          + ", ".join(f"{url} {seconds:.1f} s" for url, seconds in result["warm_up_s"].items()))
    print(f"{'action':<17} {'count':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    for action, row in result["latency"].items():
        if row["count"]:
            print(f"{action:<17} {row['count']:>6} {row['p50_s']:>7.2f} {row['p95_s']:>7.2f} {row['max_s']:>7.2f}")
    print(f"errors: {result['errors']}" + (f" (the attackers': {result['attacker_errors']})"
                                           if s.get("attackers") or s.get("flood") else ""))
    if result.get("flood_statuses"):
        print(f"upload flood, answers by status: {result['flood_statuses']}")
    for example in result["error_examples"]:
        print(f"  session {example['session']} {example['action']}: {'; '.join(example['problems'])}")
    for pid, server in result["server"].items():
        m = server["memory"]
        series = server["rss_mb"]
        every = max(1, len(series) // 12)
        trace = ", ".join(f"{t:.0f}s {mb:.0f}" for t, mb in series[::every])
        print(f"server {pid}: CPU {server['cpu_s']:.0f} s; RSS MB idle {server['idle_mb_before_warm_up']:.0f}, "
              f"start {m['start_mb']:.0f}, peak {m['peak_mb']:.0f}, "
              f"end {m['end_mb']:.0f}; second half vs first half peak {100 * m['second_half_growth']:+.1f}%; "
              f"baseline {server['baseline_mb']:.0f}, {s.get('after_s', 0):g} s after the class "
              f"{server['after_mb']:.0f}"
              f"\n  RSS over time: {trace}")
    verdict = {True: "bounded", False: "NOT bounded",
               None: f"not judged (a run under {JUDGE_MEMORY_MINUTES:g} min ends while the caches still fill)"}
    print(f"memory: {verdict[result['memory_bounded']]}")


def classroom_texts() -> list[str]:
    """Sentences from the grammar, TEXTS_PER_SIZE of each size in TEXT_SIZES (seeded: the same every run)."""
    from bench_browser import grammar_text  # imports the model code (torch): only when a class is run
    return [grammar_text(n, seed=9000 + 10 * n + i) for n in TEXT_SIZES for i in range(TEXTS_PER_SIZE)]


def stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=JUDGE_MEMORY_MINUTES)
    parser.add_argument("--think", type=float, nargs=2, default=(5.0, 25.0), metavar=("MIN", "MAX"),
                        help="seconds a student waits between two actions (uniform)")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the sessions connect")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds an action may take before it fails")
    parser.add_argument("--sample", type=float, default=2.0, help="seconds between memory samples")
    parser.add_argument("--url", help="a running server or load balancer (default: start app.py here)")
    parser.add_argument("--pid", type=int, action="append", default=[], help="server process to watch (repeat)")
    parser.add_argument("--warm", action="append", default=[],
                        help="open the page once here before the clock (repeat; default: the target URL)")
    parser.add_argument("--trainers", type=int, default=0,
                        help="students on the live-training page who press Start and watch their run (the issue's "
                             "classroom: 5)")
    parser.add_argument("--two-tabs", type=int, default=0,
                        help="of the trainers, how many have a second tab of the same browser (the issue's: 2)")
    parser.add_argument("--uploaders", type=int, default=0,
                        help="students on the image page who upload large pictures (UPLOADER_ACTIONS, upload_files)")
    parser.add_argument("--attackers", type=int, default=0,
                        help=f"hostile students sending new {ATTACK_WORDS}-word texts to {ATTACK_MODEL} without pause "
                             "(the issue's attacker mode: 4)")
    parser.add_argument("--flooder", action="store_true", help="one more hostile student flooding uploads of 5 MB")
    parser.add_argument("--after", type=float, default=0.0,
                        help="seconds the memory is still sampled once the class ends (attacker mode: 60)")
    parser.add_argument("--json", help="write the full results here")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.minutes <= 0 or not 0 <= args.think[0] <= args.think[1]:
        parser.error("--sessions >= 1, --minutes > 0 and 0 <= think MIN <= MAX")
    if args.url and not args.pid:
        parser.error("--url needs the server's process id(s), --pid, to watch its memory")
    texts = classroom_texts()
    server = None
    url, pids = args.url, args.pid
    if url is None:
        from bench_browser import free_port, start, wait_healthy

        port = free_port()
        server = start("app.py", port, Path(os.environ.get("TMPDIR", "/tmp")) / "load_test_server.log")
        url, pids = f"http://127.0.0.1:{port}", [server.pid]
        wait_healthy(url, server)
    try:
        print(f"{args.sessions} sessions against {url} for {args.minutes} min ...", flush=True)
        result = asyncio.run(classroom(url, pids, args.sessions, args.minutes, tuple(args.think), args.ramp,
                                       args.timeout, args.sample, texts, args.warm or [url],
                                       trainer_browsers(args.trainers, args.two_tabs), args.uploaders,
                                       args.attackers, args.flooder, args.after))
    finally:
        if server is not None:
            stop_server(server)
    print_report(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0 if result["errors"] == 0 and result["memory_bounded"] is not False else 1


if __name__ == "__main__":
    sys.exit(main())
