"""``bench/sweep.py`` at a small size, as `make bench-sweep` runs it (with fewer pods): the script works end to end
and its counted figures hold (3 PromQL queries, one paginated pod list, no writes in the steady state). Its times
are printed figures, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_bench_runs_and_its_counts_hold() -> None:
    done = subprocess.run(
        [sys.executable, "bench/sweep.py", "--pods", "60", "--naive-sample", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "PromQL queries: 3 " in out
    steady = next(line for line in out.splitlines() if line.strip().startswith("steady state:"))
    assert "exit 0, 3 PromQL queries, 1 paginated pod list" in steady
    assert " 0 Kubernetes writes" in steady
    first = next(line for line in out.splitlines() if line.strip().startswith("first run:"))
    # It writes: the runner lists the pods again under the Lease before it acts on them.
    assert "exit 0, 3 PromQL queries, 2 paginated pod lists" in first
    assert "targets: <= 3 PromQL queries per cluster: met" in out
