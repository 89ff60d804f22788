"""The run's deadline (``GPU_JOBS_DEADLINE``) as a CronJob's run meets it: a separate process against the emulators,
whose operations finish with time. What the deadline cuts short fails with a reason starting ``deadline:``, a cordon
is undone, the record stays for the next run to finish from, and the run still ends with its report and its
``run.summary`` (exit 1), long before the wait's own limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs.core.group_record import Record
from tests.emulators.aws.eks import UpdateTiming
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import disruption_budget, gpu_pod
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli
from tests.integration.nodegroups.world import EVENING, POLICY, Fleet, make_fleet

pytestmark = pytest.mark.integration

#: A group of each provider (its cluster, its name), whose shutdown's first operation takes far longer than the run.
SLOW = {
    "gke": ("research", "research"),
    "eks": ("ml-prod", "train"),
    "aks": ("aks-ml", "finetune"),
}


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    return make_fleet(kube, aws, gcp, azure, monkeypatch)


def nodegroups(fleet: Fleet, tmp_path: Path, cluster: str, group: str, policy: str = POLICY, **env: str) -> CliRun:
    """One cluster's run, as its per-cluster install runs it (the API carries the cluster's identity)."""
    fleet.kube.identify(cluster)
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    environ = {
        **fleet.aws.env(),
        "KUBECONFIG": str(fleet.kube.kubeconfig),
        "GPU_JOBS_GCP_ENDPOINT": fleet.gcp.url,
        "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
        "GPU_JOBS_AZURE_ENDPOINT": fleet.azure.url,
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_POLL_INTERVAL": "0.05",
        "GPU_JOBS_POLICY": str(path),
        **env,
    }
    argv = ["nodegroups", "--at", EVENING.isoformat(), "--cluster", cluster, "--only", group, "--output", "json"]
    return run_cli(argv, environ)


def result(run: CliRun, group: str) -> dict[str, Any]:
    (report,) = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    (found,) = [g for g in items(report, "node group") if g["name"] == group and "message" in g]
    found_: dict[str, Any] = found
    return found_


def record(fleet: Fleet, group: str) -> Record:
    found = fleet.ports.records.load().get(group)
    assert isinstance(found, Record), f"no usable record for {group}: {found}"
    return found


def counts(run: CliRun) -> tuple[Any, ...]:
    return tuple(run.summary[k] for k in ("planned", "applied", "failed", "exit_code"))


@pytest.mark.parametrize("provider", SLOW)
def test_an_operation_longer_than_the_deadline_fails_the_group_and_the_next_run_finishes_it(
    fleet: Fleet, tmp_path: Path, provider: str
) -> None:
    cluster, group = SLOW[provider]
    # The cloud takes a minute; the run has three seconds (as a CronJob's GPU_JOBS_DEADLINE, scaled down).
    fleet.gcp.operation_seconds = 60
    fleet.aws.update_timing = UpdateTiming(seconds=60)
    fleet.azure.operation_seconds = 60

    cut = nodegroups(fleet, tmp_path, cluster, group, GPU_JOBS_DEADLINE="3", GPU_JOBS_OPERATION_TIMEOUT="1200")

    assert (cut.code, counts(cut)) == (1, (1, 0, 1, 1))
    message = result(cut, group)["message"]
    assert result(cut, group)["status"] == "failed"
    assert message.startswith("deadline: the run's 3 s ran out waiting for "), message
    assert message.endswith("; the next run resumes")
    assert cut.summary["duration_s"] < 30  # ended by the deadline, not by the operation (60 s) or its timeout
    assert '"event": "run.deadline"' in cut.stderr
    assert record(fleet, group).phase == "stopping"  # the sizes to restore are kept, durably

    # The cloud finishes the operation on its own; the next run goes on from the record and converges.
    fleet.gcp.finish_operations()
    fleet.aws.eks.finish_now()
    fleet.azure.finish_operations()
    fleet.gcp.operation_seconds = fleet.azure.operation_seconds = 0.05
    fleet.aws.update_timing = UpdateTiming(seconds=0.05)
    done = nodegroups(fleet, tmp_path, cluster, group)
    assert (done.code, counts(done)) == (0, (1, 1, 0, 0)), done.stdout
    assert record(fleet, group).phase == "down"
    assert fleet.configs()[group].desired == 0


def test_a_drain_cut_by_the_deadline_uncordons_fails_the_group_and_the_next_run_finishes_it(
    fleet: Fleet, tmp_path: Path
) -> None:
    # A budget that refuses the eviction: the drain would wait its drainTimeout (5m); the run has three seconds.
    fleet.kube.create(gpu_pod("serve-0", "team-a", node="ip-10-0-1-1", labels={"app": "serve"}))
    fleet.kube.create(disruption_budget("serve", "team-a", {"app": "serve"}, min_available=1))
    draining = POLICY.replace("  warmUp: 15m\n", "  warmUp: 15m\n  onBusy: drain\n  drainTimeout: 5m\n")

    cut = nodegroups(fleet, tmp_path, "ml-prod", "train", draining, GPU_JOBS_DEADLINE="3")

    assert (cut.code, counts(cut)) == (1, (1, 0, 1, 1))
    message = result(cut, "train")["message"]
    assert message.startswith("deadline: the run's 3 s ran out"), message
    assert "team-a/serve-0" in message  # what the drain was still waiting for
    assert cut.summary["duration_s"] < 30
    node = fleet.kube.get("Node", "ip-10-0-1-1")
    assert node is not None
    assert not node["spec"].get("unschedulable")  # the group stays up: its node takes work again
    assert "gpu-jobs.dev/cordoned-by" not in node["metadata"].get("annotations", {})
    assert fleet.configs()["train"].desired == 3  # nothing scaled while the pod ran
    kept = record(fleet, "train")
    assert (kept.phase, kept.drain_blocked) == ("stopping", None)  # no back-off: the pods were not the problem
    assert fleet.cloud_writes() == 0

    # The budget goes; the next run (the CronJob's own deadline) drains and shuts the group down. The pod's container
    # exits as soon as it is told (the grace period still shows): no real 30 s wait in the test.
    fleet.kube.cluster.delete("PodDisruptionBudget", "serve", "team-a")
    fleet.kube.cluster.pod_stop_s = 0.2
    done = nodegroups(fleet, tmp_path, "ml-prod", "train", draining)
    assert (done.code, counts(done)) == (0, (1, 1, 0, 0)), done.stdout
    assert record(fleet, "train").phase == "down"
