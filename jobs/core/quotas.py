"""Namespace GPU quotas, pure: which rule governs a namespace, what its managed ResourceQuota must say, and the
plan that converges one cluster's quotas to the policy. No I/O: namespaces and quotas in, entries out.

The policy speaks in resource names (``nvidia.com/gpu``); a ResourceQuota enforces extended resources only as
``requests.<name>`` (a bare or ``limits.`` key is stored and never enforced), so that is the key written.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from jobs.core.policy import LabelSelector, NamespaceQuotas, Policy, QuotaRule
from jobs.core.quantity import is_extended_resource, is_gpu_resource, parse_quantity, quota_key
from jobs.core.schedule import in_working_hours

Action = Literal["create", "update", "delete", "unchanged"]
Problem = tuple[tuple[str | int, ...], str]


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    labels: Mapping[str, str]
    terminating: bool = False


@dataclass(frozen=True)
class QuotaInfo:
    """A ResourceQuota as observed: ``managed`` when it carries the job's managed-by label."""

    namespace: str
    name: str
    hard: Mapping[str, str]
    used: Mapping[str, str]
    managed: bool


@dataclass(frozen=True)
class Governing:
    """What the policy says for a namespace: ``hard`` None means no managed quota (excluded)."""

    rule: str  # "rules[i]", "rules[i].offHours", "default", "excluded", "none"
    hard: Mapping[str, str] | None


@dataclass(frozen=True)
class QuotaEntry:
    namespace: str
    quota: str
    action: Action
    hard: Mapping[str, str]  # as it will be written (enforced keys)
    rule: str
    warnings: tuple[str, ...] = ()


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


def _rule_matches(rule: QuotaRule, cluster: str, ns: NamespaceInfo) -> bool:
    if rule.clusters is not None and cluster not in rule.clusters:
        return False
    if rule.namespaces is not None and not any(fnmatch.fnmatchcase(ns.name, p) for p in rule.namespaces):
        return False
    return rule.selector is None or selector_matches(rule.selector, ns.labels)


def governing(policy: Policy, quotas: NamespaceQuotas, cluster: str, ns: NamespaceInfo, now: datetime) -> Governing:
    """Exclusions first, then the first matching rule (its off-hours limits outside its working hours), then the
    default."""
    if any(fnmatch.fnmatchcase(ns.name, p) for p in quotas.exclude):
        return Governing("excluded", None)
    for i, rule in enumerate(quotas.rules):
        if not _rule_matches(rule, cluster, ns):
            continue
        off = rule.off_hours
        if off is not None:
            tz = ZoneInfo(off.timezone or policy.defaults.timezone)
            holidays = off.holidays if off.holidays is not None else policy.defaults.holidays
            if not in_working_hours(tz, holidays, off.working_hours, now):
                return Governing(f"rules[{i}].offHours", _enforced(off.hard))
        return Governing(f"rules[{i}]", _enforced(rule.hard))
    if quotas.default is not None:
        return Governing("default", _enforced(quotas.default))
    return Governing("none", None)


def _enforced(hard: Mapping[str, str | int | float]) -> dict[str, str]:
    return {quota_key(name): str(amount) for name, amount in sorted(hard.items())}


