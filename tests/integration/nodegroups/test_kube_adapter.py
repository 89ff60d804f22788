"""The Kubernetes adapter against the API emulator: records with optimistic concurrency, the Lease, GPU pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.adapters import kube as kube_adapter
from jobs.core.nodegroups import GroupConfig, Record
from jobs.errors import Conflict, Throttled, Unavailable
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)


@pytest.fixture
def api(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(namespace("gpu-jobs"))
    return kube_adapter.api_client()


def test_records_round_trip_and_a_stale_writer_gets_a_conflict(api: object) -> None:
    first = kube_adapter.ConfigMapRecords(api, "gpu-jobs")  # type: ignore[arg-type]
    second = kube_adapter.ConfigMapRecords(api, "gpu-jobs")  # type: ignore[arg-type]
    record = Record(GroupConfig(1, 3, 8, autoscaling=True, autoscaler_tags={"k": "v"}), "stopping", NOW)
    first.save("train", record)
    assert second.load() == {"train": record}
    first.save("train", Record(record.config, "down", NOW))
    with pytest.raises(Conflict):
        second.save("train", Record(record.config, "up", NOW))  # based on the version it loaded: stale
    assert first.load()["train"].phase == "down"


def test_lease_is_exclusive_until_it_expires_or_is_released(api: object) -> None:
    one = kube_adapter.LeaseLock(api, "gpu-jobs", "gpu-jobs-nodegroups")  # type: ignore[arg-type]
    two = kube_adapter.LeaseLock(api, "gpu-jobs", "gpu-jobs-nodegroups")  # type: ignore[arg-type]
    assert one.acquire("cron-run", NOW, timedelta(minutes=30)) is None
    assert two.acquire("manual-run", NOW + timedelta(minutes=5), timedelta(minutes=30)) == "cron-run"
    assert two.acquire("manual-run", NOW + timedelta(minutes=31), timedelta(minutes=30)) is None  # expired
    two.release("manual-run")
    assert one.acquire("cron-run", NOW + timedelta(minutes=32), timedelta(minutes=30)) is None


def test_gpu_pods_are_the_unfinished_ones_requesting_gpus(kube: KubeHandle, api: object) -> None:
    kube.create(gpu_node("n1"))
    kube.create(gpu_pod("train", "a", node="n1", gpus=2))
    kube.create(gpu_pod("keep", "a", node="n1", annotations={"gpu-jobs/keep-alive": "true"}))
    kube.create(gpu_pod("mig", "b", node="n1", resource="nvidia.com/mig-1g.10gb"))
    kube.create(gpu_pod("cpu", "b", node="n1", gpus=0))
    kube.create(gpu_pod("done", "b", node="n1", phase="Succeeded"))
    pods = {(p.namespace, p.name): (p.gpus, p.evictable) for p in kube_adapter.KubeCluster(api).gpu_pods()}  # type: ignore[arg-type]
    assert pods == {("a", "train"): (2, True), ("a", "keep"): (1, False), ("b", "mig"): (1, True)}


@pytest.mark.parametrize(("fault", "error"), [("throttle", Throttled), ("server_error", Unavailable)])
def test_faults_are_translated(kube: KubeHandle, api: object, fault: str, error: type[Exception]) -> None:
    kube.inject("list nodes", fault)  # type: ignore[arg-type]
    with pytest.raises(error):
        kube_adapter.KubeCluster(api).nodes()  # type: ignore[arg-type]
