"""Every benchmark, one command: install the benchmarks' requirements, run them, print one table, write one JSON.

    python tests/benchmarks/run_all.py [--out tests/benchmarks/results] [--quick] [--skip browser load] [--no-install]

Steps (each also runs on its own; see its docstring):
  peers    tests/benchmarks/bench_peers.py    recording overhead; vs TransformerLens run_with_cache; bytes vs bertviz
  browser  tests/benchmarks/bench_browser.py  typing and toggling in the system Chromium, beside a trivial page
  default  tests/benchmarks/bench_browser.py --model default   the same at 64 and 512 tokens on the default model
  pages    tests/benchmarks/bench_browser.py --pages   a head change on every page with a head picker, likewise
  load     tests/benchmarks/load_test.py      30 students on one server for 5 minutes (p50/p95, errors, memory)

First `pip install -r requirements-dev.txt -r requirements-bench.txt` (the peers are pinned against the app's
requirements: torch and streamlit must stay as they are, and this checks that they did). Each step's own table
streams as it runs; the summary and OUT/benchmarks.json (every step's full results) come at the end.
The machine is shared: figures are medians and ratios of interleaved runs, and still move with the load beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERSIONS = "import torch, streamlit; print(torch.__version__, streamlit.__version__)"

STEPS = {  # name -> (script, its arguments, its quick arguments); its JSON path is appended after JSON_FLAG
    "peers": ("bench_peers.py", [], ["--repeats", "3"]),
    "browser": ("bench_browser.py", [], ["--repeats", "1", "--sizes", "16", "64"]),
    # issue 34: typing and toggling at 512 tokens on the app's default text model (the step above: the longest context)
    "default": ("bench_browser.py", ["--model", "default", "--sizes", "64", "512", "--repeats", "7"],
                ["--model", "default", "--sizes", "64", "512", "--repeats", "1"]),
    "pages": ("bench_browser.py", ["--pages"], ["--pages", "--repeats", "1"]),
    "load": ("load_test.py", [], ["--minutes", "1"]),
}
JSON_FLAG = {"peers": "--out", "browser": "--json", "default": "--json", "pages": "--json", "load": "--json"}


def versions() -> str:
    return subprocess.run([sys.executable, "-c", VERSIONS], capture_output=True, text=True, check=True).stdout.strip()


def install() -> None:
    """The benchmarks' requirements, then a check that torch and streamlit are the versions they were."""
    before = versions()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", "requirements-dev.txt",
                    "-r", "requirements-bench.txt"], cwd=ROOT, check=True)
    after = versions()
    if after != before:
        sys.exit(f"installing the benchmark requirements changed torch / streamlit: {before} -> {after}")
    print(f"torch, streamlit: {after} (unchanged)", flush=True)


def run_step(name: str, out: Path, quick: bool) -> dict:
    script, arguments, quick_arguments = STEPS[name]
    path = out / f"{name}.json"
    command = [sys.executable, str(HERE / script), *(quick_arguments if quick else arguments),
               JSON_FLAG[name], str(path)]
    print(f"\n== {name}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT).returncode
    results = json.loads(path.read_text()) if path.exists() else None
    return {"exit_code": code, "seconds": time.monotonic() - started, "results": results}


# ---------------------------------------------------------------------------------------------------------
# The summary: one line per figure, a ratio and its goal where the issue sets one
# ---------------------------------------------------------------------------------------------------------

def peers_lines(results: dict) -> list[tuple[str, str, str]]:
    lines = []
    for row in results["forwards"]["rows"]:
        lines.append((f"recording overhead, N={row['n']}", f"{row['recording_overhead']:.2f}x",
                      "recorded / plain (bench_recording.py: <= 1.2 at N=256)"))
    for row in results["forwards"]["rows"]:
        lines.append((f"ours vs TransformerLens, N={row['n']}", f"{row['ours_vs_lens']:.2f}x",
                      f"goal <= 0.5: {'met' if row['speed_goal_met'] else 'NOT met'}"))
    for row in results["bytes"]["rows"]:
        lines.append((f"bertviz / ours bytes, N={row['n']}", f"{row['ratio']:.1f}x",
                      f"goal >= 20: {'met' if row['bytes_goal_met'] else 'NOT met'}; "
                      f"deflated {row['ratio_deflated']:.1f}x"))
    return lines


def browser_lines(results: dict) -> list[tuple[str, str, str]]:
    lines = []
    model = f" ({results['model']})" if "model" in results else ""
    for row in results.get("rows", []):
        for what in ("type", "toggle"):
            note = "past the context" if row.get("past_context") else "vs the trivial page"
            note += f" ({row[f'app_{what}_s']:.2f} s)"
            if f"{what}_goal" in row:
                note += f"; {row[f'{what}_goal']}"
            lines.append((f"browser {what}, N={row['tokens']}{model}", f"{row[f'{what}_ratio']:.2f}x", note))
    return lines


def pages_lines(results: dict) -> list[tuple[str, str, str]]:
    return [(f"page rerun after a head change: {row['page']}", f"{row['ratio']:.2f}x",
             f"vs the trivial page ({row['app_s']:.2f} s); {row['goal']}: "
             f"{'met' if row['meets_target'] else 'NOT met'}")
            for row in results.get("pages", [])]


def load_lines(results: dict) -> list[tuple[str, str, str]]:
    latency = results["latency"]["all interactions"]
    peak = max(server["memory"]["peak_mb"] for server in results["server"].values())
    return [(f"{results['settings']['sessions']} sessions, interactions p50 / p95",
             f"{latency['p50_s']:.2f} / {latency['p95_s']:.2f} s", f"{latency['count']} interactions"),
            ("load test errors", str(results["errors"]), "goal 0: " + ("met" if results["errors"] == 0 else "NOT met")),
            ("server memory peak", f"{peak:.0f} MB", {True: "bounded", False: "NOT bounded",
                                                      None: "not judged (run too short)"}[results["memory_bounded"]])]


SUMMARIES = {"peers": peers_lines, "browser": browser_lines, "default": browser_lines, "pages": pages_lines,
             "load": load_lines}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a 1-minute load test")
    parser.add_argument("--skip", nargs="+", choices=list(STEPS), default=[])
    parser.add_argument("--no-install", action="store_true", help="the requirements are installed already")
    args = parser.parse_args(argv)
    if not args.no_install:
        install()
    args.out.mkdir(parents=True, exist_ok=True)
    steps = {name: run_step(name, args.out, args.quick) for name in STEPS if name not in args.skip}
    print(f"\n{'figure':<44} {'value':>16}  note")
    for name, step in steps.items():
        if step["results"] is not None:
            for figure, value, note in SUMMARIES[name](step["results"]):
                print(f"{figure:<44} {value:>16}  {note}")
        if step["exit_code"]:
            print(f"{name:<44} {'FAILED':>16}  exit code {step['exit_code']}")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
          "(shared with other work: figures move with it)")
    path = args.out / "benchmarks.json"
    path.write_text(json.dumps({"steps": steps, "quick": args.quick, "load_average": load}, indent=2))
    print(f"wrote {path}")
    return max((step["exit_code"] for step in steps.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
