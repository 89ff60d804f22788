"""Kube emulator: injected faults, authentication and RBAC refusals as the official client sees them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.base import FaultKind
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("kind", "code", "reason", "retry_after"),
    [
        ("throttle", 429, "TooManyRequests", "1"),
        ("busy", 429, "TooManyRequests", "1"),
        ("server_error", 500, "InternalError", None),
        ("conflict", 409, "Conflict", None),
    ],
)
def test_faults_render_as_status_errors(
    kube: KubeHandle, kube_client: Any, kind: FaultKind, code: int, reason: str, retry_after: str | None
) -> None:
    kube.create(seed.gpu_node("gpu-1"))
    kube.inject("patch nodes", kind)
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["kind"], status["status"], status["reason"]) == (
        code,
        "Status",
        "Failure",
        reason,
    )
    assert caught.value.headers.get("Retry-After") == retry_after
    node = kube.get("Node", "gpu-1")
    assert node is not None
    assert "unschedulable" not in node["spec"]  # the failed call changed nothing
    assert core.patch_node("gpu-1", {"spec": {"unschedulable": True}}).spec.unschedulable is True  # one-shot
    assert kube.log.operations() == ["patch nodes", "patch nodes"]


def test_timeout_holds_the_request_then_answers_504(kube: KubeHandle, kube_client: Any) -> None:
    kube.emulator.timeout_hold_s = 0.3
    kube.inject("list nodes", "timeout", times=4)
    core = client.CoreV1Api(kube_client)
    # The client gives up first; urllib3 retries a timed-out GET 3 times (4 attempts) before raising.
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node(_request_timeout=0.1)
    assert kube.log.count("list nodes") == 4
    kube.inject("list nodes", "timeout")
    with pytest.raises(ApiException) as caught:
        core.list_node()
    assert (caught.value.status, json.loads(caught.value.body)["reason"]) == (504, "Timeout")


def test_wildcard_faults(kube: KubeHandle, kube_client: Any) -> None:
    kube.inject("*", "server_error", times=2)
    core = client.CoreV1Api(kube_client)
    for _ in range(2):
        with pytest.raises(ApiException):
            core.list_namespace()
    assert len(core.list_namespace().items) == 4


def test_a_wrong_token_is_401(kube: KubeHandle) -> None:
    configuration = client.Configuration()
    configuration.host = kube.url
    configuration.api_key = {"authorization": "Bearer wrong"}
    with client.ApiClient(configuration) as api_client, pytest.raises(ApiException) as caught:
        client.CoreV1Api(api_client).list_namespace()
    assert (caught.value.status, json.loads(caught.value.body)["reason"]) == (401, "Unauthorized")


def test_rbac_allow_list_refuses_the_rest_with_403(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(seed.gpu_node("gpu-1"))
    kube.allow_only(("list", "nodes"), ("create", "pods/eviction"))
    core = client.CoreV1Api(kube_client)
    assert [n.metadata.name for n in core.list_node().items] == ["gpu-1"]
    with pytest.raises(ApiException) as caught:
        core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        'nodes "gpu-1" is forbidden: User "system:serviceaccount:gpu-jobs:gpu-jobs" cannot patch resource "nodes" '
        'in API group "" at the cluster scope'
    )
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod("default")
    assert (
        'cannot list resource "pods" in API group "" in the namespace "default"'
        in json.loads(caught.value.body)["message"]
    )


def test_an_apply_that_creates_needs_create_as_well_as_patch(kube: KubeHandle, kube_client: Any) -> None:
    """The API server authorises a server-side apply of a missing object as a create too: a Role with only
    ``patch`` can change an existing ResourceQuota but not make a new one."""
    kube.create(seed.namespace("team-a"))
    kube.allow_only(("patch", "resourcequotas"))
    core = client.CoreV1Api(kube_client)
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}}

    def apply() -> Any:
        return core.patch_namespaced_resource_quota(
            "q", "team-a", body, field_manager="t", _content_type="application/apply-patch+yaml"
        )

    with pytest.raises(ApiException) as caught:
        apply()
    assert caught.value.status == 403
    assert 'cannot create resource "resourcequotas"' in json.loads(caught.value.body)["message"]
    assert kube.get("ResourceQuota", "q", "team-a") is None

    kube.allow_only(("patch", "resourcequotas"), ("create", "resourcequotas"))
    apply()
    kube.allow_only(("patch", "resourcequotas"))  # it exists now: patch alone changes it
    body["spec"] = {"hard": {"pods": "2"}}
    assert apply().spec.hard == {"pods": "2"}
