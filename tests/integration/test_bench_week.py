"""``bench/week.py`` on a slice of the week (Tuesday 19:00 for 90 minutes), as docs/week.md shows it: the script
runs end to end, its JSON line has the documented keys, and the accounting holds (every strategy billed at least
what it ran; the naive schedule cuts the evening training running at 20:00; gpu-jobs postpones and interrupts
nothing). Its times and ratios are printed figures, never asserted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.docs import shell_block

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/week.md"
KEYS = {"billedGpuHours", "busyGpuHours", "interruptedBusyPods", "waitingPodMinutesWorkingHours", "apiCalls"}


def test_a_slice_of_the_week_accounts_for_every_strategy() -> None:
    command = shell_block(PAGE, "## A slice of the week")
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, "one JSON line"
    doc = json.loads(lines[0])
    assert set(doc["strategies"]) == {"always-on", "naive", "gpu-jobs"}
    assert set(doc["report"]) == {"avoidedGpuHours", "truthAvoidedGpuHours"}
    for name, s in doc["strategies"].items():
        assert set(s) >= KEYS, name
        assert s["billedGpuHours"] >= s["busyGpuHours"] > 0, name
    always, naive, product = (doc["strategies"][n] for n in ("always-on", "naive", "gpu-jobs"))
    # 20:00: the naive script takes every group to zero with the evening's H100 training on it (the A100 one, at
    # 19:49, is still waiting for the node its autoscaler launched: it waits the night instead).
    assert naive["interruptedBusyPods"] >= 1
    assert "train-h100-tue-evening" in naive["interruptedPods"]
    assert naive["busyGpuHours"] < always["busyGpuHours"]
    # gpu-jobs postpones a busy group's shutdown (onBusy wait): the training runs on, as under always-on.
    assert product["interruptedBusyPods"] == 0
    assert product["busyGpuHours"] == always["busyGpuHours"]
    assert product["billedGpuHours"] < always["billedGpuHours"]
    assert doc["report"]["truthAvoidedGpuHours"] == pytest.approx(
        always["billedGpuHours"] - product["billedGpuHours"], abs=0.05
    )
    assert doc["run"]["jobRuns"] > 0


def test_the_sweep_deletes_the_pod_that_does_nothing_and_the_report_counts_it() -> None:
    """Tuesday 10:00 to 13:00: the pod that does nothing starts at 10:00 on notebooks-t4 (its DCGM series at ~1 %);
    the sweep's window is 2 h and its grace 30 min, so the 12:00 run marks it and the 12:30 run deletes it. It is done
    in the model (not an interruption, not resubmitted), and the product's report counts it."""
    command = [".venv/bin/python", "bench/week.py", "--from-hour", "34", "--hours", "3", "--output", "json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    sweep = doc["sweep"]
    assert sweep["deleted"] == ["does-nothing"]
    assert sweep["idleReasons"] == {"does-nothing": "idle"}
    assert sweep["marked"] == 1
    assert sweep["runs"] > 0
    assert sweep["failedItems"] == sweep["failedToRun"] == 0
    assert sweep["apiCalls"]["kube"] > 0
    assert sweep["apiCalls"]["prometheus"] >= sweep["runs"]  # a few instant queries per run, never one per pod
    # Deleted at 12:30 (2 h idle, then 30 min of grace): it held its GPU 2.5 h under gpu-jobs, 3 h under always-on.
    held = sweep["idlePodGpuHours"]
    assert held["gpu-jobs"] == pytest.approx(2.5, abs=0.2)
    assert held["always-on"] == pytest.approx(3.0)
    product = doc["strategies"]["gpu-jobs"]
    assert product["interruptedBusyPods"] == 0
    assert "does-nothing" not in product["interruptedPods"]
    # No busy pod was swept, and the node the idle pod held served the 12:30 notebook at once (under always-on the
    # autoscaler had to add one for it: 10 minutes of boot).
    assert product["workGpuHours"] == pytest.approx(doc["strategies"]["always-on"]["workGpuHours"] + 10 / 60, abs=0.01)
    # The product's own report, read from the history the sweep wrote in the cluster.
    assert sweep["report"]["podsActedOn"] == 1
    assert sweep["report"]["idleGpuHoursReclaimed"] == pytest.approx(2.5)  # at least window + grace, 1 GPU


def test_make_bench_week_runs_the_whole_week() -> None:
    assert shell_block(PAGE, "## Run it").strip() == "make bench-week"
    planned = subprocess.run(
        ["make", "-n", "bench-week"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert planned.stdout.strip().endswith("bench/week.py")


def test_the_karpenter_pool_launches_for_its_training_and_consolidates_after_it() -> None:
    """Tuesday 08:00 to 16:00: the Karpenter pool's training (submitted between 08:30 and 12:00) gets a node launched
    for it in every column, waits its boot, runs, and the node goes 5 minutes after it (the model is the pool's
    Karpenter; under gpu-jobs its NodeClaims are in the cluster the job reads). The sandbox's two seeded claims are
    gone within the first steps. The report claims nothing for a pool that consolidates by itself."""
    command = [".venv/bin/python", "bench/week.py", "--from-hour", "32", "--hours", "8", "--output", "json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    pools = {n: s["byGroup"]["train-h100"] for n, s in doc["strategies"].items()}
    busy = pools["always-on"]["busyGpuHours"]
    assert busy > 8 * 3  # one 8-GPU training of 3 to 6 hours
    for name, pool in pools.items():
        assert pool["busyGpuHours"] == busy, name
        # Its node bills from launch: 20 minutes of boot, up to 10 of consolidation, and the seeded claims' first step.
        assert busy < pool["billedGpuHours"] <= busy + 8 * (20 + 10) / 60 + 2 * 8 * 10 / 60 + 0.01, name
        assert pool["longestWaitMinutesWorkingHours"] == 20, name  # an H100's boot
    assert doc["strategies"]["gpu-jobs"]["interruptedBusyPods"] == 0
    assert doc["reportByGroup"]["train-h100"]["avoidedGpuHours"] == 0.0
    assert doc["run"]["jobRunsWithFailedItems"] == doc["run"]["jobRunsFailedToRun"] == 0
