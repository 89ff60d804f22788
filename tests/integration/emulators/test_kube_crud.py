"""Kube emulator: object lifecycle and the Status bodies of failures, through the official client over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == error.status
    return body


def _configmap(name: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data or {"k": "v"}}


def test_create_assigns_uid_timestamp_and_increasing_resource_versions(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    first = core.create_namespaced_config_map("default", _configmap("a"))
    second = core.create_namespaced_config_map("default", _configmap("b"))
    assert first.metadata.uid
    assert first.metadata.uid != second.metadata.uid
    assert first.metadata.creation_timestamp is not None
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    listed = core.list_namespaced_config_map("default")
    assert int(listed.metadata.resource_version) >= int(second.metadata.resource_version)
    assert [c.metadata.name for c in listed.items] == ["a", "b"]


def test_replace_with_a_stale_resource_version_is_a_409_conflict(kube_client: Any, kube: KubeHandle) -> None:
    core = client.CoreV1Api(kube_client)
    created = core.create_namespaced_config_map("default", _configmap("state"))
    created.data = {"k": "first"}
    updated = core.replace_namespaced_config_map("state", "default", created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)

    created.data = {"k": "second"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("state", "default", created)
    assert caught.value.status == 409
    status = _status(caught.value)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "state": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert status["details"] == {"name": "state", "kind": "configmaps"}
    stored = kube.get("ConfigMap", "state", "default")
    assert stored is not None
    assert stored["data"] == {"k": "first"}


def test_a_no_op_replace_keeps_the_resource_version(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    created = core.create_namespaced_config_map("default", _configmap("same"))
    again = core.replace_namespaced_config_map("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_create_twice_is_409_already_exists(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_config_map("default", _configmap("dup"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", _configmap("dup"))
    status = _status(caught.value)
    assert (status["code"], status["reason"]) == (409, "AlreadyExists")
    assert status["message"] == 'configmaps "dup" already exists'


def test_missing_objects_are_404_not_found_with_group_qualified_names(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("ghost", "default")
    status = _status(caught.value)
    assert (status["code"], status["reason"], status["message"]) == (404, "NotFound", 'pods "ghost" not found')
    assert status["details"] == {"name": "ghost", "kind": "pods"}

    with pytest.raises(ApiException) as caught:
        client.CoordinationV1Api(kube_client).read_namespaced_lease("ghost", "default")
    status = _status(caught.value)
    assert status["message"] == 'leases.coordination.k8s.io "ghost" not found'
    assert status["details"]["group"] == "coordination.k8s.io"


def test_create_in_a_missing_namespace_is_404_for_the_namespace(kube_client: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_client).create_namespaced_config_map("nowhere", _configmap("x"))
    assert _status(caught.value)["message"] == 'namespaces "nowhere" not found'


def test_invalid_names_labels_and_missing_fields_are_422_invalid_with_causes(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", _configmap("Not_A_Name"))
    status = _status(caught.value)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"].startswith('ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name"')
    assert status["details"]["kind"] == "ConfigMap"
    assert status["details"]["causes"][0]["field"] == "metadata.name"

    with pytest.raises(ApiException) as caught:
        core.create_namespace({"metadata": {}})
    assert "metadata.name: Required value" in _status(caught.value)["message"]

    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", {"metadata": {"name": "empty"}, "spec": {"containers": []}})
    status = _status(caught.value)
    assert status["message"] == 'Pod "empty" is invalid: spec.containers: Required value'

    bad_label = {"metadata": {"name": "l", "labels": {"team": "a b"}}, "data": {}}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", bad_label)
    assert _status(caught.value)["details"]["causes"][0]["field"] == "metadata.labels"


def test_negative_or_non_standard_quota_values_are_422(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    quota = {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "-1", "gpu": "4"}}}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_resource_quota("default", quota)
    status = _status(caught.value)
    assert status["code"] == 422
    fields = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert fields["spec.hard[requests.nvidia.com/gpu]"] == 'Invalid value: "-1": must be greater than or equal to 0'
    assert fields["spec.hard[gpu]"] == 'Invalid value: "gpu": must be a standard resource for quota'


def test_a_body_that_does_not_decode_against_the_openapi_schema_is_400(kube_client: Any) -> None:
    """A wrong type (or an unknown field under fieldValidation=Strict) fails decoding, which the real server
    answers with 400 BadRequest, not 422. The typed client refuses such bodies itself (pydantic), so they go
    through the client's DynamicClient, which sends any dict."""
    quotas = DynamicClient(kube_client).resources.get(api_version="v1", kind="ResourceQuota")
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"requests.nvidia.com/gpu": {"value": 4}}},
    }
    with pytest.raises(ApiException) as caught:
        quotas.create(body=quota, namespace="default")
    status = _status(caught.value)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith('ResourceQuota in version "v1" cannot be handled as a ResourceQuota')

    unparsable = {**quota, "spec": {"hard": {"requests.nvidia.com/gpu": "four"}}}
    with pytest.raises(ApiException) as caught:
        quotas.create(body=unparsable, namespace="default")
    assert "quantities must match the regular expression" in _status(caught.value)["message"]

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "gpuCount": 1}]},
    }
    pods = DynamicClient(kube_client).resources.get(api_version="v1", kind="Pod")
    with pytest.raises(ApiException) as caught:
        pods.create(body=pod, namespace="default", query_params=[("fieldValidation", "Strict")])
    status = _status(caught.value)
    assert status["code"] == 400
    assert status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].gpuCount"'
    )


