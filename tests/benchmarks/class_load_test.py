"""A class session under load (issue 39): a teacher and 30 students, each a tab speaking Streamlit's websocket
protocol (tests/benchmarks/load_test.py's Session), against one server.

    python tests/benchmarks/class_load_test.py [--students 30] [--answer-within 10] [--replicas 1] [--json out.json]

It starts `streamlit run app.py` (the bundled models) with a class store of its own (SQLite in a temporary user
folder, or --store redis://... for a running Redis), then:
1. the teacher opens TokenNorm and starts a class; every student opens the join link with follow on and joins;
2. followed view: each student's tab polls its class fragment every STUDENT_TICK_S, as the browser does; when the
   fragment asks for a history navigation (the frame that pushes the teacher's URL), the tab reruns that page with
   that URL, as the browser does. Measured: from the teacher's run that showed the view to the student's run of it;
   the teacher then moves to the Text explorer and back, twice more for every student;
3. answers: on TokenNorm every student answers its prompt at a random moment within --answer-within s; the teacher's
   tab polls its live histogram every TEACHER_TICK_S. Time to the histogram: from the k-th answer's run to the first
   teacher poll whose count shows k answers;
4. the teacher reveals; time to reveal: to each student's first run that shows the reveal;
5. lost answers: each student's last answer against the store's (must be 0 lost) and the histogram's final count.
Reported: p50 / p95 / max of each time, errors (exception elements, error boxes, time-outs), lost answers. Exit
status 0 only with no error and no lost answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_test import Session, latency_summary
from streamlit.proto.BackMsg_pb2 import BackMsg

from core.serving.classroom import Classroom
from core.serving.classroom_store import open_store

PROMPT = "predict_standardised"  # the TokenNorm page's prompt
OPTIONS = ["mean 0 and std 1, for every token", "they still differ from token to token", "mean 0, but the std differs"]
TEACHER_TICK_S = 1.0  # pages/ui/classroom.py's polls
STUDENT_TICK_S = 1.0
ANSWERED = re.compile(r"\*\*(\d+) of (\d+)\*\* students answered")
NAVIGATION = re.compile(r'page = ("[^"]*");\nconst search = ("[^"]*");')


class ClassTab(Session):
    """A tab that also remembers the texts it was shown and follows a class navigation as the browser would."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.texts: list[str] = []  # the markdown of the last run
        self.navigation: tuple[str, str] | None = None  # (page, query) the last run asked for
        self.tick = ""  # the class fragment: a student's polls, its captions say "Following the teacher's page"
        self.live = ""  # the teacher's live histogram's fragment

    def _note(self, msg, data: bytes) -> None:
        super()._note(msg, data)
        if msg.WhichOneof("type") != "delta" or msg.delta.WhichOneof("type") != "new_element":
            return
        element = msg.delta.new_element
        kind = element.WhichOneof("type")
        if kind == "markdown":
            self.texts.append(element.markdown.body)
            if msg.delta.fragment_id and "the teacher's page" in element.markdown.body:
                self.tick = msg.delta.fragment_id
            if msg.delta.fragment_id and "students answered" in element.markdown.body:
                self.live = msg.delta.fragment_id
        elif kind == "iframe" and "pushState" in element.iframe.srcdoc:
            page, search = NAVIGATION.search(element.iframe.srcdoc).groups()
            self.navigation = (json.loads(page), json.loads(search))

    async def _rerun(self, fragment_id: str, auto: bool = False):
        self.texts, self.navigation = [], None
        return await super()._rerun(fragment_id, auto)

    async def go(self, page: str, query: str, history: bool = False):
        """Open `page` with `query` (history: as Back or Forward would, which is how a follower's page moves)."""
        self.page, self.page_hash, self.query = page, "", query
        if not history:
            return await self._rerun("")
        send = self.ws.send  # this tab's next rerun is sent flagged, as the browser flags a history navigation's

        async def flagged(data: bytes) -> None:
            back = BackMsg()
            back.ParseFromString(data)
            back.rerun_script.is_history_navigation = True
            await send(back.SerializeToString())

        self.ws.send = flagged
        try:
            return await self._rerun("")
        finally:
            self.ws.send = send

    async def follow(self, deadline: float) -> float | None:
        """Poll the class fragment until it asks for a navigation, then run it: the time that run finished."""
        while time.monotonic() < deadline:
            if self.navigation is None:
                await asyncio.sleep(STUDENT_TICK_S)
                await self.poll_class()
            if self.navigation is not None:
                page, query = self.navigation
                await self.go(page, query, history=True)
                return time.monotonic()
        return None

    async def poll_class(self):
        """The class fragment's run (run_every); it makes a full run itself when it asks for one (st.rerun)."""
        return await self._rerun(self.tick, auto=True)


def problems_of(outcomes) -> list[str]:
    return [problem for outcome in outcomes if outcome is not None for problem in outcome.problems]