def same_hard(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Equal as the API server sees them: ``4`` equals ``4000m``, ``1Gi`` equals ``1024Mi``."""
    if set(a) != set(b):
        return False
    try:
        return all(parse_quantity(a[k]) == parse_quantity(b[k]) for k in a)
    except ValueError:
        return False


def plan_quotas(
    policy: Policy,
    cluster: str,
    namespaces: Sequence[NamespaceInfo],
    quotas: Sequence[QuotaInfo],
    now: datetime,
) -> tuple[QuotaEntry, ...]:
    """One entry per namespace considered: terminating namespaces are left alone; quotas the job does not own are
    never changed (a same-named one it does not own is reported where the policy wants a quota, not taken over);
    a managed quota under another name (``quotaName`` was changed) is removed."""
    config = policy.namespace_quotas
    if config is None:
        return ()
    by_namespace = {(q.namespace, q.name): q for q in quotas}
    former: dict[str, list[QuotaInfo]] = {}
    for q in sorted(quotas, key=lambda q: q.name):
        if q.managed and q.name != config.quota_name:
            former.setdefault(q.namespace, []).append(q)
    entries: list[QuotaEntry] = []
    for ns in sorted(namespaces, key=lambda n: n.name):
        if ns.terminating:
            continue
        wanted = governing(policy, config, cluster, ns, now)
        entry = _entry(config.quota_name, ns.name, wanted, by_namespace.get((ns.name, config.quota_name)))
        entries += [entry] if entry is not None else []
        # After the new quota is written, so that the namespace is never without one.
        why = f"managed by gpu-jobs under a former quotaName: {config.quota_name} replaces it"
        entries += [QuotaEntry(ns.name, q.name, "delete", {}, wanted.rule, (why,)) for q in former.get(ns.name, ())]
    return tuple(entries)


def _entry(name: str, namespace: str, wanted: Governing, current: QuotaInfo | None) -> QuotaEntry | None:
    if current is not None and not current.managed:
        if wanted.hard is None:  # excluded, or no rule and no default: nothing to write, nothing to say
            return None
        warning = f"a ResourceQuota {name} not managed by gpu-jobs exists: left as it is"
        return QuotaEntry(namespace, name, "unchanged", {}, wanted.rule, (warning,))
    if wanted.hard is None:
        return QuotaEntry(namespace, name, "delete", {}, wanted.rule) if current is not None else None
    if current is None:
        action: Action = "create"
    elif same_hard(current.hard, wanted.hard):
        action = "unchanged"
    else:
        action = "update"
    warnings = _below_usage(wanted.hard, current.used if current else {})
    return QuotaEntry(namespace, name, action, wanted.hard, wanted.rule, warnings)


def _below_usage(hard: Mapping[str, str], used: Mapping[str, str]) -> tuple[str, ...]:
    warnings = []
    for key, limit in hard.items():
        if key in used and parse_quantity(used[key]) > parse_quantity(limit):
            warnings.append(
                f"{key}: the new limit {limit} is below current usage {used[key]}: running pods stay, new ones are"
                " refused"
            )
    return tuple(warnings)


@dataclass(frozen=True)
class Capacity:
    """What a cluster can give the quotas of its namespaces, per quota key, and where that figure comes from."""

    limits: Mapping[str, int]
    source: str  # e.g. "its node groups bring at most 24 (up.max x gpusPerNode)"


def policy_capacity(policy: Policy, cluster: str) -> Capacity | None:
    """The GPUs the cluster's node groups bring at their working maximum (``up.max`` x ``gpusPerNode``), when the
    policy says it for every group of the cluster; None when it cannot (no groups, or one without the sizes)."""
    groups = policy.groups_in(cluster)
    if not groups or any(g.up is None or not g.gpus_per_node for g in groups):
        return None
    total = sum(g.up.max * g.gpus_per_node for g in groups if g.up and g.gpus_per_node)
    return Capacity({"requests.nvidia.com/gpu": total}, "its node groups bring at most {} (up.max x gpusPerNode)")


def node_capacity(allocatable: Mapping[str, int]) -> Capacity:
    """The GPUs the cluster's nodes have allocatable right now (a group scaled down brings none)."""
    return Capacity({f"requests.{name}": n for name, n in allocatable.items()}, "its nodes have {} allocatable now")


def over_commit(entries: Sequence[QuotaEntry], capacity: Capacity) -> tuple[str, ...]:
    """Where the quotas of a cluster add up to more than it has (allowed, but shown)."""
    warnings = []
    for key, available in sorted(capacity.limits.items()):
        total = sum(parse_quantity(e.hard[key]) for e in entries if key in e.hard)
        if total > available:
            warnings.append(f"{key}: quotas add up to {total} but {capacity.source.format(available)}: over-committed")
    return tuple(warnings)


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
