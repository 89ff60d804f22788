"""Kube emulator: ResourceQuota admission and status for GPUs, as the real server enforces them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration


def _gpu_pod(name: str, gpus: int, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """What a user submits: GPUs as a limit only (the request is defaulted from it)."""
    container = {"name": "main", "image": "cuda", "resources": {"limits": {resource: str(gpus)}}}
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


@pytest.fixture
def team(kube: KubeHandle) -> str:
    kube.create(seed.namespace("team-a"))
    return "team-a"


def test_a_pod_over_the_gpu_request_quota_is_refused_with_403(kube: KubeHandle, kube_client: Any, team: str) -> None:
    kube.create(seed.resource_quota("gpu", team, {"requests.nvidia.com/gpu": "4"}))
    kube.create(seed.gpu_pod("running", team, node="gpu-1", gpus=3))
    core = client.CoreV1Api(kube_client)
    assert core.read_namespaced_resource_quota("gpu", team).status.used == {"requests.nvidia.com/gpu": "3"}

    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _gpu_pod("big", 2))
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        'pods "big" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=3, limited: requests.nvidia.com/gpu=4"
    )
    assert status["details"] == {"name": "big", "kind": "pods"}

    core.create_namespaced_pod(team, _gpu_pod("fits", 1))
    quota = core.read_namespaced_resource_quota("gpu", team)
    assert quota.status.hard == {"requests.nvidia.com/gpu": "4"}
    assert quota.status.used == {"requests.nvidia.com/gpu": "4"}

    core.delete_namespaced_pod("running", team)
    assert core.read_namespaced_resource_quota("gpu", team).status.used == {"requests.nvidia.com/gpu": "1"}


def test_bare_and_limits_gpu_keys_are_stored_but_never_enforced(kube: KubeHandle, kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_resource_quota(
        team, {"metadata": {"name": "wrong"}, "spec": {"hard": {"nvidia.com/gpu": "1", "limits.nvidia.com/gpu": "1"}}}
    )
    core.create_namespaced_pod(team, _gpu_pod("eight", 8))
    quota = core.read_namespaced_resource_quota("wrong", team)
    assert quota.spec.hard == {"nvidia.com/gpu": "1", "limits.nvidia.com/gpu": "1"}
    assert quota.status.used == {"nvidia.com/gpu": "0", "limits.nvidia.com/gpu": "0"}


def test_quota_status_is_recalculated_on_quota_create_and_update(kube: KubeHandle, kube_client: Any, team: str) -> None:
    kube.create(seed.gpu_pod("a", team, node="gpu-1", gpus=2))
    kube.create(seed.gpu_pod("b", team, node="gpu-1", gpus=2, phase="Succeeded"))  # terminal pods do not count
    kube.create(seed.gpu_pod("mig", team, node="gpu-1", gpus=3, resource="nvidia.com/mig-1g.10gb"))
    core = client.CoreV1Api(kube_client)
    hard = {"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-1g.10gb": "7", "pods": "10"}
    created = core.create_namespaced_resource_quota(team, {"metadata": {"name": "gpu"}, "spec": {"hard": hard}})
    assert created.status is None  # the creator never writes status; the controller fills it in
    quota = core.read_namespaced_resource_quota("gpu", team)
    assert quota.status.hard == hard
    assert quota.status.used == {"requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-1g.10gb": "3", "pods": "2"}

    # Lowering a quota under current usage is accepted and evicts nothing.
    lowered = core.patch_namespaced_resource_quota("gpu", team, {"spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})
    assert lowered.spec.hard["requests.nvidia.com/gpu"] == "1"
    quota = core.read_namespaced_resource_quota("gpu", team)
    assert quota.status.hard["requests.nvidia.com/gpu"] == "1"
    assert quota.status.used["requests.nvidia.com/gpu"] == "2"
    assert [p.metadata.name for p in core.list_namespaced_pod(team).items] == ["a", "b", "mig"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _gpu_pod("more", 1))
    assert caught.value.status == 403


def test_quota_status_cannot_be_written_through_the_main_resource(
    kube: KubeHandle, kube_client: Any, team: str
) -> None:
    kube.create(seed.resource_quota("gpu", team, {"requests.nvidia.com/gpu": "4"}))
    core = client.CoreV1Api(kube_client)
    patched = core.patch_namespaced_resource_quota("gpu", team, {"status": {"used": {"requests.nvidia.com/gpu": "4"}}})
    assert patched.status.used == {"requests.nvidia.com/gpu": "0"}


def test_compute_quota_requires_requests_and_counts_cpu(kube: KubeHandle, kube_client: Any, team: str) -> None:
    kube.create(seed.resource_quota("compute", team, {"requests.cpu": "2", "limits.memory": "4Gi"}))
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _gpu_pod("no-requests", 1))
    assert json.loads(caught.value.body)["message"] == (
        'pods "no-requests" is forbidden: failed quota: compute: must specify limits.memory for: main; '
        "requests.cpu for: main"
    )
    pod = {
        "metadata": {"name": "ok"},
        "spec": {
            "containers": [
                {"name": "main", "image": "i", "resources": {"requests": {"cpu": "1500m"}, "limits": {"memory": "1Gi"}}}
            ]
        },
    }
    core.create_namespaced_pod(team, pod)
    assert core.read_namespaced_resource_quota("compute", team).status.used == {
        "requests.cpu": "1500m",
        "limits.memory": "1Gi",
    }
