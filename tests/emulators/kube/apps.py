"""apps/v1 Deployments, ReplicaSets and StatefulSets: their defaults and validation on create, the ``scale``
subresource (``autoscaling/v1`` Scale), and minimal stand-ins for their controllers.

What the controllers do, and where they stop (:func:`reconcile`, run by :meth:`.cluster.Cluster.settle` before any
request is answered and any seeded read, whenever something changed):

- a Deployment has one current ReplicaSet (``<deployment>-<pod-template-hash>``): created for its template when
  there is none, its ``replicas`` kept equal to the Deployment's; a changed template gets a new ReplicaSet and the old
  ones go to 0 at once (no rolling update, no rollout history, no paused Deployments);
- a ReplicaSet or StatefulSet with fewer live pods (not Terminating, not finished) than ``replicas`` creates pods
  from its template (a ReplicaSet's named ``<replicaset>-<5 characters>``, a StatefulSet's ``<set>-<ordinal>``), with
  the controller's ``ownerReferences`` (``controller: true``), through quota admission (a refused pod is simply not
  created, as a FailedCreate would leave it). They are Running and Ready at once, ``startTime`` now, on the
  template's ``nodeName`` if it names one, else on the first Ready, schedulable node (by name) with enough
  allocatable for the pod's extended resources (GPUs), else Pending on no node. With more, it deletes the excess
  gracefully (their own grace period): a ReplicaSet the unscheduled, then the newest first; a StatefulSet the
  highest ordinals first (a Terminating ordinal is recreated only once it is gone, as the real controller waits);
- status: ``replicas``, ``readyReplicas``, ``availableReplicas`` and friends from the live pods, and
  ``observedGeneration``. No garbage collection: deleting a Deployment leaves its ReplicaSet and pods.

Seeding: :func:`.seed_workloads.deployment` and friends build whole trees (owner, ReplicaSet, pods on given nodes)
without waiting for the controllers.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import admission
from .errors import ApiError, bad_request, invalid, stale
from .quantity import parse
from .resources import ResourceType, find

if TYPE_CHECKING:
    from .cluster import Cluster

Json = dict[str, Any]
Cause = tuple[str, str, str]

APPS = "apps/v1"
KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})
POD_TEMPLATE_HASH = "pod-template-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX = "apps.kubernetes.io/pod-index"
CONTROLLER_REVISION_HASH = "controller-revision-hash"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: The Scale object's type, for decoding its body against the official schema; not served as a resource itself.
SCALE = ResourceType("autoscaling", "v1", "Scale", "scale", True)


# Defaults and validation on create and update ------------------------------------------------------------------


def _default_template(spec: Json) -> None:
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    pod = {"spec": template.setdefault("spec", {})}
    admission.default_pod(pod)  # the same pod defaults a pod gets (requests from limits, grace 30, ...)


def default(obj: Json) -> None:
    """SetDefaults_Deployment / _ReplicaSet / _StatefulSet (apps/v1), and an empty status."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    if obj["kind"] == "Deployment":
        spec.setdefault(
            "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
        )
        spec.setdefault("progressDeadlineSeconds", 600)
    elif obj["kind"] == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    else:
        spec.pop("revisionHistoryLimit")
    _default_template(spec)
    obj["status"] = {}


def causes(obj: Json, old: Json | None) -> list[Cause]:
    """ValidateDeployment / ReplicaSet / StatefulSet, as far as the tests meet them."""
    spec = obj.get("spec") or {}
    found: list[Cause] = []
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, int) and replicas < 0:
        found.append(
            ("FieldValueInvalid", "spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")
        )
    selector = spec.get("selector")
    if not selector:
        found.append(("FieldValueRequired", "spec.selector", "Required value"))
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        found.append(
            (
                "FieldValueInvalid",
                "spec.selector",
                f"Invalid value: {json.dumps(selector)}: empty selector is invalid for deployment",
            )
        )
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and not (selector.get("matchLabels") or {}).items() <= labels.items():
        found.append(
            (
                "FieldValueInvalid",
                "spec.template.metadata.labels",
                f"Invalid value: {json.dumps(labels)}: `selector` does not match template `labels`",
            )
        )
    pod_spec = template.get("spec") or {}
    if not pod_spec.get("containers"):
        found.append(("FieldValueRequired", "spec.template.spec.containers", "Required value"))
    if pod_spec.get("restartPolicy", "Always") != "Always":
        found.append(
            (
                "FieldValueNotSupported",
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{pod_spec["restartPolicy"]}": supported values: "Always"',
            )
        )
    if old is not None and (old.get("spec") or {}).get("selector") != selector:
        found.append(
            ("FieldValueInvalid", "spec.selector", f"Invalid value: {json.dumps(selector)}: field is immutable")
        )
    return found


