"""Namespace GPU quotas, pure: which rule governs a namespace, what its managed ResourceQuota must say, and the
plan that converges one cluster's quotas to the policy. No I/O: namespaces and quotas in, entries out.

The policy speaks in resource names (``nvidia.com/gpu``); a ResourceQuota enforces extended resources only as
``requests.<name>`` (a bare or ``limits.`` key is stored and never enforced), so that is the key written.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Literal
from zoneinfo import ZoneInfo

from jobs.core.policy import Holidays, LabelSelector, NamespaceQuotas, Policy, WorkingHours
from jobs.core.quantity import parse_quantity, quota_key
from jobs.core.schedule import in_working_hours
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.labels import MANAGED_BY, MANAGED_BY_LABEL

#: ``conflict`` and ``failed`` are written nowhere: the namespace is a failed item, with the entry's reason.
Action = Literal["create", "update", "delete", "unchanged", "conflict", "failed"]
WRITES: frozenset[Action] = frozenset({"create", "update", "delete"})
Problem = tuple[tuple[str | int, ...], str]


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    labels: Mapping[str, str]
    terminating: bool = False


@dataclass(frozen=True)
class QuotaInfo:
    """A ResourceQuota as observed: ``managed`` when it carries the job's managed-by label.

    ``scopes`` are its ``spec.scopes`` and ``spec.scopeSelector`` requirements as text (``Terminating``,
    ``PriorityClass In (high)``): a scoped quota limits only the pods in its scopes. ``scopes_mine`` says the job's
    own server-side apply owns every one of them (so its next apply, which gives none, removes them);
    ``scope_owners`` names the other field managers that own one (whose fields an apply never removes)."""

    namespace: str
    name: str
    hard: Mapping[str, str]
    used: Mapping[str, str]
    managed: bool
    scopes: tuple[str, ...] = ()
    scopes_mine: bool = False
    scope_owners: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()  # every field manager of the object, for the reports


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
    hard: Mapping[str, str]  # as it will be written (enforced keys); for a conflict or failure, what the policy says
    rule: str
    warnings: tuple[str, ...] = ()
    reason: str = ""  # why a conflict or failure, and how to resolve it
    before: Mapping[str, str] = field(default_factory=dict)  # the quota's limits now, for an update or a delete

    @property
    def writes(self) -> bool:
        return self.action in WRITES

    def change(self) -> str:
        """The limits as a person reads them: ``key=value`` for a quota created or a limit kept (compared by value,
        as the plan does), ``key old -> new`` for an update (``none -> new`` for a limit it adds), ``key old ->
        removed`` for one the write drops (every one, for a delete)."""
        if self.action == "delete":
            return ", ".join(f"{k} {v} -> removed" for k, v in self.before.items()) or "-"
        if self.action != "update":
            return ", ".join(f"{k}={v}" for k, v in self.hard.items()) or "-"
        parts = []
        for key, value in self.hard.items():
            old = self.before.get(key)
            same = old is not None and _same_quantity(old, value)
            parts.append(f"{key}={value}" if same else f"{key} {old or 'none'} -> {value}")
        parts += [f"{k} {v} -> removed" for k, v in self.before.items() if k not in self.hard]
        return ", ".join(parts) or "-"


def _same_quantity(a: str, b: str) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:  # unreadable limits make a failed entry, never an update: said as they are, just in case
        return a == b


def unwritten_status(entry: QuotaEntry) -> Literal["unchanged", "conflict", "failed"]:
    """The outcome of an entry that writes nothing: ``unchanged``, or a failed item (``conflict``, ``failed``)."""
    if entry.action in ("conflict", "failed"):
        return "conflict" if entry.action == "conflict" else "failed"
    return "unchanged"


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


def _globs(patterns: Sequence[str]) -> re.Pattern[str]:
    """Names and globs as one expression (fnmatchcase's translation), matched once per namespace."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


_EXCLUDED = Governing("excluded", None)


@dataclass(frozen=True)
class _Rule:
    index: int
    names: re.Pattern[str] | None
    selector: LabelSelector | None
    working_hours: Governing  # what it says inside its working hours (always, without offHours)
    off_hours: Governing | None
    off_schedule: tuple[ZoneInfo, Holidays | None, tuple[WorkingHours, ...]] | None

    def matches(self, ns: NamespaceInfo) -> bool:
        if self.names is not None and self.names.match(ns.name) is None:
            return False
        return self.selector is None or selector_matches(self.selector, ns.labels)


@dataclass
class QuotaRules:
    """A policy's ``namespaceQuotas`` compiled for one cluster: globs compiled, limits as the enforced keys, each
    rule's off-hours schedule resolved, and whether an instant lies in a rule's working hours asked once per rule and
    instant (5,000 namespaces under one rule ask once, not 5,000 times). Built once per plan, or once per run and
    passed to every plan of the run."""

    quota_name: str
    exclude: re.Pattern[str] | None
    rules: tuple[_Rule, ...]
    default: Governing
    _in_hours: dict[tuple[int, datetime], bool] = field(default_factory=dict, init=False, repr=False)

    def working(self, rule: _Rule, now: datetime) -> bool:
        key, schedule = (rule.index, now), rule.off_schedule
        if schedule is None:
            return True
        if key not in self._in_hours:
            if len(self._in_hours) > 256:  # a long-lived object asked at many instants: keep it small
                self._in_hours.clear()
            self._in_hours[key] = in_working_hours(*schedule, now)
        return self._in_hours[key]

    def governing(self, ns: NamespaceInfo, now: datetime) -> Governing:
        """Exclusions first, then the first matching rule (its off-hours limits outside its working hours), then
        the default."""
        if self.exclude is not None and self.exclude.match(ns.name):
            return _EXCLUDED
        for rule in self.rules:
            if not rule.matches(ns):
                continue
            if rule.off_hours is not None and not self.working(rule, now):
                return rule.off_hours
            return rule.working_hours
        return self.default


def compile_quotas(policy: Policy, config: NamespaceQuotas, cluster: str) -> QuotaRules:
    """The rules that can apply in ``cluster`` (a rule limited to other clusters is left out), compiled."""
    rules = []
    for i, rule in enumerate(config.rules):
        if rule.clusters is not None and cluster not in rule.clusters:
            continue
        off = rule.off_hours
        schedule = None
        if off is not None:
            holidays = off.holidays if off.holidays is not None else policy.defaults.holidays
            schedule = (ZoneInfo(off.timezone or policy.defaults.timezone), holidays, off.working_hours)
        names = _globs(rule.namespaces) if rule.namespaces is not None else None
        on = Governing(f"rules[{i}]", _enforced(rule.hard))
        off_hard = Governing(f"rules[{i}].offHours", _enforced(off.hard)) if off is not None else None
        rules.append(_Rule(i, names, rule.selector, on, off_hard, schedule))
    exclude = _globs(config.exclude) if config.exclude else None
    default = Governing("none", None) if config.default is None else Governing("default", _enforced(config.default))
    return QuotaRules(config.quota_name, exclude, tuple(rules), default)


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
    rules: QuotaRules | None = None,
) -> tuple[QuotaEntry, ...]:
    """One entry per namespace considered: terminating namespaces are left alone; quotas the job does not own are
    never changed (a same-named one it does not own is a conflict where the policy wants a quota, not taken over);
    a managed quota under another name (``quotaName`` was changed) is removed. ``rules``: the policy's rules
    compiled for ``cluster`` once for the run (compiled here when not given)."""
    config = policy.namespace_quotas
    if config is None:
        return ()
    rules = rules if rules is not None else compile_quotas(policy, config, cluster)
    by_namespace = {(q.namespace, q.name): q for q in quotas}
    former: dict[str, list[QuotaInfo]] = {}
    for q in sorted(quotas, key=lambda q: q.name):
        if q.managed and q.name != config.quota_name:
            former.setdefault(q.namespace, []).append(q)
    entries: list[QuotaEntry] = []
    for ns in sorted(namespaces, key=lambda n: n.name):
        if ns.terminating:
            continue
        wanted = rules.governing(ns, now)
        entry = _entry(config.quota_name, ns.name, wanted, by_namespace.get((ns.name, config.quota_name)))
        entries += [entry] if entry is not None else []
        # After the new quota is written, so that the namespace is never without one.
        why = f"managed by gpu-jobs under a former quotaName: {config.quota_name} replaces it"
        entries += [
            QuotaEntry(ns.name, q.name, "delete", {}, wanted.rule, (why,), before=q.hard)
            for q in former.get(ns.name, ())
        ]
    return tuple(entries)


