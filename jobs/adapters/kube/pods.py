"""GPU pods and what the sweep does to them and their owners, through the one Kubernetes client (plain JSON calls):
one paginated list of the cluster's unfinished pods, a fresh read before an action, annotations, graceful deletion,
scaling a pod's Deployment (through its ReplicaSet) or StatefulSet to zero, and Events on the pod. Also how wake on
demand reads a Pending GPU pod and a node's shape (``pending_pod``, ``node_shape``: no call of their own).

Every write names the pod it was planned for by uid, so a pod replaced by a same-named one (a StatefulSet's next
``llm-0``, a Job's retry) is never touched:
- ``annotate`` is a JSON merge patch carrying ``metadata.uid``: the API server validates a patched object's uid as
  immutable, so a patch naming another uid is refused (422 on ``metadata.uid``) and changes nothing. A JSON patch
  ``test`` op would do as well, but its ``add``/``remove`` of an annotation fail when the map or the key is absent,
  which a merge patch (``null`` removes) does not. The refusal is raised as ``Conflict``.
- ``delete`` sends DeleteOptions with ``preconditions.uid`` (409 when it differs) and no grace period of its own:
  the pod's ``terminationGracePeriodSeconds`` applies, it stays Terminating for that long.
- ``scale_owner`` is ``jobs.adapters.kube.owners``.
Failures are the project's errors (``client.translate``); retrying is the job's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobs import errors
from jobs.adapters.kube import owners
from jobs.adapters.kube.client import MERGE_PATCH, ApiClient, json_pages, request
from jobs.adapters.kube.paths import object_path as _path
from jobs.adapters.kube.rbac import Grant
from jobs.core.idle_pods import Owner, PodInfo
from jobs.core.quantity import parse_quantity
from jobs.core.wake import NodeShape, PendingPod, Requirement, Taint, Toleration
from jobs.labels import GPU_RESOURCE_PREFIXES

#: Exactly what this module calls, cluster-wide (pods are in every team's namespace). Scaling owners is
#: ``jobs.adapters.kube.owners``, with its own grants: only an install whose action is ``scale-owner`` needs them.
RBAC = (
    Grant("", "pods", ("list", "get", "patch", "delete"), "cluster"),
    Grant("", "events", ("create",), "cluster"),  # the sweep's Events (kube/events.py) on pods, in their namespaces
)

# Pods that have finished hold no GPU (and are not listed: the one list stays small).
_UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def _gpu_requests(pod: Mapping[str, Any]) -> tuple[int, tuple[str, ...]]:
    """GPUs (whole, MIG slices, shared) the pod asks for, summed over its containers and its sidecars (init
    containers with ``restartPolicy: Always`` run alongside); ordinary init containers have finished."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or ())
    containers += [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    total, names = 0, set()
    for container in containers:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in wanted.items():
            if name.startswith(GPU_RESOURCE_PREFIXES):
                try:
                    count = int(parse_quantity(str(value)))
                except ValueError:
                    continue  # not a quantity: the API server would not have stored it
                if count:
                    total += count
                    names.add(name)
    return total, tuple(sorted(names))


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """A pod as the core sees it (whether or not it asks for GPUs: ``gpus`` says)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    gpus, resources = _gpu_requests(pod)
    controller = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    owner = Owner(str(controller["kind"]), str(controller["name"]), str(controller["uid"])) if controller else None
    return PodInfo(
        namespace=str(meta["namespace"]),
        name=str(meta["name"]),
        uid=str(meta["uid"]),
        node=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        gpus=gpus,
        started=_time(status.get("startTime")),
        deleting=bool(meta.get("deletionTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        owner=owner,
        resources=resources,
    )


class KubePods:
    """The sweep's ``Pods`` port for one cluster (``jobs.sweep.ports.Pods``)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def gpu_pods(self) -> list[PodInfo]:
        listing = json_pages(self.api, "list pods", "/api/v1/pods", fieldSelector=_UNFINISHED)
        return [info for info in map(pod_info, listing) if info.gpus]

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        try:
            return pod_info(request(self.api, "get pods", "GET", _path("", "pods", namespace, name)))
        except errors.NotFound:
            return None

    def annotate(self, pod: PodInfo, changes: Mapping[str, str | None]) -> None:
        """NotFound when the pod is gone, Conflict when its name now belongs to another pod (another uid)."""
        body = {"metadata": {"uid": pod.uid, "annotations": dict(changes)}}
        try:
            request(
                self.api,
                "patch pods",
                "PATCH",
                _path("", "pods", pod.namespace, pod.name),
                body=body,
                content_type=MERGE_PATCH,
            )
        except errors.Invalid as exc:
            if any(cause.field == "metadata.uid" for cause in exc.causes):
                raise _replaced(pod, exc) from exc
            raise

    def delete(self, pod: PodInfo) -> None:
        """Conflict when the name now belongs to another pod; a pod already gone is what a delete wanted (and what
        a resend after a lost answer finds). A Terminating pod accepts it again without a longer deadline."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
        try:
            request(self.api, "delete pods", "DELETE", _path("", "pods", pod.namespace, pod.name), body=body)
        except errors.NotFound:
            return
        except errors.Conflict as exc:
            raise _replaced(pod, exc) from exc

    def scale_owner(self, pod: PodInfo) -> str:
        return owners.scale_owner(self.api, pod)


def _replaced(pod: PodInfo, exc: errors.CloudError) -> errors.Conflict:
    return errors.Conflict(
        f"{pod.namespace}/{pod.name} is no longer the pod that was judged (uid {pod.uid}): left alone ({exc})",
        operation=exc.operation,
        code=exc.code,
        status=exc.status,
        reason=exc.reason or "UIDMismatch",
        causes=exc.causes,
    )


def pending_pod(pod: Mapping[str, Any]) -> PendingPod | None:
    """A Pending pod that asks for GPUs and has no node yet, as wake on demand reads it (``jobs.core.wake``); None for
    any other pod (running, finished, deleting, placed, asking for no GPU)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or (status.get("phase") or "Pending") != "Pending":
        return None
    gpus, resources = _gpu_requests(pod)
    if not gpus:
        return None
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    ).get("nodeSelectorTerms") or ()
    terms: list[tuple[Requirement, ...] | None] = []
    for term in required:
        if term.get("matchFields"):
            terms.append(None)  # a node's name: no node of a group at zero has one yet
            continue
        terms.append(
            tuple(
                Requirement(str(e["key"]), str(e["operator"]), tuple(str(v) for v in e.get("values") or ()))
                for e in term.get("matchExpressions") or ()
            )
        )
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or ()
    )
    controller = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    return PendingPod(
        namespace=str(meta["namespace"]),
        name=str(meta["name"]),
        uid=str(meta.get("uid") or ""),
        gpus=gpus,
        resources=resources,
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        affinity=tuple(terms),
        tolerations=tolerations,
        owner=str(controller["uid"]) if controller else "",
    )


def node_shape(node: Mapping[str, Any]) -> NodeShape:
    """A node's labels (but its own name), taints and the GPU resources it offers."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items() if k not in _PER_NODE_LABELS}
    taints = tuple(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])) for t in spec.get("taints") or ())
    offered = {**(status.get("capacity") or {}), **(status.get("allocatable") or {})}
    gpus = tuple(sorted(r for r in offered if r.startswith(GPU_RESOURCE_PREFIXES)))
    return NodeShape(labels, taints, gpus)


# Labels that name one node, not its group: a pod selecting one of them waits for that node, not for any.
_PER_NODE_LABELS = frozenset({"kubernetes.io/hostname"})
