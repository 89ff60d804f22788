"""The one Kubernetes client (jobs/adapters/kube/client.py) against the API emulator over HTTP: what a failed call
keeps (HTTP status, the Status reason and causes, Retry-After) and which project error it becomes; the paginator."""

from __future__ import annotations

from typing import Any

import pytest

from jobs import errors
from jobs.adapters.kube import client
from jobs.adapters.kube.client import api_client, json_pages, request
from jobs.adapters.kube.workloads import KubeCluster
from jobs.core.nodegroup_plan import GpuPod
from tests.emulators.kube.fixtures import KubeHandle, write_kubeconfig
from tests.emulators.kube.seed import disruption_budget, gpu_pod, namespace

pytestmark = pytest.mark.integration

CONFIGMAPS = "/api/v1/namespaces/gpu-jobs/configmaps"


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


@pytest.fixture
def api(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch) -> client.ApiClient:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    kube.create(namespace("gpu-jobs"))
    return api_client(timeout_s=5.0)


def failure(api: client.ApiClient, operation: str, method: str, path: str, body: Any = None) -> errors.CloudError:
    with pytest.raises(errors.CloudError) as caught:
        request(api, operation, method, path, body=body)
    return caught.value


def test_not_found_keeps_status_and_reason(api: client.ApiClient) -> None:
    error = failure(api, "get configmaps", "GET", f"{CONFIGMAPS}/missing")

    assert type(error) is errors.NotFound
    assert (error.status, error.reason, error.code, error.operation) == (404, "NotFound", "404", "get configmaps")
    assert str(error) == 'get configmaps: 404 configmaps "missing" not found'
    assert error.retry_after_s is None
    assert not error.retryable


def test_already_exists_and_a_stale_write_are_conflicts_told_apart_by_reason(api: client.ApiClient) -> None:
    created = request(api, "create configmaps", "POST", CONFIGMAPS, body=configmap("a"))
    again = failure(api, "create configmaps", "POST", CONFIGMAPS, body=configmap("a"))
    request(api, "update configmaps", "PUT", f"{CONFIGMAPS}/a", body={**created, "data": {"k": "w"}})
    stale = failure(api, "update configmaps", "PUT", f"{CONFIGMAPS}/a", body={**created, "data": {"k": "x"}})

    assert (type(again), again.status, again.reason) == (errors.Conflict, 409, "AlreadyExists")
    assert (type(stale), stale.status, stale.reason) == (errors.Conflict, 409, "Conflict")
    assert "the object has been modified" in str(stale)


def test_invalid_keeps_every_cause(api: client.ApiClient) -> None:
    error = failure(api, "create configmaps", "POST", CONFIGMAPS, body=configmap("Not_A_Name", team="bad value!"))

    assert (type(error), error.status, error.reason) == (errors.Invalid, 422, "Invalid")
    assert [(c.reason, c.field) for c in error.causes] == [
        ("FieldValueInvalid", "metadata.name"),
        ("FieldValueInvalid", "metadata.labels"),
    ]
    assert all(c.message for c in error.causes)


def test_forbidden_keeps_the_cause_that_says_why(api: client.ApiClient, kube: KubeHandle) -> None:
    namespace_object = kube.get("Namespace", "gpu-jobs")
    assert namespace_object is not None
    namespace_object["metadata"]["deletionTimestamp"] = "2026-12-01T20:00:00Z"
    namespace_object["status"] = {"phase": "Terminating"}
    kube.put(namespace_object)

    error = failure(api, "create configmaps", "POST", CONFIGMAPS, body=configmap("a"))

    assert (type(error), error.status, error.reason) == (errors.Denied, 403, "Forbidden")
    assert [(c.reason, c.field) for c in error.causes] == [("NamespaceTerminating", "metadata.namespace")]


@pytest.mark.parametrize("fault", ["throttle", "busy"])
def test_too_many_requests_is_throttled_and_keeps_retry_after(
    api: client.ApiClient, kube: KubeHandle, fault: Any
) -> None:
    kube.inject("list configmaps", fault)

    with pytest.raises(errors.Throttled) as caught:
        list(json_pages(api, "list configmaps", CONFIGMAPS))

    assert (caught.value.status, caught.value.reason, caught.value.retry_after_s) == (429, "TooManyRequests", 1.0)
    assert caught.value.retryable
    assert list(json_pages(api, "list configmaps", CONFIGMAPS)) == []  # the fault was one-shot


