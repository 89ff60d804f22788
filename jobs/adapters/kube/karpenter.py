"""Karpenter NodePools (``karpenter.sh/v1``) as node groups, through the cluster's own Kubernetes API (the run's
client for that cluster, so the fleet model and the cluster identity check apply unchanged).

A NodePool has no size: Karpenter launches NodeClaims for pending pods within ``spec.limits``. So the group's
configuration is its limits (and ``replicas`` of a static pool), recorded and written back exactly, and its live
size is its NodeClaims not being deleted (``jobs.core.group_config``). Down is a limit that blocks every instance
type, then the claims deleted on every run until none remain (``jobs.core.nodegroups``: ``SetLimits``,
``RemoveClaims``); Karpenter drains each deleted claim's node through evictions. Each change also leaves an Event
on the NodePool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import MERGE_PATCH, ApiClient, api_client, job_namespace, json_pages, request
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.rbac import Grant
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import (
    PREWARM_POD_PREFIX,
    ZERO_LIMITS,
    CloudGroup,
    RemoveClaims,
    SetLimits,
    SetPlaceholders,
    Step,
)
from jobs.core.policy import NodeGroup
from jobs.events import ObjectRef
from jobs.labels import GPU_RESOURCE_PREFIXES, KARPENTER_NODEPOOL_LABEL
from jobs.logs import get_logger

#: Exactly what this module calls: pools and claims are cluster-scoped, the pods on a claim's node in every
#: namespace; ``onBusy: force`` deletes the pods that would block a claim's drain; Events on the NodePool go to
#: ``default``, as kubectl's for cluster-scoped objects.
RBAC = (
    Grant("karpenter.sh", "nodepools", ("get", "list", "patch"), "cluster"),
    Grant("karpenter.sh", "nodeclaims", ("list", "delete"), "cluster"),
    Grant("", "pods", ("list", "delete"), "cluster"),
    Grant("", "events", ("create",), "cluster"),
    # `prewarm`: the placeholder pods, in the job's own namespace, and their negative-priority class.
    Grant("", "pods", ("create",), "namespace"),
    Grant("scheduling.k8s.io", "priorityclasses", ("get", "create"), "cluster"),
)

API = "/apis/karpenter.sh/v1"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
#: The controller's pods, as the official chart labels them (charts/karpenter).
CONTROLLER_SELECTOR = "app.kubernetes.io/name=karpenter"
_UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"
#: Placeholder pods (``prewarm``) carry this label, its value the pool; their PriorityClass is below every real pod's
#: (the default 0), so the scheduler evicts them for any pod that needs their place.
PREWARM_LABEL = "gpu-jobs.dev/prewarm"
PREWARM_CLASS = "gpu-jobs-prewarm"
PREWARM_PRIORITY = -10
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
Json = dict[str, Any]


def blocks(limits: Mapping[str, str]) -> bool:
    """Whether limits keep Karpenter from launching anything: a zero ``cpu`` or ``nodes`` limit (every instance type
    has CPUs; ``nvidia.com/gpu: 0`` alone still launches types without GPUs)."""
    return any(str(limits.get(key, "")).strip() in ("0", "0m") for key in ZERO_LIMITS)


def consolidates(spec: Mapping[str, Any]) -> bool:
    """Whether a pool's Karpenter removes its empty nodes by itself (``spec.disruption``, karpenter.sh/v1): every
    ``consolidationPolicy`` takes empty nodes, so only ``consolidateAfter: Never`` keeps them. Without ``disruption``
    the server's default applies (``consolidateAfter: 0s``); a ``disruption`` without ``consolidateAfter`` (which the
    CRD refuses) reads as Karpenter's Go type reads it, never. A static pool (``replicas``) keeps its nodes."""
    if spec.get("replicas") is not None:
        return False
    disruption = spec.get("disruption") or {"consolidateAfter": "0s"}
    return disruption.get("consolidateAfter") not in (None, "Never")


def _gpu_pod(pod: Json) -> bool:
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        if any(name.startswith(GPU_RESOURCE_PREFIXES) and str(v) not in ("0", "") for name, v in wanted.items()):
            return True
    return False


def _do_not_disrupt(pod: Json) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"


