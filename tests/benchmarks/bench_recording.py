"""Recording overhead: recorded vs plain forward time of our model at N = 64, 256, 1024.

    python tests/benchmarks/bench_recording.py [--repeats 15] [--json out.json]

Run on purpose, not by the default test run. Reports medians and their ratio (target: <= 1.2 at N = 256).
The two variants are interleaved so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from core.model.config import ModelConfig  # noqa: E402
from core.model.transformer import Transformer  # noqa: E402


def median_seconds(model: Transformer, ids: torch.Tensor, record: bool, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        with torch.no_grad():
            model(ids, record=record)
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path, default=Path("bench_recording.json"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (more than free cores distorts)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=128, n_heads=4, n_layers=4, d_mlp=256, max_len=1024, vocab_size=335,
                      pos_encoding="rope")
    model = Transformer(cfg).eval()
    rows = []
    print(f"{'N':>6} {'plain ms':>10} {'recorded ms':>12} {'ratio':>7}")
    for n in (64, 256, 1024):
        ids = torch.randint(0, cfg.vocab_size, (1, n))
        median_seconds(model, ids, True, 2)  # warm up
        plain, recorded = [], []
        for _ in range(args.repeats):
            plain += median_seconds(model, ids, False, 1)
            recorded += median_seconds(model, ids, True, 1)
        row = {"n": n, "plain_ms": 1000 * statistics.median(plain), "recorded_ms": 1000 * statistics.median(recorded)}
        row["ratio"] = row["recorded_ms"] / row["plain_ms"]
        rows.append(row)
        print(f"{n:>6} {row['plain_ms']:>10.2f} {row['recorded_ms']:>12.2f} {row['ratio']:>7.3f}")
    args.json.write_text(json.dumps({"config": cfg.to_dict(), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
