"""How fast the live-training page's default recipe trains on this machine, and when its pattern forms.

    python tests/benchmarks/bench_training.py                 # the page's default recipe (reversal, M=2, H=2, D=32,
                                                              # relative positions; --seeds: once per seed)
    python tests/benchmarks/bench_training.py --compare-norms --seeds 0 1 2  # also the page's post-LN / warm-up
                                                                             # recipes, once per seed
    python tests/benchmarks/bench_training.py --spec '{"task": "copy", "n_heads": 1, "pos_encoding": "rope"}'

Runs the real background worker (core/training/live/: one torch thread, snapshots of the probe as the page takes them)
and reports steps per second, and the step and seconds (from pressing start) at which the best head's task
pattern score (core.lessons.analysis.mirrored_score on reversal) first reaches the threshold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from core.training.live.runs import LiveRegistry  # noqa: E402
from core.training.live.spec import DEFAULT_RECIPE, RECIPES, RunSpec  # noqa: E402
from core.training.live.worker import PATTERN_THRESHOLD  # noqa: E402

COMPARISONS = ("post-LN, no warm-up", "post-LN, with warm-up", "pre-LN, no warm-up")  # the page's recipes


def measure(spec: RunSpec, threshold: float) -> dict:
    started = time.perf_counter()
    run = LiveRegistry(max_running=1, idle_seconds=math.inf).start(spec, "benchmark")  # no page watches here
    run.join()
    view = run.view()
    formed = view.pattern_formed(threshold)
    return {"spec": spec.describe(), "status": view.status, "steps": view.steps_done,
            "steps_per_second": round(view.steps_per_second, 1), "seconds": round(time.perf_counter() - started, 1),
            "threads": view.threads, "pattern": view.pattern.name if view.pattern else None,
            "best_score": round(max(s.best_score for s in view.snapshots), 3),
            "formed_at_step": formed.step if formed else None,
            "formed_after_seconds": round(formed.seconds, 1) if formed else None,
            "final_loss": round(float(view.history["loss"][-50:].mean()), 3),
            "final_accuracy": round(float(view.history["accuracy"][-50:].mean()), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="{}", help="RunSpec fields as JSON, over the page's default recipe")
    parser.add_argument("--threshold", type=float, default=PATTERN_THRESHOLD)
    parser.add_argument("--compare-norms", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the page's recipes, once per seed")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}")
    specs = {f"default, seed {seed}": RunSpec(**{**RECIPES[DEFAULT_RECIPE], "seed": seed, **json.loads(args.spec)})
             for seed in args.seeds}
    if args.compare_norms:
        specs |= {f"{name}, seed {seed}": RunSpec(**{**RECIPES[name], "seed": seed})
                  for name in COMPARISONS for seed in args.seeds}
    for name, spec in specs.items():
        print(json.dumps({"run": name, **measure(spec, args.threshold)}), flush=True)


if __name__ == "__main__":
    main()
