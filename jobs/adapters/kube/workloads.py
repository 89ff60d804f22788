"""Nodes and the GPU pods on them (reads), cordon and eviction (writes): what the nodegroups job does to a
cluster's workloads before a group goes down."""

from __future__ import annotations

import contextlib
from typing import Any

from kubernetes import client

from jobs import errors
from jobs.adapters.kube.client import call, pages
from jobs.adapters.kube.rbac import Grant
from jobs.core.nodegroup_plan import GpuPod, NodeInfo
from jobs.labels import CORDONED_BY_ANNOTATION, GPU_RESOURCE_PREFIXES, KEEP_ALIVE_ANNOTATION, SAFE_TO_EVICT_ANNOTATION

RBAC = (
    Grant("", "nodes", ("list", "patch"), "cluster"),  # a group's nodes by label; cordon before a drain
    Grant("", "pods", ("list", "get"), "cluster"),  # GPU pods on a group's nodes; a drain waits for evicted pods
    Grant("", "pods/eviction", ("create",), "cluster"),  # `onBusy: drain` evicts, so PodDisruptionBudgets hold
)


def _gpus(pod: Any) -> int:
    total = 0
    for container in pod.spec.containers or []:
        resources = container.resources
        wanted = {**((resources and resources.limits) or {}), **((resources and resources.requests) or {})}
        for name, value in wanted.items():
            if name.startswith(GPU_RESOURCE_PREFIXES):
                total += int(str(value))
    return total


class KubeCluster:
    """Nodes and GPU pods (reads), cordon and eviction (writes)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def nodes(self) -> list[NodeInfo]:
        found = []
        for n in pages("list nodes", self.core.list_node):
            unschedulable = bool(n.spec and n.spec.unschedulable)
            ours = unschedulable and CORDONED_BY_ANNOTATION in (n.metadata.annotations or {})
            found.append(NodeInfo(n.metadata.name, dict(n.metadata.labels or {}), unschedulable, ours))
        return found

    def gpu_pods(self) -> list[GpuPod]:
        found = []
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        for pod in pages("list pods", self.core.list_pod_for_all_namespaces, field_selector=selector):
            gpus = _gpus(pod)
            if not gpus or not pod.spec.node_name:
                continue
            notes = pod.metadata.annotations or {}
            evictable = notes.get(SAFE_TO_EVICT_ANNOTATION) != "false" and KEEP_ALIVE_ANNOTATION not in notes
            found.append(GpuPod(pod.metadata.namespace, pod.metadata.name, pod.spec.node_name, gpus, evictable))
        return found

    def cordon(self, node: str) -> None:
        mark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: "nodegroups"}}, "spec": {"unschedulable": True}}
        call("patch nodes", lambda: self.core.patch_node(node, mark))

    def uncordon(self, node: str) -> None:
        unmark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: None}}, "spec": {"unschedulable": None}}
        with contextlib.suppress(errors.NotFound):  # the node went away with its group: nothing left to undo
            call("patch nodes", lambda: self.core.patch_node(node, unmark))

    def evict(self, pod: GpuPod) -> None:
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace))
        try:
            call(
                "create pods/eviction", lambda: self.core.create_namespaced_pod_eviction(pod.name, pod.namespace, body)
            )
        except errors.Throttled as exc:  # 429 from eviction means a PodDisruptionBudget said no (for now)
            raise errors.Busy(str(exc), operation=exc.operation, code="DisruptionBudget") from exc
        except errors.NotFound:
            pass  # already gone

    def pod_exists(self, pod: GpuPod) -> bool:
        try:
            call("get pods", lambda: self.core.read_namespaced_pod(pod.name, pod.namespace))
        except errors.NotFound:
            return False
        return True
