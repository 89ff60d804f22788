"""Issue 18, items 7 and 12: a group removed from the policy while down, and a drain a budget blocks."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.records import ConfigMapRecords, record_name
from jobs.core.policy import Policy
from jobs.nodegroups import report as render
from jobs.nodegroups.job import Report, identities, run, tally
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.nodegroups.world import EVENING, MORNING, POLICY, Fleet, _Log, make_fleet

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
        events=KubeEvents(api_client(), "gpu-jobs", "nodegroups", known),
    )
    return run(policy, at, replace(fleet.settings, **overrides), ports, _Log())  # type: ignore[arg-type]


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
    text = render.to_text([morning])
    assert "records of node groups the policy no longer names:" in text
    assert "aws eu-west-1/ml-prod/gpu-a100 in cluster ml-prod: down, recorded 2026-12-01T20:05:00+01:00" in text
    assert "restores 1/3/8" in text
    assert "nothing to change" not in text
    (entry,) = json.loads(render.to_json([morning]))["orphans"]
    assert (entry["record"], entry["phase"], entry["failed"], entry["restores"]["desired"]) == (name, "down", True, 3)
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
    assert "nothing left changed; drop it with: kubectl -n gpu-jobs delete configmap" in render.to_text([report])


def test_orphans_are_not_looked_for_with_only(fleet: Fleet) -> None:
    fleet.run(EVENING)
    without = parse_policy(POLICY.replace(TRAIN, ""), "policy.yaml")
    assert run_with(fleet, without, MORNING, only="batch").orphans == ()
