"""``KubePods`` (jobs/adapters/kube/pods.py) against the Kubernetes emulator through the one client: the GPU pod
list, a fresh read, uid-guarded annotations and graceful deletes, scaling a Deployment (through its ReplicaSet) or
StatefulSet to zero with the replicas recorded, the refusals for other owners, Events on the pod, and faults."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs import errors
from jobs.adapters.kube import client, owners
from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.pods import RBAC, KubePods
from jobs.core.idle_pods import Owner, PodInfo
from jobs.events import ObjectRef
from jobs.labels import IDLE_SINCE_ANNOTATION, SCALED_FROM_ANNOTATION
from jobs.sweep.ports import Pods
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle
from tests.fakes import RecordingLog

pytestmark = pytest.mark.integration

STARTED = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)  # Tue 2026-12-01 21:00 Europe/Berlin


@pytest.fixture
def pods(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> KubePods:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(seed.namespace("ml"))
    kube.create(seed.gpu_node("gpu-1"))
    kube.create(seed.gpu_node("gpu-2"))
    return KubePods(api_client(timeout_s=2.0))


def _conforms(adapter: KubePods) -> Pods:
    return adapter  # mypy: KubePods implements the sweep's Pods port exactly


def events(pods: KubePods, log: RecordingLog | None = None) -> KubeEvents:
    """The sweep's Events, through the same client as its pods (as the command wires them)."""
    return KubeEvents(pods.api, "sweep", log or RecordingLog())


def pod_ref(info: PodInfo) -> ObjectRef:
    return ObjectRef("Pod", info.name, info.namespace, info.uid)


def _info(kube: KubeHandle, name: str, namespace: str = "ml") -> PodInfo:
    found = KubePods(api_client(timeout_s=2.0)).pod(namespace, name)
    assert found is not None
    return found


