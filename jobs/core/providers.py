"""What each provider allows and how it counts, as data in one place: the resolved policy, the planner's step
sequences and the adapters read the rules here (the emulators keep their own copy, from the providers'
documentation, so a wrong rule here is caught by them rather than shared with them).

The table is keyed by provider kind, and each row names the adapter that serves that kind: a new kind of node
group is a row here, its adapter module, its locator in the policy model and its cloud permissions (RBAC/IAM).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic.alias_generators import to_camel

from jobs.labels import AKS_AGENTPOOL_LABEL, EKS_NODEGROUP_LABEL, GKE_NODEPOOL_LABEL, KARPENTER_NODEPOOL_LABEL

ProviderKind = Literal["eks", "asg", "gke", "aks", "karpenter"]
Cloud = Literal["aws", "gcp", "azure"]


@dataclass(frozen=True)
class ProviderRules:
    kind: ProviderKind
    title: str
    #: The ``NodeGroupCloud`` adapter serving this kind, as ``module:Class``: imported on first use (the command's
    #: wiring), so a GKE-only policy never imports boto3 and the core imports no adapter.
    adapter: str
    #: The policy's cloud and the locator field that names a group of this kind: a locator with that field set is
    #: this kind (an AWS locator with ``nodegroup`` is EKS, with ``autoScalingGroup`` a plain ASG). None: a kind
    #: reached through the cluster's own Kubernetes API, with a locator section of its own named after the kind
    #: (``karpenter:``), whose cloud is its cluster's (``clouds``).
    cloud: Cloud | None
    group_field: str
    #: The label the provider puts on a group's nodes, its value the locator's ``group_field``; None: the policy's
    #: nodeSelector must say (plain ASGs).
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
    #: The Cluster Autoscaler finds the group by tags on its Auto Scaling group, and the group's own
    #: min/desired/max are its size (EKS, ASG). Otherwise the provider's autoscaler has bounds of its own and the
    #: group a node count (GKE, AKS).
    autoscaler_by_tags: bool
    #: The discovery tags may stay at night, so pending pods wake the group (the policy's ``autoscalerWakeUp``).
    wake_up: bool = False
    #: The group can be stopped (power state) instead of scaled to zero (the policy's ``strategy: stop``).
    can_stop: bool = False
    #: Groups the provider never lets go to zero (AKS System mode pools need >= 1 node and cannot be stopped).
    never_down: str | None = None
    #: The clouds whose clusters may hold a group of this kind (``cloud`` None only).
    clouds: tuple[Cloud, ...] = ()
    #: A group without a size of its own: the provider launches nodes for pending pods within limits (Karpenter).
    #: Down is a zero limit, then its nodes removed one by one (on every run until none remain), so running work
    #: keeps its own node only; up writes the recorded limits back, and nodes come with pods again.
    by_limits: bool = False

    @property
    def node_limit(self) -> int:
        """``max_nodes`` as a bound to check against (no fixed limit: none reached)."""
        return self.max_nodes if self.max_nodes is not None else sys.maxsize

    def describe_limit(self) -> str:
        return f"the {self.title} limit of {self.node_limit} nodes{' per zone' if self.per_zone else ''}"


PROVIDERS: dict[ProviderKind, ProviderRules] = {
    "eks": ProviderRules(
        "eks",
        "EKS managed node group",
        "jobs.adapters.aws.eks:EksNodeGroups",
        "aws",
        "nodegroup",
        EKS_NODEGROUP_LABEL,
        min_max_size=1,
        max_nodes=None,
        per_zone=False,
        one_operation_per="group",
        autoscaler_by_tags=True,
        wake_up=True,
    ),
    "asg": ProviderRules(
        "asg",
        "EC2 Auto Scaling group",
        "jobs.adapters.aws.asg:AsgNodeGroups",
        "aws",
        "auto_scaling_group",
        None,
        min_max_size=0,
        max_nodes=None,
        per_zone=False,
        one_operation_per="group",
        autoscaler_by_tags=True,
    ),
    "gke": ProviderRules(
        "gke",
        "GKE node pool",
        "jobs.adapters.gcp.nodegroups:GkeNodePools",
        "gcp",
        "node_pool",
        GKE_NODEPOOL_LABEL,
        min_max_size=0,
        max_nodes=1000,
        per_zone=True,
        one_operation_per="group",
        autoscaler_by_tags=False,
    ),
    "aks": ProviderRules(
        "aks",
        "AKS agent pool",
        "jobs.adapters.azure.nodegroups:AksAgentPools",
        "azure",
        "agent_pool",
        AKS_AGENTPOOL_LABEL,
        min_max_size=0,
        max_nodes=1000,
        per_zone=False,
        one_operation_per="cluster",
        autoscaler_by_tags=False,
        can_stop=True,
        never_down="AKS system pool: needs >= 1 node and cannot be stopped; never scaled",
    ),
    "karpenter": ProviderRules(
        "karpenter",
        "Karpenter NodePool",
        "jobs.adapters.kube.karpenter:KarpenterPools",
        None,
        "node_pool",
        KARPENTER_NODEPOOL_LABEL,
        min_max_size=0,
        max_nodes=None,
        per_zone=False,
        one_operation_per="group",
        autoscaler_by_tags=False,
        clouds=("aws", "azure"),  # EKS, and AKS node auto-provisioning (Karpenter underneath)
        by_limits=True,
    ),
}

#: The clouds of the policy's locators (``aws:``, ``gcp:``, ``azure:``), in the table's order.
CLOUDS: tuple[Cloud, ...] = tuple(dict.fromkeys(rules.cloud for rules in PROVIDERS.values() if rules.cloud))
#: The kinds with a locator section of their own (``karpenter:``), reached through the cluster's API.
SECTION_KINDS: tuple[ProviderKind, ...] = tuple(k for k, rules in PROVIDERS.items() if rules.cloud is None)

#: Providers whose groups in one cluster must take turns.
CLUSTER_SERIAL_KINDS = frozenset(k for k, rules in PROVIDERS.items() if rules.one_operation_per == "cluster")


def rules_for(cloud: str, locator: object) -> ProviderRules:
    """The provider a locator of ``cloud`` selects: the one whose ``group_field`` it sets. A locator of a section
    kind says its kind itself (``kind``), as a record's locator keys do for :func:`rules_of_identity`."""
    own = getattr(locator, "kind", None)
    if own in PROVIDERS:
        return PROVIDERS[own]
    for rules in PROVIDERS.values():
        if rules.cloud == cloud and getattr(locator, rules.group_field, None) is not None:
            return rules
    raise ValueError(f"no provider for a {cloud} locator {locator!r}")


def rules_of_identity(cloud: str, locator: Mapping[str, str]) -> ProviderRules | None:
    """The provider of a record's identity (its cloud and locator keys, camelCase): a section kind's locator has
    exactly ``cluster`` and its group field; otherwise the row of that cloud whose group field it has."""
    for rules in PROVIDERS.values():
        field = to_camel(rules.group_field)
        if rules.cloud is None and cloud in rules.clouds and set(locator) == {"cluster", field}:
            return rules
        if rules.cloud == cloud and field in locator:
            return rules
    return None