async def run_class(urls: list[str], students: int, answer_within: float, timeout: float, seed: int) -> dict:
    rng = random.Random(seed)
    errors: list[str] = []
    teacher = ClassTab(urls[0], timeout, page="token_norm")
    errors += problems_of([await teacher.open(), await teacher.click("class_start")])
    code = next(m.group(1) for t in teacher.texts if (m := re.search(r"Class code \*\*(\w+)\*\*", t)))
    viewed_at = time.monotonic()  # the teacher's view is shared by the run that started the class

    tabs = [ClassTab(urls[i % len(urls)], timeout, query=f"class={code}&follow=true") for i in range(students)]

    async def join(tab: ClassTab) -> None:
        nonlocal errors
        errors += problems_of([await tab.open(), await tab.click("class_join")])

    await asyncio.gather(*(join(tab) for tab in tabs))
    print(f"{students} students joined class {code}", file=sys.stderr, flush=True)
    follow_s: list[float] = []

    async def all_follow(since: float) -> None:
        deadline = time.monotonic() + timeout
        arrived = await asyncio.gather(*(tab.follow(deadline) for tab in tabs))
        follow_s.extend(at - since for at in arrived if at is not None)
        errors.extend(f"a student did not follow in {timeout:.0f} s" for at in arrived if at is None)

    await all_follow(viewed_at)  # from the Text explorer to the teacher's TokenNorm
    print(f"followed: {len(follow_s)}", file=sys.stderr, flush=True)

    # Answers within answer_within seconds; the teacher's histogram polled meanwhile.
    sent: dict[int, str] = {}
    answered_at: list[float] = []

    async def answer(index: int, tab: ClassTab) -> None:
        await asyncio.sleep(rng.uniform(0, answer_within))
        for _ in range(1 + (index % 3 == 0)):  # a third change their mind once
            choice = rng.choice(OPTIONS)
            outcome = await tab.change(PROMPT, choice)
            errors.extend(outcome.problems)
            sent[index] = choice
        answered_at.append(time.monotonic())

    histogram: list[tuple[float, int]] = []

    async def watch(stop: asyncio.Event) -> None:
        while not stop.is_set() or (histogram and histogram[-1][1] < students):
            await asyncio.sleep(TEACHER_TICK_S)
            outcome = await teacher._rerun(teacher.live, auto=bool(teacher.live))
            errors.extend(outcome.problems)
            counts = [int(m.group(1)) for t in teacher.texts if (m := ANSWERED.search(t))]
            if counts:
                histogram.append((time.monotonic(), counts[0]))
            if time.monotonic() > start + answer_within + timeout:
                break

    start, stop = time.monotonic(), asyncio.Event()
    watcher = asyncio.create_task(watch(stop))
    await asyncio.gather(*(answer(i, tab) for i, tab in enumerate(tabs)))
    stop.set()
    await watcher
    answered_at.sort()
    histogram_s = []
    for k, at in enumerate(answered_at, start=1):
        shown = next((seen for seen, count in histogram if count >= k and seen >= at), None)
        if shown is None:
            errors.append(f"the histogram never showed {k} answers")
        else:
            histogram_s.append(shown - at)

    print(f"answered: {len(sent)}, histogram: {histogram[-1:] }", file=sys.stderr, flush=True)
    # The reveal, then the teacher moves: Text explorer, TokenNorm again.
    revealed_at = time.monotonic()
    errors += problems_of([await teacher.click(f"{PROMPT}__reveal")])
    reveal_s: list[float] = []

    async def see_reveal(tab: ClassTab) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await asyncio.sleep(STUDENT_TICK_S)
            await tab.poll_class()
            if not any("You said" in t for t in tab.texts):
                continue
            reveal_s.append(time.monotonic() - revealed_at)
            return
        errors.append("a student did not see the reveal")

    await asyncio.gather(*(see_reveal(tab) for tab in tabs))
    for page in ("", "token_norm"):
        errors += problems_of([await teacher.go(page, f"class={code}")])
        await all_follow(time.monotonic())

    room = Classroom(open_store())
    revealed = [prompt for prompt in room.reveals(code) if prompt.startswith(PROMPT)]
    if not revealed:
        errors.append("the teacher's reveal was not stored")
    stored = room.answers(code, revealed[0]) if revealed else {}
    lost = sum(1 for index, tab in enumerate(tabs) if index in sent and sent[index] not in stored.values())
    lost = max(lost, len(sent) - len(stored))
    for tab in [teacher, *tabs]:
        await tab.close()
    return {"students": students, "answered": len(sent), "stored": len(stored), "lost_answers": lost,
            "histogram_final": histogram[-1][1] if histogram else 0,
            "time_to_histogram_s": latency_summary(histogram_s), "time_to_followed_view_s": latency_summary(follow_s),
            "time_to_reveal_s": latency_summary(reveal_s), "errors": errors[:20], "error_count": len(errors)}


def start_server(user_dir: str, store: str | None) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ATTENTION_LAB_USER_DIR": user_dir, "PYTHONUNBUFFERED": "1"}
    if store:
        env["ATTENTION_LAB_CLASS_STORE"] = store
    with open(Path(user_dir) / f"streamlit-{port}.log", "w") as log:
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                                   "--server.port", str(port), "--server.fileWatcherType", "none",
                                   "--server.address", "127.0.0.1"], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                return server, url
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("streamlit did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--answer-within", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--store", help="the class store, e.g. redis://127.0.0.1:6379/0 (default: SQLite)")
    parser.add_argument("--replicas", type=int, default=1,
                        help="servers sharing the store, students spread over them as a load balancer would")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    user_dir = tempfile.mkdtemp(prefix="class-load-")
    os.environ["ATTENTION_LAB_USER_DIR"] = user_dir  # this process reads the store too (lost answers)
    if args.store:
        os.environ["ATTENTION_LAB_CLASS_STORE"] = args.store
    servers = [start_server(user_dir, args.store) for _ in range(args.replicas)]
    try:
        result = asyncio.run(run_class([url for _, url in servers], args.students, args.answer_within, args.timeout,
                                       args.seed))
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait(10)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["error_count"] == 0 and result["lost_answers"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
