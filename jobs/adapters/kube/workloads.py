"""Nodes and the GPU pods on them (reads), cordon and eviction (writes): what the nodegroups job does to a
cluster's workloads before a group goes down. Objects are read as JSON and parsed once, here, into the core's
``NodeInfo`` and ``GpuPod``."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import STRATEGIC_MERGE_PATCH, ApiClient, json_pages, request
from jobs.adapters.kube.pods import node_shape, pending_pod
from jobs.adapters.kube.rbac import Grant
from jobs.core.nodegroup_plan import SHUTDOWN_WARNING, BudgetRefused, GpuPod, NodeInfo
from jobs.core.wake import KEEP_UP_UNTIL_ANNOTATION, NOT_WOKEN, WAKING, PendingPod
from jobs.labels import CORDONED_BY_ANNOTATION, GPU_RESOURCE_PREFIXES, KEEP_ALIVE_ANNOTATION, SAFE_TO_EVICT_ANNOTATION

RBAC = (
    Grant("", "nodes", ("list", "patch"), "cluster"),  # a group's nodes by label; cordon before a drain
    Grant("", "pods", ("list", "get"), "cluster"),  # GPU pods on a group's nodes; a drain waits for evicted pods
    Grant("", "pods/eviction", ("create",), "cluster"),  # `onBusy: drain` evicts, so PodDisruptionBudgets hold
    # After a drain gave up: whether a budget that refused it allows another number now (then it is tried again).
    Grant("policy", "poddisruptionbudgets", ("get",), "cluster"),
    # `warnBefore`: the Warning Event on each running GPU pod (in its namespace) before its group goes down, and the
    # ones already given, so a later run adds none (kube/events.py writes them).
    Grant("", "events", ("list", "create"), "cluster"),
)

# What the API server says when a budget refuses an eviction (pkg/registry/core/pod/storage/eviction.go).
_BUDGET_CAUSE = re.compile(r"^The disruption budget (\S+) needs")

# Pods that have finished hold no GPU.
_RUNNING_OR_PENDING = "status.phase!=Succeeded,status.phase!=Failed"


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    meta = node.get("metadata") or {}
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    ours = unschedulable and CORDONED_BY_ANNOTATION in (meta.get("annotations") or {})
    return NodeInfo(str(meta["name"]), dict(meta.get("labels") or {}), unschedulable, ours, node_shape(node))


def gpu_pod(pod: Mapping[str, Any]) -> GpuPod | None:
    """The pod as a ``GpuPod``, or None if it asks for no GPU or is not on a node yet."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    gpus = 0
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        gpus += sum(int(str(value)) for name, value in wanted.items() if name.startswith(GPU_RESOURCE_PREFIXES))
    node = spec.get("nodeName")
    if not gpus or not node:
        return None
    notes = meta.get("annotations") or {}
    evictable = notes.get(SAFE_TO_EVICT_ANNOTATION) != "false" and KEEP_ALIVE_ANNOTATION not in notes
    controller = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    owner = str(controller.get("uid") or "") if controller else ""
    uid, keep_up = str(meta.get("uid") or ""), notes.get(KEEP_UP_UNTIL_ANNOTATION)
    return GpuPod(str(meta["namespace"]), str(meta["name"]), str(node), gpus, evictable, uid, owner, keep_up)


