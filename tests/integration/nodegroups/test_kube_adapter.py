"""The Kubernetes adapter against the API emulator: records with optimistic concurrency, the Lease, GPU pods."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.lease import LeaseLock
from jobs.adapters.kube.records import ConfigMapRecords, record_name
from jobs.adapters.kube.workloads import KubeCluster
from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity, RecordError
from jobs.core.group_record import Record
from jobs.errors import Conflict, Throttled, Unavailable
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


@pytest.fixture
def api(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(namespace("gpu-jobs"))
    return api_client()


TRAIN = GroupIdentity.of("ml-prod", "aws", {"region": "eu-west-1", "cluster": "ml-prod", "nodegroup": "gpu-a100"})
OTHER = GroupIdentity.of("ml-prod", "aws", {"region": "eu-west-1", "cluster": "ml-prod", "nodegroup": "gpu-h100"})


def test_records_round_trip_and_a_stale_writer_gets_a_conflict(api: object) -> None:
    first = ConfigMapRecords(api, "gpu-jobs", {"train": TRAIN})  # type: ignore[arg-type]
    second = ConfigMapRecords(api, "gpu-jobs", {"train": TRAIN})  # type: ignore[arg-type]
    record = Record(GroupConfig(1, 3, 8, autoscaling=True, autoscaler_tags={"k": "v"}), "stopping", NOW)
    first.save("train", record)
    assert second.load() == {"train": replace(record, describes=TRAIN)}
    first.save("train", Record(record.config, "down", NOW))
    with pytest.raises(Conflict):
        second.save("train", Record(record.config, "up", NOW))  # based on the version it loaded: stale
    loaded = first.load()["train"]
    assert isinstance(loaded, Record)
    assert loaded.phase == "down"


def test_a_record_follows_its_group_not_its_name(api: object, kube: KubeHandle) -> None:
    record = Record(GroupConfig(1, 3, 8), "down", NOW)
    ConfigMapRecords(api, "gpu-jobs", {"train": TRAIN}).save("train", record)  # type: ignore[arg-type]
    # Renamed in the policy, same group in the cloud: the record is found.
    renamed = ConfigMapRecords(api, "gpu-jobs", {"training": TRAIN}).load()  # type: ignore[arg-type]
    assert renamed == {"training": replace(record, describes=TRAIN)}
    # The old name pointed at another group: that group has no record (it never gets the old group's sizes).
    assert ConfigMapRecords(api, "gpu-jobs", {"train": OTHER}).load() == {}  # type: ignore[arg-type]
    # A record edited by hand to describe another group is refused, not applied.
    (cm,) = kube.list("ConfigMap", "gpu-jobs")
    data = json.loads(cm["data"]["record.json"])
    data["describes"] = OTHER.to_json()
    cm["data"]["record.json"] = json.dumps(data)
    kube.put(cm)
    (problem,) = ConfigMapRecords(api, "gpu-jobs", {"train": TRAIN}).load().values()  # type: ignore[arg-type]
    assert isinstance(problem, RecordError)
    assert "describes aws eu-west-1/ml-prod/gpu-h100 in cluster ml-prod, not aws eu-west-1/ml-prod/gpu-a100" in str(
        problem
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "is not JSON"),
        ('{"schemaVersion": 1}', "schemaVersion 1, expected 2"),
        ('{"schemaVersion": 2, "phase": "gone"}', 'phase "gone" is not stopping, down or up'),
        (
            '{"schemaVersion": 2, "phase": "down", "recordedAt": "2026-12-01T20:00:00",'
            ' "config": {"min": 1, "desired": 1, "max": 2}}',
            'recordedAt "2026-12-01T20:00:00" has no UTC offset',
        ),
        ('{"schemaVersion": 2, "phase": "down", "config": {}}', "malformed: KeyError"),
    ],
)
def test_a_malformed_record_is_its_groups_problem_only(api: object, kube: KubeHandle, text: str, problem: str) -> None:
    store = ConfigMapRecords(api, "gpu-jobs", {"train": TRAIN, "other": OTHER})  # type: ignore[arg-type]
    store.save("other", Record(GroupConfig(1, 3, 8), "down", NOW))
    store.save("train", Record(GroupConfig(1, 3, 8), "down", NOW))
    cm = next(c for c in kube.list("ConfigMap", "gpu-jobs") if c["metadata"]["name"] == record_name(TRAIN))
    cm["data"]["record.json"] = text
    kube.put(cm)
    loaded = store.load()
    assert isinstance(loaded["train"], RecordError)
    assert problem in str(loaded["train"])
    assert isinstance(loaded["other"], Record)


def test_lease_is_exclusive_while_renewed_and_taken_over_two_renewals_late(api: object) -> None:
    one = LeaseLock(api, "gpu-jobs", "gpu-jobs-nodegroups")  # type: ignore[arg-type]
    two = LeaseLock(api, "gpu-jobs", "gpu-jobs-nodegroups")  # type: ignore[arg-type]
    # 30 minutes: renewed every 10; a holder 20 minutes past its last renewal is dead.
    assert one.acquire("cron-run", NOW, timedelta(minutes=30)) is None
    held = two.acquire("manual-run", NOW + timedelta(minutes=5), timedelta(minutes=30))
    assert held is not None
    assert (held.name, held.overdue(NOW + timedelta(minutes=5))) == ("cron-run", None)  # alive: renews at 10
    assert held.overdue(NOW + timedelta(minutes=15)) == timedelta(minutes=5)  # one renewal missed
    assert one.renew("cron-run", NOW + timedelta(minutes=10), timedelta(minutes=30))
    assert two.acquire("manual-run", NOW + timedelta(minutes=29), timedelta(minutes=30)) is not None
    assert two.acquire("manual-run", NOW + timedelta(minutes=30), timedelta(minutes=30)) is None  # taken over
    assert not one.renew("cron-run", NOW + timedelta(minutes=31), timedelta(minutes=30))  # it knows it lost it
    two.release("manual-run")
    assert one.acquire("cron-run", NOW + timedelta(minutes=32), timedelta(minutes=30)) is None


def test_gpu_pods_are_the_unfinished_ones_requesting_gpus(kube: KubeHandle, api: object) -> None:
    kube.create(gpu_node("n1"))
    kube.create(gpu_pod("train", "a", node="n1", gpus=2))
    kube.create(gpu_pod("keep", "a", node="n1", annotations={"gpu-jobs/keep-alive": "true"}))
    kube.create(gpu_pod("mig", "b", node="n1", resource="nvidia.com/mig-1g.10gb"))
    kube.create(gpu_pod("cpu", "b", node="n1", gpus=0))
    kube.create(gpu_pod("done", "b", node="n1", phase="Succeeded"))
    pods = {(p.namespace, p.name): (p.gpus, p.evictable) for p in KubeCluster(api).gpu_pods()}  # type: ignore[arg-type]
    assert pods == {("a", "train"): (2, True), ("a", "keep"): (1, False), ("b", "mig"): (1, True)}


@pytest.mark.parametrize(("fault", "error"), [("throttle", Throttled), ("server_error", Unavailable)])
def test_faults_are_translated(kube: KubeHandle, api: object, fault: str, error: type[Exception]) -> None:
    kube.inject("list nodes", fault)  # type: ignore[arg-type]
    with pytest.raises(error):
        KubeCluster(api).nodes()  # type: ignore[arg-type]
