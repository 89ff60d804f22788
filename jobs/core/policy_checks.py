"""The checks that span sections of a validated policy: unique names, overrides and quota targets that name a node
group, the fleet the clusters and locators imply, the ``cloudQuotas`` entries against each other and the node
groups, the ``namespaceQuotas`` rules against the clusters and each other, and the quota warnings. Each section's
model checks itself (``jobs.core.policy_*``); the loader (``jobs.policy_file``) runs these after, and reports every
problem as a (path, message) pair on the line it names."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from pydantic.alias_generators import to_camel

from jobs.core.policy import Policy
from jobs.core.policy_cloud_quotas import CloudQuota, InstancesTarget, NodeGroupsTarget, foreign_fields
from jobs.core.policy_fleet import NodeGroup, Problem, declared_cluster_problems, resolve_fleet
from jobs.core.policy_quotas import QuotaRule
from jobs.core.quantity import is_extended_resource, is_gpu_resource, quota_key


def policy_problems(policy: Policy) -> list[Problem]:
    """Every cross-section problem of ``policy``."""
    return cross_reference_problems(policy) + cloud_quota_problems(policy) + quota_problems(policy)


def cross_reference_problems(policy: Policy) -> list[Problem]:
    """Rules that span entries (unique names, overrides that name a group), as (path, message) pairs."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(policy.node_groups):
        if group.name in seen:
            problems.append(
                (("nodeGroups", i, "name"), f'"{group.name}" is already used by nodeGroups[{seen[group.name]}]')
            )
        seen.setdefault(group.name, i)
    locators: dict[Any, int] = {}
    for i, group in enumerate(policy.node_groups):
        key = group.locator
        if key in locators:
            problems.append(((("nodeGroups", i, group.locator_key)), f"same node group as nodeGroups[{locators[key]}]"))
        locators.setdefault(key, i)
    for i, override in enumerate(policy.overrides):
        if override.node_group not in seen:
            problems.append((("overrides", i, "nodeGroup"), f'unknown node group "{override.node_group}"'))
    # A price for a group the policy does not have is a typo: that group's savings would have no money.
    problems += [
        (("pricing", "nodeGroups", name), f'unknown node group "{name}"')
        for name in policy.pricing.node_groups
        if name not in seen
    ]
    return problems + fleet_problems(policy)


def fleet_problems(policy: Policy) -> list[Problem]:
    """The clusters declared, and those the node groups' locators imply."""
    return declared_cluster_problems(policy.clusters) + resolve_fleet(policy.clusters, policy.node_groups).problems


def _region_of(location: str) -> str:
    """A GCP zone's region (europe-west4-a -> europe-west4); a region is its own."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) > 2 else location


def _group_problem(entry: CloudQuota, group: NodeGroup) -> str | None:
    """Why a node group cannot count against the entry's quota, naming both; None when it can."""
    if group.karpenter is not None:  # no instance type of its own: Karpenter chooses per pod
        return f"node group {group.name} is a Karpenter NodePool: name its instance types (target: instances)"
    if group.cloud != entry.cloud:
        return f"node group {group.name} is on {group.cloud}, quota {entry.name} on {entry.cloud}"
    loc = group.locator.model_dump()
    if entry.cloud == "aws" and loc["region"] != entry.region:
        return f"node group {group.name} is in region {loc['region']}, quota {entry.name} in {entry.region}"
    if entry.cloud == "gcp":
        if loc["project"] != entry.project:
            return f"node group {group.name} is in project {loc['project']}, quota {entry.name} in {entry.project}"
        if entry.region and _region_of(loc["location"]) != entry.region:
            return f"node group {group.name} is in {loc['location']}, quota {entry.name} in region {entry.region}"
    if entry.cloud == "azure" and str(loc["subscription"]).lower() != str(entry.subscription).lower():
        return (
            f"node group {group.name} is in subscription {loc['subscription']}, quota {entry.name} in"
            f" {entry.subscription}"
        )
    return None


