"""Wall time and peak RSS of ``gpu-jobs validate`` on the example policy, as a separate process each run.

Target (issue 2): under 0.5 s wall on a 2-core machine. Prints figures; asserts nothing.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

RUNS = 15


def main() -> None:
    command = [sys.executable, "-m", "jobs", "validate", "gitops/policy.yaml"]
    subprocess.run(command, check=True, capture_output=True)  # warm the bytecode cache
    walls = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    walls.sort()
    print(f"gpu-jobs validate gitops/policy.yaml, {RUNS} runs")
    print(f"  wall   min {walls[0]:.3f} s  median {statistics.median(walls):.3f} s  max {walls[-1]:.3f} s")
    print(f"  peak RSS {peak_kib / 1024:.1f} MiB")
    bare = [sys.executable, "-c", "pass"]
    started = time.perf_counter()
    for _ in range(5):
        subprocess.run(bare, check=True)
    print(f"  (bare python start-up: {(time.perf_counter() - started) / 5:.3f} s)")


if __name__ == "__main__":
    main()