# The scale subresource -----------------------------------------------------------------------------------------


def selector_text(obj: Json) -> str:
    """metav1.FormatLabelSelector of the object's selector (matchLabels, sorted)."""
    labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def scale_of(obj: Json) -> Json:
    """scaleFromDeployment and friends: the owner's identity (uid, resourceVersion) with its replicas."""
    meta = obj["metadata"]
    status: Json = {"replicas": (obj.get("status") or {}).get("replicas", 0), "selector": selector_text(obj)}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": status,
    }


def scaled(rt: ResourceType, obj: Json, scale: Any) -> Json:
    """The owner with the replicas of a new Scale (scaleUpdatedObjectInfo.UpdatedObject): ValidateScale (422), the
    Scale's resourceVersion and uid as preconditions (409)."""
    name = obj["metadata"]["name"]
    if not isinstance(scale, dict) or scale.get("kind", "Scale") != "Scale":
        raise bad_request("the body of the request must be a Scale")
    meta = scale.get("metadata") or {}
    if meta.get("name", name) != name:
        raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise bad_request(
            f'Scale in version "v1" cannot be handled as a Scale: spec.replicas: {replicas!r} is not an integer'
        )
    if replicas < 0:
        raise invalid(
            "Scale",
            "autoscaling",
            name,
            [("FieldValueInvalid", "spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")],
        )
    if meta.get("resourceVersion") and meta["resourceVersion"] != obj["metadata"]["resourceVersion"]:
        raise stale(rt.plural, rt.group, name)
    if meta.get("uid") and meta["uid"] != obj["metadata"]["uid"]:
        why = f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {obj['metadata']['uid']}"
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {rt.plural}.{rt.group} "{name}": {why}',
            {"name": name, "group": rt.group, "kind": rt.plural},
        )
    updated = copy.deepcopy(obj)
    updated["spec"]["replicas"] = replicas
    return updated


# Controllers ---------------------------------------------------------------------------------------------------


def _rt(plural: str) -> ResourceType:
    found = find("apps", "v1", plural) or find("", "v1", plural)
    assert found is not None
    return found


def controller_of(obj: Json) -> Json | None:
    return next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)


