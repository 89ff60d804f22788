"""Small builders for the objects GPU tests seed: GPU nodes, GPU pods, namespaces, quotas, disruption budgets.

They return plain manifests; store them with ``kube.create(...)`` (no HTTP, no admission) or send them through
the API. Timestamps are optional so tests can pin pod ages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cluster import timestamp

Json = dict[str, Any]
GPU = "nvidia.com/gpu"


def namespace(name: str, labels: dict[str, str] | None = None) -> Json:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def gpu_node(
    name: str,
    gpus: int = 8,
    labels: dict[str, str] | None = None,
    resource: str = GPU,
    ready: bool = True,
    unschedulable: bool = False,
    created: datetime | None = None,
) -> Json:
    """A Ready node advertising ``gpus`` of ``resource`` in capacity and allocatable."""
    resources = {"cpu": "96", "memory": "1056Gi", "pods": "110", resource: str(gpus)}
    meta: Json = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if created:
        meta["creationTimestamp"] = timestamp(created)
    node: Json = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.8.0",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.37.0",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023",
                "systemUUID": "",
            },
        },
    }
    return node


def gpu_pod(
    name: str,
    namespace: str = "default",
    node: str | None = None,
    gpus: int = 1,
    resource: str = GPU,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Running",
    created: datetime | None = None,
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
    grace_s: int | None = None,
    started: datetime | None = None,
    owner: Json | None = None,
) -> Json:
    """A pod with one container asking ``gpus`` of ``resource`` (as a limit and request, like real GPU pods).

    ``phase`` Running comes with a Ready condition, which is what a disruption budget counts as healthy.
    ``grace_s`` is its ``terminationGracePeriodSeconds`` (absent: the emulator deletes it as if defaulted to 30);
    ``started`` its ``status.startTime``; ``owner`` its controller (:func:`controller_ref`).
    """
    meta: Json = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if created:
        meta["creationTimestamp"] = timestamp(created)
    quantity = {resource: str(gpus)} if gpus else {}
    spec: Json = {
        "containers": [
            {"name": "main", "image": image, "resources": {"limits": dict(quantity), "requests": dict(quantity)}}
        ],
        "restartPolicy": "Always",
    }
    if node:
        spec["nodeName"] = node
    if grace_s is not None:
        spec["terminationGracePeriodSeconds"] = grace_s
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    running = phase == "Running"
    status: Json = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if running else "False"}],
    }
    if started is not None:
        status["startTime"] = timestamp(started)
    if running:
        status["containerStatuses"] = [
            {"name": "main", "ready": True, "restartCount": 0, "image": image, "imageID": "", "state": {"running": {}}}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def resource_quota(name: str, namespace: str, hard: dict[str, str], labels: dict[str, str] | None = None) -> Json:
    meta: Json = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": {"hard": dict(hard)}}


#: The label of the quotas the gpu-jobs quotas job owns.
MANAGED = {"app.kubernetes.io/managed-by": "gpu-jobs"}


def disruption_budget(
    name: str,
    namespace: str,
    match_labels: dict[str, str],
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> Json:
    spec: Json = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
