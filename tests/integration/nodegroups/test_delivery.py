"""Scale-ups that do not deliver: stockouts and quotas on restore, per provider, through the real adapters and
the emulators over HTTP.

A restore whose nodes did not come is a failed item (exit 1) with the provider's cause and a Warning Event on the
group's record; the pre-shutdown record stays, and a later run finishes the restore once capacity is back. Nodes
join the cluster only for instances the emulated cloud really launched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest

from jobs.adapters.kube.records import record_name
from jobs.core.group_record import Record
from jobs.nodegroups.observe import identities
from jobs.nodegroups.report import NodeGroupsReport as Report
from jobs.outcome import ExitCode
from jobs.runner import outcome
from tests.emulators.aws import AwsEmulator, moto_state
from tests.emulators.azure import AzureEmulator
from tests.emulators.gcp import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node
from tests.integration.nodegroups.test_job import records
from tests.integration.nodegroups.world import EVENING, MORNING, NODES, SUB, Fleet, _Log, make_fleet, run, tally

pytestmark = pytest.mark.integration

LATER = MORNING + timedelta(minutes=30)  # the next CronJob run
MUCH_LATER = MORNING + timedelta(hours=1)
REGION = "eu-west-1"
AWS_ZONES = ["eu-west-1a", "eu-west-1b"]
GKE_ZONES = ["europe-west4-a", "europe-west4-b"]


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    return make_fleet(kube, aws, gcp, azure, monkeypatch)


def launched(fleet: Fleet, group: str) -> int:
    """The instances the group's cloud really runs: what registers as Kubernetes nodes."""
    if group in ("train", "batch"):
        if group == "train":
            nodegroup = moto_state.find_nodegroup(REGION, "ml-prod", "gpu-a100")
            assert nodegroup is not None
            name = str(nodegroup.resources["autoScalingGroups"][0]["name"])
        else:
            name = "batch-g5"
        asg = moto_state.find_asg(REGION, name)
        return len(asg.instance_states) if asg is not None else 0
    if group == "research":
        return fleet.gcp.running_nodes("ml-research", "europe-west4", "research", "h100")
    pool = fleet.azure.agent_pool(SUB, "rg-ml", "aks-ml", {"finetune": "a100", "vision": "t4"}[group])
    return 0 if pool.power_state == "Stopped" else pool.count


def run_one(fleet: Fleet, group: str, at: object) -> tuple[Report, ExitCode]:
    settings = replace(fleet.settings, only=group)
    report = run(fleet.policy, at, settings, fleet.ports, _Log())  # type: ignore[arg-type]
    name, labels = NODES[group]
    node = fleet.kube.get("Node", name)
    if node is not None and not launched(fleet, group):
        fleet.kube.cluster.delete("Node", name)
    elif node is None and launched(fleet, group):
        fleet.kube.create(gpu_node(name, labels=labels))
    return report, outcome([tally(report)], dry_run=False).exit_code


def warnings(fleet: Fleet, group: str, reason: str) -> list[str]:
    record = record_name(identities(fleet.policy, None)[group])
    return [
        e["message"]
        for e in fleet.kube.list("Event", "gpu-jobs")
        if e["involvedObject"]["name"] == record and e["reason"] == reason and e["type"] == "Warning"
    ]


def failure(report: Report, group: str) -> str:
    found = [r.message for r in report.results if r.group == group and r.status == "failed"]
    found += [s.reason for s in report.skips if s.group == group and s.failed]
    assert found, f"{group} did not fail: {report}"
    return found[0]


@dataclass(frozen=True)
class Shortage:
    group: str
    cause: str  # what the failure names
    begin: Callable[[Fleet], None]
    end: Callable[[Fleet], None]


SHORTAGES = [
    Shortage(
        "train",
        "AsgInstanceLaunchFailures: Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently"
        " do not have sufficient p4d.24xlarge capacity",
        lambda f: f.aws.stock_out("p4d.24xlarge", AWS_ZONES),
        lambda f: f.aws.restock(),
    ),
    Shortage(
        "train",
        "VcpuLimitExceeded - You have requested more vCPU capacity than your current vCPU limit of 0 allows",
        lambda f: f.aws.set_quota(REGION, "L-417A185B", 0),  # Running On-Demand P instances
        lambda f: f.aws.set_quota(REGION, "L-417A185B", 3 * 96),
    ),
    Shortage(
        "research",
        "Not all instances running in IGM after 1m0s. Expect 2. Current errors:"
        " [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]",
        lambda f: f.gcp.stock_out("a3-highgpu-8g", GKE_ZONES),
        lambda f: f.gcp.restock(),
    ),
    Shortage(
        "research",
        "[QUOTA_EXCEEDED]: Instance creation failed: Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 0.0",
        lambda f: f.gcp.set_quota("ml-research", "NVIDIA-H100-GPUS-per-project-region", "europe-west4", 0),
        lambda f: f.gcp.set_quota("ml-research", "NVIDIA-H100-GPUS-per-project-region", "europe-west4", 32),
    ),
    Shortage(
        "finetune",
        "AllocationFailed: Allocation failed. We do not have sufficient capacity for the requested VM size",
        lambda f: f.azure.fail_allocations("Standard_NC24ads_A100_v4"),
        lambda f: f.azure.restock(),
    ),
    Shortage(
        "finetune",
        "exceeding approved standardNCADSA100v4Family Cores quota",
        lambda f: f.azure.set_quota(SUB, "westeurope", "standardNCADSA100v4Family", 0),
        lambda f: f.azure.set_quota(SUB, "westeurope", "standardNCADSA100v4Family", 48),
    ),
]