def owner_reference(owner: Json) -> Json:
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", APPS),
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(template: Json) -> str:
    """A stable stand-in for the pod-template-hash (ComputeHash of the template): 10 characters of its digest."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join(_ALPHABET[int(digest[i : i + 2], 16) % len(_ALPHABET)] for i in range(0, 20, 2))


def _owned(objects: Iterable[Json], owner: Json) -> list[Json]:
    uid = owner["metadata"]["uid"]
    return [o for o in objects if (controller_of(o) or {}).get("uid") == uid]


def _live(pod: Json) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and not admission.is_terminal(pod)


def reconcile(cluster: Cluster, namespaces: Iterable[str]) -> None:
    """One pass of the three controllers over the namespaces that have workloads: Deployments first (they write
    their ReplicaSets), then ReplicaSets and StatefulSets (they write pods). Caller holds the lock."""
    for namespace in namespaces:
        for deployment in list(cluster.scan(_rt("deployments"), namespace)):
            _sync_deployment(cluster, deployment)
        for kind in ("replicasets", "statefulsets"):
            for owner in list(cluster.scan(_rt(kind), namespace)):
                _sync_pods(cluster, owner)
        for deployment in list(cluster.scan(_rt("deployments"), namespace)):
            sets = _owned(cluster.scan(_rt("replicasets"), namespace), deployment)
            _set_status(cluster, deployment, _deployment_status(deployment, sets))


def _template_without_hash(template: Json) -> Json:
    stripped = copy.deepcopy(template)
    (stripped.get("metadata") or {}).get("labels", {}).pop(POD_TEMPLATE_HASH, None)
    return stripped


def _sync_deployment(cluster: Cluster, deployment: Json) -> None:
    meta, spec = deployment["metadata"], deployment.get("spec") or {}
    sets = _owned(cluster.scan(_rt("replicasets"), meta["namespace"]), deployment)
    template = spec.get("template") or {}
    current = next((rs for rs in sets if _template_without_hash(rs["spec"]["template"]) == template), None)
    replicas = spec.get("replicas", 1)
    if current is None:
        pod_hash = template_hash(template)
        rs_template = copy.deepcopy(template)
        rs_template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = pod_hash
        replica_set: Json = {
            "apiVersion": APPS,
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta["namespace"],
                "labels": dict(rs_template["metadata"]["labels"]),
                "annotations": {"deployment.kubernetes.io/desired-replicas": str(replicas)},
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
            "status": {"replicas": 0},
        }
        if cluster.stored(_rt("replicasets"), meta["namespace"], replica_set["metadata"]["name"]) is None:
            cluster.new_metadata(replica_set)
            cluster.commit(_rt("replicasets"), replica_set)
    for rs in sets:
        wanted = replicas if rs is current else 0
        if rs["spec"].get("replicas") != wanted:
            updated = copy.deepcopy(rs)
            updated["spec"]["replicas"] = wanted
            updated["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
            cluster.commit(_rt("replicasets"), updated)


def _sync_pods(cluster: Cluster, owner: Json) -> None:
    namespace = owner["metadata"]["namespace"]
    pods = _owned(cluster.scan(_rt("pods"), namespace), owner)
    live = [p for p in pods if _live(p)]
    replicas = (owner.get("spec") or {}).get("replicas", 1)
    stateful = owner["kind"] == "StatefulSet"
    if len(live) > replicas:
        if stateful:
            excess = sorted(live, key=_ordinal, reverse=True)[: len(live) - replicas]
        else:
            ranked = sorted(
                live,
                key=lambda p: (
                    bool(p["spec"].get("nodeName")),
                    p["metadata"]["creationTimestamp"],
                    p["metadata"]["name"],
                ),
            )
            # Unscheduled first, then the newest (the real ranking has more steps; these are the ones tests meet).
            excess = [p for p in ranked if not p["spec"].get("nodeName")]
            excess += [p for p in reversed(ranked) if p["spec"].get("nodeName")]
            excess = excess[: len(live) - replicas]
        for pod in excess:
            _delete_pod(cluster, pod)
    elif len(live) < replicas:
        if stateful:
            taken = {p["metadata"]["name"] for p in pods}
            names = [f"{owner['metadata']['name']}-{i}" for i in range(replicas)]
            for index, name in enumerate(names):
                if name not in taken and cluster.stored(_rt("pods"), namespace, name) is None:
                    _create_pod(cluster, owner, name, index)
        else:
            for _ in range(replicas - len(live)):
                name = f"{owner['metadata']['name']}-{''.join(random.choices(_ALPHABET, k=5))}"
                _create_pod(cluster, owner, name, None)
    pods = [p for p in _owned(cluster.scan(_rt("pods"), namespace), owner) if _live(p)]
    _set_status(cluster, owner, _pods_status(owner, pods))


def _ordinal(pod: Json) -> int:
    tail = pod["metadata"]["name"].rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _delete_pod(cluster: Cluster, pod: Json) -> None:
    grace = admission.pod_grace(pod, {})
    if not grace:
        cluster.remove(_rt("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"])
    else:
        cluster.terminate_pod(copy.deepcopy(pod), grace)


def _node_for(cluster: Cluster, pod: Json) -> str | None:
    """The scheduler, as far as GPUs go: the template's node, else the first Ready, schedulable node (by name) with
    room for the pod's extended resources."""
    wanted: dict[str, Any] = {}
    for container in pod["spec"].get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if "/" in name:
                wanted[name] = wanted.get(name, 0) + parse(value)
    pods = [p for p in cluster.scan(_rt("pods")) if not admission.is_terminal(p)]
    for node in cluster.scan(_rt("nodes")):
        status, spec = node.get("status") or {}, node.get("spec") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if not ready or spec.get("unschedulable"):
            continue
        allocatable = status.get("allocatable") or {}
        here = [p for p in pods if p["spec"].get("nodeName") == node["metadata"]["name"]]
        fits = True
        for name, amount in wanted.items():
            used = sum(
                parse(((c.get("resources") or {}).get("requests") or {}).get(name, 0))
                for p in here
                for c in p["spec"].get("containers") or []
            )
            fits = fits and used + amount <= parse(allocatable.get(name, 0))
        if fits:
            return str(node["metadata"]["name"])
    return None


