"""Kube emulator: the pods/eviction subresource honours PodDisruptionBudgets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration


def _eviction(name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}


@pytest.fixture
def trainers(kube: KubeHandle) -> None:
    for index in range(3):
        kube.create(seed.gpu_pod(f"trainer-{index}", node="gpu-1", labels={"app": "trainer"}))
    kube.create(seed.disruption_budget("trainer", "default", {"app": "trainer"}, min_available=2))


@pytest.mark.usefixtures("trainers")
def test_eviction_deletes_until_the_budget_would_be_violated(kube: KubeHandle, kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    budget = client.PolicyV1Api(kube_client).read_namespaced_pod_disruption_budget("trainer", "default")
    assert (budget.status.current_healthy, budget.status.desired_healthy, budget.status.disruptions_allowed) == (
        3,
        2,
        1,
    )

    response = kube_client.rest_client.request(
        "POST",
        f"{kube.url}/api/v1/namespaces/default/pods/trainer-0/eviction",
        headers={"Content-Type": "application/json"},
        body=_eviction("trainer-0"),
    )
    assert response.status == 201
    assert json.loads(response.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    evicted = kube.get("Pod", "trainer-0", "default")  # deleted gracefully: Terminating, no longer healthy
    assert evicted is not None
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30

    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("trainer-1", "default", _eviction("trainer-1"))
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget trainer needs 2 healthy pods and has 2 currently",
        }
    ]
    assert kube.get("Pod", "trainer-1", "default") is not None
    assert kube.log.operations()[-1] == "create pods/eviction"


@pytest.mark.usefixtures("trainers")
def test_max_unavailable_and_unprotected_pods(kube: KubeHandle, kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    policy = client.PolicyV1Api(kube_client)
    policy.patch_namespaced_pod_disruption_budget(
        "trainer", "default", {"spec": {"minAvailable": None, "maxUnavailable": 0}}
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("trainer-2", "default", _eviction("trainer-2"))
    assert caught.value.status == 429

    kube.create(seed.gpu_pod("loner", node="gpu-1"))
    core.create_namespaced_pod_eviction("loner", "default", _eviction("loner"))
    kube.create(seed.gpu_pod("waiting", labels={"app": "trainer"}, phase="Pending"))
    core.create_namespaced_pod_eviction("waiting", "default", _eviction("waiting"))  # on no node: gone at once
    pods = {p["metadata"]["name"]: p["metadata"].get("deletionTimestamp") for p in kube.list("Pod", "default")}
    assert sorted(name for name, deleting in pods.items() if not deleting) == ["trainer-0", "trainer-1", "trainer-2"]
    assert pods["loner"]  # on a node: Terminating for its grace period


def test_evicting_a_missing_pod_is_404_and_a_mismatched_name_400(kube: KubeHandle, kube_client: Any) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("ghost", "default", _eviction("ghost"))
    assert caught.value.status == 404
    kube.create(seed.gpu_pod("p", node="gpu-1"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("p", "default", _eviction("other"))
    assert caught.value.status == 400
