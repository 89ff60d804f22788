"""Wake on demand (``nodeGroups[].wake``), pure: which Pending GPU pods out of hours would run on which down group,
whether they may wake it, with how many nodes and until when; and the Events that tell a pod why it woke nothing.

A pod fits a group when it asks for a GPU resource the group's nodes offer, its ``nodeSelector`` and required node
affinity match the group's node labels, and its tolerations cover the group's taints. What the nodes of a group at
zero look like is what they looked like when it went down (``NodeShape``, kept in its record), else its provider's
node label alone (no taints, any GPU resource).

No drain -> wake loop: the controllers (ReplicaSet, Job, StatefulSet) of the pods this job evicted or whose nodes it
removed in an off-hours period are in the group's record (``displaced``) until the morning restore, and a pod they
own never wakes the group. A pod wakes a group once per off-hours period (``woke``): one that never starts cannot
keep it up all night.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.core.group_config import GroupConfig
from jobs.core.providers import PROVIDERS, ProviderKind

#: The Event reasons on a pod: its pod woke a group; it woke none, and why.
WAKING = "NodeGroupWaking"
NOT_WOKEN = "NodeGroupNotWoken"

#: How long new GPU nodes usually take to be Ready, per provider, as the pod's Event says it (boot, driver, join).
READY_MINUTES: Mapping[str, int] = {"eks": 5, "asg": 5, "gke": 4, "aks": 6, "karpenter": 4}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


@dataclass(frozen=True)
class Toleration:
    key: str  # "" with operator Exists: every taint
    operator: str  # Equal, Exists
    value: str
    effect: str  # "": every effect

    def covers(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry of a required node affinity term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value in self.values
        if op == "NotIn":
            return value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                a, b = int(value), int(self.values[0])
            except ValueError:
                return False
            return a > b if op == "Gt" else a < b
        return False


@dataclass(frozen=True)
class PendingPod:
    """A pod that asks for GPUs and waits for a node (Pending, no ``nodeName``)."""

    namespace: str
    name: str
    uid: str
    gpus: int
    resources: tuple[str, ...]  # the GPU resource names it asks for
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Required node affinity: the terms are ORed, each term's requirements ANDed. A term on fields (matchFields:
    # a node's name) cannot match a node that does not exist yet: it is kept as an empty-able marker (None).
    affinity: tuple[tuple[Requirement, ...] | None, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    owner: str = ""  # its controller's uid ("" for a bare pod)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class NodeShape:
    """What a group's nodes look like (labels, taints, GPU resources), recorded when it goes down."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    resources: tuple[str, ...] = ()  # GPU resources its nodes offer; () = unknown, any

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": dict(self.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            "resources": list(self.resources),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeShape:
        taints = tuple(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])) for t in data["taints"])
        return cls(dict(data["labels"]), taints, tuple(str(r) for r in data["resources"]))


@dataclass(frozen=True)
class WakeRecord:
    """A wake in force, durably in the group's record: who woke it, why, with how many nodes, until when."""

    by: str  # namespace/name of the pod
    uid: str
    reason: str
    at: datetime
    until: datetime
    nodes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "uid": self.uid,
            "reason": self.reason,
            "at": self.at.isoformat(),
            "until": self.until.isoformat(),
            "nodes": self.nodes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WakeRecord:
        at, until = datetime.fromisoformat(str(data["at"])), datetime.fromisoformat(str(data["until"]))
        if at.tzinfo is None or until.tzinfo is None:
            raise ValueError("wake.at and wake.until need a UTC offset")
        return cls(str(data["by"]), str(data["uid"]), str(data["reason"]), at, until, int(data["nodes"]))


def fits(pod: PendingPod, selector: Mapping[str, str], shape: NodeShape | None) -> bool:
    """Whether the scheduler could put ``pod`` on a node of a group whose nodes carry ``selector`` (its provider's
    label) and look like ``shape``."""
    labels = {**(shape.labels if shape else {}), **selector}
    if shape is not None and shape.resources and not set(pod.resources) & set(shape.resources):
        return False
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.affinity and not any(term is not None and all(r.matches(labels) for r in term) for term in pod.affinity):
        return False
    hard = (t for t in (shape.taints if shape else ()) if t.effect in ("NoSchedule", "NoExecute"))
    return all(any(tol.covers(t) for tol in pod.tolerations) for t in hard)


