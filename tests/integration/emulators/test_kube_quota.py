"""Kube emulator: ResourceQuota admission and status for GPUs, as the real server enforces them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.quantity import canonical

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

    core.delete_namespaced_pod("running", team)  # Terminating for its grace period: still charged
    assert core.read_namespaced_resource_quota("gpu", team).status.used == {"requests.nvidia.com/gpu": "4"}
    core.delete_namespaced_pod("running", team, grace_period_seconds=0)
    assert core.read_namespaced_resource_quota("gpu", team).status.used == {"requests.nvidia.com/gpu": "1"}


def test_bare_and_limits_gpu_keys_are_stored_but_never_enforced(kube: KubeHandle, kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_resource_quota(
        team, {"metadata": {"name": "wrong"}, "spec": {"hard": {"nvidia.com/gpu": "1", "limits.nvidia.com/gpu": "1"}}}
    )
    core.create_namespaced_pod(team, _gpu_pod("eight", 8))
    quota = core.read_namespaced_resource_quota("wrong", team)
    assert quota.spec.hard == {"nvidia.com/gpu": "1", "limits.nvidia.com/gpu": "1"}
    assert quota.status.hard == quota.spec.hard
    # No evaluator matches either key, so the controller reports no usage at all (an empty map is omitted).
    assert quota.status.used is None


def test_used_lists_only_the_keys_an_evaluator_reports(kube: KubeHandle, kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(team, {"metadata": {"name": "settings"}})
    hard = {
        "requests.nvidia.com/gpu": "16",
        "nvidia.com/gpu": "16",
        "limits.nvidia.com/gpu": "16",
        "count/pods": "10",
        "configmaps": "5",
        "count/configmaps": "5",
        "resourcequotas": "1",
    }
    core.create_namespaced_resource_quota(team, {"metadata": {"name": "mixed"}, "spec": {"hard": hard}})
    core.create_namespaced_pod(team, _gpu_pod("two", 2))
    assert core.read_namespaced_resource_quota("mixed", team).status.used == {
        "requests.nvidia.com/gpu": "2",
        "count/pods": "1",
        "configmaps": "1",
        "count/configmaps": "1",
        "resourcequotas": "1",
    }


def _invalid_pod(core: Any, team: str, resources: dict[str, Any]) -> dict[str, Any]:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": resources}]},
    }
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, pod)
    assert caught.value.status == 422
    body: dict[str, Any] = json.loads(caught.value.body)
    assert body["reason"] == "Invalid"
    return body


def test_a_fractional_gpu_is_refused_with_422(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    body = _invalid_pod(core, team, {"limits": {"nvidia.com/gpu": "1.5"}})
    # The request is defaulted from the limit, so both are refused; the value shown is the re-encoded quantity.
    assert body["message"] == (
        'Pod "p" is invalid: ['
        'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "1500m": must be an integer, '
        'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "1500m": must be an integer]'
    )
    assert [c["field"] for c in body["details"]["causes"]] == [
        "spec.containers[0].resources.limits[nvidia.com/gpu]",
        "spec.containers[0].resources.requests[nvidia.com/gpu]",
    ]
    assert core.list_namespaced_pod(team).items == []


def test_a_gpu_request_must_equal_its_limit(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    body = _invalid_pod(core, team, {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}})
    assert body["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to nvidia.com/gpu limit of 2"
    )
    body = _invalid_pod(core, team, {"requests": {"nvidia.com/gpu": "1"}})
    assert body["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.limits: Required value: '
        "Limit must be set for non overcommitable resources"
    )
    # Equal quantities in other spellings are equal.
    pod = {
        "metadata": {"name": "ok"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "cuda",
                    "resources": {"requests": {"nvidia.com/gpu": "1000m"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }
    resources = core.create_namespaced_pod(team, pod).spec.containers[0].resources
    assert (resources.requests, resources.limits) == ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})


def test_a_fractional_bare_gpu_quota_is_refused_but_a_requests_key_is_not_checked(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_resource_quota(
            team, {"metadata": {"name": "bare"}, "spec": {"hard": {"nvidia.com/gpu": "0.5"}}}
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'ResourceQuota "bare" is invalid: spec.hard[nvidia.com/gpu]: Invalid value: "500m": must be an integer'
    )
    # helper.IsIntegerResourceName is false for a requests.<name> key: the real server stores it.
    created = core.create_namespaced_resource_quota(
        team, {"metadata": {"name": "requests"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1.5"}}}
    )
    assert created.spec.hard == {"requests.nvidia.com/gpu": "1500m"}


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


# Quantities in canonical form -----------------------------------------------------------------------------------

#: (written, what the real server returns): from apimachinery pkg/api/resource/quantity_test.go (TestQuantityString
#: alternates, TestQuantityParseEmit, TestParseQuantity canonical, TestQuantityParse rounding), plus the ParseQuantity
#: fast path that keeps text it judges canonical ("010", "+1", "1E3").
CANONICAL = [
    ("1024Mi", "1Gi"),
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("1024Gi", "1Ti"),
    ("5000m", "5"),
    ("0.5", "500m"),
    ("1000M", "1G"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    ("00", "0"),
    (".001e12", "1e9"),
    ("0.001e0", "1e-3"),
    ("1000e-12", "1e-9"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000000001Ki", "2n"),
    ("3.001n", "4n"),
    ("0.00000012345", "124n"),
    ("1.0E", "1E"),
    ("1000000000000000000", "1E"),
    ("999999999999999999.1", "999999999999999999100m"),
    ("10000000000000000000000m", "10E"),
    ("9Ei", "9223372036854775807"),
    ("0.5Mi", "512Ki"),
    ("1.3E+6", "1300e3"),
    ("1e3", "1e3"),
    ("4000m", "4"),
    ("2.0", "2"),
    ("1.5Gi", "1536Mi"),
    ("-1024Mi", "-1Gi"),
    ("1500m", "1500m"),
    ("6Ki", "6Ki"),
    ("1025", "1025"),
    ("010", "010"),
    ("+1", "+1"),
    ("1E3", "1E3"),
    (2, "2"),
    (0.5, "500m"),
]


@pytest.mark.parametrize(("written", "returned"), CANONICAL)
def test_quantity_canonical_form_matches_apimachinery(written: object, returned: str) -> None:
    assert canonical(written) == returned


def test_quota_quantities_are_returned_in_canonical_form(kube: KubeHandle, kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    hard = {"requests.cpu": "4000m", "requests.memory": "1024Mi", "requests.nvidia.com/gpu": "8.0", "pods": "1e3"}
    created = core.create_namespaced_resource_quota(team, {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    expected = {"requests.cpu": "4", "requests.memory": "1Gi", "requests.nvidia.com/gpu": "8", "pods": "1e3"}
    assert created.spec.hard == expected
    quota = core.read_namespaced_resource_quota("q", team)
    assert (quota.spec.hard, quota.status.hard) == (expected, expected)

    patched = core.patch_namespaced_resource_quota("q", team, {"spec": {"hard": {"requests.memory": "1.5Gi"}}})
    assert patched.spec.hard["requests.memory"] == "1536Mi"


def test_server_side_apply_of_the_same_quantities_in_another_spelling_is_a_no_op(
    kube: KubeHandle, kube_client: Any, team: str
) -> None:
    core = client.CoreV1Api(kube_client)
    config = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}, "spec": {"hard": {}}}

    def apply(hard: dict[str, str]) -> Any:
        body = {**config, "spec": {"hard": hard}}
        return core.patch_namespaced_resource_quota(
            "gpu", team, body, field_manager="quotas", _content_type="application/apply-patch+yaml"
        )

    apply({"requests.nvidia.com/gpu": "4", "requests.memory": "1Gi"})
    before = core.read_namespaced_resource_quota("gpu", team)  # after the controller wrote status
    again = apply({"requests.nvidia.com/gpu": "4000m", "requests.memory": "1024Mi"})
    assert again.spec.hard == {"requests.nvidia.com/gpu": "4", "requests.memory": "1Gi"}
    assert again.metadata.resource_version == before.metadata.resource_version


def test_pod_resources_are_returned_in_canonical_form(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    resources = {
        "requests": {"cpu": "0.5", "memory": "1073741824"},
        "limits": {"cpu": "1000m", "memory": "1.5Gi", "nvidia.com/gpu": "2000m"},
    }
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": resources}]},
    }
    created = core.create_namespaced_pod(team, pod).spec.containers[0].resources
    # The GPU request is defaulted from the limit as written, then both are re-encoded.
    assert created.requests == {"cpu": "500m", "memory": "1073741824", "nvidia.com/gpu": "2"}
    assert created.limits == {"cpu": "1", "memory": "1536Mi", "nvidia.com/gpu": "2"}


def test_node_capacity_and_limit_ranges_are_returned_in_canonical_form(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    capacity = {"cpu": "96000m", "memory": "1081344Mi", "nvidia.com/gpu": "8.0", "pods": "110"}
    node = core.create_node({"metadata": {"name": "n"}, "status": {"capacity": capacity, "allocatable": capacity}})
    assert node.status.capacity == {"cpu": "96", "memory": "1056Gi", "nvidia.com/gpu": "8", "pods": "110"}
    assert node.status.allocatable == node.status.capacity

    limits = {"type": "Container", "max": {"memory": "2048Mi"}, "default": {"cpu": "0.25"}, "defaultRequest": {}}
    created = core.create_namespaced_limit_range(team, {"metadata": {"name": "l"}, "spec": {"limits": [limits]}})
    assert created.spec.limits[0].max == {"memory": "2Gi"}
    assert created.spec.limits[0].default == {"cpu": "250m"}


# Scoped quotas ------------------------------------------------------------------------------------------------


def _pod(name: str, gpus: int = 0, cpu: str = "", **spec: Any) -> dict[str, Any]:
    limits = {**({"nvidia.com/gpu": str(gpus)} if gpus else {}), **({"cpu": cpu} if cpu else {})}
    container = {"name": "main", "image": "cuda", "resources": {"limits": limits}}
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


def _scoped_quota(name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}}


def _used(core: Any, team: str, name: str) -> Any:
    return core.read_namespaced_resource_quota(name, team).status.used


def test_a_priority_class_scope_counts_and_limits_only_its_pods(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    gpus = {"requests.nvidia.com/gpu": "4"}
    high = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    rest = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}
    anyclass = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}
    core.create_namespaced_resource_quota(team, _scoped_quota("high", gpus, scopeSelector=high))
    core.create_namespaced_resource_quota(
        team, _scoped_quota("rest", {"requests.nvidia.com/gpu": "1"}, scopeSelector=rest)
    )
    core.create_namespaced_resource_quota(team, _scoped_quota("any", {"pods": "10"}, scopeSelector=anyclass))

    core.create_namespaced_pod(team, _pod("trainer", 3, priorityClassName="high"))
    core.create_namespaced_pod(team, _pod("notebook", 1))  # no class: NotIn matches it, Exists does not
    core.create_namespaced_pod(team, _pod("batch", 0, priorityClassName="low"))
    assert _used(core, team, "high") == {"requests.nvidia.com/gpu": "3"}
    assert _used(core, team, "rest") == {"requests.nvidia.com/gpu": "1"}
    assert _used(core, team, "any") == {"pods": "2"}

    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _pod("second-notebook", 1))
    assert json.loads(caught.value.body)["message"] == (
        'pods "second-notebook" is forbidden: exceeded quota: rest, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1"
    )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _pod("big", 2, priorityClassName="high"))
    assert "exceeded quota: high," in json.loads(caught.value.body)["message"]
    core.create_namespaced_pod(team, _pod("small", 1, priorityClassName="high"))
    assert _used(core, team, "high") == {"requests.nvidia.com/gpu": "4"}


def test_best_effort_and_terminating_scopes(kube_client: Any, team: str) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_resource_quota(team, _scoped_quota("best-effort", {"pods": "1"}, scopes=["BestEffort"]))
    core.create_namespaced_resource_quota(
        team, _scoped_quota("burstable", {"pods": "5", "requests.cpu": "2"}, scopes=["NotBestEffort"])
    )
    core.create_namespaced_resource_quota(
        team, _scoped_quota("jobs", {"requests.nvidia.com/gpu": "2"}, scopes=["Terminating"])
    )
    core.create_namespaced_resource_quota(
        team, _scoped_quota("services", {"requests.nvidia.com/gpu": "8"}, scopes=["NotTerminating"])
    )

    # Only cpu and memory decide the QoS class: a pod asking for GPUs alone is BestEffort, so the NotBestEffort
    # quota on requests.cpu neither counts it nor makes it state its cpu ("must specify").
    gpu_only = core.create_namespaced_pod(team, _pod("gpu-only", 1, activeDeadlineSeconds=3600))
    assert gpu_only.status.qos_class == "BestEffort"
    with_cpu = core.create_namespaced_pod(team, _pod("with-cpu", 1, cpu="1"))
    assert with_cpu.status.qos_class == "Burstable"
    assert _used(core, team, "best-effort") == {"pods": "1"}
    assert _used(core, team, "burstable") == {"pods": "1", "requests.cpu": "1"}
    assert _used(core, team, "jobs") == {"requests.nvidia.com/gpu": "1"}
    assert _used(core, team, "services") == {"requests.nvidia.com/gpu": "1"}

    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _pod("another", 2))
    assert "exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1" in caught.value.body
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(team, _pod("deadline", 2, cpu="500m", activeDeadlineSeconds=60))
    assert "exceeded quota: jobs, requested: requests.nvidia.com/gpu=2" in caught.value.body


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]},
            'spec.scopes: Invalid value: ["BestEffort","NotBestEffort"]: conflicting scopes',
        ),
        (
            {"hard": {"requests.cpu": "1"}, "scopes": ["BestEffort"]},
            'spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource',
        ),
        (
            {"hard": {"pods": "1"}, "scopes": ["Sometimes"]},
            'spec.scopes: Invalid value: ["Sometimes"]: unsupported scope',
        ),
        (
            {
                "hard": {"requests.nvidia.com/gpu": "1"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]},
            },
            "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` "
            "is 'In' or 'NotIn' for scope selector",
        ),
        (
            {
                "hard": {"pods": "1"},
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "Terminating", "operator": "In", "values": ["x"]}]
                },
            },
            "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' only operator when "
            "scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "
            "ResourceQuotaScopeBestEffort and ResourceQuotaScopeNotBestEffort",
        ),
        (
            {"hard": {"persistentvolumeclaims": "1"}, "scopes": ["VolumeAttributesClass"]},
            'spec.scopes: Unsupported value: "VolumeAttributesClass": the gpu-jobs Kubernetes emulator does not '
            "model this quota scope (a real server accepts it)",
        ),
    ],
)
def test_invalid_or_unmodelled_scopes_are_refused_with_422(
    kube_client: Any, team: str, spec: dict[str, Any], message: str
) -> None:
    core = client.CoreV1Api(kube_client)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_resource_quota(team, {"metadata": {"name": "q"}, "spec": spec})
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == f'ResourceQuota "q" is invalid: {message}'
