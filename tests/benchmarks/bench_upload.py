"""What one upload costs to decode, before and after issue 15 (finding 6): peak memory and CPU time.

    python tests/benchmarks/bench_upload.py [--repeats 3] [--json bench_upload.json]

Run on purpose, not by the default test run. Each decode runs in a fresh Python process, which reports how much
its peak resident memory grew (VmHWM, reset first; Linux) and the CPU seconds spent: Pillow allocates pixels
outside Python's allocator, so tracemalloc would miss them. "before" is a full decode, as the review measured it
(every pixel decoded, then converted and resized: full_decode in tests/upload_files.py; the loader before issue 15
did this for a PNG, with one more copy, but already decoded JPEGs at a reduced scale); "after" is
core.serving.image_io.load_image, which refuses from the header what is too large and otherwise holds at most one
full-size buffer. The page then caches the 32 x 32 result, so a rerun (a layer click) decodes nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upload_files import decode_cost, flat_png, photo_jpeg  # noqa: E402

CASES = {
    "39.7 MP PNG (flat, 7300x5440)": lambda: flat_png(7300, 5440),
    "8.3 MP RGBA PNG (3840x2160, the largest accepted)": lambda: flat_png(3840, 2160, (10, 200, 10, 128)),
    "12 MP JPEG (4000x3000)": lambda: photo_jpeg(4000, 3000),
    "12 MP progressive JPEG (the largest accepted)": lambda: photo_jpeg(4000, 3000, progressive=True),
    "24 MP JPEG (6000x4000, the largest accepted)": lambda: photo_jpeg(6000, 4000),
    "24 MP progressive JPEG (refused)": lambda: photo_jpeg(6000, 4000, progressive=True),
    "512x512 PNG": lambda: flat_png(512, 512),
}


def measure(path: Path, decoder: str, repeats: int) -> dict:
    """Median peak-memory growth (MB) and CPU seconds over ``repeats`` fresh processes, and the outcome."""
    runs = [decode_cost(str(path), decoder) for _ in range(repeats)]
    return {"peak_mb": statistics.median(r["mb"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "outcome": runs[-1]["outcome"]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, make in CASES.items():
            path = Path(folder) / "upload"
            data = make()
            path.write_bytes(data)
            results[name] = {"file_kb": len(data) / 1024,
                             "before": measure(path, "full", args.repeats),
                             "after": measure(path, "load_image", args.repeats)}
    print(f"{'upload':58} {'file':>8}  {'before: peak, CPU':>20}  {'after: peak, CPU':>20}  after")
    for name, row in results.items():
        before, after = row["before"], row["after"]
        outcome = after["outcome"] if after["outcome"].startswith("decoded") else "refused from the header"
        print(f"{name:58} {row['file_kb']:6.0f}KB  {before['peak_mb']:8.1f} MB {before['cpu_s']:6.2f} s  "
              f"{after['peak_mb']:8.1f} MB {after['cpu_s']:6.2f} s  {outcome}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
