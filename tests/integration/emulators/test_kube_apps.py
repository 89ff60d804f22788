"""Kube emulator: apps/v1 Deployments, ReplicaSets and StatefulSets through the official client and the real kubectl:
discovery, defaults and validation, the autoscaling/v1 scale subresource, and the minimal controllers (pods from
the template, owned and named as the real ones; the excess deleted gracefully)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"
ANNOTATION = "gpu-jobs/scaled-from-replicas"


def kubectl(kube: KubeHandle, *args: str) -> str:
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _deployment(name: str, replicas: int, gpus: int = 1, grace_s: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": grace_s,
                    "containers": [
                        {"name": "main", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
                    ],
                },
            },
        },
    }


def _live(kube: KubeHandle, namespace: str = "default") -> list[dict[str, Any]]:
    return [p for p in kube.list("Pod", namespace) if not p["metadata"].get("deletionTimestamp")]


@pytest.fixture
def nodes(kube: KubeHandle) -> None:
    kube.create(seed.gpu_node("gpu-1", gpus=2))
    kube.create(seed.gpu_node("gpu-2", gpus=2))


def test_discovery_serves_the_apps_group_and_the_scale_subresource(kube_client: Any) -> None:
    resources = {r.name: r for r in client.AppsV1Api(kube_client).get_api_resources().resources}
    for plural in ("deployments", "replicasets", "statefulsets"):
        scale = resources[f"{plural}/scale"]
        assert (scale.group, scale.version, scale.kind, sorted(scale.verbs)) == (
            "autoscaling",
            "v1",
            "Scale",
            ["get", "patch", "update"],
        )
    assert resources["deployments"].short_names == ["deploy"]


@pytest.mark.usefixtures("nodes")
def test_a_created_deployment_gets_one_replicaset_and_running_pods_on_nodes_with_room(
    kube: KubeHandle, kube_client: Any
) -> None:
    apps = client.AppsV1Api(kube_client)
    created = apps.create_namespaced_deployment("default", _deployment("llm", 3, gpus=1))
    assert created.spec.strategy.type == "RollingUpdate"  # defaulted
    assert created.spec.template.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}

    (rs,) = apps.list_namespaced_replica_set("default").items
    assert rs.metadata.name.startswith("llm-")
    assert rs.metadata.owner_references[0].kind == "Deployment"
    assert rs.metadata.owner_references[0].uid == created.metadata.uid
    assert rs.metadata.owner_references[0].controller is True
    pods = kube.list("Pod", "default")
    assert len(pods) == 3
    for pod in pods:
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "ReplicaSet",
            rs.metadata.name,
            rs.metadata.uid,
            True,
        )
        assert pod["metadata"]["name"].startswith(f"{rs.metadata.name}-")
        assert len(pod["metadata"]["name"]) == len(rs.metadata.name) + 6
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["startTime"]
    # Two GPUs per node: the scheduler stand-in fills gpu-1, then gpu-2.
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-1", "gpu-1", "gpu-2"]
    status = apps.read_namespaced_deployment("llm", "default").status
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (3, 3, 3)


@pytest.mark.usefixtures("nodes")
def test_scale_subresource_get_put_patch_and_the_controllers_follow(kube: KubeHandle, kube_client: Any) -> None:
    apps = client.AppsV1Api(kube_client)
    deployment = apps.create_namespaced_deployment("default", _deployment("llm", 2))
    scale = apps.read_namespaced_deployment_scale("llm", "default")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 2, "app=llm")
    assert scale.metadata.uid == deployment.metadata.uid

    apps.patch_namespaced_deployment_scale("llm", "default", {"spec": {"replicas": 0}})
    assert apps.read_namespaced_deployment("llm", "default").spec.replicas == 0
    (rs,) = apps.list_namespaced_replica_set("default").items
    assert rs.spec.replicas == 0
    assert _live(kube) == []
    assert len(kube.list("Pod", "default")) == 2  # Terminating for their grace period (1 s)
    deadline = time.monotonic() + 5
    while kube.list("Pod", "default"):
        assert time.monotonic() < deadline
        time.sleep(0.05)

    current = apps.read_namespaced_deployment_scale("llm", "default")
    current.spec.replicas = 1
    apps.replace_namespaced_deployment_scale("llm", "default", current)
    assert len(_live(kube)) == 1
    current.spec.replicas = 2  # the resourceVersion read before the last write: stale
    with pytest.raises(ApiException) as caught:
        apps.replace_namespaced_deployment_scale("llm", "default", current)
    assert caught.value.status == 409
    with pytest.raises(ApiException) as caught:
        apps.patch_namespaced_deployment_scale("llm", "default", {"spec": {"replicas": -1}})
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"], status["details"]["kind"]) == (422, "Invalid", "Scale")


def test_validation_refuses_a_selector_that_does_not_match_the_template(kube_client: Any) -> None:
    body = _deployment("bad", 1)
    body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(ApiException) as caught:
        client.AppsV1Api(kube_client).create_namespaced_deployment("default", body)
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.template.metadata.labels"]


def test_a_statefulset_scales_by_ordinal(kube: KubeHandle, kube_client: Any) -> None:
    kube.create(seed.gpu_node("gpu-1"))
    kube.seed_statefulset("db", nodes=("gpu-1",), replicas=3, grace_s=1)
    apps = client.AppsV1Api(kube_client)

    apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": 1}})
    live = [p["metadata"]["name"] for p in _live(kube)]
    assert live == ["db-0"]  # the highest ordinals go first
    terminating = [p["metadata"]["name"] for p in kube.list("Pod", "default") if p["metadata"].get("deletionTimestamp")]
    assert terminating == ["db-1", "db-2"]

    apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": 2}})
    # db-1 is still Terminating: its name is taken until it is gone, then it comes back.
    assert [p["metadata"]["name"] for p in _live(kube)] == ["db-0"]
    deadline = time.monotonic() + 5
    while [p["metadata"]["name"] for p in _live(kube)] != ["db-0", "db-1"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pod = kube.get("Pod", "db-1", "default")
    assert pod is not None
    assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"


def test_seeded_workloads_are_consistent_and_left_alone(kube: KubeHandle) -> None:
    kube.create(seed.gpu_node("gpu-1"))
    deployment = kube.seed_deployment("llm", nodes=("gpu-1", "gpu-1"), gpus=2)
    job = kube.seed_job("train", nodes=("gpu-1",))
    kube.log.clear()
    pods = {p["metadata"]["name"] for p in kube.list("Pod", "default")}

    assert pods == {p["metadata"]["name"] for p in (*deployment.pods, *job.pods)}
    assert kube.get("Deployment", "llm", "default", "apps/v1")["status"]["readyReplicas"] == 2  # type: ignore[index]
    (owner,) = job.pods[0]["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["uid"]) == ("batch/v1", "Job", job.owner["metadata"]["uid"])


def test_kubectl_get_scale_and_restore_from_the_recorded_replicas(kube: KubeHandle, tmp_path: Path) -> None:
    kube.create(seed.gpu_node("gpu-1"))
    kube.seed_deployment("llm", nodes=("gpu-1",) * 3, grace_s=0, annotations={ANNOTATION: "3"})
    kube.seed_statefulset("db", nodes=("gpu-1",))

    table = kubectl(kube, "get", "deployments,replicasets,statefulsets").splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["deployment.apps/llm", "3/3", "3", "3"]
    assert any(line.startswith("statefulset.apps/db") and "1/1" in line for line in table)

    assert kubectl(kube, "scale", "deployment", "llm", "--replicas=0").strip() == "deployment.apps/llm scaled"
    assert kube.get("Deployment", "llm", "default", "apps/v1")["spec"]["replicas"] == 0  # type: ignore[index]
    assert _live(kube) == [p for p in _live(kube) if p["metadata"]["name"].startswith("db-")]

    # The restore the docs give, as typed in a shell: the annotation's `/` needs no escaping in kubectl's JSONPath.
    restore = (
        "kubectl scale deployment llm --replicas=$(kubectl get deploy llm -o "
        "jsonpath='{.metadata.annotations.gpu-jobs/scaled-from-replicas}')"
    )
    environ = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "KUBECONFIG": str(kube.kubeconfig), "HOME": str(tmp_path)}
    shell = subprocess.run(
        ["bash", "-c", restore], env=environ, capture_output=True, text=True, timeout=60, check=False
    )
    assert (shell.returncode, shell.stdout.strip()) == (0, "deployment.apps/llm scaled"), shell.stderr
    assert kube.get("Deployment", "llm", "default", "apps/v1")["spec"]["replicas"] == 3  # type: ignore[index]
    assert "successfully rolled out" in kubectl(kube, "rollout", "status", "deployment/llm", "--timeout=10s")
    assert len([p for p in _live(kube) if p["metadata"]["name"].startswith("llm-")]) == 3
