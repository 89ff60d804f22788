"""The nodegroups job end to end: real adapters, real SDKs, over HTTP to the emulators."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.records import ConfigMapRecords, record_name
from jobs.core.group_record import Record
from jobs.labels import NODE_GROUP_LABEL, RECORD_KEY
from jobs.nodegroups.observe import identities
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.nodegroups.world import EVENING, MORNING, POLICY, Fleet, _Log, gpu_pod, make_fleet, run, text

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    return make_fleet(kube, aws, gcp, azure, monkeypatch)


def records(fleet: Fleet) -> dict[str, Record]:
    out = {}
    for cm in fleet.kube.list("ConfigMap", "gpu-jobs"):
        group = cm["metadata"].get("labels", {}).get(NODE_GROUP_LABEL)
        if group:
            out[group] = Record.from_json(json.loads(cm["data"][RECORD_KEY]))
    return out


def statuses(report: object) -> dict[str, str]:
    return {r.group: r.status for r in report.results}  # type: ignore[attr-defined]


def test_a_night_down_and_up_restores_every_provider_exactly(fleet: Fleet) -> None:
    original = fleet.configs()
    evening = fleet.run(EVENING)
    assert statuses(evening) == dict.fromkeys(("train", "batch", "research", "finetune", "vision"), "applied")
    assert {s.group for s in evening.skips} == set()
    down = fleet.configs()
    assert (down["train"].min, down["train"].desired, down["train"].max, down["train"].autoscaling) == (0, 0, 1, False)
    assert (down["batch"].min, down["batch"].desired, down["batch"].max) == (0, 0, 0)
    assert (down["research"].desired, down["research"].autoscaling) == (0, False)
    assert (down["finetune"].desired, down["finetune"].autoscaling) == (0, False)
    assert down["vision"].stopped
    assert all(r.phase == "down" for r in records(fleet).values())
    # EKS was never asked for maxSize 0.
    sent = [json.loads(r.body) for r in fleet.aws.log.all() if r.operation == "UpdateNodegroupConfig"]
    assert sent
    assert all(body["scalingConfig"]["maxSize"] >= 1 for body in sent)

    morning = fleet.run(MORNING)
    assert set(statuses(morning).values()) == {"applied"}
    assert fleet.configs() == original
    assert all(r.phase == "up" for r in records(fleet).values())


def test_a_second_run_plans_nothing_and_writes_nothing(fleet: Fleet) -> None:
    fleet.run(EVENING)
    fleet.clear_logs()
    again = fleet.run(EVENING)
    assert (again.results, fleet.all_writes()) == ((), 0)
    fleet.run(MORNING)
    fleet.clear_logs()
    assert fleet.run(MORNING).results == ()
    assert fleet.all_writes() == 0


def test_the_text_report_shows_each_size_as_the_provider_keeps_it(fleet: Fleet) -> None:
    """min/desired/max where they hold (EKS, ASG, an autoscaled pool); a node count where a GKE or AKS autoscaler is
    off, never its unused bounds (an AKS manual pool reports none: ``0/3/0`` read as a max below the size); a stopped
    AKS pool says what it starts with."""
    evening = text(fleet.run(EVENING))
    rows = {line.split()[0]: line for line in evening.splitlines()[1:]}
    assert "1/3/8 autoscaled -> 0/0/1 " in rows["train"]
    assert "2/2/4 -> 0/0/0 " in rows["batch"]
    assert "1/?/4 per zone autoscaled -> 0 nodes per zone " in rows["research"]  # GKE: in each of its 2 zones
    assert "1/2/6 autoscaled -> 0 nodes " in rows["finetune"]
    assert "3 nodes -> stopped (3 nodes on start) " in rows["vision"]
    # As the schedule wants, each group as it is now.
    quiet = [line.split(maxsplit=3) for line in text(fleet.run(EVENING)).splitlines() if "  ok  " in line]
    assert {r[0]: r[3].split("  ")[0] for r in quiet} == {
        "train": "0/0/1",
        "batch": "0/0/0",
        "research": "0 nodes per zone",
        "finetune": "0 nodes",
        "vision": "stopped (3 nodes on start)",
    }
    morning = text(fleet.run(MORNING))
    assert "stopped (3 nodes on start) -> 3 nodes " in morning
    assert "0 nodes -> 1/2/6 autoscaled " in morning


def test_dry_run_plans_and_writes_nothing(fleet: Fleet) -> None:
    report = fleet.run(EVENING, dry_run=True)
    assert set(statuses(report).values()) == {"planned"}
    assert fleet.all_writes() == 0


def test_a_crash_between_record_and_scale_loses_nothing(fleet: Fleet) -> None:
    original = fleet.configs()
    # Every EKS update fails (beyond the retry deadline) right after the record was written.
    fleet.aws.inject("UpdateNodegroupConfig", "server_error", times=1000)
    first = fleet.run(EVENING, only="train")
    assert statuses(first) == {"train": "failed"}
    assert records(fleet)["train"].phase == "stopping"
    assert records(fleet)["train"].config.desired == 3
    fleet.aws.faults.clear()
    assert statuses(fleet.run(EVENING, only="train")) == {"train": "applied"}
    assert records(fleet)["train"].config == original["train"]
    fleet.run(MORNING, only="train")
    assert fleet.configs()["train"] == original["train"]


@pytest.mark.parametrize(
    ("group", "operation", "emulator"),
    [
        ("research", "nodePools.setSize", "gcp"),
        ("finetune", "agentPools.createOrUpdate", "azure"),
    ],
)
def test_a_crash_between_the_two_steps_converges(fleet: Fleet, group: str, operation: str, emulator: str) -> None:
    original = fleet.configs()
    target = getattr(fleet, emulator)
    if emulator == "azure":
        # The first PUT (autoscaler off) succeeds; every later one fails until the deadline.
        real = fleet.ports.clouds["aks"].apply
        calls = {"n": 0}

        def flaky(g, step):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] == 2:
                target.faults.inject(operation, "server_error", times=1000)
            return real(g, step)

        fleet.ports.clouds["aks"].apply = flaky  # type: ignore[method-assign]
    else:
        target.faults.inject(operation, "server_error", times=1000)
    assert statuses(fleet.run(EVENING, only=group)) == {group: "failed"}
    half = fleet.configs()[group]
    assert not half.autoscaling
    assert records(fleet)[group].phase == "stopping"
    target.faults.clear()
    assert statuses(fleet.run(EVENING, only=group)) == {group: "applied"}
    assert records(fleet)[group].config == original[group]
    fleet.run(MORNING, only=group)
    assert fleet.configs()[group] == original[group]


def test_busy_and_throttling_are_retried(fleet: Fleet) -> None:
    fleet.aws.inject("UpdateNodegroupConfig", "busy", times=2)
    fleet.aws.inject("DescribeNodegroup", "throttle", times=1)
    fleet.gcp.faults.inject("nodePools.setSize", "busy", times=2)
    fleet.azure.faults.inject("agentPools.createOrUpdate", "busy", times=2)
    report = fleet.run(EVENING)
    assert set(statuses(report).values()) == {"applied"}
    assert fleet.aws.log.count("UpdateNodegroupConfig") == 3


def test_aks_system_pool_in_the_policy_is_refused(fleet: Fleet) -> None:
    from jobs.policy_file import parse_policy
    from tests.integration.nodegroups.world import POLICY, SUB

    text = POLICY + (
        f"  - name: sys\n    cloud: azure\n"
        f"    azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml, agentPool: system}}\n"
    )
    report = fleet.run(EVENING, policy=parse_policy(text, "p.yaml"), only="sys")
    assert report.results == ()
    assert [s.reason for s in report.skips] == ["AKS system pool: needs >= 1 node and cannot be stopped; never scaled"]
    assert fleet.azure.agent_pool("00000000-0000-0000-0000-000000000001", "rg-ml", "aks-ml", "system").count == 3


def test_wait_postpones_and_records_when(fleet: Fleet) -> None:
    # Evicted pods stay Terminating for their grace period (1 s here), and the drain waits for them to go.
    fleet.kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1", gpus=8, grace_s=1))
    report = fleet.run(EVENING, only="train")
    assert report.results == ()
    assert (
        "shutdown postponed until 2026-12-01T22:05:00+01:00: GPU pods running (team-a/train-0)"
        in report.skips[0].reason
    )
    assert records(fleet)["train"].busy_since == EVENING
    fleet.clear_logs()
    assert fleet.run(EVENING + timedelta(minutes=10), only="train").skips
    assert fleet.all_writes() == 0  # still waiting: nothing new to write
    # After maxDelay (2h), afterDelay drain: cordon, evict, scale down.
    late = fleet.run(EVENING + timedelta(hours=2), only="train")
    assert statuses(late) == {"train": "applied"}
    assert fleet.kube.get("Pod", "train-0", "team-a") is None
    assert "patch nodes" in fleet.kube.log.operations()  # cordoned before the eviction
    assert fleet.kube.get("Node", "ip-10-0-1-1") is None  # scaled to zero: the node went with its group


def test_drain_respects_disruption_budgets_and_times_out(fleet: Fleet) -> None:
    from tests.emulators.kube.seed import disruption_budget

    fleet.kube.create(gpu_pod("serve-0", "team-a", node="ip-10-0-1-1", labels={"app": "serve"}))
    fleet.kube.create(disruption_budget("serve", "team-a", {"app": "serve"}, min_available=1))
    policy = fleet.policy.model_copy(
        update={
            "node_groups": tuple(
                g.model_copy(update={"on_busy": "drain", "drain_timeout": "1s"}) for g in fleet.policy.node_groups
            )
        }
    )
    report = fleet.run(EVENING, policy=policy, only="train")
    assert statuses(report) == {"train": "failed"}
    assert "drain timed out" in report.results[0].message
    assert fleet.kube.get("Pod", "serve-0", "team-a") is not None
    assert fleet.configs()["train"].desired == 3  # not scaled while work was protected
    # The group stays up, so its node takes work again: the job undid its own cordon and its mark.
    node = fleet.kube.get("Node", "ip-10-0-1-1")
    assert not node["spec"].get("unschedulable")
    assert "gpu-jobs.dev/cordoned-by" not in node["metadata"].get("annotations", {})


def test_a_cordon_left_by_a_crashed_drain_is_undone_by_the_next_run(fleet: Fleet) -> None:
    # A drain cordoned the node and the run died (no chance to undo it); a person cordoned another node.
    fleet.kube.put(
        {**fleet.kube.get("Node", "ip-10-0-1-1"), "spec": {"unschedulable": True}}
        | {
            "metadata": {
                **fleet.kube.get("Node", "ip-10-0-1-1")["metadata"],
                "annotations": {"gpu-jobs.dev/cordoned-by": "nodegroups"},
            }
        }
    )
    fleet.kube.put({**fleet.kube.get("Node", "aks-a100-1"), "spec": {"unschedulable": True}})
    fleet.kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1"))  # the evening is postponed: pods running
    report = fleet.run(EVENING, only="train")
    assert [(r.group, r.status, r.message) for r in report.results] == [("train", "applied", "uncordon ip-10-0-1-1")]
    assert "postponed" in report.skips[0].reason
    assert not fleet.kube.get("Node", "ip-10-0-1-1")["spec"].get("unschedulable")
    assert fleet.kube.get("Node", "aks-a100-1")["spec"]["unschedulable"] is True  # a person's cordon stands
    assert fleet.run(EVENING, only="train").results == ()  # nothing left to undo


def test_force_scales_down_with_pods_running_but_keep_alive_never(fleet: Fleet) -> None:
    fleet.kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1"))
    policy = fleet.policy.model_copy(
        update={"node_groups": tuple(g.model_copy(update={"on_busy": "force"}) for g in fleet.policy.node_groups)}
    )
    assert statuses(fleet.run(EVENING, policy=policy, only="train")) == {"train": "applied"}
    fleet.kube.create(gpu_pod("keep-0", "team-b", node="aks-a100-1", annotations={"gpu-jobs/keep-alive": "true"}))
    kept = fleet.run(EVENING, policy=policy, only="finetune")
    assert kept.results == ()
    assert "team-b/keep-0" in kept.skips[0].reason


def test_the_lease_holds_against_a_concurrent_run(fleet: Fleet) -> None:
    other = type(fleet.ports.lock)  # a second run, as the CronJob and a manual Job would be
    from jobs.adapters.kube.client import api_client

    rival = other(api_client(), "gpu-jobs", "gpu-jobs-nodegroups")
    # Held now, on the real clock: the run below is evaluated at EVENING, days away, and must still wait.
    assert rival.acquire("manual-run", datetime.now(UTC), timedelta(minutes=30)) is None
    fleet.clear_logs()
    report = fleet.run(EVENING)
    assert report.lock_holder == "manual-run"
    assert fleet.cloud_writes() == 0
    rival.release("manual-run")
    assert set(statuses(fleet.run(EVENING)).values()) == {"applied"}


def test_unmanaged_gpu_groups_are_reported(fleet: Fleet) -> None:
    fleet.aws.add_eks_nodegroup("eu-west-1", "ml-prod", "gpu-spare", 0, 1, 2, instance_types=("g5.xlarge",))
    report = fleet.run(EVENING, dry_run=True)
    found = {(u.cloud, tuple(u.locator.values())) for u in report.unmanaged}
    assert ("aws", ("eu-west-1", "ml-prod", "gpu-spare")) in found


def test_events_say_what_changed(fleet: Fleet) -> None:
    fleet.run(EVENING, only="train")
    reasons = [(e["involvedObject"]["name"], e["reason"]) for e in fleet.kube.list("Event", "gpu-jobs")]
    train = record_name(identities(fleet.policy, None)["train"])
    assert train.startswith("gpu-jobs-nodegroup-gpu-a100-")
    assert (train, "ConfigurationRecorded") in reasons
    assert (train, "NodeGroupScaled") in reasons


def test_a_renamed_group_is_restored_from_its_record(fleet: Fleet) -> None:
    original = fleet.configs()["train"]
    fleet.run(EVENING, only="train")
    renamed = parse_policy(POLICY.replace("- name: train\n", "- name: training\n"), "policy.yaml")
    known = identities(renamed, None)
    ports = replace(
        fleet.ports,
        records=ConfigMapRecords(api_client(), "gpu-jobs", known),
        events=KubeEvents(api_client(), "nodegroups", _Log()),
    )
    settings = replace(fleet.settings, only="training")
    report = run(renamed, MORNING, settings, ports, _Log())
    assert statuses(report) == {"training": "applied"}
    restored = fleet.ports.clouds["eks"].describe(renamed.group("training"), live_size=True)
    assert (restored.min, restored.desired, restored.max, restored.autoscaling) == (
        original.min,
        original.desired,
        original.max,
        original.autoscaling,
    )


def test_a_malformed_record_fails_its_group_only(fleet: Fleet) -> None:
    fleet.run(EVENING)
    cm = next(
        c for c in fleet.kube.list("ConfigMap", "gpu-jobs") if c["metadata"]["labels"][NODE_GROUP_LABEL] == "train"
    )
    cm["data"][RECORD_KEY] = "{not json"
    fleet.kube.put(cm)
    fleet.clear_logs()
    morning = fleet.run(MORNING)
    assert statuses(morning) == dict.fromkeys(("batch", "research", "finetune", "vision"), "applied")
    (skip,) = morning.skips
    assert (skip.group, skip.failed) == ("train", True)
    assert skip.reason.startswith("left as it is: record ConfigMap gpu-jobs-nodegroup-gpu-a100-")
    assert "is not JSON" in skip.reason
    assert fleet.configs()["train"].desired == 0  # still down: its sizes to restore are unknown


def test_a_gke_pool_resized_by_hand_at_night_goes_down_again(fleet: Fleet) -> None:
    from jobs.core.nodegroups import SetSize

    fleet.run(EVENING, only="research")
    assert fleet.configs()["research"].desired == 0
    # Someone resizes the pool in the console at night; its nodes register again.
    group = fleet.policy.group("research")
    fleet.ports.clouds["gke"].apply(group, SetSize(0, 2, 0))
    fleet.sync_nodes()
    assert fleet.kube.get("Node", "gke-research-h100-1") is not None
    later = fleet.run(EVENING + timedelta(minutes=10), only="research")
    assert statuses(later) == {"research": "applied"}
    assert fleet.configs()["research"].desired == 0
    kept = records(fleet)["research"]
    assert (kept.phase, kept.config.desired) == ("down", 2)  # the pre-shutdown size, not the hand-made one


# A write whose answer was lost is observed, not blindly resent: every write path, every emulator.
LOST_ANSWER_PATHS = [
    ("train", "aws", "UpdateNodegroupConfig"),
    ("train", "aws", "DeleteTags"),
    ("batch", "aws", "UpdateAutoScalingGroup"),
    ("research", "gcp", "nodePools.setAutoscaling"),
    ("research", "gcp", "nodePools.setSize"),
    ("finetune", "azure", "agentPools.createOrUpdate"),
    ("vision", "azure", "agentPools.createOrUpdate"),
    ("train", "kube", "create configmaps"),
    ("train", "kube", "update configmaps"),
]


@pytest.mark.parametrize(("group", "emulator", "operation"), LOST_ANSWER_PATHS)
def test_a_write_whose_answer_is_lost_is_observed_not_resent(
    fleet: Fleet, group: str, emulator: str, operation: str
) -> None:
    original = fleet.configs()[group]
    fleet.run(EVENING, only=group, dry_run=True)  # warm nothing up; just a read-only pass
    target = getattr(fleet, emulator)
    target.log.clear()
    target.faults.inject(operation, "lost", times=1)
    evening = fleet.run(EVENING, only=group)
    assert statuses(evening) == {group: "applied"}
    assert evening.results[0].message.startswith("down: ")  # the lost answer was observed as done, not resent
    sent = target.log.count(operation)
    target.log.clear()
    morning = fleet.run(MORNING, only=group)
    assert statuses(morning) == {group: "applied"}
    assert fleet.configs()[group] == original
    assert sent == LOST_ANSWER_SENT.get((group, operation), 1)  # as many as without the fault: none resent


# Writes of one evening per path, without any fault: the lost answer adds none.
LOST_ANSWER_SENT = {("finetune", "agentPools.createOrUpdate"): 2}  # AKS: autoscaler off, then count 0


def test_a_night_and_a_morning_leave_events_a_person_reads(fleet: Fleet) -> None:
    """Every Event message is a sentence: no Python repr (braces, quotes, None) of a record or a size."""
    fleet.run(EVENING)
    fleet.run(MORNING)
    messages = {(e["reason"], e["message"]) for e in fleet.kube.list("Event", "gpu-jobs")}
    assert {
        (
            "ConfigurationRecorded",
            "Recorded the size before shutdown: min 1, desired 3, max 8, autoscaler on with 2 discovery tags.",
        ),
        ("ConfigurationRecorded", "Recorded the size before shutdown: desired 3."),  # an AKS manual pool
        (
            "ConfigurationRecorded",
            "Recorded the size before shutdown: min 1, desired 2, max 4 (per zone, 2 zones), autoscaler on (BALANCED).",
        ),
        ("NodeGroupScaled", "Turned the autoscaler off: outside working hours."),
        ("NodeGroupScaled", "Set the size to min 0, desired 0, max 0: outside working hours."),
        ("NodeGroupScaled", "Stopped the pool: outside working hours."),
        (
            "NodeGroupRestored",
            "Set the size to min 1, desired 3, max 8: warming up for Mon-Fri 08:00-20:00 opening Wed 08:00.",
        ),
    } <= messages
    assert [m for _, m in messages if any(c in m for c in ("{", "'", "None"))] == []
    assert all(m[0].isupper() for _, m in messages)
