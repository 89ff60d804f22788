"""What each provider allows and how it counts, as data in one place: the planner, the job and the adapters read
the rules here (the emulators keep their own copy, from the providers' documentation, so a wrong rule here is
caught by them rather than shared with them)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from jobs.labels import AKS_AGENTPOOL_LABEL, EKS_NODEGROUP_LABEL, GKE_NODEPOOL_LABEL

ProviderKind = Literal["eks", "asg", "gke", "aks"]


@dataclass(frozen=True)
class ProviderRules:
    kind: ProviderKind
    title: str
    #: The label the provider puts on a group's nodes; None: the policy's nodeSelector must say (plain ASGs).
    node_label: str | None
    #: The smallest maxSize the provider accepts: EKS UpdateNodegroupConfig refuses maxSize 0, so a group at rest
    #: keeps 0/0/1.
    min_max_size: int
    #: The largest size of one group (per zone where ``per_zone``); None: no fixed limit (EKS: a service quota;
    #: an ASG: its own maxSize).
    max_nodes: int | None
    #: Sizes are counted per zone (a GKE node pool's node count is per zone of its locations).
    per_zone: bool
    #: Where the provider runs one operation at a time: GKE one per node pool, AKS one per cluster (its pools'
    #: updates take turns), EKS and Auto Scaling one update per group.
    one_operation_per: Literal["group", "cluster"]
    #: Groups the provider never lets go to zero (AKS System mode pools need >= 1 node and cannot be stopped).
    never_down: str | None = None

    @property
    def node_limit(self) -> int:
        """``max_nodes`` as a bound to check against (no fixed limit: none reached)."""
        return self.max_nodes if self.max_nodes is not None else sys.maxsize


PROVIDERS: dict[ProviderKind, ProviderRules] = {
    "eks": ProviderRules("eks", "EKS managed node group", EKS_NODEGROUP_LABEL, 1, None, False, "group"),
    "asg": ProviderRules("asg", "EC2 Auto Scaling group", None, 0, None, False, "group"),
    "gke": ProviderRules("gke", "GKE node pool", GKE_NODEPOOL_LABEL, 0, 1000, True, "group"),
    "aks": ProviderRules(
        "aks",
        "AKS agent pool",
        AKS_AGENTPOOL_LABEL,
        0,
        1000,
        False,
        "cluster",
        never_down="AKS system pool: needs >= 1 node and cannot be stopped; never scaled",
    ),
}

#: Providers whose groups in one cluster must take turns.
CLUSTER_SERIAL_KINDS = frozenset(k for k, rules in PROVIDERS.items() if rules.one_operation_per == "cluster")