class KubeCluster:
    """Nodes and GPU pods (reads), cordon and eviction (writes)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def nodes(self) -> list[NodeInfo]:
        return [node_info(n) for n in json_pages(self.api, "list nodes", "/api/v1/nodes")]

    def gpu_pods(self) -> list[GpuPod]:
        return self.gpu_and_pending_pods()[0]

    def gpu_and_pending_pods(self) -> tuple[list[GpuPod], list[PendingPod]]:
        # One list serves both: the Pending GPU pods that may wake a group cost no call of their own.
        listing = list(json_pages(self.api, "list pods", "/api/v1/pods", fieldSelector=_RUNNING_OR_PENDING))
        placed = [found for found in map(gpu_pod, listing) if found is not None]
        return placed, [found for found in map(pending_pod, listing) if found is not None]

    def wake_notices(self) -> frozenset[str]:
        """``namespace/name`` of each wake Event (waking, not woken) this job put on a pod."""
        selector = "reportingComponent=gpu-jobs/nodegroups,involvedObject.kind=Pod"
        listing = json_pages(self.api, "list events", "/api/v1/events", fieldSelector=selector)
        reasons = (WAKING, NOT_WOKEN)
        return frozenset(
            f"{e['metadata']['namespace']}/{e['metadata']['name']}" for e in listing if e["reason"] in reasons
        )

    def shutdown_warnings(self) -> frozenset[str]:
        # Narrowed by the server to this job's warnings: a cluster's other Events are never paged through.
        selector = f"reason={SHUTDOWN_WARNING},reportingComponent=gpu-jobs/nodegroups"
        listing = json_pages(self.api, "list events", "/api/v1/events", fieldSelector=selector)
        return frozenset(f"{e['metadata']['namespace']}/{e['metadata']['name']}" for e in listing)

    def cordon(self, node: str) -> None:
        mark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: "nodegroups"}}, "spec": {"unschedulable": True}}
        self._patch_node(node, mark)

    def uncordon(self, node: str) -> None:
        unmark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: None}}, "spec": {"unschedulable": None}}
        with contextlib.suppress(errors.NotFound):  # the node went away with its group: nothing left to undo
            self._patch_node(node, unmark)

    def evict(self, pod: GpuPod) -> bool:
        """Evict this pod, and only this one: the eviction carries its uid as a precondition, so a same-named
        replacement (a StatefulSet's) is never evicted in its place. False when the pod was already gone (404) or
        replaced (409: the precondition failed)."""
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        if pod.uid:
            body["deleteOptions"] = {"preconditions": {"uid": pod.uid}}
        try:
            request(self.api, "create pods/eviction", "POST", f"{_pod_path(pod)}/eviction", body=body)
        except errors.Throttled as exc:  # 429 from eviction means a PodDisruptionBudget said no (for now)
            named = (_BUDGET_CAUSE.match(c.message) for c in exc.causes if c.reason == "DisruptionBudget")
            budget = next((f"{pod.namespace}/{m.group(1)}" for m in named if m), None)
            raise BudgetRefused(
                str(exc),
                budget=budget,
                operation=exc.operation,
                code="DisruptionBudget",
                status=exc.status,
                reason=exc.reason,
                causes=exc.causes,
                retry_after_s=exc.retry_after_s,
            ) from exc
        except errors.NotFound:
            return False  # already gone
        except errors.Conflict as exc:
            if not self.pod_exists(pod):
                return False  # the name now belongs to a replacement: the pod evicted is gone
            # The same pod, changed under the server's own retries (it adds a resourceVersion precondition): the
            # eviction is tried again at the drain's next poll, as a refusal would be.
            raise errors.Busy(str(exc), operation=exc.operation, status=exc.status, reason=exc.reason) from exc
        return True

    def disruptions_allowed(self, budget: str) -> int | None:
        namespace, _, name = budget.partition("/")
        path = f"/apis/policy/v1/namespaces/{quote(namespace, safe='')}/poddisruptionbudgets/{quote(name, safe='')}"
        try:
            found = request(self.api, "get poddisruptionbudgets", "GET", path)
        except errors.NotFound:
            return None
        return int((found.get("status") or {}).get("disruptionsAllowed") or 0)

    def pod_exists(self, pod: GpuPod) -> bool:
        """Whether this very pod is still there (Terminating counts): a pod of the same name with another uid is a
        replacement, and means this one is gone (what ``kubectl drain`` waits for too)."""
        try:
            found = request(self.api, "get pods", "GET", _pod_path(pod))
        except errors.NotFound:
            return False
        return not pod.uid or str((found.get("metadata") or {}).get("uid") or "") == pod.uid

    def _patch_node(self, node: str, patch: Mapping[str, Any]) -> None:
        # Strategic merge, as kubectl cordon sends it: a null removes the field or the annotation.
        path = f"/api/v1/nodes/{quote(node, safe='')}"
        request(self.api, "patch nodes", "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)


def _pod_path(pod: GpuPod) -> str:
    return f"/api/v1/namespaces/{quote(pod.namespace, safe='')}/pods/{quote(pod.name, safe='')}"