def _entry(name: str, namespace: str, wanted: Governing, current: QuotaInfo | None) -> QuotaEntry | None:
    if current is not None and not current.managed:
        if wanted.hard is None:  # excluded, or no rule and no default: nothing to write, nothing to say
            return None
        return QuotaEntry(namespace, name, "conflict", wanted.hard, wanted.rule, reason=_foreign(current, wanted))
    if wanted.hard is None:
        return (
            QuotaEntry(namespace, name, "delete", {}, wanted.rule, before=current.hard) if current is not None else None
        )
    if current is None:
        return QuotaEntry(namespace, name, "create", wanted.hard, wanted.rule)
    same, warnings, unreadable = _compare(current, wanted.hard)
    if unreadable:
        return QuotaEntry(namespace, name, "failed", wanted.hard, wanted.rule, reason=unreadable)
    if current.scopes and not (current.scopes_mine and not current.scope_owners):
        return QuotaEntry(namespace, name, "conflict", wanted.hard, wanted.rule, warnings, _foreign_scopes(current))
    if current.scopes:
        # The job's own apply set them: its next apply, which gives none, removes them.
        warnings += (f"scopes {', '.join(current.scopes)} (not in the policy) removed: the quota limits every pod",)
        return QuotaEntry(namespace, name, "update", wanted.hard, wanted.rule, warnings, before=current.hard)
    if same:
        return QuotaEntry(namespace, name, "unchanged", wanted.hard, wanted.rule, warnings)
    return QuotaEntry(namespace, name, "update", wanted.hard, wanted.rule, warnings, before=current.hard)