def _work(pod: Json) -> bool:
    """Running work that holds a node: a GPU pod, or any pod that asked Karpenter not to disrupt it. DaemonSet and
    static pods are the node's own, never work."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or ()):
        return False
    if PREWARM_LABEL in (meta.get("labels") or {}):
        return False  # this job's own placeholder: no work
    return _gpu_pod(pod) or _do_not_disrupt(pod)


def _pod_name(pod: Json) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class KarpenterPools:
    """``NodeGroupCloud`` for Karpenter NodePools in one cluster. The command's wiring gives each cluster's run
    its own client (``api``); without one, the current kubeconfig context's (an in-process run)."""

    def __init__(self, settings: AdapterSettings, api: ApiClient | None = None) -> None:
        self._settings = settings
        self._api = api

    @property
    def api(self) -> ApiClient:
        if self._api is None:
            self._api = api_client(self._settings.request_timeout_s)
        return self._api

    # --- reads ----------------------------------------------------------------------------------------------

    def _pool(self, name: str) -> Json:
        found: Json = request(self.api, "get nodepools", "GET", f"{API}/nodepools/{quote(name, safe='')}")
        return found

    def _claims(self, pool: str) -> list[Json]:
        selector = f"{KARPENTER_NODEPOOL_LABEL}={pool}"
        return list(json_pages(self.api, "list nodeclaims", f"{API}/nodeclaims", labelSelector=selector))

    def _pods_on(self, nodes: Iterable[str]) -> dict[str, list[Json]]:
        """The unfinished pods on each of ``nodes``: one list of the cluster's pods."""
        wanted = set(nodes)
        found: dict[str, list[Json]] = {n: [] for n in wanted}
        if not wanted:
            return found
        for pod in json_pages(self.api, "list pods", "/api/v1/pods", fieldSelector=_UNFINISHED):
            node = (pod.get("spec") or {}).get("nodeName")
            if node in wanted:
                found[node].append(pod)
        return found

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        pool_name = _pool_of(group)
        spec = self._pool(pool_name).get("spec") or {}
        limits = {str(k): str(v) for k, v in (spec.get("limits") or {}).items()}
        claims = self._claims(pool_name)
        live = [c for c in claims if not c["metadata"].get("deletionTimestamp")]
        nodes = {str(n): c for c in claims if (n := (c.get("status") or {}).get("nodeName"))}
        pods = self._pods_on(nodes)
        grace = frozenset(n for n, c in nodes.items() if (c.get("spec") or {}).get("terminationGracePeriod"))
        undisruptable = frozenset(n for n, found in pods.items() if any(map(_do_not_disrupt, found)))
        return GroupConfig(
            min=0,
            desired=len(live),
            max=0,
            autoscaling=not blocks(limits),
            limits=limits,
            replicas=spec.get("replicas"),
            consolidates=consolidates(spec),
            missing=sum(1 for c in live if not (c.get("status") or {}).get("nodeName")),
            refused=self._controller_on(pool_name, nodes),
            grace_nodes=grace,
            do_not_disrupt_nodes=undisruptable,
            placeholders=len(self._placeholders(pool_name)),
        )

    def _controller_on(self, pool: str, nodes: Mapping[str, Json]) -> str | None:
        """Where Karpenter's own controller runs on the pool's nodes: emptying the pool would strand it."""
        found = json_pages(self.api, "list pods", "/api/v1/pods", labelSelector=CONTROLLER_SELECTOR)
        on_pool = sorted(
            f"{_pod_name(p)} on {p['spec']['nodeName']}" for p in found if p["spec"].get("nodeName") in nodes
        )
        if not on_pool:
            return None
        return (
            f"the Karpenter controller runs on NodePool {pool}'s nodes ({', '.join(on_pool)}): emptying the pool would"
            f" strand it; keep it off the pool (a nodeSelector or affinity away from {KARPENTER_NODEPOOL_LABEL}={pool},"
            " a managed node group or Fargate)"
        )

    # --- writes ---------------------------------------------------------------------------------------------

    def apply(self, group: NodeGroup, step: Step) -> None:
        pool = _pool_of(group)
        if isinstance(step, SetLimits):
            self._set_limits(pool, step)
        elif isinstance(step, RemoveClaims):
            self._remove_claims(pool, step)
        elif isinstance(step, SetPlaceholders):
            self._set_placeholders(pool, step.count, group.gpus_per_node or 1)
            self._event(pool, "", "PrewarmSet", step.done())
        else:
            raise errors.Invalid(
                f"NodePool {pool}: {step.describe()} is not a NodePool change", operation="apply", code="UNSUPPORTED"
            )

    def _set_limits(self, pool: str, step: SetLimits) -> None:
        """A merge patch that leaves exactly ``step.limits``: keys not in it are removed (null), none at all removes
        ``spec.limits``. Its answer lost, the job reads the pool back before sending it again."""
        current = self._pool(pool)
        uid = current["metadata"].get("uid", "")
        stored = (current.get("spec") or {}).get("limits") or {}
        limits: Json | None = {k: None for k in stored if k not in step.limits} | dict(step.limits)
        spec: Json = {"limits": limits if step.limits else None}
        if step.replicas is not None:
            spec["replicas"] = step.replicas
        patch = {"metadata": {"uid": uid}, "spec": spec}  # the pool read, not one recreated under its name since
        request(
            self.api,
            "patch nodepools",
            "PATCH",
            f"{API}/nodepools/{quote(pool, safe='')}",
            body=patch,
            content_type=MERGE_PATCH,
        )
        self._event(pool, uid, "LimitsSet", step.done())

    def _remove_claims(self, pool: str, step: RemoveClaims) -> None:
        """Delete the pool's claims but those kept: looked at again now, so work that landed on a node since the
        job observed keeps it (wait), and a drain that would force or stall is not started (drain)."""
        claims = [c for c in self._claims(pool) if not c["metadata"].get("deletionTimestamp")]
        nodes = {c["metadata"]["name"]: (c.get("status") or {}).get("nodeName") for c in claims}
        pods = self._pods_on(n for n in nodes.values() if n)
        deleted: list[str] = []
        kept: list[str] = []
        for claim in claims:
            name = claim["metadata"]["name"]
            node = nodes[name]
            work = [p for p in pods.get(node or "", []) if _work(p)]
            if node in step.keep or (work and not self._may_go(claim, work, step)):
                kept.append(f"{name} ({', '.join(map(_pod_name, work)) or 'pods that must not be evicted'})")
                continue
            self._delete_claim(claim)
            if step.busy == "force":
                for pod in work:  # what would stall or outlive the drain goes with the node
                    with contextlib.suppress(errors.NotFound, errors.Conflict):
                        request(self.api, "delete pods", "DELETE", _pod_path(pod), body=_preconditions(pod))
            deleted.append(name + (f" (was running {', '.join(map(_pod_name, work))})" if work else ""))
        if deleted:
            text = f"{step.done()}: {', '.join(deleted)}" + (f"; kept {', '.join(kept)}" if kept else "")
            self._event(pool, "", "NodeClaimsDeleted", text)

    def _delete_claim(self, claim: Json) -> None:
        """Delete one claim (gone already: what was wanted). Its answer lost, the claim is read back: deleting or
        gone is done, and only a claim that still shows no deletion raises (the job then tries the step again)."""
        name = claim["metadata"]["name"]
        path = f"{API}/nodeclaims/{quote(name, safe='')}"
        try:
            request(self.api, "delete nodeclaims", "DELETE", path, body=_preconditions(claim))
        except errors.NotFound:
            return
        except errors.Unavailable:
            pool = (claim["metadata"].get("labels") or {}).get(KARPENTER_NODEPOOL_LABEL, "")
            now = {c["metadata"]["name"]: c for c in self._claims(pool)}
            if name in now and not now[name]["metadata"].get("deletionTimestamp"):
                raise

        # --- prewarm ---------------------------------------------------------------------------------------------

    def _placeholders(self, pool: str) -> list[Json]:
        path = f"/api/v1/namespaces/{quote(job_namespace(), safe='')}/pods"
        found = json_pages(self.api, "list pods", path, labelSelector=f"{PREWARM_LABEL}={pool}")
        return sorted((p for p in found if not p["metadata"].get("deletionTimestamp")), key=_pod_name)

    def _set_placeholders(self, pool: str, count: int, gpus: int) -> None:
        """Create or delete placeholder pods until ``count`` remain, each asking for one node's GPUs of the pool,
        selecting it and tolerating its taints, so Karpenter launches that many nodes (within the limits)."""
        have = self._placeholders(pool)
        for pod in have[count:]:
            with contextlib.suppress(errors.NotFound):
                request(self.api, "delete pods", "DELETE", _pod_path(pod), body=_preconditions(pod))
        if len(have) < count:
            spec = self._pool(pool).get("spec") or {}
            self._priority_class()
            names = {p["metadata"]["name"] for p in have}
            wanted = [f"{PREWARM_POD_PREFIX}{pool}-{i}"[:63].rstrip("-.") for i in range(count)]
            for name in [n for n in wanted if n not in names][: count - len(have)]:
                body = _placeholder(name, pool, spec, gpus)
                with contextlib.suppress(errors.Conflict):  # created by a run whose answer was lost
                    path = f"/api/v1/namespaces/{quote(job_namespace(), safe='')}/pods"
                    request(self.api, "create pods", "POST", path, body=body)

    def _priority_class(self) -> None:
        path = f"/apis/scheduling.k8s.io/v1/priorityclasses/{PREWARM_CLASS}"
        try:
            request(self.api, "get priorityclasses", "GET", path)
            return
        except errors.NotFound:
            pass
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PREWARM_CLASS},
            "value": PREWARM_PRIORITY,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "gpu-jobs prewarm placeholders: below every real pod, which takes their place",
        }
        with contextlib.suppress(errors.Conflict):
            request(self.api, "create priorityclasses", "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=body)

    @staticmethod
    def _may_go(claim: Json, work: list[Json], step: RemoveClaims) -> bool:
        """Whether a claim whose node runs ``work`` is deleted: never under wait; under drain only where Karpenter
        evicts everything in time (no do-not-disrupt pod, and no GPU pod a terminationGracePeriod would force off);
        always under force."""
        if step.busy == "force":
            return True
        if step.busy == "keep":
            return False
        grace = bool((claim.get("spec") or {}).get("terminationGracePeriod"))
        return not any(_do_not_disrupt(p) or (grace and _gpu_pod(p)) for p in work)

    def _event(self, pool: str, uid: str, reason: str, message: str) -> None:
        ref = ObjectRef("NodePool", pool, "", uid, api_version="karpenter.sh/v1")
        KubeEvents(self.api, "nodegroups", get_logger(component="karpenter")).emit(ref, reason, message)

    # --- discovery ------------------------------------------------------------------------------------------

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        """The cluster's NodePools whose nodes may carry GPUs (a GPU limit, or GPU instance types required), listed
        or not: the job reports those the policy does not name."""
        if not groups:
            return []
        cluster = _cluster_of(groups[0])
        found: list[CloudGroup] = []
        for pool in json_pages(self.api, "list nodepools", f"{API}/nodepools"):
            spec = pool.get("spec") or {}
            gpu_limit = any(k.startswith(GPU_RESOURCE_PREFIXES) for k in (spec.get("limits") or {}))
            taints = ((spec.get("template") or {}).get("spec") or {}).get("taints") or []
            gpu_taint = any(str(t.get("key", "")).startswith(GPU_RESOURCE_PREFIXES) for t in taints)
            if gpu_limit or gpu_taint:
                found.append(
                    CloudGroup(groups[0].cloud, {"cluster": cluster, "nodePool": pool["metadata"]["name"]}, "karpenter")
                )
        return found


def _placeholder(name: str, pool: str, spec: Json, gpus: int) -> Json:
    template = (spec.get("template") or {}).get("spec") or {}
    limits = spec.get("limits") or {}
    resource = next((k for k in limits if k.startswith(GPU_RESOURCE_PREFIXES)), "nvidia.com/gpu")
    tolerations = [
        {k: v for k, v in {"key": t.get("key"), "operator": "Exists", "effect": t.get("effect")}.items() if v}
        for t in template.get("taints") or ()
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": job_namespace(), "labels": {PREWARM_LABEL: pool}},
        "spec": {
            "priorityClassName": PREWARM_CLASS,
            "nodeSelector": {KARPENTER_NODEPOOL_LABEL: pool},
            "tolerations": tolerations,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "placeholder",
                    "image": PAUSE_IMAGE,
                    "resources": {"requests": {resource: str(gpus)}, "limits": {resource: str(gpus)}},
                }
            ],
        },
    }


def _preconditions(obj: Json) -> Json:
    """DeleteOptions naming the object read by uid: a same-named successor is never deleted in its place."""
    uid = (obj.get("metadata") or {}).get("uid")
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else {}


def _pod_path(pod: Json) -> str:
    meta = pod["metadata"]
    return f"/api/v1/namespaces/{quote(meta['namespace'], safe='')}/pods/{quote(meta['name'], safe='')}"


def _pool_of(group: NodeGroup) -> str:
    if group.karpenter is None:
        raise errors.Invalid(f"{group.name} is not a Karpenter NodePool", operation="describe", code="NOT_A_POOL")
    return group.karpenter.node_pool


def _cluster_of(group: NodeGroup) -> str:
    assert group.karpenter is not None
    return group.karpenter.cluster


__all__ = ["RBAC", "KarpenterPools", "blocks", "consolidates"]
