"""``gpu-jobs/keep-up-until`` end to end: a running GPU pod keeps its group up until then, capped by the group's
maxDelay from when the job first saw it (saved in the record once), and is told to when; a malformed value is
reported and ignored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobs.core.group_record import Record
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.integration.nodegroups.world import EVENING, POLICY, Fleet, document, make_fleet, text

pytestmark = pytest.mark.integration

DRAIN = parse_policy(POLICY.replace("  - name: train\n", "  - name: train\n    onBusy: drain\n", 1), "policy.yaml")


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    world = make_fleet(kube, aws, gcp, azure, monkeypatch)
    kube.cluster.pod_stop_s = 0.3  # evicted containers exit on SIGTERM: no real wait for their 30 s grace period
    world.kube.create(namespace("ml-a"))
    return world


def kept(fleet: Fleet) -> list[dict[str, Any]]:
    return [e for e in fleet.kube.list("Event", "ml-a") if e["reason"] == "NodeGroupKeptUp"]


def test_keep_up_until_holds_the_group_capped_by_max_delay_then_it_goes_down(fleet: Fleet) -> None:
    asked = "2026-12-01T23:30:00+01:00"  # beyond 20:05 + maxDelay 2h
    fleet.kube.create(gpu_pod("train-0", "ml-a", node="ip-10-0-1-1", annotations={"gpu-jobs/keep-up-until": asked}))

    first = fleet.run(EVENING, policy=DRAIN)

    assert fleet.configs()["train"].desired == 3  # still up: not drained
    (skip,) = [s for s in first.skips if s.group == "train"]
    assert skip.reason.startswith("kept up until 2026-12-01T22:05:00+01:00 by ml-a/train-0 (gpu-jobs/keep-up-until)")
    assert "(capped by maxDelay 2h; asked 2026-12-01T23:30:00+01:00)" in skip.reason
    assert "kept up until 2026-12-01T22:05" in text(first)
    (event,) = kept(fleet)
    assert event["message"].startswith("Node group train stays up until Tue 2026-12-01 22:05 CET for this pod")
    assert "capped by the group's maxDelay 2h" in event["message"]
    record = fleet.ports.records.load()["train"]
    assert isinstance(record, Record)
    assert [(k.asked, k.seen) for k in record.kept_up] == [(asked, EVENING)]  # the cap, saved once

    fleet.clear_logs()
    fleet.run(EVENING + timedelta(minutes=55), policy=DRAIN)  # the cap is not recomputed: nothing written
    assert fleet.all_writes() == 0

    fleet.run(EVENING + timedelta(hours=2, minutes=5), policy=DRAIN)  # past the cap: the normal shutdown
    assert fleet.configs()["train"].desired == 0
    assert fleet.kube.get("Pod", "train-0", "ml-a") is None  # drained
    assert len(kept(fleet)) == 1


def test_a_malformed_keep_up_until_is_reported_and_ignored(fleet: Fleet) -> None:
    pod = gpu_pod("train-0", "ml-a", node="ip-10-0-1-1", annotations={"gpu-jobs/keep-up-until": "tomorrow"})
    fleet.kube.create(pod)

    report = fleet.run(EVENING, policy=DRAIN)

    assert fleet.configs()["train"].desired == 0
    (item,) = [i for i in document(report)["items"] if i["kind"] == "node group" and i["name"] == "train"]
    assert 'ignored: ml-a/train-0: gpu-jobs/keep-up-until="tomorrow" is not an RFC 3339 time' in item["why"]
    assert kept(fleet) == []


def test_a_dry_run_shows_the_keep_up_and_writes_nothing(fleet: Fleet) -> None:
    annotations = {"gpu-jobs/keep-up-until": "2026-12-01T21:00:00+01:00"}
    fleet.kube.create(gpu_pod("train-0", "ml-a", node="ip-10-0-1-1", annotations=annotations))

    report = fleet.run(EVENING, policy=DRAIN, dry_run=True)

    assert fleet.all_writes() == 0
    (skip,) = [s for s in report.skips if s.group == "train"]
    assert skip.reason == "kept up until 2026-12-01T21:00:00+01:00 by ml-a/train-0 (gpu-jobs/keep-up-until)"