def test_one_paginated_list_of_unfinished_gpu_pods_parsed_once(
    pods: KubePods, kube: KubeHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "PAGE", 2)
    deployment = kube.seed_deployment("llm", "ml", nodes=("gpu-1", "gpu-2"), gpus=2, started=STARTED)
    kube.create(seed.gpu_pod("mig", "ml", node="gpu-1", resource="nvidia.com/mig-1g.10gb", gpus=3, started=STARTED))
    kube.create(seed.gpu_pod("cpu", "ml", node="gpu-1", gpus=0))
    kube.create(seed.gpu_pod("done", "ml", node="gpu-1", phase="Succeeded"))
    kube.create(seed.gpu_pod("queued", "ml", phase="Pending", annotations={IDLE_SINCE_ANNOTATION: "x"}))
    kube.log.clear()

    found = {p.name: p for p in _conforms(pods).gpu_pods()}

    assert sorted(found) == sorted([*(p["metadata"]["name"] for p in deployment.pods), "mig", "queued"])
    lists = [r for r in kube.log.all() if r.operation == "list pods"]
    assert len(lists) == 3  # 6 unfinished pods, 2 per page: one paginated list, nothing else
    assert all("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in r.query for r in lists)
    assert kube.log.operations() == ["list pods"] * 3
    replica = found[deployment.pods[0]["metadata"]["name"]]
    assert replica.gpus == 2
    assert replica.resources == ("nvidia.com/gpu",)
    assert replica.phase == "Running"
    assert replica.started == STARTED
    assert replica.node == "gpu-1"
    assert not replica.deleting
    assert replica.uid == deployment.pods[0]["metadata"]["uid"]
    rs = deployment.replica_set
    assert rs is not None
    assert replica.owner == Owner("ReplicaSet", rs["metadata"]["name"], rs["metadata"]["uid"])
    assert (found["mig"].gpus, found["mig"].resources, found["mig"].owner) == (3, ("nvidia.com/mig-1g.10gb",), None)
    assert (found["queued"].phase, found["queued"].node, found["queued"].started) == ("Pending", None, None)
    assert found["queued"].annotations == {IDLE_SINCE_ANNOTATION: "x"}


def test_a_terminating_pod_is_listed_as_deleting(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", grace_s=600))
    pods.delete(_info(kube, "p"))

    (listed,) = pods.gpu_pods()
    assert listed.deleting
    assert listed.phase == "Running"  # still running out its grace period


def test_pod_reads_the_pod_now_or_none(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", gpus=1))
    assert pods.pod("ml", "p") == _info(kube, "p")
    assert pods.pod("ml", "ghost") is None


def test_annotate_sets_and_removes_and_only_on_the_same_pod(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", annotations={"team": "a", "gpu-jobs/idle-reason": "idle"}))
    before = _info(kube, "p")

    pods.annotate(before, {IDLE_SINCE_ANNOTATION: "2026-12-01T21:00:00Z", "gpu-jobs/idle-reason": None})
    assert kube.get("Pod", "p", "ml")["metadata"]["annotations"] == {  # type: ignore[index]
        "team": "a",
        IDLE_SINCE_ANNOTATION: "2026-12-01T21:00:00Z",
    }
    pods.annotate(before, {"absent": None})  # removing what is not there is fine

    # The pod is replaced by a same-named one: the planned write must not land on it.
    kube.cluster.delete("Pod", "p", "ml")
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1"))
    with pytest.raises(errors.Conflict) as caught:
        pods.annotate(before, {IDLE_SINCE_ANNOTATION: "later"})
    assert "no longer the pod that was judged" in str(caught.value)
    assert kube.get("Pod", "p", "ml")["metadata"]["annotations"] == {}  # type: ignore[index]

    kube.cluster.delete("Pod", "p", "ml")
    with pytest.raises(errors.NotFound):
        pods.annotate(before, {IDLE_SINCE_ANNOTATION: "later"})


def test_delete_is_graceful_guarded_by_uid_and_idempotent(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", grace_s=120))
    info = _info(kube, "p")

    pods.delete(info)
    terminating = kube.get("Pod", "p", "ml")
    assert terminating is not None
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 120  # the pod's own grace period
    sent = json.loads(next(r for r in kube.log.all() if r.operation == "delete pods").body)
    assert sent == {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": info.uid}}
    pods.delete(info)  # again (a resend): accepted, the deadline stands
    assert kube.get("Pod", "p", "ml")["metadata"]["deletionTimestamp"] == terminating["metadata"]["deletionTimestamp"]  # type: ignore[index]

    kube.cluster.delete("Pod", "p", "ml")
    pods.delete(info)  # gone: what a delete wanted
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1"))
    with pytest.raises(errors.Conflict):
        pods.delete(info)  # a same-named pod (another uid) is left alone
    assert not kube.get("Pod", "p", "ml")["metadata"].get("deletionTimestamp")  # type: ignore[index]


def test_scale_owner_scales_a_deployment_through_its_replicaset_and_records_the_replicas(
    pods: KubePods, kube: KubeHandle
) -> None:
    deployment = kube.seed_deployment("llm", "ml", nodes=("gpu-1", "gpu-2"), replicas=3, grace_s=600)
    pod = _info(kube, deployment.pods[0]["metadata"]["name"])
    kube.log.clear()

    assert pods.scale_owner(pod) == "Deployment ml/llm from 3"

    stored = kube.get("Deployment", "llm", "ml", "apps/v1")
    assert stored is not None
    assert stored["spec"]["replicas"] == 0
    assert stored["metadata"]["annotations"][SCALED_FROM_ANNOTATION] == "3"
    assert [r.operation for r in kube.log.writes()] == ["patch deployments", "patch deployments/scale"]
    # The controllers follow: the ReplicaSet to 0, its pods Terminating for their grace period.
    rs = kube.get("ReplicaSet", deployment.replica_set["metadata"]["name"], "ml")  # type: ignore[index]
    assert rs is not None
    assert rs["spec"]["replicas"] == 0
    assert all(p["metadata"].get("deletionTimestamp") for p in kube.list("Pod", "ml"))
    assert {p.name for p in pods.gpu_pods() if p.deleting} == {p["metadata"]["name"] for p in deployment.pods}

    kube.log.clear()
    assert pods.scale_owner(pod) == "Deployment ml/llm already at 0"  # a second run changes nothing
    assert kube.log.writes() == []
    assert kube.get("Deployment", "llm", "ml", "apps/v1")["metadata"]["annotations"][SCALED_FROM_ANNOTATION] == "3"  # type: ignore[index]


def test_scale_owner_scales_a_statefulset(pods: KubePods, kube: KubeHandle) -> None:
    kube.seed_statefulset("db", "ml", nodes=("gpu-1",), replicas=2, grace_s=600)

    assert pods.scale_owner(_info(kube, "db-1")) == "StatefulSet ml/db from 2"

    stored = kube.get("StatefulSet", "db", "ml", "apps/v1")
    assert stored is not None
    assert (stored["spec"]["replicas"], stored["metadata"]["annotations"][SCALED_FROM_ANNOTATION]) == (0, "2")
    assert pods.scale_owner(_info(kube, "db-0")) == "StatefulSet ml/db already at 0"


def test_scale_owner_refuses_jobs_bare_pods_and_a_replicaset_without_deployment(
    pods: KubePods, kube: KubeHandle
) -> None:
    job = kube.seed_job("train", "ml", nodes=("gpu-1",))
    kube.create(seed.gpu_pod("bare", "ml", node="gpu-1"))
    kube.log.clear()

    with pytest.raises(errors.Invalid) as caught:
        pods.scale_owner(_info(kube, job.pods[0]["metadata"]["name"]))
    assert str(caught.value) == "cannot scale-owner a pod owned by Job: use action delete or exempt it"
    with pytest.raises(errors.Invalid) as caught:
        pods.scale_owner(_info(kube, "bare"))
    assert "has no controller (a bare pod)" in str(caught.value)
    assert kube.log.writes() == []

    # A ReplicaSet nobody's Deployment owns: not scaled (the brief scales Deployments and StatefulSets only).
    deployment = kube.seed_deployment("web", "ml", nodes=("gpu-1",))
    rs = kube.get("ReplicaSet", deployment.replica_set["metadata"]["name"], "ml")  # type: ignore[index]
    assert rs is not None
    del rs["metadata"]["ownerReferences"]
    kube.cluster.put({**rs, "metadata": {**rs["metadata"], "ownerReferences": []}})
    with pytest.raises(errors.Invalid) as caught:
        pods.scale_owner(_info(kube, deployment.pods[0]["metadata"]["name"]))
    assert "is owned by nothing, not a Deployment" in str(caught.value)


def test_scale_owner_leaves_a_replaced_owner_alone(pods: KubePods, kube: KubeHandle) -> None:
    kube.seed_statefulset("db", "ml", nodes=("gpu-1",), replicas=1)
    planned = _info(kube, "db-0")
    # The StatefulSet was deleted and created again under the same name (another uid).
    kube.cluster.delete("StatefulSet", "db", "ml")
    kube.seed_statefulset("db", "ml", nodes=("gpu-2",), replicas=0)

    with pytest.raises(errors.Conflict) as caught:
        pods.scale_owner(planned)
    assert caught.value.reason == "UIDMismatch"
    assert SCALED_FROM_ANNOTATION not in (kube.get("StatefulSet", "db", "ml")["metadata"].get("annotations") or {})  # type: ignore[index]


def test_emit_puts_an_event_on_the_pod_with_its_uid(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1"))
    info = _info(kube, "p")

    events(pods).emit(pod_ref(info), "IdleGpu", "idle for 2h: deleted after 30m unless busy", "Warning")

    (event,) = kube.list("Event", "ml")
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ml",
        "uid": info.uid,
    }
    assert (event["type"], event["reason"], event["source"]) == ("Warning", "IdleGpu", {"component": "sweep"})
    assert kube.log.operations().count("list pods") == 0  # the uid came with the pod: no lookup


@pytest.mark.parametrize("fault", ["throttle", "busy", "server_error"])
def test_a_failed_event_is_logged_never_raised(pods: KubePods, kube: KubeHandle, fault: Any) -> None:
    """An Event is a courtesy: the write it tells of is done, so its failure is a log line, not the job's error."""
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1"))
    info = _info(kube, "p")
    log = RecordingLog()
    kube.inject("create events", fault)

    events(pods, log).emit(pod_ref(info), "IdleGpu", "idle")

    ((event, fields),) = log.events
    assert event == "event.failed"
    assert (fields["kind"], fields["namespace"], fields["name"], fields["reason"]) == ("Pod", "ml", "p", "IdleGpu")
    assert "create events" in fields["error"]


@pytest.mark.parametrize(
    ("fault", "raised"),
    [("throttle", errors.Throttled), ("busy", errors.Throttled), ("server_error", errors.Unavailable)],
)
def test_faults_on_each_call_are_the_projects_errors(
    pods: KubePods, kube: KubeHandle, fault: Any, raised: type[errors.CloudError]
) -> None:
    kube.seed_deployment("llm", "ml", nodes=("gpu-1",))
    info = pods.gpu_pods()[0]
    calls: dict[str, Callable[[], object]] = {
        "list pods": pods.gpu_pods,
        "get pods": lambda: pods.pod("ml", info.name),
        "patch pods": lambda: pods.annotate(info, {IDLE_SINCE_ANNOTATION: "now"}),
        "get replicasets": lambda: pods.scale_owner(info),
        "patch deployments/scale": lambda: pods.scale_owner(info),
        "delete pods": lambda: pods.delete(info),
    }
    for operation, call in calls.items():
        kube.inject(operation, fault)
        with pytest.raises(raised) as caught:
            call()
        assert caught.value.operation == operation
        assert caught.value.retryable
    # The scale fault came after the record: the replicas are kept, the Deployment still up; a retry finishes it.
    stored = kube.get("Deployment", "llm", "ml", "apps/v1")
    assert stored is not None
    assert (stored["spec"]["replicas"], stored["metadata"]["annotations"][SCALED_FROM_ANNOTATION]) == (1, "1")
    assert pods.scale_owner(info) == "Deployment ml/llm from 1"


def test_a_timeout_is_unavailable(pods: KubePods, kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1"))
    kube.inject("get pods", "timeout")
    with pytest.raises(errors.Unavailable):
        pods.pod("ml", "p")


def test_a_lost_delete_answer_then_a_resend_is_safe(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", grace_s=600))
    info = _info(kube, "p")
    kube.inject("delete pods", "lost")  # carried out, the answer never arrives
    with pytest.raises(errors.Unavailable):
        pods.delete(info)
    first = kube.get("Pod", "p", "ml")
    assert first is not None
    pods.delete(info)  # the job's resend
    assert kube.get("Pod", "p", "ml")["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]  # type: ignore[index]


def test_a_conflict_on_the_scale_write_is_retried_once_from_a_fresh_read(pods: KubePods, kube: KubeHandle) -> None:
    kube.seed_deployment("llm", "ml", nodes=("gpu-1", "gpu-2"))
    info = pods.gpu_pods()[0]
    kube.inject("patch deployments/scale", "conflict")

    assert pods.scale_owner(info) == "Deployment ml/llm from 2"
    assert kube.log.count("patch deployments/scale") == 2
    kube.inject("patch deployments", "conflict", times=2)
    kube.seed_deployment("web", "ml", nodes=("gpu-1",))
    web = next(p for p in pods.gpu_pods() if p.name.startswith("web-"))
    with pytest.raises(errors.Conflict):
        pods.scale_owner(web)  # twice in a row: the item fails, the job decides
    assert kube.get("Deployment", "web", "ml", "apps/v1")["spec"]["replicas"] == 1  # type: ignore[index]


def test_rbac_is_exactly_what_the_adapter_calls(pods: KubePods, kube: KubeHandle) -> None:
    """Run every method under an allow-list made of the two modules' RBAC alone: nothing is refused."""
    kube.seed_deployment("llm", "ml", nodes=("gpu-1",))
    kube.seed_statefulset("db", "ml", nodes=("gpu-2",))
    grants = (*RBAC, *owners.RBAC)
    kube.allow_only(*((verb, g.resource) for g in grants for verb in g.verbs))
    listed = pods.gpu_pods()
    for info in listed:
        assert pods.pod(info.namespace, info.name) is not None
        pods.annotate(info, {IDLE_SINCE_ANNOTATION: "now"})
        events(pods).emit(pod_ref(info), "IdleGpu", "idle")
        pods.scale_owner(info)
    pods.delete(listed[0])
    used = {r.operation for r in kube.log.all()}
    declared = {f"{verb} {g.resource}" for g in grants for verb in g.verbs}
    assert used == declared


def test_without_the_owner_grants_scale_owner_is_denied_and_nothing_else_is(pods: KubePods, kube: KubeHandle) -> None:
    """An install whose action is not scale-owner is granted pods and events only: scaling says 403, the rest works."""
    kube.seed_deployment("llm", "ml", nodes=("gpu-1",))
    kube.allow_only(*((verb, g.resource) for g in RBAC for verb in g.verbs))
    (info,) = pods.gpu_pods()
    pods.annotate(info, {IDLE_SINCE_ANNOTATION: "now"})
    with pytest.raises(errors.Denied):
        pods.scale_owner(info)
    assert kube.get("Deployment", "llm", "ml", "apps/v1")["spec"]["replicas"] == 1  # type: ignore[index]


def test_started_is_timezone_aware(pods: KubePods, kube: KubeHandle) -> None:
    kube.create(seed.gpu_pod("p", "ml", node="gpu-1", started=STARTED - timedelta(hours=3)))
    (info,) = pods.gpu_pods()
    assert info.started == STARTED - timedelta(hours=3)
    assert info.started is not None
    assert info.started.tzinfo is not None
