"""Kube emulator: the four PATCH content types, including server-side apply ownership, through the official client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

APPLY = "application/apply-patch+yaml"


def _quota_config(hard: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}, "spec": {"hard": hard}}


def test_strategic_merge_cordons_a_node_and_merges_labels(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(seed.gpu_node("gpu-1", labels={"pool": "a100"}))
    core = client.CoreV1Api(kube_client)
    patched = core.patch_node("gpu-1", {"spec": {"unschedulable": True}, "metadata": {"labels": {"drain": "yes"}}})
    assert patched.spec.unschedulable is True
    assert patched.metadata.labels == {"kubernetes.io/hostname": "gpu-1", "pool": "a100", "drain": "yes"}
    uncordoned = core.patch_node("gpu-1", {"spec": {"unschedulable": None}, "metadata": {"labels": {"drain": None}}})
    assert uncordoned.spec.unschedulable is None
    assert "drain" not in uncordoned.metadata.labels
    assert kube.log.operations() == ["patch nodes", "patch nodes"]
    assert kube.log.all()[0].body == b'{"spec": {"unschedulable": true}, "metadata": {"labels": {"drain": "yes"}}}'


def test_strategic_merge_merges_containers_by_name(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
        },
    )
    patched = core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "b", "image": "b:2"}]}})
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "a:1"), ("b", "b:2")]


def test_json_merge_patch_replaces_lists_and_deletes_with_null(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "annotations": {"a": "1", "b": "2"}}, "data": {"x": "1"}}
    )
    patched = core.patch_namespaced_config_map(
        "c",
        "default",
        {"metadata": {"annotations": {"a": None, "c": "3"}}, "data": {"y": "2"}},
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.annotations == {"b": "2", "c": "3"}
    assert patched.data == {"x": "1", "y": "2"}


def test_json_patch_ops_and_a_failing_test_op(kube_client: Any, kube: KubeHandle) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "labels": {"owner": "gpu-jobs"}}, "data": {"a": "1"}}
    )
    operations = [
        {"op": "test", "path": "/metadata/labels/owner", "value": "gpu-jobs"},
        {"op": "add", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/a", "value": "10"},
        {"op": "copy", "from": "/data/b", "path": "/data/c"},
        {"op": "move", "from": "/data/c", "path": "/data/d"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/annotations", "value": {"gpu-jobs.io~1x": "y"}},
    ]
    patched = core.patch_namespaced_config_map("c", "default", operations)
    assert patched.data == {"a": "10", "d": "2"}
    assert patched.metadata.annotations == {"gpu-jobs.io~1x": "y"}
    assert kube.log.all()[-1].operation == "patch configmaps"

    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map("c", "default", [{"op": "test", "path": "/data/a", "value": "1"}])
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["reason"] == "Invalid"
    stored = kube.get("ConfigMap", "c", "default")
    assert stored is not None
    assert stored["data"] == {"a": "10", "d": "2"}


def test_patch_with_a_stale_resource_version_is_a_conflict(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("c", "default", {"data": {"a": "2"}})
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map(
            "c", "default", {"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"a": "3"}}
        )
    assert caught.value.status == 409


def test_patching_a_missing_object_is_404_and_an_unknown_content_type_415(kube: KubeHandle, kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.patch_node("ghost", {"spec": {"unschedulable": True}})
    assert caught.value.status == 404
    kube.create(seed.gpu_node("gpu-1"))
    with pytest.raises(ApiException) as caught:
        core.patch_node("gpu-1", {"spec": {}}, _content_type="application/x-www-form-urlencoded+json")
    assert caught.value.status == 415


def test_server_side_apply_creates_then_conflicts_between_managers(kube_client: Any, kube: KubeHandle) -> None:
    core = client.CoreV1Api(kube_client)
    created = core.patch_namespaced_resource_quota(
        "gpu",
        "default",
        _quota_config({"requests.nvidia.com/gpu": "4"}),
        field_manager="gpu-jobs-quotas",
        _content_type=APPLY,
    )
    assert created.spec.hard == {"requests.nvidia.com/gpu": "4"}
    owners = {(m.manager, m.operation) for m in created.metadata.managed_fields}
    assert ("gpu-jobs-quotas", "Apply") in owners
    entry = next(m for m in created.metadata.managed_fields if m.manager == "gpu-jobs-quotas")
    assert entry.fields_v1 == {"f:spec": {"f:hard": {"f:requests.nvidia.com/gpu": {}}}}

    # Another manager applying the same value co-owns it without conflict.
    core.patch_namespaced_resource_quota(
        "gpu", "default", _quota_config({"requests.nvidia.com/gpu": "4"}), field_manager="argocd", _content_type=APPLY
    )
    # ...but changing it is a conflict naming the other owners.
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_resource_quota(
            "gpu",
            "default",
            _quota_config({"requests.nvidia.com/gpu": "8"}),
            field_manager="argocd",
            _content_type=APPLY,
        )
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "gpu-jobs-quotas" using v1: .spec.hard.requests.nvidia.com/gpu'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "gpu-jobs-quotas" using v1',
            "field": ".spec.hard.requests.nvidia.com/gpu",
        }
    ]
    stored = kube.get("ResourceQuota", "gpu", "default")
    assert stored is not None
    assert stored["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}


def test_server_side_apply_force_moves_ownership(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.patch_namespaced_resource_quota(
        "gpu", "default", _quota_config({"requests.nvidia.com/gpu": "4"}), field_manager="kubectl", _content_type=APPLY
    )
    forced = core.patch_namespaced_resource_quota(
        "gpu",
        "default",
        _quota_config({"requests.nvidia.com/gpu": "2"}),
        field_manager="gpu-jobs-quotas",
        force=True,
        _content_type=APPLY,
    )
    assert forced.spec.hard == {"requests.nvidia.com/gpu": "2"}
    assert [m.manager for m in forced.metadata.managed_fields] == ["gpu-jobs-quotas"]
    # The former owner now conflicts, and the new owner can re-apply freely.
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_resource_quota(
            "gpu",
            "default",
            _quota_config({"requests.nvidia.com/gpu": "4"}),
            field_manager="kubectl",
            _content_type=APPLY,
        )
    assert caught.value.status == 409


def test_server_side_apply_removes_fields_the_manager_stopped_applying(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    both = {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/mig-1g.10gb": "7"}
    core.patch_namespaced_resource_quota(
        "gpu", "default", _quota_config(both), field_manager="quotas", _content_type=APPLY
    )
    core.patch_namespaced_resource_quota(
        "gpu", "default", {"metadata": {"labels": {"team": "a"}}}, field_manager="labeller"
    )
    reduced = core.patch_namespaced_resource_quota(
        "gpu", "default", _quota_config({"requests.nvidia.com/gpu": "4"}), field_manager="quotas", _content_type=APPLY
    )
    assert reduced.spec.hard == {"requests.nvidia.com/gpu": "4"}
    assert reduced.metadata.labels == {"team": "a"}  # owned by another manager, untouched
    managers = {m.manager: m.operation for m in reduced.metadata.managed_fields}
    assert managers == {"quotas": "Apply", "labeller": "Update"}


def test_an_update_takes_ownership_without_conflict(kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    core.patch_namespaced_resource_quota(
        "gpu", "default", _quota_config({"requests.nvidia.com/gpu": "4"}), field_manager="quotas", _content_type=APPLY
    )
    updated = core.patch_namespaced_resource_quota(
        "gpu", "default", {"spec": {"hard": {"requests.nvidia.com/gpu": "6"}}}, field_manager="human"
    )
    assert updated.spec.hard == {"requests.nvidia.com/gpu": "6"}
    assert {m.manager for m in updated.metadata.managed_fields} == {"human"}
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_resource_quota(
            "gpu",
            "default",
            _quota_config({"requests.nvidia.com/gpu": "4"}),
            field_manager="quotas",
            _content_type=APPLY,
        )
    assert 'conflict with "human"' in json.loads(caught.value.body)["message"]


def test_apply_needs_a_field_manager(kube_client: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_client).patch_namespaced_resource_quota(
            "gpu", "default", _quota_config({"requests.nvidia.com/gpu": "4"}), _content_type=APPLY
        )
    status = json.loads(caught.value.body)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert "fieldManager: Required value: is required for apply requests" in status["message"]


def test_apply_conflicts_with_the_update_manager_of_a_seeded_object(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(seed.resource_quota("gpu", "default", {"requests.nvidia.com/gpu": "4"}), manager="kubectl-create")
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(kube_client).patch_namespaced_resource_quota(
            "gpu",
            "default",
            _quota_config({"requests.nvidia.com/gpu": "2"}),
            field_manager="quotas",
            _content_type=APPLY,
        )
    assert 'conflict with "kubectl-create" using v1' in json.loads(caught.value.body)["message"]