def test_unknown_fields_are_dropped_with_a_warning_by_default(kube_client: Any, kube: KubeHandle) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "gpuCount": 1}]},
    }
    pods = DynamicClient(kube_client).resources.get(api_version="v1", kind="Pod")
    pods.create(body=pod, namespace="default")
    stored = kube.get("Pod", "p", "default")
    assert stored is not None
    assert "gpuCount" not in stored["spec"]["containers"][0]
    # The client does not surface response headers here; read the Warning off the wire with the client's REST layer.
    response = kube_client.rest_client.request(
        "POST",
        f"{kube.url}/api/v1/namespaces/default/pods",
        headers={"Content-Type": "application/json"},
        body={**pod, "metadata": {"name": "q"}},
    )
    assert response.status == 201
    assert response.getheader("Warning") == '299 - "unknown field \\"spec.containers[0].gpuCount\\""'


def test_gpu_requests_must_equal_limits(kube_client: Any) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
    }
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_client).create_namespaced_pod("default", pod)
    status = _status(caught.value)
    assert status["details"]["causes"][0]["message"] == (
        "Required value: Limit must be set for non overcommitable resources"
    )


def test_pod_create_is_defaulted_and_starts_pending(kube_client: Any) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Running"},
    }
    created = client.CoreV1Api(kube_client).create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"
    assert created.spec.containers[0].resources.requests == {"nvidia.com/gpu": "2"}


def test_pod_spec_is_immutable_except_images(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    pod = core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    pod.spec.containers[0].image = "i:2"
    assert core.replace_namespaced_pod("p", "default", pod).spec.containers[0].image == "i:2"
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p", "default", {"spec": {"nodeName": "elsewhere"}})
    status = _status(caught.value)
    assert status["code"] == 422
    assert status["details"]["causes"][0]["field"] == "spec"


def test_status_subresource_and_main_resource_do_not_write_each_other(kube_client: Any, kube: KubeHandle) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    ignored = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}}
    )
    assert ignored.status.phase == "Pending"
    assert ignored.metadata.labels == {"a": "b"}
    updated = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Succeeded"}})
    assert updated.status.phase == "Succeeded"
    assert kube.log.operations()[-2:] == ["patch pods", "patch pods/status"]


