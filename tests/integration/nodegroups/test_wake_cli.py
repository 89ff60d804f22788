"""Wake on demand through the CLI, as its CronJob runs it (a central install: a Kubernetes API per cluster): the
evening run takes the groups down, a Pending GPU pod appears in ml-prod, the night run wakes ``train``, a second run
writes nothing, and ``gpu-jobs calendar --live`` shows the wake in force."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.emulators.kube.seed import gpu_pod, namespace
from tests.integration.cli import run_cli
from tests.integration.nodegroups.world import EVENING, POLICY, Fleet

pytestmark = pytest.mark.integration

NIGHT = datetime.fromisoformat("2026-12-01T22:00:00+01:00")
WOKEN = POLICY.replace(
    "  - name: train\n", "  - name: train\n    wake: {namespaces: [ml-*], for: 2h, maxNodes: 2}\n", 1
)


def gpu_jobs(fleet: Fleet, policy: Path, *args: str) -> tuple[int, dict[str, object], str]:
    env = {**fleet.cli_env(policy), "GPU_JOBS_POLL_INTERVAL": "0.01", "GPU_JOBS_RETRY_DEADLINE": "1"}
    done = run_cli(list(args), env)
    return done.code, done.summary, done.stdout


def test_a_night_run_wakes_the_group_a_second_writes_nothing_and_calendar_live_shows_it(
    central: Fleet, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(WOKEN)
    code, _, _ = gpu_jobs(central, policy, "nodegroups", "--at", EVENING.isoformat())
    assert code == 0
    central.sync_nodes()
    ml_prod = central.kubes["ml-prod"]
    ml_prod.create(namespace("ml-a"))
    pod = gpu_pod("train-x", "ml-a", node=None, gpus=8, phase="Pending")
    pod["spec"]["nodeSelector"] = {"eks.amazonaws.com/nodegroup": "gpu-a100"}
    ml_prod.create(pod)
    central.clear_logs()

    code, summary, out = gpu_jobs(central, policy, "nodegroups", "--at", NIGHT.isoformat(), "--output", "json")

    assert (code, summary["applied"], summary["failed"]) == (0, 2, 0)  # the group's change and the pod's Event
    report = json.loads(out)
    (wake,) = [i for i in report["items"] if i["kind"] == "wake"]
    assert (wake["name"], wake["scope"], wake["nodeGroup"], wake["nodes"]) == ("ml-a/train-x", "ml-prod", "train", 1)
    assert central.configs()["train"].desired == 1
    assert central.cloud_writes() == 1  # the one resize

    central.clear_logs()
    code, summary, _ = gpu_jobs(central, policy, "nodegroups", "--at", (NIGHT + timedelta(minutes=5)).isoformat())
    assert (code, summary["planned"], central.all_writes()) == (0, 0, 0)

    later = (NIGHT + timedelta(minutes=10)).isoformat()
    code, _, text = gpu_jobs(central, policy, "calendar", "--live", "--at", later, "--days", "1")
    assert code == 0
    assert "  woken: by ml-a/train-x until Wed 2026-12-02 00:00 +0100 (1 node(s), wake.for)" in text
    assert "  wake:  a Pending GPU pod in ml-* wakes it for 2h, at most 2 nodes" in text
