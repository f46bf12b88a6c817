"""How fast the text explorer redraws in a real browser, beside a trivial Streamlit page timed the same way.

    python tests/benchmarks/bench_browser.py [--sizes 16 64 256 512 1024] [--repeats 5] [--json out.json]
    python tests/benchmarks/bench_browser.py --pages [--repeats 5] [--json out.json]

--pages times, instead, a widget change on every page with a layer and head picker (the text explorer, the maths,
the cost of attention, the encoder–decoder, the image page): a click on another head, until the page is redrawn,
beside the trivial page's mask toggle in the same browser (goal, issue 18: within PAGE_TARGET x of it). Each page
opens with its own defaults (its bundled model, its default text or image).

The goals (issue 18, GOALS): the toggle within 1.2x the floor at 64 tokens and within 2x at 512, typing within 2x
at 512, and at 1024 tokens the toggle under 2 s. The floor is tests/benchmarks/trivial_page.py (a text box, a mask
choice and a small heatmap). Both apps are started headless (`streamlit run ... --server.headless true
--server.port P --server.fileWatcherType none`) and driven by Playwright in the system Chromium, in one browser, their measurements interleaved so that
machine noise hits both alike. For each N (tokens with [BOS]; texts from the grammar's vocabulary, a new text
for every repeat so no cached recording is reused) it measures

  (a) type:   fill the text box with an N-token text, Ctrl+Enter   -> everything redrawn
  (b) toggle: mask "model's own (causal)" -> "none" (trivial page: "causal" -> "none") -> everything redrawn

"Redrawn" is detected in the page: a MutationObserver notes when Streamlit's script state
(stApp[data-test-script-state]) went to running and back to notRunning, and the time of the last DOM change
inside any chart (a plotly chart, or the app's canvas heatmap, which counts its draws in data-drawn); the
measurement ends at the later of the two, once the page has been quiet for QUIET_MS, the expected charts (or, past the context length, the error message) are on screen and, when charts
are expected, at least one of them changed. Times are from just before the key press / option click.

The app runs the bundled text model with the longest context (lm-rope-long, 1024 tokens, trained on 512) at every
N; past its context the app answers with the "context length" message, and that time is reported and marked as such.
Run on purpose, not by the default test run (pytest.ini excludes tests/benchmarks).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from core.data.grammar import generate_documents  # noqa: E402
from core.model.registry import DEFAULT_TEXT_MODEL, TEXT_TASKS, list_cards, load_model  # noqa: E402
from core.model.run import text_tokenizer, tokenizer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
CHARTS = ".js-plotly-plot, .al-heatmap"  # plotly charts and the app's canvas heatmaps (assets/web/heatmap.js)
QUIET_MS = 400
HEAD_VIEW_N = 461  # issue 18: the head view at 461 tokens took 8.8 s
TIMEOUT_MS = 60_000
APP_CHARTS = 1  # the default tab, "Attention pattern": the chosen head (other tabs, "All heads" too, are lazy)
GOALS = {(64, "toggle"): ("ratio", 1.2), (512, "toggle"): ("ratio", 2.0), (512, "type"): ("ratio", 2.0),
         (1024, "toggle"): ("seconds", 2.0)}  # issue 18: (N, action) -> (the app's time ÷ the floor's, or s), at most
# name -> (url path, "": the text explorer; the key of its head picker; its options' prefix; a goal in seconds)
HEAD_PAGES = {"text_explorer": ("", "head", "H", None), "maths": ("maths", "head", "H", 1.0),
              "attention_cost": ("attention_cost", "head", "H", None),
              "cross_attention": ("cross_attention", "dec_head", "H", None),
              "image_lab": ("image_lab", "head", "H", None),
              # the head view of a long text: a change of its layer redraws its lines
              f"head view, {HEAD_VIEW_N} tokens": ("?view=Head+view&model={long}&text={text}", "lines_layer", "L", 1.0)}
PAGE_TARGET = 2.0

OBSERVER_JS = """(charts) => {
  if (window.__bench && window.__bench.observer) window.__bench.observer.disconnect();
  const b = window.__bench = {t0: null, sawRunning: false, stopped: null, lastPlot: 0, plotChanged: false,
                              lastMain: 0, mainChanged: false, lastAny: performance.now()};
  b.observer = new MutationObserver(records => {
    const now = performance.now();
    b.lastAny = now;
    for (const r of records) {
      const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (!node) continue;
      if (r.type === 'attributes' && r.attributeName === 'data-test-script-state') {
        // batches are read after the fact: a quick rerun's running -> notRunning pair shows in oldValue
        b.sawRunning = true;
        b.stopped = r.oldValue === 'running' ? now : null;
        continue;
      }
      if (b.t0 === null) continue;
      if (node.closest(charts)) { b.lastPlot = now; b.plotChanged = true; }
      if (node.closest('[data-testid="stMain"]')) { b.lastMain = now; b.mainChanged = true; }
    }
  });
  b.observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true,
                                     attributeOldValue: true});
}"""

DONE_JS = """([charts, needChange, errorText, quiet, selector]) => {
  // Done: the script is not running, no status widget, the page has been quiet for `quiet` ms, the expected
  // charts (or error text) are there, and the rerun showed (script state seen running, or the main area or,
  // when charts are expected, a chart changed). A rerun so quick that React never shows "running" is caught
  // by the DOM changes it makes.
  const b = window.__bench;
  if (!b || b.t0 === null) return null;
  const app = document.querySelector('[data-testid="stApp"]');
  if (app.getAttribute('data-test-script-state') !== 'notRunning') return null;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return null;
  if (errorText) {
    const alerts = [...document.querySelectorAll('[data-testid="stAlert"]')].map(e => e.innerText).join(' ');
    if (!alerts.includes(errorText)) return null;
    if (!b.sawRunning && !b.mainChanged) return null;
  } else {
    if (document.querySelectorAll(selector).length < charts) return null;
    if (needChange ? !b.plotChanged : !(b.sawRunning || b.mainChanged)) return null;
  }
  const now = performance.now();
  if (now - b.lastAny < quiet) return null;
  return Math.max(b.stopped || 0, b.lastPlot, b.lastMain) - b.t0;
}"""


# ---------------------------------------------------------------------------------------------------------
# Texts and servers
# ---------------------------------------------------------------------------------------------------------

def grammar_text(n_tokens: int, seed: int, tok=None) -> str:
    """A text of exactly n_tokens tokens with [BOS] (by `tok`, ours by default), made of grammar sentences (cut at a
    word; where the next word is more than one piece too many for a subword tokenizer, " the" fills the rest, one
    token each)."""
    tok = tok or tokenizer()
    words: list[str] = []
    for document in generate_documents(1 + n_tokens // 8, seed):
        words.extend(document.split())
    text = ""
    for count in range(1, len(words) + 1):
        candidate = " ".join(words[:count])
        if len(tok.encode(candidate).ids) > n_tokens:
            break
        text = candidate
    while len(tok.encode(text).ids) < n_tokens:
        text += " the"
    if len(tok.encode(text).ids) != n_tokens:
        raise ValueError(f"could not make exactly {n_tokens} tokens (got to {len(tok.encode(text).ids)})")
    return text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(script: str, port: int, log: Path) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
                             "--server.port", str(port), "--server.fileWatcherType", "none",
                             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: streamlit exited")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url}: no answer in {timeout} s")


@contextlib.contextmanager
def app_and_trivial_page():
    """app.py and the trivial page, each on a free port, started and healthy; yields their two URLs, stops both."""
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    ports = free_port(), free_port()
    servers = [start("app.py", ports[0], logs / "bench_app.log"),
               start("tests/benchmarks/trivial_page.py", ports[1], logs / "bench_trivial.log")]
    try:
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        for url, server in zip(urls, servers):
            wait_healthy(url, server)
        yield urls
    finally:
        for server in servers:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()


# ---------------------------------------------------------------------------------------------------------
# Measuring in the page
# ---------------------------------------------------------------------------------------------------------

class Page:
    """One app in one browser tab, with what "drawn" means for it."""

    def __init__(self, browser, url: str, charts: int, mask_from: str, context: int | None, name: str):
        self.page = browser.new_page(viewport={"width": 1500, "height": 1000})
        self.page.set_default_timeout(TIMEOUT_MS)
        self.url, self.charts, self.mask_from, self.context, self.name = url, charts, mask_from, context, name

    def load(self, ready: str = CHARTS) -> None:
        """Open the page and wait until `ready` (by default a chart) is shown and the script has finished."""
        self.page.goto(self.url)
        self.page.wait_for_selector(ready)
        self.page.wait_for_function("() => document.querySelector('[data-testid=\"stApp\"]')"
                                    "?.getAttribute('data-test-script-state') === 'notRunning'")
        self.page.wait_for_timeout(1000)

    def _expect(self, n_tokens: int) -> tuple[int, bool, str | None]:
        if self.context is not None and n_tokens > self.context:
            return 0, False, "context length"
        return self.charts, True, None

    def _measure(self, action, n_tokens: int, need_change: bool = True) -> float:
        self.page.evaluate(OBSERVER_JS, CHARTS)
        charts, change, error = self._expect(n_tokens)
        action()
        try:
            handle = self.page.wait_for_function(DONE_JS, arg=[charts, change and need_change, error, QUIET_MS, CHARTS],
                                                 polling=50, timeout=TIMEOUT_MS)
        except Exception:
            state = self.page.evaluate("""selector => ({bench: {...window.__bench, observer: undefined},
                now: performance.now(), charts: document.querySelectorAll(selector).length,
                state: document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state'),
                status: !!document.querySelector('[data-testid="stStatusWidget"]'),
                alerts: [...document.querySelectorAll('[data-testid="stAlert"]')].map(e => e.innerText)})""", CHARTS)
            raise RuntimeError(f"{self.name}: not drawn after {TIMEOUT_MS / 1000} s: {state}") from None
        return float(handle.json_value()) / 1000

    def _start_clock(self) -> None:
        self.page.evaluate("() => { window.__bench.t0 = performance.now(); }")

    def type_text(self, text: str, n_tokens: int) -> float:
        box = self.page.get_by_role("textbox", name="Text", exact=True)

        def act():
            box.fill(text)
            self._start_clock()
            box.press("Control+Enter")
        return self._measure(act, n_tokens)

    def chosen_head(self, key: str) -> int:
        """The head (or layer) chosen in the picker whose widget key is `key` (options "H0", "H1", … or "L0", …)."""
        return int(self.page.locator(f".st-key-{key} label:has(input:checked)").inner_text().strip()[1:])

    def choose_head(self, key: str, head: int, prefix: str = "H") -> float:
        """Click option `prefix``head` in the picker whose widget key is `key` (another than the chosen one)."""
        option = self.page.locator(f".st-key-{key}").get_by_text(f"{prefix}{head}", exact=True)

        def act():
            self._start_clock()
            option.click()
        return self._measure(act, 0, need_change=False)  # some pages draw the chosen head only further down

    def choose_mask(self, option: str, n_tokens: int, measured: bool = True) -> float:
        self.page.get_by_test_id("stSelectbox").filter(has_text="Mask").first.click()
        choice = self.page.get_by_role("option", name=option, exact=True)
        choice.wait_for()

        def act():
            self._start_clock()
            choice.click()
        return self._measure(act, n_tokens)


def run(sizes: list[int], repeats: int, model: str | None = None) -> dict:
    """model: a model name the app knows (a pretrained one: "hf:/path/to/folder"; "default": the app's default text
    model); by default the bundled text model with the longest context (the default one if none is longer), for
    every N."""
    from playwright.sync_api import sync_playwright

    if model == "default":
        model = DEFAULT_TEXT_MODEL
    if model is None:
        cards = [card for card in list_cards() if card.task in TEXT_TASKS]
        card = max(cards, key=lambda card: (card.config.max_len, card.name == DEFAULT_TEXT_MODEL))
    else:
        card = load_model(model)[1]
    model, context, tok = card.name, card.config.max_len, text_tokenizer(card)
    results: dict = {"sizes": sizes, "repeats": repeats, "model": model, "context": context,
                     "quiet_ms": QUIET_MS, "rows": []}
    with app_and_trivial_page() as urls:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            app = Page(browser, f"{urls[0]}/?model={model}", APP_CHARTS, "model's own (causal)", context, "app")
            trivial = Page(browser, urls[1], 1, "causal", None, "trivial")
            for page in (app, trivial):
                page.load()
                page.type_text(grammar_text(12, 999, tok), 12)  # warm up: model loaded, first figures drawn
            if not app.page.get_by_role("combobox", name="Model").input_value().startswith(model):
                raise RuntimeError(f"the app did not open {model}: it would time another model")
            for n in sizes:
                times = {(page.name, what): [] for page in (app, trivial) for what in ("type", "toggle")}
                for repeat in range(repeats):
                    text = grammar_text(n, 1000 * n + repeat, tok)
                    for page in (app, trivial) if repeat % 2 == 0 else (trivial, app):
                        times[(page.name, "type")].append(page.type_text(text, n))
                        times[(page.name, "toggle")].append(page.choose_mask("none", n))
                        page.choose_mask(page.mask_from, n)  # back, not measured (cached)
                row = {"tokens": n, "past_context": n > context}
                for (name, what), values in times.items():
                    row[f"{name}_{what}_s"] = statistics.median(values)
                    row[f"{name}_{what}_all_s"] = values
                for what in ("type", "toggle"):
                    row[f"{what}_ratio"] = row[f"app_{what}_s"] / row[f"trivial_{what}_s"]
                judge(row)
                results["rows"].append(row)
                print_row(row)
            browser.close()
    return results


def run_pages(repeats: int) -> dict:
    """Every HEAD_PAGES page's head change beside the trivial page's mask toggle, interleaved."""
    from playwright.sync_api import sync_playwright

    results: dict = {"repeats": repeats, "target": PAGE_TARGET, "quiet_ms": QUIET_MS, "pages": []}
    long = max((card for card in list_cards() if card.task in TEXT_TASKS), key=lambda card: card.config.max_len)
    text = urllib.parse.quote_plus(grammar_text(HEAD_VIEW_N, 461, text_tokenizer(long)))
    with app_and_trivial_page() as urls:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            trivial = Page(browser, urls[1], 1, "causal", None, "trivial")
            trivial.load()
            trivial_masks = itertools.cycle(["none", "causal"])  # each toggle a change, whatever the repeats
            for name, (path, key, prefix, seconds) in HEAD_PAGES.items():
                # no chart required: a page may hide its charts until a prediction is revealed
                page = Page(browser, f"{urls[0]}/{path.format(long=long.name, text=text)}", 0, "", None, name)
                page.load(ready=f".st-key-{key}")
                own = page.chosen_head(key)
                other = 1 if own == 0 else 0
                page.choose_head(key, other, prefix)  # warm up: the other option drawn once
                app_times, floor_times = [], []
                for repeat in range(repeats):
                    app_times.append(page.choose_head(key, own if repeat % 2 == 0 else other, prefix))
                    floor_times.append(trivial.choose_mask(next(trivial_masks), 0))
                row = {"page": page.name, "app_s": statistics.median(app_times), "app_all_s": app_times,
                       "trivial_s": statistics.median(floor_times), "trivial_all_s": floor_times}
                row["ratio"] = row["app_s"] / row["trivial_s"]
                row["meets_target"] = row["ratio"] <= PAGE_TARGET and (seconds is None or row["app_s"] <= seconds)
                row["goal"] = f"goal <= {PAGE_TARGET:g}x" + (f" and <= {seconds:g} s" if seconds else "")
                results["pages"].append(row)
                print(f"{row['page']:<24} {row['app_s']:>7.3f} {row['trivial_s']:>8.3f} {row['ratio']:>6.2f}  "
                      f"{row['goal']}: {'met' if row['meets_target'] else 'NOT met'}", flush=True)
                page.page.close()
            browser.close()
    return results


def judge(row: dict) -> None:
    """Adds, for each action with a goal at this N, `ACTION_goal`: the goal and whether it was met."""
    for (n, what), (measure, limit) in GOALS.items():
        if row["tokens"] == n:
            value = row[f"{what}_ratio"] if measure == "ratio" else row[f"app_{what}_s"]
            unit = "x" if measure == "ratio" else " s"
            row[f"{what}_goal"] = f"goal <= {limit:g}{unit}: {'met' if value <= limit else 'NOT met'}"


HEADER = (f"{'N':>5} {'what':<7} {'app s':>7} {'floor s':>8} {'ratio':>6}  note")
PAGES_HEADER = f"{'page':<24} {'app s':>7} {'floor s':>8} {'ratio':>6}  (a head change vs the trivial page's toggle)"


def print_row(row: dict) -> None:
    for what in ("type", "toggle"):
        note = "past the context length: the 'context length' message" if row["past_context"] else "figures drawn"
        if f"{what}_goal" in row:
            note += f"; {row[f'{what}_goal']}"
        print(f"{row['tokens']:>5} {what:<7} {row[f'app_{what}_s']:>7.3f} {row[f'trivial_{what}_s']:>8.3f} "
              f"{row[f'{what}_ratio']:>6.2f}  {note}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 512, 1024])
    parser.add_argument("--repeats", type=int, default=5,
                        help="texts per size (medians; 3 left the 512-token ratios 0.3 apart from run to run)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--model", help="the model to run, 'default' for the app's default text model (default: the "
                        "bundled text model with the longest context)")
    parser.add_argument("--pages", action="store_true", help="time a head change on every page with a head picker")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"no Chromium at {CHROMIUM}", file=sys.stderr)
        return 2
    print(PAGES_HEADER if args.pages else HEADER, flush=True)
    results = run_pages(args.repeats) if args.pages else run(args.sizes, args.repeats, args.model)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
