"""The Compute Engine ``Instances`` adapter of the sweep against the GCP emulator, through the real compute_v1
REST clients: GPU detection by the cloud's own data, labels with their fingerprint, stop and delete, group members,
faults, and the calls made against the permissions declared."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jobs.adapters.gcp.instances import LIST_FILTER, PERMISSIONS, GcpInstances
from jobs.adapters.settings import AdapterSettings
from jobs.core.untagged import GpuInstance
from jobs.errors import Conflict, Denied, Invalid, NotFound, Throttled, Unavailable
from jobs.labels import SWEEP_MARK_TAG
from jobs.retry import Backoff
from tests.emulators.base import FaultKind
from tests.emulators.gcp import GcpEmulator
from tests.emulators.gcp.compute import rate_limit_403

pytestmark = pytest.mark.integration

PROJECT = "proj"
ZONE_A, ZONE_B = "us-central1-a", "europe-west4-b"
MARK = SWEEP_MARK_TAG  # already a valid GCP label key

#: The IAM permission Google documents for each Compute method the adapter may call.
PERMISSION_OF = {
    "instances.aggregatedList": "compute.instances.list",
    "machineTypes.get": "compute.machineTypes.get",
    "instances.setLabels": "compute.instances.setLabels",
    "instances.stop": "compute.instances.stop",
    "instances.delete": "compute.instances.delete",
}


def _settings(url: str, **overrides: float) -> AdapterSettings:
    values: dict[str, Any] = {"poll_interval_s": 0.01, "operation_timeout_s": 5.0, "request_timeout_s": 2.0}
    values.update(overrides)
    return AdapterSettings(gcp_endpoint=url, emulator_credentials=True, **values)


@pytest.fixture
def adapter(gcp: GcpEmulator) -> GcpInstances:
    return GcpInstances(_settings(gcp.url))


def _seed(gcp: GcpEmulator) -> None:
    # Attached GPUs (N1 + guestAccelerators), built-in GPUs (A2, A3, G2: none attached), and CPU machines.
    gcp.add_instance(
        PROJECT, ZONE_A, "n1-t4", machine_type="n1-standard-8", accelerators=[("nvidia-tesla-t4", 2)], labels={}
    )
    gcp.add_instance(PROJECT, ZONE_A, "a2", machine_type="a2-highgpu-1g", accelerators=[], labels={"owner": "cv"})
    gcp.add_instance(PROJECT, ZONE_B, "a3", machine_type="a3-highgpu-8g", accelerators=[])
    gcp.add_instance(PROJECT, ZONE_B, "g2-off", machine_type="g2-standard-4", accelerators=[], status="TERMINATED")
    gcp.add_instance(PROJECT, ZONE_A, "cpu", machine_type="n1-standard-8", accelerators=[])
    gcp.add_instance(PROJECT, ZONE_B, "cpu-2", machine_type="n2-standard-4", accelerators=[])
    gcp.add_instance(PROJECT, ZONE_A, "booting", machine_type="a2-highgpu-1g", accelerators=[], status="STAGING")
    gcp.add_instance("other", ZONE_A, "not-this-project", machine_type="a2-highgpu-1g", accelerators=[])


def _by_name(found: list[GpuInstance]) -> dict[str, GpuInstance]:
    return {i.name: i for i in found}


# ----- listing ------------------------------------------------------------------------------------------------


def test_gpu_instances_by_attached_and_built_in_gpus(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)

    found = _by_name(adapter.gpu_instances(PROJECT))

    assert {n: (i.type, i.gpus, i.state) for n, i in found.items()} == {
        "n1-t4": ("n1-standard-8", 2, "running"),
        "a2": ("a2-highgpu-1g", 1, "running"),
        "a3": ("a3-highgpu-8g", 8, "running"),
        "g2-off": ("g2-standard-4", 1, "stopped"),
    }  # CPU machines left out; STAGING is a transition, judged by the next run
    a2 = found["a2"]
    assert (a2.cloud, a2.account, a2.zone) == ("gcp", PROJECT, ZONE_A)
    assert a2.id == f"projects/{PROJECT}/zones/{ZONE_A}/instances/a2"
    assert a2.tags == {"owner": "cv"}
    assert a2.version
    assert a2.version != found["n1-t4"].version
    assert a2.group is None


def test_one_filtered_list_and_one_machine_type_read_per_type(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    gcp.add_instance(PROJECT, ZONE_B, "a2-b", machine_type="a2-highgpu-1g", accelerators=[])

    adapter.gpu_instances(PROJECT)
    adapter.gpu_instances(PROJECT)  # the machine types are cached for the run

    lists = [r for r in gcp.log.all() if r.operation == "instances.aggregatedList"]
    assert len(lists) == 2
    assert all(f"filter={LIST_FILTER}" in r.query for r in lists)
    reads = sorted(r.path.rsplit("/", 1)[-1] for r in gcp.log.all() if r.operation == "machineTypes.get")
    # the instances with guestAccelerators need no read; each other type is read once, in one zone
    assert reads == ["a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-4", "n1-standard-8", "n2-standard-4"]


def test_every_page_is_read(gcp: GcpEmulator) -> None:
    for n in range(7):
        gcp.add_instance(PROJECT, ZONE_A, f"gpu-{n}", machine_type="n1-standard-4", accelerators=[("nvidia-l4", 1)])
    adapter = GcpInstances(_settings(gcp.url))
    from jobs.adapters.gcp import instances as module

    page, module._PAGE = module._PAGE, 3  # a small page so the listing takes several
    try:
        found = adapter.gpu_instances(PROJECT)
    finally:
        module._PAGE = page

    assert len(found) == 7
    assert gcp.log.count("instances.aggregatedList") == 3


def test_an_unknown_machine_type_counts_as_no_gpus(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    gcp.add_instance(PROJECT, ZONE_A, "custom", machine_type="custom-4-5120", accelerators=[])
    gcp.add_instance(PROJECT, ZONE_A, "custom-t4", machine_type="custom-4-5120", accelerators=[("nvidia-tesla-t4", 1)])

    found = _by_name(adapter.gpu_instances(PROJECT))

    assert sorted(found) == ["custom-t4"]  # attached GPUs count on any type


def test_mig_and_gke_members_are_reported_as_a_group(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    igm = "projects/123/zones/us-central1-a/instanceGroupManagers"
    gcp.add_instance(PROJECT, ZONE_A, "batch-x1", metadata={"created-by": f"{igm}/batch"})
    gcp.add_instance(
        PROJECT,
        ZONE_A,
        "gke-ml-l4-1",
        labels={"goog-gke-node": "", "goog-k8s-cluster-name": "ml", "goog-k8s-node-pool-name": "l4"},
        metadata={"created-by": f"{igm}/gke-ml-l4-grp"},
    )
    gcp.add_instance(PROJECT, ZONE_A, "gke-bare", labels={"goog-gke-node": ""})
    gcp.add_instance(PROJECT, ZONE_A, "plain", metadata={"startup-script": "echo hi"})

    found = _by_name(adapter.gpu_instances(PROJECT))

    assert {n: i.group for n, i in found.items()} == {
        "batch-x1": "managed instance group batch",
        "gke-ml-l4-1": "GKE cluster ml node pool l4 (managed instance group gke-ml-l4-grp)",
        "gke-bare": "GKE cluster (unnamed)",
        "plain": None,
    }


def test_an_unreachable_zone_fails_the_list(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    gcp.compute.unreachable_zones.add("asia-east1-a")

    with pytest.raises(Unavailable) as caught:
        adapter.gpu_instances(PROJECT)

    assert "zones/asia-east1-a" in str(caught.value)
    assert caught.value.retryable


# ----- labels -------------------------------------------------------------------------------------------------


def _instance(adapter: GcpInstances, name: str) -> GpuInstance:
    return _by_name(adapter.gpu_instances(PROJECT))[name]


def _settle(gcp: GcpEmulator) -> None:
    time.sleep((gcp.operation_seconds or 0) + 0.05)


def test_labels_are_set_and_removed_with_the_fingerprint(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    a2 = _instance(adapter, "a2")

    adapter.set_tags(a2, {MARK: "stop-after-20261203t1400z"})
    _settle(gcp)
    marked = _instance(adapter, "a2")
    assert marked.tags == {"owner": "cv", MARK: "stop-after-20261203t1400z"}  # the other labels are kept
    assert marked.version != a2.version

    adapter.set_tags(marked, {MARK: None, "project": "vision"})
    _settle(gcp)

    assert _instance(adapter, "a2").tags == {"owner": "cv", "project": "vision"}


def test_a_stale_fingerprint_is_a_conflict(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    a2 = _instance(adapter, "a2")
    adapter.set_tags(a2, {"project": "someone"})  # someone else labels it meanwhile
    _settle(gcp)

    with pytest.raises(Conflict) as caught:
        adapter.set_tags(a2, {MARK: "stop-after-20261203t1400z"})

    assert caught.value.status == 412
    assert "fingerprint" in str(caught.value)  # Compute's conditionNotMet
    assert _instance(adapter, "a2").tags == {"owner": "cv", "project": "someone"}


def test_a_lost_answer_is_resent_as_the_same_request(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    a2 = _instance(adapter, "a2")
    gcp.faults.inject("instances.setLabels", "lost")  # carried out, then the answer is lost

    Backoff(deadline_s=5, base_s=0.01).call(lambda: adapter.set_tags(a2, {MARK: "stop-after-20261203t1400z"}))
    _settle(gcp)

    assert gcp.log.count("instances.setLabels") == 2
    assert len(gcp.compute.operations) == 1  # the resend was recognised by its requestId, not refused as stale
    assert _instance(adapter, "a2").tags[MARK] == "stop-after-20261203t1400z"


def test_an_invalid_label_is_invalid(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)

    with pytest.raises(Invalid):
        adapter.set_tags(_instance(adapter, "a2"), {"Owner": "Not Valid"})


# ----- stop and delete --------------------------------------------------------------------------------------------


def test_stop_returns_once_accepted_and_the_instance_stops(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    gcp.operation_seconds = 0.3
    a2 = _instance(adapter, "a2")

    adapter.act(a2, "stop")

    live = gcp.compute.instances[(PROJECT, ZONE_A, "a2")]
    assert live.status == "STOPPING"  # accepted; not waited for
    assert gcp.log.count("zoneOperations.get") == 0
    time.sleep(0.35)
    assert _instance(adapter, "a2").state == "stopped"


def test_terminate_deletes_the_instance(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)

    adapter.act(_instance(adapter, "a3"), "terminate")
    _settle(gcp)

    assert "a3" not in _by_name(adapter.gpu_instances(PROJECT))
    assert gcp.instance(PROJECT, ZONE_B, "a3") is None


def test_an_instance_gone_meanwhile_is_not_found(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    a3 = _instance(adapter, "a3")
    adapter.act(a3, "terminate")
    _settle(gcp)

    with pytest.raises(NotFound):
        adapter.act(a3, "stop")
    with pytest.raises(NotFound):
        adapter.set_tags(a3, {MARK: "stop-after-20261203t1400z"})


# ----- faults -------------------------------------------------------------------------------------------------

FAULTS: list[tuple[FaultKind, type[Exception]]] = [
    ("throttle", Throttled),  # a 429, where an API sends one
    ("server_error", Unavailable),
    ("timeout", Unavailable),
    ("busy", Invalid),  # 400 resourceNotReady: refused, not retried
]
OPERATIONS = ["instances.aggregatedList", "machineTypes.get", "instances.setLabels", "instances.stop"]


def _call(adapter: GcpInstances, operation: str, a2: GpuInstance) -> None:
    if operation in ("instances.aggregatedList", "machineTypes.get"):
        adapter.gpu_instances(PROJECT)
    elif operation == "instances.setLabels":
        adapter.set_tags(a2, {MARK: "stop-after-20261203t1400z"})
    else:
        adapter.act(a2, "stop")


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(("kind", "raised"), FAULTS, ids=[k for k, _ in FAULTS])
def test_faults_are_translated(gcp: GcpEmulator, operation: str, kind: FaultKind, raised: type[Exception]) -> None:
    _seed(gcp)
    gcp.timeout_hold_s = 0.2
    a2 = _instance(GcpInstances(_settings(gcp.url)), "a2")
    adapter = GcpInstances(_settings(gcp.url))  # a fresh one: no machine type cached
    gcp.faults.inject(operation, kind)

    with pytest.raises(raised) as caught:
        _call(adapter, operation, a2)

    assert caught.value.operation == operation  # type: ignore[attr-defined]
    _call(adapter, operation, a2)  # once only: the next call goes through


@pytest.mark.parametrize("operation", [*OPERATIONS, "instances.delete"])
def test_a_rate_limit_403_is_throttled_and_retried(gcp: GcpEmulator, operation: str) -> None:
    _seed(gcp)
    a2 = _instance(GcpInstances(_settings(gcp.url)), "a2")
    adapter = GcpInstances(_settings(gcp.url))
    gcp.log.clear()
    gcp.inject_error(operation, rate_limit_403(), times=2)

    with pytest.raises(Throttled) as caught:
        adapter.act(a2, "terminate") if operation == "instances.delete" else _call(adapter, operation, a2)
    assert caught.value.code == "rateLimitExceeded"
    assert caught.value.status == 403

    retry = Backoff(deadline_s=5, base_s=0.01)
    retry.call(
        lambda: adapter.act(a2, "terminate") if operation == "instances.delete" else _call(adapter, operation, a2)
    )
    # twice refused, then through (the listing reads each of its five machine types once it gets through)
    assert gcp.log.count(operation) == (2 + 5 if operation == "machineTypes.get" else 3)


def test_a_rate_limit_403_without_its_reason_is_still_throttled_by_its_words(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.inject_error("instances.aggregatedList", rate_limit_403(reason=""), times=1)
    with pytest.raises(Throttled):
        GcpInstances(_settings(gcp.url)).gpu_instances(PROJECT)


def test_a_client_timeout_is_unavailable(gcp: GcpEmulator) -> None:
    _seed(gcp)
    gcp.timeout_hold_s = 1.0
    gcp.faults.inject("instances.aggregatedList", "timeout")

    with pytest.raises(Unavailable) as caught:
        GcpInstances(_settings(gcp.url, request_timeout_s=0.2)).gpu_instances(PROJECT)

    assert caught.value.retryable


def test_a_permission_refusal_stays_denied(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    a2 = _instance(adapter, "a2")
    gcp.inject_permission_denied("instances.stop", "compute.instances.stop")

    with pytest.raises(Denied) as caught:
        adapter.act(a2, "stop")

    assert not caught.value.retryable
    assert gcp.compute.instances[(PROJECT, ZONE_A, "a2")].status == "RUNNING"


# ----- permissions --------------------------------------------------------------------------------------------


def test_the_calls_made_are_exactly_the_permissions_declared(gcp: GcpEmulator, adapter: GcpInstances) -> None:
    _seed(gcp)
    found = _by_name(adapter.gpu_instances(PROJECT))
    adapter.set_tags(found["a2"], {MARK: "stop-after-20261203t1400z"})
    adapter.act(found["a3"], "stop")
    adapter.act(found["n1-t4"], "terminate")

    called = {PERMISSION_OF[op] for op in gcp.log.operations()}  # KeyError: a call nobody declared

    assert called == set(PERMISSIONS.actions)