@pytest.mark.parametrize(
    "shortage", SHORTAGES, ids=["eks-stockout", "eks-quota", "gke-stockout", "gke-quota", "aks-stockout", "aks-quota"]
)
def test_a_restore_that_does_not_deliver_fails_keeps_its_record_and_finishes_later(
    fleet: Fleet, shortage: Shortage
) -> None:
    group = shortage.group
    original = fleet.configs()[group]
    run_one(fleet, group, EVENING)
    shortage.begin(fleet)

    morning, morning_exit = run_one(fleet, group, MORNING)
    later, later_exit = run_one(fleet, group, LATER)  # still short: observed and reported, the size not resent
    shortage.end(fleet)
    recovered, recovered_exit = run_one(fleet, group, MUCH_LATER)

    assert morning_exit == later_exit == ExitCode.ITEM_FAILED
    assert shortage.cause in failure(morning, group)
    assert shortage.cause in failure(later, group)  # AKS kept the old count, so its PUT is sent (and fails) again
    assert warnings(fleet, group, "RestoreNotDelivered")
    assert recovered_exit == ExitCode.OK
    assert [r.status for r in recovered.results if r.group == group] == ["applied"]
    assert records(fleet)[group].phase == "up"
    assert replace(fleet.configs()[group], desired=original.desired) == original
    assert fleet.kube.get("Node", NODES[group][0]) is not None


def test_a_failed_restore_keeps_the_pre_shutdown_record(fleet: Fleet) -> None:
    run_one(fleet, "train", EVENING)
    before: Record = records(fleet)["train"]
    fleet.aws.stock_out("p4d.24xlarge", AWS_ZONES)

    run_one(fleet, "train", MORNING)

    assert records(fleet)["train"] == before
    assert before.phase == "down"
    assert fleet.kube.get("Node", NODES["train"][0]) is None  # nothing launched, so no node registered


def test_the_next_run_does_not_resend_a_size_already_in_place(fleet: Fleet) -> None:
    run_one(fleet, "research", EVENING)
    fleet.gcp.stock_out("a3-highgpu-8g", GKE_ZONES)
    run_one(fleet, "research", MORNING)
    fleet.clear_logs()

    report, code = run_one(fleet, "research", LATER)

    assert code == ExitCode.ITEM_FAILED
    assert report.results == ()
    assert fleet.gcp.log.writes() == []  # observed and reported: setSize is not sent again


def test_a_plain_asg_short_of_instances_fails_with_the_cause_from_its_scaling_activities(fleet: Fleet) -> None:
    # A plain ASG accepts the desired capacity and then fails its launches: only its scaling activities say why.
    run_one(fleet, "batch", EVENING)
    fleet.aws.stock_out("g5.12xlarge", AWS_ZONES)

    morning, morning_exit = run_one(fleet, "batch", MORNING)
    fleet.clear_logs()
    later, later_exit = run_one(fleet, "batch", LATER)
    later_writes = fleet.aws.log.writes()
    fleet.aws.restock()
    _, recovered_exit = run_one(fleet, "batch", MUCH_LATER)

    assert morning_exit == ExitCode.ITEM_FAILED
    assert "We currently do not have sufficient g5.12xlarge capacity" in failure(morning, "batch")
    assert later_exit == ExitCode.ITEM_FAILED
    assert "restore not delivered: We currently do not have sufficient g5.12xlarge capacity" in failure(later, "batch")
    assert later_writes == []  # the desired capacity is in place: observed and reported, not sent again
    assert warnings(fleet, "batch", "RestoreNotDelivered")
    assert recovered_exit == ExitCode.OK
    assert records(fleet)["batch"].phase == "up"
    assert fleet.kube.get("Node", NODES["batch"][0]) is not None


def test_an_eks_update_that_ends_failed_fails_the_restore_and_is_sent_again_next_run(fleet: Fleet) -> None:
    run_one(fleet, "train", EVENING)
    fleet.aws.eks.fail_next_update("InsufficientFreeAddresses")

    morning, morning_exit = run_one(fleet, "train", MORNING)
    _, later_exit = run_one(fleet, "train", LATER)  # the update changed nothing: the size is sent again

    assert morning_exit == ExitCode.ITEM_FAILED
    assert "failed: InsufficientFreeAddresses: One or more of the subnets" in failure(morning, "train")
    assert warnings(fleet, "train", "RestoreNotDelivered")
    assert later_exit == ExitCode.OK
    assert records(fleet)["train"].phase == "up"


@pytest.mark.parametrize(("group", "stock_out"), [("train", "aws"), ("research", "gcp")])
def test_a_group_whose_restore_never_delivered_still_goes_down_at_night(
    fleet: Fleet, group: str, stock_out: str
) -> None:
    # The cloud says none of the nodes launched: there is nothing to judge busy, so the shutdown is not blocked as
    # "the cloud reports nodes the cluster does not show".
    run_one(fleet, group, EVENING)
    if stock_out == "aws":
        fleet.aws.stock_out("p4d.24xlarge", AWS_ZONES)
    else:
        fleet.gcp.stock_out("a3-highgpu-8g", GKE_ZONES)
    run_one(fleet, group, MORNING)

    report, code = run_one(fleet, group, EVENING + timedelta(days=1))

    assert code == ExitCode.OK
    assert [r.status for r in report.results] == ["applied"]
    assert records(fleet)[group].phase == "down"
    assert fleet.configs()[group].desired == 0
