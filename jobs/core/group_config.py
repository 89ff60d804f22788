"""A node group's configuration as the job sees it: what a provider adapter reads, what the steps move between, and
what a record keeps of a group before it goes down (its JSON is part of the record format, ``group_record``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class GroupConfig:
    """What the cloud says about a group; also what is recorded before a shutdown and restored after.

    ``desired`` is None where the provider reports no live size (a GKE node pool). ``autoscaler_tags`` holds the
    Cluster Autoscaler discovery tags of EKS/ASG groups exactly as found, so that restoring re-creates them.
    """

    min: int
    desired: int | None
    max: int
    autoscaling: bool = False
    autoscaler_tags: Mapping[str, str] = field(default_factory=dict)
    propagated_tags: frozenset[str] = frozenset()  # EKS/ASG: discovery tags with PropagateAtLaunch
    autoscaler_profile: str | None = None  # GKE: the autoscaler's location policy (BALANCED, ANY)
    stopped: bool = False
    system: bool = False  # AKS System mode pool: refused
    zones: int = 1  # GKE: node counts are per zone
    busy: bool = False  # an update is running on the group right now (read-only hint)
    # Why the provider has fewer nodes than it was asked for (stockout, quota, no free IPs), in its own words;
    # None when it reports nothing missing. Read-only, never recorded.
    shortfall: str | None = None
    # Nodes asked for that the provider has not launched (yet): a fact without a cause, e.g. a plain ASG's
    # instances short of its desired capacity. Read-only, never recorded.
    missing: int = 0
    # A Karpenter NodePool (``ProviderRules.by_limits``): its ``spec.limits`` as stored ({}: none; None: no pool)
    # and ``spec.replicas`` (a static pool), recorded and written back exactly. ``desired`` is then its NodeClaims
    # not being deleted, ``missing`` those whose node has not registered.
    limits: Mapping[str, str] | None = None
    replicas: int | None = None
    # Karpenter: whether the pool's ``spec.disruption`` removes empty nodes by itself (None: not a pool). The
    # report's floor (``jobs.history``); read-only, never recorded nor restored.
    consolidates: bool | None = None
    # Why the job must not take the group down (Karpenter's own controller runs on its nodes). Read-only.
    refused: str | None = None
    # Karpenter, read-only: nodes whose claim has a ``terminationGracePeriod`` (deleting it would force its pods off
    # at the deadline), and nodes running ``karpenter.sh/do-not-disrupt`` pods (running work, GPUs or not).
    grace_nodes: frozenset[str] = frozenset()
    do_not_disrupt_nodes: frozenset[str] = frozenset()
    # Karpenter, read-only: this job's prewarm placeholder pods for the pool (``prewarm``), not being deleted.
    placeholders: int = 0

    def recordable(self) -> GroupConfig:
        """The configuration as a record keeps it: the read-only hints dropped (they are never stored)."""
        return replace(
            self,
            busy=False,
            shortfall=None,
            missing=0,
            consolidates=None,
            refused=None,
            grace_nodes=frozenset(),
            do_not_disrupt_nodes=frozenset(),
            placeholders=0,
        )

    def describe(self) -> str:
        """The configuration as a person reads it (an Event's): ``min 1, desired 3, max 8, autoscaler on``."""
        if self.limits is not None:
            limits = ", ".join(f"{k} {v}" for k, v in sorted(self.limits.items())) or "none"
            replicas = f", replicas {self.replicas}" if self.replicas is not None else ""
            return f"limits {limits}{replicas}, {self.desired or 0} node claim(s)"
        desired = "unknown" if self.desired is None else str(self.desired)
        parts = [f"min {self.min}", f"desired {desired}", f"max {self.max}"]
        if not self.autoscaling and self.desired is not None and self.max < self.desired:
            parts = [f"desired {desired}"]  # bounds the provider keeps but does not use (an AKS manual pool: 0, 0)
        if self.zones > 1:
            parts[-1] += f" (per zone, {self.zones} zones)"
        if self.autoscaling:
            profile = f" ({self.autoscaler_profile})" if self.autoscaler_profile else ""
            tags = f" with {len(self.autoscaler_tags)} discovery tags" if self.autoscaler_tags else ""
            parts.append(f"autoscaler on{profile}{tags}")
        if self.stopped:
            parts.append("stopped")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "desired": self.desired,
            "max": self.max,
            "autoscaling": self.autoscaling,
            "autoscalerTags": dict(self.autoscaler_tags),
            "propagatedTags": sorted(self.propagated_tags),
            "autoscalerProfile": self.autoscaler_profile,
            "stopped": self.stopped,
            "system": self.system,
            "zones": self.zones,
        } | self._pool_json()

    def _pool_json(self) -> dict[str, Any]:
        """A Karpenter pool's limits, replicas and consolidation, only where set: the other kinds' records stay as
        they were."""
        pool: dict[str, Any] = {"limits": dict(self.limits)} if self.limits is not None else {}
        pool |= {"replicas": self.replicas} if self.replicas is not None else {}
        return pool | ({"consolidates": self.consolidates} if self.consolidates is not None else {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupConfig:
        return cls(
            min=int(data["min"]),
            desired=None if data.get("desired") is None else int(data["desired"]),
            max=int(data["max"]),
            autoscaling=bool(data.get("autoscaling", False)),
            autoscaler_tags=dict(data.get("autoscalerTags", {})),
            propagated_tags=frozenset(data.get("propagatedTags", ())),
            autoscaler_profile=data.get("autoscalerProfile"),
            stopped=bool(data.get("stopped", False)),
            system=bool(data.get("system", False)),
            zones=int(data.get("zones", 1)),
            limits={str(k): str(v) for k, v in data["limits"].items()} if data.get("limits") is not None else None,
            replicas=None if data.get("replicas") is None else int(data["replicas"]),
            consolidates=None if data.get("consolidates") is None else bool(data["consolidates"]),
        )
