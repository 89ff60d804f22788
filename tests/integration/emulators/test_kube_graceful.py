"""Kube emulator: pods are deleted gracefully, as a real API server deletes them. A DELETE (or an eviction) sets
``deletionTimestamp`` (now + grace) and ``deletionGracePeriodSeconds``; the pod stays listed, Terminating and
charged to quota until its grace period has passed on the emulator's clock, then it is gone. Preconditions, a
second DELETE, grace 0, and ``metadata.uid`` as a patch precondition."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"


def _wait_gone(kube: KubeHandle, name: str, namespace: str = "default", within_s: float = 5.0) -> float:
    """Seconds until the pod is gone (read through the seeding API, which sees what a client would)."""
    start = time.monotonic()
    while kube.get("Pod", name, namespace) is not None:
        assert time.monotonic() - start < within_s, f"pod {name} still there after {within_s} s"
        time.sleep(0.02)
    return time.monotonic() - start


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@pytest.fixture
def core(kube_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


def test_a_deleted_pod_is_terminating_and_charged_for_its_grace_period_then_gone(
    kube: KubeHandle, core: client.CoreV1Api
) -> None:
    kube.create(seed.resource_quota("gpu", "default", {"requests.nvidia.com/gpu": "8"}))
    kube.create(seed.gpu_pod("train", node="gpu-1", gpus=2, grace_s=1))
    before = datetime.now(UTC)

    answer = core.delete_namespaced_pod("train", "default")

    assert answer.metadata.deletion_grace_period_seconds == 1
    stamp = answer.metadata.deletion_timestamp
    assert before - timedelta(seconds=1) <= stamp <= before + timedelta(seconds=2)  # now + grace, whole seconds
    listed = core.list_namespaced_pod("default").items
    assert [(p.metadata.name, p.status.phase) for p in listed] == [("train", "Running")]  # still listed
    assert core.read_namespaced_resource_quota("gpu", "default").status.used == {"requests.nvidia.com/gpu": "2"}
    with pytest.raises(ApiException) as caught:  # the name is still taken
        core.create_namespaced_pod("default", seed.gpu_pod("train", node="gpu-1"))
    assert (caught.value.status, json.loads(caught.value.body)["reason"]) == (409, "AlreadyExists")

    waited = _wait_gone(kube, "train")
    assert 0.5 < waited < 2.0  # by time, on its own: nobody had to ask
    assert core.list_namespaced_pod("default").items == []
    assert core.read_namespaced_resource_quota("gpu", "default").status.used == {"requests.nvidia.com/gpu": "0"}


def test_the_default_grace_period_is_thirty_seconds_and_the_request_may_shorten_it(
    kube: KubeHandle, core: client.CoreV1Api
) -> None:
    kube.create(seed.gpu_pod("a", node="gpu-1"))  # no terminationGracePeriodSeconds: defaulted to 30
    kube.create(seed.gpu_pod("b", node="gpu-1", grace_s=600))

    assert core.delete_namespaced_pod("a", "default").metadata.deletion_grace_period_seconds == 30
    shortened = core.delete_namespaced_pod("b", "default", body=client.V1DeleteOptions(grace_period_seconds=1))
    assert shortened.metadata.deletion_grace_period_seconds == 1
    assert _wait_gone(kube, "b") < 2.0
    assert kube.get("Pod", "a", "default") is not None  # 30 s are not over


def test_grace_zero_an_unscheduled_pod_and_a_finished_pod_are_deleted_at_once(
    kube: KubeHandle, core: client.CoreV1Api
) -> None:
    kube.create(seed.gpu_pod("now", node="gpu-1", grace_s=600))
    kube.create(seed.gpu_pod("pending", phase="Pending"))  # on no node: nothing to stop
    kube.create(seed.gpu_pod("done", node="gpu-1", phase="Succeeded"))

    core.delete_namespaced_pod("now", "default", grace_period_seconds=0)  # as a query parameter
    core.delete_namespaced_pod("pending", "default")
    core.delete_namespaced_pod("done", "default")

    assert kube.list("Pod", "default") == []


def test_a_second_delete_is_accepted_and_never_extends_the_deadline_but_may_shorten_it(
    kube: KubeHandle, core: client.CoreV1Api
) -> None:
    kube.create(seed.gpu_pod("p", node="gpu-1", grace_s=30))
    first = core.delete_namespaced_pod("p", "default", body=client.V1DeleteOptions(grace_period_seconds=20))
    again = core.delete_namespaced_pod("p", "default")  # the pod's own 30 s would be longer: ignored
    longer = core.delete_namespaced_pod("p", "default", body=client.V1DeleteOptions(grace_period_seconds=25))

    for answer in (again, longer):
        assert answer.metadata.deletion_timestamp == first.metadata.deletion_timestamp
        assert answer.metadata.deletion_grace_period_seconds == 20
        assert answer.metadata.resource_version == first.metadata.resource_version  # nothing was written

    shorter = core.delete_namespaced_pod("p", "default", body=client.V1DeleteOptions(grace_period_seconds=1))
    assert shorter.metadata.deletion_grace_period_seconds == 1
    # Counted from the first request, as the real server recomputes it: 19 s earlier than the first deadline.
    moved = first.metadata.deletion_timestamp - shorter.metadata.deletion_timestamp
    assert timedelta(seconds=18) <= moved <= timedelta(seconds=20)
    assert _wait_gone(kube, "p") < 2.0


def test_preconditions_are_honoured(kube: KubeHandle, core: client.CoreV1Api) -> None:
    pod = kube.create(seed.gpu_pod("p", node="gpu-1", grace_s=30))
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]

    for preconditions, shown in (
        (client.V1Preconditions(uid="someone-else"), "UID"),
        (client.V1Preconditions(resource_version="1"), "ResourceVersion"),
    ):
        with pytest.raises(ApiException) as caught:
            core.delete_namespaced_pod("p", "default", body=client.V1DeleteOptions(preconditions=preconditions))
        status = json.loads(caught.value.body)
        assert (caught.value.status, status["reason"]) == (409, "Conflict")
        assert f"the {shown} in the precondition" in status["message"]
    assert not kube.get("Pod", "p", "default")["metadata"].get("deletionTimestamp")  # type: ignore[index]

    same = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid, resource_version=rv))
    assert core.delete_namespaced_pod("p", "default", body=same).metadata.deletion_timestamp is not None


def test_eviction_deletes_gracefully_with_its_delete_options(kube: KubeHandle, core: client.CoreV1Api) -> None:
    kube.create(seed.gpu_pod("a", node="gpu-1", grace_s=600))
    kube.create(seed.gpu_pod("b", node="gpu-1", grace_s=600))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": "default"}}
    core.create_namespaced_pod_eviction("a", "default", eviction)
    quick = {**eviction, "metadata": {"name": "b", "namespace": "default"}, "deleteOptions": {"gracePeriodSeconds": 1}}
    core.create_namespaced_pod_eviction("b", "default", quick)

    assert kube.get("Pod", "a", "default")["metadata"]["deletionGracePeriodSeconds"] == 600  # type: ignore[index]
    assert _wait_gone(kube, "b") < 2.0
    core.create_namespaced_pod_eviction("a", "default", eviction)  # evicting a Terminating pod: accepted
    assert kube.get("Pod", "a", "default") is not None


def test_a_watch_sees_the_pod_modified_then_deleted(kube: KubeHandle, core: client.CoreV1Api) -> None:
    pod = kube.create(seed.gpu_pod("p", node="gpu-1", grace_s=1))
    rv = pod["metadata"]["resourceVersion"]
    core.delete_namespaced_pod("p", "default")
    from kubernetes import watch

    seen = [
        (event["type"], event["object"].metadata.deletion_timestamp is not None)
        for event in watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=3)
        if event["object"].metadata.name == "p"
    ]
    assert seen == [("MODIFIED", True), ("DELETED", True)]


def test_uid_in_a_patch_is_a_precondition_and_in_a_put_too(kube: KubeHandle, core: client.CoreV1Api) -> None:
    pod = kube.create(seed.gpu_pod("p", node="gpu-1"))
    uid = pod["metadata"]["uid"]

    patched = core.patch_namespaced_pod("p", "default", {"metadata": {"uid": uid, "annotations": {"a": "1"}}})
    assert patched.metadata.annotations == {"a": "1"}
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p", "default", {"metadata": {"uid": "another", "annotations": {"a": "2"}}})
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "another": field is immutable',
            "field": "metadata.uid",
        }
    ]
    body = kube.get("Pod", "p", "default")
    assert body is not None
    assert body["metadata"]["annotations"] == {"a": "1"}
    body["metadata"]["uid"] = "another"
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_pod("p", "default", body)
    assert caught.value.status == 409
    assert "Precondition failed: UID in precondition: another" in json.loads(caught.value.body)["message"]


def test_kubectl_shows_a_deleted_pod_as_terminating(kube: KubeHandle, core: client.CoreV1Api) -> None:
    kube.create(seed.gpu_pod("train", node="gpu-1", grace_s=600))
    kube.create(seed.gpu_pod("serve", node="gpu-1"))
    core.delete_namespaced_pod("train", "default")

    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), "get", "pods"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {line.split()[0]: line.split()[2] for line in result.stdout.splitlines()[1:]}
    assert rows == {"serve": "Running", "train": "Terminating"}
    forced = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), "delete", "pod", "train", "--grace-period=0", "--force"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert 'pod "train" force deleted' in forced.stdout
    assert kube.get("Pod", "train", "default") is None


def test_an_eviction_with_a_uid_precondition_refuses_a_same_named_replacement(
    kube: KubeHandle, core: client.CoreV1Api
) -> None:
    """What a StatefulSet does to a drain: the pod evicted is gone, another one has its name. An eviction that names
    the old uid is refused (409, the real server's rest.BeforeDelete wording), and the replacement is untouched."""
    old = kube.create(seed.gpu_pod("sweep-0", node="gpu-1", grace_s=0))["metadata"]["uid"]
    kube.cluster.delete("Pod", "sweep-0", "default")
    new = kube.create(seed.gpu_pod("sweep-0", node="gpu-2", grace_s=30))["metadata"]["uid"]
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "sweep-0", "namespace": "default"},
        "deleteOptions": {"preconditions": {"uid": old}},
    }
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("sweep-0", "default", eviction)
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"], status["details"]["kind"]) == (409, "Conflict", "Pod")
    assert status["message"] == (
        f'Operation cannot be fulfilled on Pod "sweep-0": the UID in the precondition ({old}) does not match the UID'
        f" in record ({new}). The object might have been deleted and then recreated"
    )
    assert not kube.get("Pod", "sweep-0", "default")["metadata"].get("deletionTimestamp")  # type: ignore[index]

    same = {**eviction, "deleteOptions": {"preconditions": {"uid": new}}}
    core.create_namespaced_pod_eviction("sweep-0", "default", same)
    assert kube.get("Pod", "sweep-0", "default")["metadata"]["deletionTimestamp"]  # type: ignore[index]


def test_containers_that_stop_on_sigterm_end_the_grace_period_early(kube: KubeHandle, core: client.CoreV1Api) -> None:
    """``pod_stop_s``: Terminating until the containers exit, then gone; deletionTimestamp still says the whole grace
    period, and a second, shorter delete still shortens it."""
    kube.cluster.pod_stop_s = 0.3
    kube.create(seed.gpu_pod("p", node="gpu-1", grace_s=30))
    before = datetime.now(UTC)
    answer = core.delete_namespaced_pod("p", "default")
    assert answer.metadata.deletion_timestamp >= before + timedelta(seconds=29)
    assert kube.get("Pod", "p", "default") is not None  # Terminating, not gone at once
    assert 0.2 < _wait_gone(kube, "p") < 2.0

    kube.cluster.pod_stop_s = 5.0  # slower containers: a force delete (grace 0) still removes at once
    kube.create(seed.gpu_pod("q", node="gpu-1", grace_s=30))
    core.delete_namespaced_pod("q", "default")
    core.delete_namespaced_pod("q", "default", grace_period_seconds=0)
    assert kube.get("Pod", "q", "default") is None