def test_server_errors_are_unavailable_with_their_causes(api: client.ApiClient, kube: KubeHandle) -> None:
    kube.inject("get configmaps", "server_error")
    kube.inject("list configmaps", "timeout")

    internal = failure(api, "get configmaps", "GET", f"{CONFIGMAPS}/a")
    timeout = failure(api, "list configmaps", "GET", CONFIGMAPS)

    assert (type(internal), internal.status, internal.reason) == (errors.Unavailable, 500, "InternalError")
    assert internal.causes == (errors.Cause(message="etcdserver: request timed out"),)
    assert (type(timeout), timeout.status, timeout.reason) == (errors.Unavailable, 504, "Timeout")
    assert internal.retryable
    assert timeout.retryable


def test_a_wrong_token_is_denied(kube: KubeHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", kube.url, "wrong")))
    error = failure(api_client(timeout_s=5.0), "list nodes", "GET", "/api/v1/nodes")

    assert (type(error), error.status, error.reason) == (errors.Denied, 401, "Unauthorized")


def test_no_answer_at_all_is_unavailable_without_a_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # Port 1 on the loopback: nothing listens there, so the connection is refused and no status comes back.
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1", "t")))
    error = failure(api_client(timeout_s=5.0), "list nodes", "GET", "/api/v1/nodes")

    assert (type(error), error.status, error.reason, error.causes) == (errors.Unavailable, 0, "", ())
    assert error.retryable


def test_an_eviction_refused_by_a_disruption_budget_is_busy_and_keeps_the_budget_cause(
    api: client.ApiClient, kube: KubeHandle
) -> None:
    kube.create(gpu_pod("train-0", "default", node="gpu-1", labels={"app": "train"}))
    kube.create(disruption_budget("train", "default", {"app": "train"}, min_available=1))

    with pytest.raises(errors.Busy) as caught:
        KubeCluster(api).evict(GpuPod("default", "train-0", "gpu-1", 1, evictable=True))

    assert (caught.value.code, caught.value.status, caught.value.reason) == ("DisruptionBudget", 429, "TooManyRequests")
    assert [c.reason for c in caught.value.causes] == ["DisruptionBudget"]
    assert caught.value.retry_after_s is None  # the eviction refusal asks for no particular wait


def test_a_pod_is_followed_by_uid_and_its_replacement_is_never_evicted_in_its_place(
    api: client.ApiClient, kube: KubeHandle
) -> None:
    old = kube.create(gpu_pod("sweep-0", "default", node="gpu-1", grace_s=0))["metadata"]["uid"]
    evicted = GpuPod("default", "sweep-0", "gpu-1", 1, evictable=True, uid=old)
    cluster = KubeCluster(api)
    assert cluster.pod_exists(evicted)
    kube.cluster.delete("Pod", "sweep-0", "default")
    kube.create(gpu_pod("sweep-0", "default", node="gpu-2", grace_s=30))  # a StatefulSet's replacement

    assert not cluster.pod_exists(evicted)  # the name is taken, by another pod
    assert cluster.evict(evicted) is False  # 409 on the uid precondition: the evicted pod is gone
    assert not kube.get("Pod", "sweep-0", "default")["metadata"].get("deletionTimestamp")  # type: ignore[index]
    [sent] = [r for r in kube.log.all() if r.operation == "create pods/eviction"]
    assert b'"preconditions": {"uid": "' + old.encode() in sent.body


def test_an_eviction_conflict_on_the_same_pod_is_busy_and_tried_again(api: client.ApiClient, kube: KubeHandle) -> None:
    uid = kube.create(gpu_pod("train-0", "default", node="gpu-1", grace_s=0))["metadata"]["uid"]
    pod = GpuPod("default", "train-0", "gpu-1", 1, evictable=True, uid=uid)
    kube.inject("create pods/eviction", "conflict")  # the server ran out of its own retries on a changing pod

    with pytest.raises(errors.Busy) as caught:
        KubeCluster(api).evict(pod)
    assert caught.value.status == 409
    assert KubeCluster(api).evict(pod) is True  # the next poll's eviction goes through
    assert not KubeCluster(api).pod_exists(pod)


def test_the_paginator_follows_continue_tokens_with_the_query_on_every_page(
    api: client.ApiClient, kube: KubeHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "PAGE", 2)
    for index in range(5):
        request(api, "create configmaps", "POST", CONFIGMAPS, body=configmap(f"cm-{index}", kind="x"))
    request(api, "create configmaps", "POST", CONFIGMAPS, body=configmap("other", kind="y"))
    kube.log.clear()

    names = [cm["metadata"]["name"] for cm in json_pages(api, "list configmaps", CONFIGMAPS, labelSelector="kind=x")]

    assert names == [f"cm-{index}" for index in range(5)]
    pages = [r for r in kube.log.all() if r.operation == "list configmaps"]
    assert len(pages) == 3
    assert all("labelSelector=kind%3Dx" in r.query and "limit=2" in r.query for r in pages)
    assert ["continue=" in r.query for r in pages] == [False, True, True]
