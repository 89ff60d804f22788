"""Wake on demand end to end: at night a Pending GPU pod brings its node group up for ``wake.for``, through the real
adapters to the emulated clouds and Kubernetes API; the pod is told so (or why not) by one Event."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs.core.group_record import Record
from jobs.core.limits import ChangeLimit
from jobs.core.policy import Policy
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.integration.nodegroups.world import EVENING, POLICY, Fleet, document, make_fleet, tally, text

pytestmark = pytest.mark.integration

# Tue 2026-12-01, Europe/Berlin: the window ended at 20:00; train (EKS gpu-a100, 1/3/8) went down at 20:05.
NIGHT = datetime.fromisoformat("2026-12-01T22:00:00+01:00")
TRAIN = "eks.amazonaws.com/nodegroup"
WAKE = "  - name: train\n    wake: {namespaces: [ml-*, nlp], for: 2h, maxNodes: 2}\n"


def policy(extra: str = "", wake: str = WAKE) -> Policy:
    return parse_policy(POLICY.replace("  - name: train\n", wake + extra, 1), "policy.yaml")


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    world = make_fleet(kube, aws, gcp, azure, monkeypatch)
    kube.cluster.pod_stop_s = 0.3  # evicted containers exit on SIGTERM: no real wait for their 30 s grace period
    for ns in ("ml-a", "team-b"):
        world.kube.create(namespace(ns))
    return world


def night(fleet: Fleet, woken: Policy) -> None:
    """The evening run takes every group down (train recorded at 1/3/8)."""
    fleet.run(EVENING, policy=woken)
    assert fleet.configs()["train"].desired == 0
    fleet.clear_logs()


def pending(name: str, ns: str, *, selector: dict[str, str] | None = None, gpus: int = 1, owner: Any = None) -> Any:
    pod = gpu_pod(name, ns, node=None, gpus=gpus, phase="Pending", owner=owner)
    pod["spec"]["nodeSelector"] = selector if selector is not None else {TRAIN: "gpu-a100"}
    return pod


def events(fleet: Fleet, reason: str, ns: str = "ml-a") -> list[dict[str, Any]]:
    return [e for e in fleet.kube.list("Event", ns) if e["reason"] == reason]


def test_a_pending_gpu_pod_in_an_allowed_namespace_wakes_its_group_once(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("train-x", "ml-a"))

    first = fleet.run(NIGHT, policy=woken)

    config = fleet.configs()["train"]
    assert (config.min, config.desired, config.max) == (0, 1, 1)  # 1 node for 1 pod, max raised to hold it
    (event,) = events(fleet, "NodeGroupWaking")
    assert event["involvedObject"]["name"] == "train-x"
    assert event["message"].startswith("Waking train: 1 node, usually ready in ~5 min, up until 00:00")
    assert "(policy wake.for)" in event["message"]
    items = [i for i in document(first)["items"] if i["kind"] == "wake"]
    assert [(i["name"], i["status"], i["namespace"], i["pod"], i["woke"], i["nodes"]) for i in items] == [
        ("ml-a/train-x", "applied", "ml-a", "train-x", True, 1)
    ]
    assert "woken on demand (an Event on each Pending pod):" in text(first)
    assert (document(first)["exitCode"], tally(first).failed) == (0, 0)
    # Durable: the wake is in the record, and the size to restore in the morning is still the pre-shutdown one.
    kept = fleet.ports.records.load()["train"]
    assert isinstance(kept, Record)
    assert kept.wake is not None
    assert (kept.wake.by, kept.wake.nodes, kept.wake.until) == ("ml-a/train-x", 1, NIGHT + timedelta(hours=2))
    assert (kept.phase, kept.config.min, kept.config.desired, kept.config.max) == ("down", 1, 3, 8)

    fleet.clear_logs()
    second = fleet.run(NIGHT + timedelta(minutes=5), policy=woken)  # the next run: nothing to write
    assert fleet.all_writes() == 0
    assert not [i for i in document(second)["items"] if i["kind"] == "wake"]


def test_a_pod_in_a_namespace_not_allowed_wakes_nothing_and_is_told_once(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("nb-0", "team-b"))

    first = fleet.run(NIGHT, policy=woken)
    fleet.run(NIGHT + timedelta(minutes=5), policy=woken)

    assert fleet.configs()["train"].desired == 0
    (event,) = events(fleet, "NodeGroupNotWoken", "team-b")
    assert event["type"] == "Warning"
    assert "namespace team-b may not wake it (wake.namespaces: ml-*, nlp)" in event["message"]
    (item,) = [i for i in document(first)["items"] if i["kind"] == "wake"]
    assert (item["woke"], item["nodeGroup"], item["status"]) == (False, "train", "applied")


def test_a_pod_that_fits_no_group_or_a_group_without_wake_is_told_why(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("odd-0", "ml-a", selector={"gpu": "b200"}))
    fleet.kube.create(pending("batch-0", "ml-a", selector={"gpu-jobs.dev/pool": "batch-g5"}))

    fleet.run(NIGHT, policy=woken)

    told = {e["involvedObject"]["name"]: e["message"] for e in events(fleet, "NodeGroupNotWoken")}
    assert told["odd-0"].startswith("Not waking any node group: no node group of the policy that is down fits")
    assert told["batch-0"].startswith("Not waking batch: it has no wake policy; it comes up at Wed 07:45 CET")
    assert fleet.cloud_writes() == 0


def test_a_replacement_of_a_pod_the_job_drained_never_wakes_the_group(fleet: Fleet) -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-5d9", "uid": "rs-1", "controller": True}
    woken = policy("    onBusy: drain\n")
    fleet.kube.create(gpu_pod("trainer-5d9-a", "ml-a", node="ip-10-0-1-1", owner=rs))
    night(fleet, woken)  # drained: trainer-5d9-a evicted, its ReplicaSet remembered
    assert fleet.kube.get("Pod", "trainer-5d9-a", "ml-a") is None
    fleet.kube.create(pending("trainer-5d9-b", "ml-a", owner=rs))  # what the ReplicaSet does next

    fleet.run(NIGHT, policy=woken)

    assert fleet.configs()["train"].desired == 0
    (event,) = events(fleet, "NodeGroupNotWoken")
    assert "replaces one this job evicted" in event["message"]


def test_the_wake_brings_the_nodes_the_pods_need_at_most_max_nodes(fleet: Fleet) -> None:
    woken = policy("    gpusPerNode: 8\n    up: {min: 1, desired: 3, max: 8}\n")
    night(fleet, woken)
    fleet.kube.create(pending("big-0", "ml-a", gpus=16))  # 2 nodes
    fleet.kube.create(pending("big-1", "ml-a", gpus=8))  # a 3rd: above maxNodes 2

    fleet.run(NIGHT, policy=woken)

    config = fleet.configs()["train"]
    assert (config.desired, config.max) == (2, 2)


def test_the_wake_never_exceeds_the_groups_up_max(fleet: Fleet) -> None:
    tight = policy(
        "    gpusPerNode: 8\n    up: {min: 0, desired: 1, max: 1}\n", wake=WAKE.replace("maxNodes: 2", "maxNodes: 4")
    )
    night(fleet, tight)
    fleet.kube.create(pending("big-0", "ml-a", gpus=16))

    fleet.run(NIGHT, policy=tight)

    assert fleet.configs()["train"].desired == 1


def test_the_change_limit_holds_a_wake(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("train-x", "ml-a"))

    report = fleet.run(NIGHT, policy=woken, limit=ChangeLimit(0))

    assert fleet.configs()["train"].desired == 0
    assert document(report)["exitCode"] == 3
    assert events(fleet, "NodeGroupWaking") == []


def test_a_dry_run_writes_nothing(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("train-x", "ml-a"))
    fleet.kube.create(pending("nb-0", "team-b"))

    report = fleet.run(NIGHT, policy=woken, dry_run=True)

    assert fleet.all_writes() == 0
    assert sorted((i["name"], i["status"]) for i in document(report)["items"] if i["kind"] == "wake") == [
        ("ml-a/train-x", "planned"),
        ("team-b/nb-0", "planned"),
    ]


def test_when_the_wake_ends_the_normal_shutdown_path_applies(fleet: Fleet) -> None:
    woken = policy()
    night(fleet, woken)
    fleet.kube.create(pending("train-x", "ml-a"))
    fleet.run(NIGHT, policy=woken)
    # The pod got its node and runs.
    fleet.kube.cluster.delete("Pod", "train-x", "ml-a")
    fleet.kube.create(gpu_pod("train-x", "ml-a", node="ip-10-0-1-1"))

    over = fleet.run(NIGHT + timedelta(hours=2, minutes=1), policy=woken)

    # onBusy wait: a running GPU pod postpones the shutdown (maxDelay), as at any shutdown.
    assert fleet.configs()["train"].desired == 1
    assert any("shutdown postponed" in s.reason for s in over.skips)
    fleet.kube.cluster.delete("Pod", "train-x", "ml-a")

    fleet.run(NIGHT + timedelta(hours=2, minutes=10), policy=woken)

    config = fleet.configs()["train"]
    assert (config.min, config.desired, config.max) == (0, 0, 1)
    kept = fleet.ports.records.load()["train"]
    assert isinstance(kept, Record)
    assert (kept.phase, kept.wake, kept.config.desired, kept.config.max) == ("down", None, 3, 8)
    assert kept.woke  # the pod that woke it does not wake it again tonight