def cloud_quota_problems(policy: Policy) -> list[Problem]:
    """What the ``cloudQuotas`` section gets wrong, as (path, message) pairs; the cloud's data is checked at plan."""
    problems: list[Problem] = []
    names: dict[str, int] = {}
    identities: dict[tuple[str, ...], int] = {}
    groups = {g.name: g for g in policy.node_groups}
    for i, entry in enumerate(policy.cloud_quotas):
        base: tuple[str | int, ...] = ("cloudQuotas", i)
        if entry.name in names:
            problems.append(((*base, "name"), f'"{entry.name}" is already used by cloudQuotas[{names[entry.name]}]'))
        names.setdefault(entry.name, i)
        foreign = list(foreign_fields(entry, base))
        problems += foreign
        if foreign:
            continue
        if entry.identity in identities:
            other = policy.cloud_quotas[identities[entry.identity]]
            problems.append((base, f"same quota and scope as cloudQuotas[{identities[entry.identity]}] ({other.name})"))
        identities.setdefault(entry.identity, i)
        target = entry.target
        if isinstance(target, int) and entry.max is not None and target > entry.max:
            problems.append(((*base, "target"), f"{target} is above max {entry.max}"))
        if entry.cloud == "gcp" and not entry.contact_email:
            problems.append(((*base, "contactEmail"), "required: GCP refuses a quota increase without a contact"))
        if isinstance(target, InstancesTarget):
            wanted = {"aws": "instance_type", "gcp": "machine_type", "azure": "vm_size"}[entry.cloud]
            if getattr(target, wanted) is None:
                problems.append(((*base, "target"), f"cloud {entry.cloud} takes {to_camel(wanted)}"))
        if isinstance(target, NodeGroupsTarget):
            for j, name in enumerate(target.node_groups):
                path = (*base, "target", "nodeGroups", j)
                group = groups.get(name)
                if group is None:
                    problems.append((path, f'unknown node group "{name}"'))
                elif (why := _group_problem(entry, group)) is not None:
                    problems.append((path, why))
    return problems


def quota_problems(policy: Policy) -> list[Problem]:
    """Rules that cannot work: an unknown cluster, and a rule an earlier one always shadows."""
    config = policy.namespace_quotas
    if config is None:
        return []
    known = {c.name for c in policy.fleet}
    problems: list[Problem] = []
    base: tuple[str | int, ...] = ("namespaceQuotas", "rules")
    for i, rule in enumerate(config.rules):
        for j, name in enumerate(rule.clusters or ()):
            if name not in known:
                problems.append(((*base, i, "clusters", j), f'unknown cluster "{name}"'))
        for k in range(i):
            if _shadows(config.rules[k], rule):
                problems.append(
                    ((*base, i), f"never matches: rules[{k}] comes first and matches every namespace it does")
                )
                break
    return problems


#: The GPU resource names the job knows, as a warning shows them.
KNOWN_GPU_RESOURCES = "nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<n>g.<m>gb, amd.com/gpu"


def quota_warnings(policy: Policy) -> list[Problem]:
    """What is allowed but likely a mistake: an extended resource that is not a known GPU name (a typo such as
    ``nvidia.com/gpus`` would limit nothing; a real device plugin's resource is fine)."""
    config = policy.namespace_quotas
    if config is None:
        return []
    limits: list[tuple[tuple[str | int, ...], Mapping[str, str | int | float]]] = []
    if config.default is not None:
        limits.append((("namespaceQuotas", "default"), config.default))
    for i, rule in enumerate(config.rules):
        limits.append((("namespaceQuotas", "rules", i, "hard"), rule.hard))
        if rule.off_hours is not None:
            limits.append((("namespaceQuotas", "rules", i, "offHours", "hard"), rule.off_hours.hard))
    return [
        (
            (*path, name),
            f'"{name}" is not a known GPU resource ({KNOWN_GPU_RESOURCES}): it is written as'
            f" {quota_key(name)}, which limits only pods that request exactly this name",
        )
        for path, hard in limits
        for name in hard
        if is_extended_resource(name) and not is_gpu_resource(name)
    ]


def _shadows(earlier: QuotaRule, later: QuotaRule) -> bool:
    """Whether ``earlier`` matches every namespace ``later`` can (checked for what can be decided exactly)."""
    if earlier.clusters is not None and (later.clusters is None or not set(later.clusters) <= set(earlier.clusters)):
        return False
    if earlier.selector is not None and earlier.selector != later.selector:
        return False
    if earlier.namespaces is None:
        return True
    if later.namespaces is None:
        return False
    return all(
        any(p == q or (not _is_glob(q) and fnmatch.fnmatchcase(q, p)) or p == "*" for p in earlier.namespaces)
        for q in later.namespaces
    )


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")
