"""The whole test suite beside a CPU hog (issue 36): two processes that spin without pause for as long as the
suite runs, on a 2-core machine as busy as a shared CI machine gets. The tests wait on conditions, not fixed
sleeps, so they pass here too.

    python tests/benchmarks/beside_cpu_hog.py [pytest arguments]     # default: -q, the README's test command

Exit status: pytest's. The hogs stop with the suite, whatever its outcome.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOGS = 2  # busy processes: one per core of the development machine


def spin() -> None:
    while True:
        pass


def main(argv: list[str]) -> int:
    hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(HOGS)]
    for hog in hogs:
        hog.start()
    started = time.monotonic()
    try:
        status = subprocess.call([sys.executable, "-m", "pytest", *(argv or ["-q"])], cwd=ROOT)
    finally:
        for hog in hogs:
            hog.terminate()
    print(f"beside {HOGS} CPU hogs: pytest exited {status} after {time.monotonic() - started:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