def nodes_needed(pods: tuple[PendingPod, ...], gpus_per_node: int | None) -> int:
    """Nodes for these pods: their GPUs over the group's ``gpusPerNode``, each pod on its own node without it."""
    if gpus_per_node is None:
        return len(pods)
    return sum(max(1, math.ceil(p.gpus / gpus_per_node)) for p in pods)


def wake_config(kind: ProviderKind, current: GroupConfig, nodes: int) -> GroupConfig:
    """The group brought up to ``nodes`` nodes (per zone where the provider counts per zone), its autoscaler left
    off: the nodes are asked for directly (no autoscaler to wait for), and max is raised to hold them."""
    rules = PROVIDERS[kind]
    if rules.autoscaler_by_tags:
        return replace(current, min=0, desired=nodes, max=max(nodes, rules.min_max_size), autoscaling=False)
    per_zone = math.ceil(nodes / max(1, current.zones))
    return replace(current, desired=per_zone, max=max(current.max, per_zone), autoscaling=False, stopped=False)


def wake_limits(recorded: GroupConfig, current: GroupConfig, nodes: int) -> GroupConfig:
    """A Karpenter pool woken for ``nodes`` nodes: its recorded limits back, with a ``nodes`` limit of ``nodes`` (or
    the recorded one, if lower), so Karpenter launches for the Pending pods and no more; a static pool gets
    ``nodes`` replicas (at most its recorded ones)."""
    limits = dict(recorded.limits or {})
    if recorded.replicas is not None:
        return replace(current, limits=limits, replicas=min(nodes, recorded.replicas))
    had = limits.get("nodes", "")
    limits["nodes"] = str(min(nodes, int(had)) if had.isdigit() else nodes)
    return replace(current, limits=limits, replicas=None)


def notice_event(pod: PendingPod, kind: str) -> str:
    """The name of the one ``kind`` Event (``wake``, ``nowake``) on ``pod`` (by uid: its replacement is another)."""
    digest = hashlib.sha256(f"{pod.uid}/{kind}".encode()).hexdigest()[:16]
    suffix = f".{kind}-{digest}"
    return pod.name[: 253 - len(suffix)] + suffix


def waking_text(group: str, nodes: int, ready_min: int, until: datetime) -> str:
    what = f"{nodes} node{'' if nodes == 1 else 's'}"
    return f"waking {group}: {what}, usually ready in ~{ready_min} min, up until {until:%H:%M} (policy wake.for)"


def ends(at: datetime, duration: timedelta) -> datetime:
    """When a wake begun at ``at`` ends (kept in the instant's own timezone)."""
    return (at.astimezone(UTC) + duration).astimezone(at.tzinfo)


#: ``gpu-jobs/keep-up-until=<RFC 3339>`` on a running GPU pod keeps its group up until then, capped by maxDelay.
KEEP_UP_UNTIL_ANNOTATION = "gpu-jobs/keep-up-until"
#: The Event reason on a pod whose keep-up-until holds its group up.
KEPT_UP = "NodeGroupKeptUp"


@dataclass(frozen=True)
class KeepUp:
    """A keep-up-until first seen at ``seen`` (in the group's record): its cap is ``seen + maxDelay``, saved once, so
    a snooze re-read every run still ends; a new value is a new keep-up, capped from when it is first seen."""

    pod: str  # namespace/name/uid
    asked: str  # the annotation's value, as written
    seen: datetime

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "asked": self.asked, "seen": self.seen.isoformat()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeepUp:
        seen = datetime.fromisoformat(str(data["seen"]))
        if seen.tzinfo is None:
            raise ValueError("keepUp.seen needs a UTC offset")
        return cls(str(data["pod"]), str(data["asked"]), seen)


def rfc3339(text: str) -> datetime | None:
    """An RFC 3339 time with its offset, or None."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
