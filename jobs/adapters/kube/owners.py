"""Scaling a pod's owner to zero (the sweep's ``scale-owner`` action): the pod's ReplicaSet and its Deployment, or
its StatefulSet, read and checked by uid against every ownerReference, the replicas recorded on the owner
(``gpu-jobs/scaled-from-replicas``, so a person can restore them), then the scale subresource, each write on the
version read (409 when the owner moved meanwhile). Other owners (a Job, a DaemonSet, none) are refused with the
reason. Its own module, with its own grants: an install that never scales owners is never granted apps writes.
"""

from __future__ import annotations

from typing import Any

from jobs import errors
from jobs.adapters.kube.client import MERGE_PATCH, ApiClient, request
from jobs.adapters.kube.paths import object_path as _path
from jobs.adapters.kube.rbac import Grant
from jobs.core.idle_pods import Owner, PodInfo
from jobs.labels import SCALED_FROM_ANNOTATION

RBAC = (
    Grant("apps", "replicasets", ("get",), "cluster"),
    Grant("apps", "deployments", ("get", "patch"), "cluster"),
    Grant("apps", "deployments/scale", ("patch",), "cluster"),
    Grant("apps", "statefulsets", ("get", "patch"), "cluster"),
    Grant("apps", "statefulsets/scale", ("patch",), "cluster"),
)

_SCALABLE = {"Deployment": "deployments", "StatefulSet": "statefulsets"}


def scale_owner(api: ApiClient, pod: PodInfo) -> str:
    owner = pod.owner
    if owner is None:
        raise errors.Invalid(
            f"cannot scale-owner {pod.namespace}/{pod.name}: it has no controller (a bare pod): use action delete"
            " or exempt it",
            operation="scale owner",
            reason="NoController",
        )
    if owner.kind == "ReplicaSet":
        replica_set = _owned_object(api, "replicasets", pod.namespace, owner)
        parent = next(
            (r for r in (replica_set.get("metadata") or {}).get("ownerReferences") or () if r.get("controller")),
            None,
        )
        if parent is None or parent.get("kind") != "Deployment":
            kind = parent.get("kind") if parent else "nothing"
            raise errors.Invalid(
                f"cannot scale-owner {pod.namespace}/{pod.name}: its ReplicaSet {owner.name} is owned by {kind},"
                " not a Deployment: use action delete or exempt it",
                operation="scale owner",
                reason="NotScalable",
            )
        owner = Owner("Deployment", str(parent["name"]), str(parent["uid"]))
    elif owner.kind != "StatefulSet":
        raise errors.Invalid(
            f"cannot scale-owner a pod owned by {owner.kind}: use action delete or exempt it",
            operation="scale owner",
            reason="NotScalable",
        )
    try:
        return _scale_to_zero(api, pod.namespace, owner)
    except errors.Conflict as exc:
        if exc.reason == "UIDMismatch":
            raise
        # The owner moved between the record and the scale (its controller wrote status): once more, from a
        # fresh read, so the record is of the replicas it really had.
        return _scale_to_zero(api, pod.namespace, owner)


def _owned_object(api: ApiClient, resource: str, namespace: str, owner: Owner) -> dict[str, Any]:
    found: dict[str, Any] = request(api, f"get {resource}", "GET", _path("apps", resource, namespace, owner.name))
    if (found.get("metadata") or {}).get("uid") != owner.uid:
        raise errors.Conflict(
            f"{owner.kind} {namespace}/{owner.name} is not the one that owned the pod (another uid): not scaled",
            operation=f"get {resource}",
            reason="UIDMismatch",
        )
    return found


def _scale_to_zero(api: ApiClient, namespace: str, owner: Owner) -> str:
    """Record the replicas on the owner first (a patch that lands only on the version read), then scale it to 0
    through the scale subresource, on the version the record was written to: if anything moved in between,
    the 409 leaves the owner as it was or recorded, never scaled without its record. Already at 0: nothing."""
    resource = _SCALABLE[owner.kind]
    found = _owned_object(api, resource, namespace, owner)
    meta = found["metadata"]
    replicas = int((found.get("spec") or {}).get("replicas", 1))
    what = f"{owner.kind} {namespace}/{owner.name}"
    if replicas == 0:
        return f"{what} already at 0"
    record = {
        "metadata": {
            "uid": owner.uid,
            "resourceVersion": meta["resourceVersion"],
            "annotations": {SCALED_FROM_ANNOTATION: str(replicas)},
        }
    }
    path = _path("apps", resource, namespace, owner.name)
    recorded = request(api, f"patch {resource}", "PATCH", path, body=record, content_type=MERGE_PATCH)
    scale = {"metadata": {"resourceVersion": recorded["metadata"]["resourceVersion"]}, "spec": {"replicas": 0}}
    request(api, f"patch {resource}/scale", "PATCH", f"{path}/scale", body=scale, content_type=MERGE_PATCH)
    return f"{what} from {replicas}"