def _create_pod(cluster: Cluster, owner: Json, name: str, ordinal: int | None) -> None:
    from .cluster import timestamp

    namespace = owner["metadata"]["namespace"]
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    if ordinal is not None:
        labels.update(
            {
                STS_POD_NAME: name,
                STS_POD_INDEX: str(ordinal),
                CONTROLLER_REVISION_HASH: f"{owner['metadata']['name']}-{template_hash(template)}",
            }
        )
    meta: Json = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner_reference(owner)]}
    if template_meta.get("annotations"):
        meta["annotations"] = dict(template_meta["annotations"])
    if ordinal is None:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    pod: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}
    admission.default_pod(pod)
    try:
        admission.admit_pod(pod, cluster.scan(_rt("resourcequotas"), namespace), cluster.scan(_rt("pods"), namespace))
    except ApiError:
        return  # FailedCreate: the controller tries again on its next pass
    node = pod["spec"].get("nodeName") or _node_for(cluster, pod)
    now = timestamp(cluster.now())
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "startTime": now,
            "qosClass": admission.qos_class(pod),
            "containerStatuses": [
                {
                    "name": c["name"],
                    "ready": True,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "imageID": "",
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"].get("containers") or []
            ],
        }
    else:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now}
            ],
            "qosClass": admission.qos_class(pod),
        }
    cluster.new_metadata(pod)
    cluster.commit(_rt("pods"), pod)


def _ready(pod: Json) -> bool:
    return admission.is_healthy(pod)


def _omit_zero(status: Json) -> Json:
    return {k: v for k, v in status.items() if v not in (0, None, "")}


def _pods_status(owner: Json, pods: list[Json]) -> Json:
    ready = sum(1 for p in pods if _ready(p))
    status: Json = {
        "replicas": len(pods),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": owner["metadata"].get("generation", 1),
    }
    if owner["kind"] == "ReplicaSet":
        status["fullyLabeledReplicas"] = len(pods)
    else:
        revision = f"{owner['metadata']['name']}-{template_hash((owner.get('spec') or {}).get('template') or {})}"
        status.update(
            currentReplicas=len(pods), updatedReplicas=len(pods), currentRevision=revision, updateRevision=revision
        )
        status["collisionCount"] = (owner.get("status") or {}).get("collisionCount", 0)
        return {k: v for k, v in status.items() if v not in (None, "") and (v != 0 or k == "replicas")}
    return {**_omit_zero(status), "replicas": len(pods)}


def _deployment_status(deployment: Json, sets: list[Json]) -> Json:
    spec = deployment.get("spec") or {}
    replicas = sum((rs.get("status") or {}).get("replicas", 0) for rs in sets)
    ready = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in sets)
    current = [
        rs for rs in sets if rs["spec"].get("replicas", 0) == spec.get("replicas", 1) and rs["spec"].get("replicas")
    ]
    updated = sum((rs.get("status") or {}).get("replicas", 0) for rs in current[:1])
    status: Json = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(0, spec.get("replicas", 1) - ready),
    }
    return _omit_zero(status)


def _set_status(cluster: Cluster, obj: Json, status: Json) -> None:
    if obj.get("status") != status:
        updated = copy.deepcopy(obj)
        updated["status"] = status
        cluster.commit(_rt(obj["kind"].lower() + "s"), updated)
