"""Snoozes end: ``sweep.idlePods.maxSnooze`` through the CLI, the real Prometheus and the Kubernetes API emulator. A
person's ``gpu-jobs/keep-alive-until`` a year away is capped (recorded on the pod once, one Warning Event), holds
until the cap on later runs, then the pod is judged and warned as usual. A short cap stands in for the default 7d:
the backfilled series cover hours, not weeks."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.prometheus.server import PrometheusServer
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli
from tests.integration.sweep import test_pods
from tests.integration.sweep.test_pods import POLICY, pod_annotations

pytestmark = pytest.mark.integration

CAPPED_POLICY = POLICY.replace("    action: delete\n", "    action: delete\n    maxSnooze: 20m\n")


world = test_pods.world  # the same seeded cluster and DCGM series as test_pods.py


def sweep(
    kube: KubeHandle, tmp_path: Path, prometheus: PrometheusServer, after: timedelta, *args: str
) -> tuple[CliRun, dict[str, Any]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(CAPPED_POLICY)
    at = (prometheus.now + after).isoformat()
    environ = {
        "KUBECONFIG": str(kube.kubeconfig),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_PROMETHEUS_URL": prometheus.url,
    }
    argv = ["sweep", "--part", "pods", "--policy", str(policy), "--cluster", "ml-prod", "--at", at, "--output", "json"]
    done = run_cli([*argv, *args], environ)
    assert done.code == 0, done.stderr
    return done, json.loads(done.stdout)


def idle_row(document: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in items(document, "pod") if p["pod"] == "idle-0")


def idle_events(kube: KubeHandle) -> list[tuple[str, str, str]]:
    found = [e for e in kube.list("Event", "ml") if e["involvedObject"]["name"] == "idle-0"]
    return [(e["reason"], e["type"], e["message"]) for e in found]


def test_a_year_long_snooze_is_capped_holds_until_the_cap_then_ends(
    world: tuple[KubeHandle, PrometheusServer], tmp_path: Path
) -> None:
    kube, prometheus = world
    now = prometheus.now
    asked = timestamp(now + timedelta(days=365))
    pod = kube.get("Pod", "idle-0", "ml")
    assert pod is not None
    pod["metadata"]["annotations"] = {
        "gpu-jobs/keep-alive-until": asked,
        "gpu-jobs/idle-since": timestamp(now - timedelta(minutes=10)),
    }
    kube.put(pod)
    kube.log.clear()
    cap = now + timedelta(minutes=20)
    shown = (
        f"snoozed until {cap:%Y-%m-%dT%H:%MZ} (capped by sweep.idlePods.maxSnooze 20m;"
        f" asked {now + timedelta(days=365):%Y-%m-%dT%H:%MZ})"
    )

    # A dry run shows the cap and writes nothing.
    _, document = sweep(kube, tmp_path, prometheus, timedelta(0), "--dry-run")
    assert (idle_row(document)["state"], idle_row(document)["reason"]) == ("snoozed", shown)
    assert kube.log.writes() == []

    # The run records the cap on the pod, removes the mark, and says so once.
    _, document = sweep(kube, tmp_path, prometheus, timedelta(0))
    row = idle_row(document)
    assert (row["state"], row["status"], row["reason"]) == ("snoozed", "applied", shown)
    assert row["snooze"] == {"until": timestamp(cap), "asked": asked, "cappedBy": "sweep.idlePods.maxSnooze"}
    assert pod_annotations(kube, "idle-0") == {
        "gpu-jobs/keep-alive-until": asked,  # the person's answer stays as written
        "gpu-jobs/keep-alive-capped-until": timestamp(cap),
        "gpu-jobs/keep-alive-capped-asked": asked,
    }
    ((reason, kind, message),) = idle_events(kube)
    assert (reason, kind) == ("GpuSnoozeCapped", "Warning")
    assert f"snoozed until {cap:%Y-%m-%dT%H:%MZ} only" in message

    # Ten minutes on: the cap recorded then holds (it is not "now + 20m" again); nothing written, no second Event.
    kube.log.clear()
    _, document = sweep(kube, tmp_path, prometheus, timedelta(minutes=10))
    assert (idle_row(document)["state"], idle_row(document)["reason"]) == ("snoozed", shown)
    assert kube.log.writes() == []
    assert len(idle_events(kube)) == 1

    # Past the cap: the snooze has ended; the idle pod is warned afresh (a full grace period), and told why.
    _, document = sweep(kube, tmp_path, prometheus, timedelta(minutes=21))
    assert idle_row(document)["state"] == "marked"
    assert "gpu-jobs/idle-since" in pod_annotations(kube, "idle-0")
    warned = [m for r, _, m in idle_events(kube) if r == "GpuIdle"]
    assert len(warned) == 1
    assert "capped by sweep.idlePods.maxSnooze 20m" in warned[0]
