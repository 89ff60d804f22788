"""Issue 18, items 7 and 12: a group removed from the policy while down, and a drain a budget blocks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.records import ConfigMapRecords, record_name
from jobs.core.group_record import Record
from jobs.core.policy import Policy
from jobs.labels import NODE_GROUP_LABEL, RECORD_KEY
from jobs.nodegroups.observe import identities
from jobs.nodegroups.report import NodeGroupsReport as Report
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.envelope import items
from tests.integration.cli import run_cli
from tests.integration.nodegroups import world
from tests.integration.nodegroups.world import (
    EVENING,
    MORNING,
    POLICY,
    Fleet,
    _Log,
    configured,
    make_fleet,
    run,
    tally,
)

pytestmark = pytest.mark.integration

TRAIN = """\
  - name: train
    cloud: aws
    aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}
"""


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    return make_fleet(kube, aws, gcp, azure, monkeypatch)


def run_with(fleet: Fleet, policy: Policy, at: object, **overrides: object) -> Report:
    """A run of another version of the policy, with the record store and Events that version is wired with."""
    known = identities(policy, None)
    ports = replace(
        fleet.ports,
        records=ConfigMapRecords(api_client(), "gpu-jobs", known),
        events=KubeEvents(api_client(), "nodegroups", _Log()),
    )
    return run(policy, at, configured(fleet.settings, **overrides), ports, _Log())  # type: ignore[arg-type]


def test_a_group_removed_from_the_policy_while_down_is_a_failed_item_with_its_restore(fleet: Fleet) -> None:
    original = fleet.configs()["train"]
    fleet.run(EVENING)
    assert POLICY.count(TRAIN) == 1
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    morning = run_with(fleet, without, MORNING)
    name = record_name(identities(fleet.policy, None)["train"])
    (orphan,) = morning.orphans
    assert (orphan.name, orphan.failed, orphan.record.phase if orphan.record else None) == (name, True, "down")
    assert tally(morning).failed == 1  # exit 1: the Job status says so
    assert orphan.restore[0] == (
        "aws eks update-nodegroup-config --region eu-west-1 --cluster-name ml-prod --nodegroup-name gpu-a100"
        " --scaling-config minSize=1,maxSize=8,desiredSize=3"
    )
    assert orphan.delete == f"kubectl -n gpu-jobs delete configmap {name}"
    text = world.text(morning)
    assert "records of node groups the policy no longer names:" in text
    assert "aws eu-west-1/ml-prod/gpu-a100 in cluster ml-prod: down, recorded 2026-12-01T20:05:00+01:00" in text
    assert "restores 1/3/8" in text
    assert "nothing to change" not in text
    (entry,) = [i for i in world.document(morning)["items"] if i["kind"] == "record"]
    assert (entry["name"], entry["phase"], entry["status"], entry["restores"]["desired"]) == (name, "down", "failed", 3)
    assert entry["describes"]["locator"]["nodegroup"] == "gpu-a100"
    assert fleet.configs()["train"].desired == 0  # reported, not acted on

    # Put back in the policy, the group is restored from the record it kept, and nothing is orphaned any more.
    back = run_with(fleet, fleet.policy, MORNING, only="train")
    assert [r.status for r in back.results] == ["applied"]
    assert fleet.configs()["train"] == original
    again = run_with(fleet, fleet.policy, MORNING)
    assert again.orphans == ()


def test_an_orphan_record_dropped_by_hand_is_not_reported_again(fleet: Fleet) -> None:
    fleet.run(EVENING)
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    (orphan,) = run_with(fleet, without, EVENING).orphans
    fleet.kube.cluster.delete("ConfigMap", orphan.name, "gpu-jobs")  # what `orphan.delete` types
    later = run_with(fleet, without, MORNING)
    assert (later.orphans, tally(later).failed) == ((), 0)


def test_an_orphan_record_in_phase_up_is_listed_not_failed(fleet: Fleet) -> None:
    fleet.run(EVENING, only="train")
    fleet.run(MORNING, only="train")
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    report = run_with(fleet, without, MORNING)
    (orphan,) = report.orphans
    assert (orphan.failed, orphan.restore, tally(report).failed) == (False, (), 0)
    assert "nothing left changed; drop it with: kubectl -n gpu-jobs delete configmap" in world.text(report)


def test_orphans_are_not_looked_for_with_only(fleet: Fleet) -> None:
    fleet.run(EVENING)
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    assert run_with(fleet, without, MORNING, only="batch").orphans == ()


# Item 12: a drain a budget blocks is not restarted every run.


def drain_policy(fleet: Fleet) -> Policy:
    return fleet.policy.model_copy(
        update={
            "node_groups": tuple(
                g.model_copy(update={"on_busy": "drain", "drain_timeout": "1s"}) for g in fleet.policy.node_groups
            )
        }
    )


def blocked_train(fleet: Fleet) -> Policy:
    # Pods that stop at once when evicted (grace 0): the drain timeout (1 s) then measures refusals, not grace.
    from tests.emulators.kube.seed import disruption_budget, gpu_pod

    fleet.kube.create(gpu_pod("serve-0", "team-a", node="ip-10-0-1-1", labels={"app": "serve"}, grace_s=0))
    fleet.kube.create(disruption_budget("serve", "team-a", {"app": "serve"}, min_available=1))
    return drain_policy(fleet)


def drains(fleet: Fleet) -> list[str]:
    """The cordons and evictions the Kubernetes API received."""
    return [op for op in fleet.kube.log.operations() if op in ("patch nodes", "create pods/eviction")]


def train_record(fleet: Fleet) -> Record:
    (cm,) = [
        c for c in fleet.kube.list("ConfigMap", "gpu-jobs") if c["metadata"]["labels"].get(NODE_GROUP_LABEL) == "train"
    ]
    return Record.from_json(json.loads(cm["data"][RECORD_KEY]))


def node(fleet: Fleet, name: str) -> dict[str, Any]:
    found = fleet.kube.get("Node", name)
    assert found is not None
    return found


def test_a_blocked_drain_is_not_restarted_within_its_back_off(fleet: Fleet) -> None:
    from datetime import timedelta

    policy = blocked_train(fleet)
    first = fleet.run(EVENING, policy=policy, only="train")
    assert [r.status for r in first.results] == ["failed"]
    assert "next drain at 2026-12-01T20:35:00+01:00" in first.results[0].message
    record = train_record(fleet)
    # Nothing was scaled: the record is not left in `stopping` while the group is up.
    block = record.drain_blocked
    assert block is not None
    assert (record.phase, block.attempts, block.budgets) == ("up", 1, (("team-a/serve", 0),))
    assert not node(fleet, "ip-10-0-1-1")["spec"].get("unschedulable")

    # Ten minutes later, another pod has landed: no cordon, no eviction, no write at all; still a failed item.
    from tests.emulators.kube.seed import gpu_pod

    fleet.kube.create(gpu_pod("notebook-0", "team-b", node="ip-10-0-1-1", grace_s=0))
    fleet.clear_logs()
    second = fleet.run(EVENING + timedelta(minutes=10), policy=policy, only="train")
    assert second.results == ()
    (skip,) = second.skips
    assert (skip.failed, skip.warning) == (True, True)
    assert skip.reason.startswith("shutdown blocked: the drain at 2026-12-01T20:05:00+01:00 gave up (1 time(s))")
    assert "team-a/serve allows 0" in skip.reason
    assert "next drain at 2026-12-01T20:35:00+01:00" in skip.reason
    assert tally(second).failed == 1
    assert (drains(fleet), fleet.all_writes()) == ([], 0)
    assert fleet.kube.get("Pod", "notebook-0", "team-b") is not None  # not evicted for nothing

    # Once the back-off passed it drains again; the same blockers double the next back-off (1 h).
    third = fleet.run(EVENING + timedelta(minutes=31), policy=policy, only="train")
    assert [r.status for r in third.results] == ["failed"]
    assert "create pods/eviction" in drains(fleet)
    assert "next drain at 2026-12-01T21:36:00+01:00 (attempt 2" in third.results[0].message
    again = train_record(fleet).drain_blocked
    assert again is not None
    assert again.attempts == 2


def test_an_evicted_pod_still_in_its_grace_period_is_no_blocker(fleet: Fleet) -> None:
    from tests.emulators.kube.seed import gpu_pod

    policy = blocked_train(fleet)
    fleet.kube.create(gpu_pod("notebook-0", "team-b", node="ip-10-0-1-1", grace_s=30))  # evicted, still Terminating
    first = fleet.run(EVENING, policy=policy, only="train")
    assert [r.status for r in first.results] == ["failed"]
    block = train_record(fleet).drain_blocked
    assert block is not None
    # Only the pod whose eviction its budget refused: the Terminating one is on its way out, and its going away by
    # the next run must not count as "the blockers changed" (that would drain again at once).
    assert [key.rsplit("/", 1)[0] for key in block.pods] == ["team-a/serve-0"]


def test_a_blocked_drain_is_tried_again_when_its_budget_changes(fleet: Fleet) -> None:
    from datetime import timedelta

    policy = blocked_train(fleet)
    fleet.run(EVENING, policy=policy, only="train")
    # The team relaxes its budget: it allows one disruption now, so the drain goes through before the back-off.
    pdb = fleet.kube.get("PodDisruptionBudget", "serve", "team-a")
    assert pdb is not None
    pdb["spec"] = {"selector": pdb["spec"]["selector"], "maxUnavailable": 1}
    fleet.kube.put(pdb)
    fleet.clear_logs()
    later = fleet.run(EVENING + timedelta(minutes=10), policy=policy, only="train")
    assert [r.status for r in later.results] == ["applied"]
    assert "create pods/eviction" in drains(fleet)
    assert fleet.kube.get("Pod", "serve-0", "team-a") is None
    record = train_record(fleet)
    assert (record.phase, record.drain_blocked, record.config.desired) == ("down", None, 3)


def test_a_blocked_drain_is_tried_again_when_its_pod_is_gone(fleet: Fleet) -> None:
    from datetime import timedelta

    from tests.emulators.kube.seed import gpu_pod

    policy = blocked_train(fleet)
    fleet.run(EVENING, policy=policy, only="train")
    fleet.kube.cluster.delete("Pod", "serve-0", "team-a")  # it finished; another pod took its place on the node
    fleet.kube.create(gpu_pod("train-1", "team-b", node="ip-10-0-1-1", grace_s=0))
    fleet.clear_logs()
    later = fleet.run(EVENING + timedelta(minutes=10), policy=policy, only="train")
    assert [r.status for r in later.results] == ["applied"]
    assert "create pods/eviction" in drains(fleet)


def test_working_hours_forget_a_blocked_drain(fleet: Fleet) -> None:
    policy = blocked_train(fleet)
    fleet.run(EVENING, policy=policy, only="train")
    morning = fleet.run(MORNING, policy=policy, only="train")
    assert [s.reason for s in morning.skips] == ["working hours are back: the wait for running GPU pods is over"]
    record = train_record(fleet)
    assert (record.phase, record.drain_blocked) == ("up", None)
    assert fleet.configs()["train"].desired == 3


def test_the_shipped_rbac_is_enough_for_a_blocked_drain(fleet: Fleet) -> None:
    from datetime import timedelta

    from tests.integration.test_deploy import rendered_allow_list

    policy = blocked_train(fleet)
    fleet.kube.allow_only(*rendered_allow_list("production/aws"))
    first = fleet.run(EVENING, policy=policy, only="train")
    assert "next drain at" in first.results[0].message  # the back-off was recorded, not refused
    second = fleet.run(EVENING + timedelta(minutes=10), policy=policy, only="train")
    assert second.skips[0].reason.startswith("shutdown blocked:")
    assert "get poddisruptionbudgets" in fleet.kube.log.operations()


def test_gpu_jobs_exits_1_for_a_group_left_down_that_the_policy_no_longer_names(central: Fleet, tmp_path: Path) -> None:
    """As the CronJob runs it: one install reaching every cluster, a run per cluster; the record is reported by the
    run of the cluster it describes only."""
    fleet = central  # one API per cluster: the command proves each cluster before it reads it
    policy = tmp_path / "policy.yaml"
    environ = {**fleet.cli_env(policy), "GPU_JOBS_POLL_INTERVAL": "0.01", "GPU_JOBS_RETRY_DEADLINE": "1"}
    policy.write_text(POLICY)
    evening = run_cli(["nodegroups", "--policy", str(policy), "--at", EVENING.isoformat()], environ)
    assert evening.code == 0
    policy.write_text(POLICY.replace(TRAIN, ""))  # a pull request removes the group while it is down
    at = MORNING.isoformat()
    morning = run_cli(["nodegroups", "--policy", str(policy), "--at", at, "--output", "json"], environ)
    assert (morning.code, morning.summary["failed"]) == (1, 1)
    doc = json.loads(morning.stdout)
    (orphan,) = items(doc, "record")
    assert (orphan["scope"], orphan["phase"], orphan["status"]) == ("ml-prod", "down", "failed")
    assert orphan["restore"][0].startswith("aws eks update-nodegroup-config --region eu-west-1 --cluster-name ml-prod")
    assert orphan["deleteRecord"].startswith("kubectl --context ")  # the cluster's kubeContext
    restored = {g["name"] for g in items(doc, "node group") if "direction" in g}
    assert restored == {"batch", "research", "finetune", "vision"}  # the rest restored
    assert fleet.configs()["train"].desired == 0


def test_a_run_that_finds_the_lease_held_leaves_orphans_to_the_run_holding_it(fleet: Fleet) -> None:
    from datetime import UTC, datetime, timedelta

    from jobs.adapters.kube.lease import LeaseLock

    fleet.run(EVENING)
    rival = LeaseLock(api_client(), "gpu-jobs", "gpu-jobs-nodegroups")
    assert rival.acquire("manual-run", datetime.now(UTC), timedelta(minutes=30)) is None
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    locked = run_with(fleet, without, MORNING)
    assert (locked.lock_holder, locked.orphans, tally(locked).failed) == ("manual-run", (), 0)