def test_delete_returns_the_pod_or_a_status_and_honours_preconditions(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    assert core.delete_namespaced_pod("p", "default").metadata.name == "p"

    cm = core.create_namespaced_config_map("default", _configmap("c"))
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map(
            "c", "default", body=client.V1DeleteOptions(preconditions={"resourceVersion": "1"})
        )
    assert _status(caught.value)["reason"] == "Conflict"
    deleted = core.delete_namespaced_config_map(
        "c", "default", body=client.V1DeleteOptions(preconditions={"uid": cm.metadata.uid})
    )
    assert deleted["kind"] == "Status"
    assert (deleted["status"], deleted["details"]["name"], deleted["details"]["uid"]) == (
        "Success",
        "c",
        cm.metadata.uid,
    )
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("c", "default")
    assert caught.value.status == 404


def test_dry_run_validates_without_storing(kube_client: Any, kube: KubeHandle) -> None:
    created = client.CoreV1Api(kube_client).create_namespaced_config_map("default", _configmap("dry"), dry_run="All")
    assert created.metadata.name == "dry"
    assert kube.get("ConfigMap", "dry", "default") is None


def test_lease_create_renew_and_conflicting_takeover(kube_client: Any) -> None:
    coordination = client.CoordinationV1Api(kube_client)
    lease = {
        "metadata": {"name": "nodegroups"},
        "spec": {"holderIdentity": "run-1", "leaseDurationSeconds": 300},
    }
    created = coordination.create_namespaced_lease("kube-system", lease)
    created.spec.renew_time = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    renewed = coordination.replace_namespaced_lease("nodegroups", "kube-system", created)
    assert renewed.spec.holder_identity == "run-1"
    assert int(renewed.metadata.resource_version) > int(created.metadata.resource_version)
    # A second runner read the lease before the renewal: its takeover is refused.
    stale = {
        "metadata": {"name": "nodegroups", "resourceVersion": created.metadata.resource_version},
        "spec": {"holderIdentity": "run-2", "leaseDurationSeconds": 300},
    }
    with pytest.raises(ApiException) as caught:
        coordination.replace_namespaced_lease("nodegroups", "kube-system", stale)
    assert caught.value.status == 409
    assert _status(caught.value)["message"].startswith(
        'Operation cannot be fulfilled on leases.coordination.k8s.io "nodegroups"'
    )
    with pytest.raises(ApiException) as caught:
        coordination.create_namespaced_lease("kube-system", lease)
    assert _status(caught.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as caught:
        coordination.create_namespaced_lease(
            "kube-system", {"metadata": {"name": "z"}, "spec": {"leaseDurationSeconds": 0}}
        )
    assert caught.value.status == 422


def test_events_core_and_events_k8s_io(kube_client: Any, kube: KubeHandle) -> None:
    core = client.CoreV1Api(kube_client)
    event = {
        "metadata": {"generateName": "gpu-jobs-"},
        "involvedObject": {"kind": "Node", "name": "gpu-1", "apiVersion": "v1"},
        "reason": "ScaledDown",
        "message": "node group scaled to zero",
        "type": "Normal",
    }
    created = core.create_namespaced_event("default", event)
    assert created.metadata.name.startswith("gpu-jobs-")
    assert len(created.metadata.name) == len("gpu-jobs-") + 5
    found = core.list_namespaced_event("default", field_selector="involvedObject.kind=Node,involvedObject.name=gpu-1")
    assert [e.reason for e in found.items] == ["ScaledDown"]

    new_event = {
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-05T10:00:00.000000Z",
        "reportingController": "gpu-jobs/sweep",
        "reportingInstance": "sweep-1",
        "action": "Warn",
        "reason": "IdleGPU",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "idle for 2h",
        "type": "Warning",
    }
    client.EventsV1Api(kube_client).create_namespaced_event("default", new_event)
    assert kube.get("Event", "e1", "default", api_version="events.k8s.io/v1") is not None
    assert kube.log.operations() == ["create events", "list events", "create events"]


def test_namespaces_nodes_are_cluster_scoped_and_namespace_delete_takes_contents(
    kube_client: Any, kube: KubeHandle
) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespace({"metadata": {"name": "team-a"}})
    core.create_namespaced_config_map("team-a", _configmap("c"))
    assert core.read_namespace("team-a").status.phase == "Active"
    deleted = core.delete_namespace("team-a")
    assert deleted["status"]["phase"] == "Terminating"
    assert kube.list("ConfigMap", "team-a") == []
    names = [n.metadata.name for n in core.list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]


def test_a_deleted_namespace_is_terminating_until_its_content_is_gone(kube: KubeHandle, kube_client: Any) -> None:
    """As the namespace controller and the NamespaceLifecycle admission plugin behave: the namespace stays
    Terminating while its content is deleted, nothing new may be created in it (403, cause NamespaceTerminating),
    existing objects may still be changed, then namespace and content are gone."""
    core = client.CoreV1Api(kube_client)
    core.create_namespace({"metadata": {"name": "team-x"}})
    core.create_namespaced_config_map("team-x", _configmap("kept"))
    kube.cluster.namespace_termination_s = 3600.0

    deleted = json.loads(core.delete_namespace("team-x", _preload_content=False).data)
    assert (deleted["kind"], deleted["status"]["phase"]) == ("Namespace", "Terminating")
    seen = core.read_namespace("team-x")
    assert (seen.status.phase, seen.metadata.deletion_timestamp is not None) == ("Terminating", True)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("team-x", _configmap("new"))
    status = _status(caught.value)
    assert (caught.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        'configmaps "new" is forbidden: unable to create new content in namespace team-x because it is being terminated'
    )
    assert status["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    core.patch_namespaced_config_map("kept", "team-x", {"data": {"k": "v"}})  # updates are still admitted

    kube.cluster.namespace_termination_s = 0.0  # the controller finishes
    with pytest.raises(ApiException) as caught:
        core.read_namespace("team-x")
    assert caught.value.status == 404
    assert kube.get("ConfigMap", "kept", "team-x") is None