def _compare(current: QuotaInfo, hard: Mapping[str, str]) -> tuple[bool, tuple[str, ...], str]:
    """Whether the quota's limits are the policy's (by value), where the policy's are below current usage, and what
    of the two the job must compare but cannot read as a quantity (one pass: a plan does this per namespace)."""
    same = set(current.hard) == set(hard)
    warnings: list[str] = []
    bad: list[str] = []
    for key, limit in hard.items():
        wanted = parse_quantity(limit)  # the policy's: validated at load
        if key in current.hard:
            have = _quantity(current.hard[key])
            if have is None:
                bad.append(f"spec.hard[{key}] {quoted(current.hard[key], ECHO_LIMIT)}")
            same = same and have == wanted
        if key in current.used:
            used = _quantity(current.used[key])
            if used is None:
                bad.append(f"status.used[{key}] {quoted(current.used[key], ECHO_LIMIT)}")
            elif used > wanted:
                warnings.append(
                    f"{key}: the new limit {limit} is below current usage {current.used[key]}: running pods stay,"
                    " new ones are refused"
                )
    reason = f"{'; '.join(bad)}: not a quantity, so it cannot be compared with the policy: nothing written"
    return same, tuple(warnings), reason if bad else ""


def _listing(hard: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(hard.items())) or "no limits"


def _foreign(current: QuotaInfo, wanted: Governing) -> str:
    by = f"field managers {', '.join(current.managers)}" if current.managers else "no field manager"
    return (
        f"a ResourceQuota {current.name} that gpu-jobs does not manage ({by}; it says {_listing(current.hard)})"
        f" is where the policy wants {_listing(wanted.hard or {})}: left as it is. Delete it"
        f" (kubectl -n {current.namespace} delete resourcequota {current.name}) for the next run to write the"
        f" policy's, hand it to gpu-jobs (label it {MANAGED_BY_LABEL}={MANAGED_BY}; fields another manager owns"
        " then conflict until that manager gives them up), or give namespaceQuotas another quotaName"
    )


def _foreign_scopes(current: QuotaInfo) -> str:
    by = ", ".join(current.scope_owners) or "no field manager"
    return (
        f"scopes {', '.join(current.scopes)} set on {current.name} by {by}: the policy gives none, and scoped the"
        " quota limits only the pods in those scopes; server-side apply never removes another manager's field."
        f" Remove them (kubectl -n {current.namespace} patch resourcequota {current.name} --type=json -p"
        """ '[{"op":"remove","path":"/spec/scopes"}]', or /spec/scopeSelector) or delete the quota for the next"""
        " run to write it again"
    )


def _quantity(text: str) -> Fraction | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None


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
