"""What a policy change does, section by section: the pull-request view. Pure: two policies and a week in, data out.

- Node groups: up-hours and GPU-hours per week, for the groups whose figures change only, with fleet totals; every
  other changed field of a group as a field change.
- Namespace quotas: quotaName, the default, the exclusions and each rule before/after (rules are paired by what they
  match, so a limit change reads as one change and a reorder as a move: the first matching rule wins).
- Every other section (defaults, clusters, overrides, and sections added to the policy later, such as cloud quota
  targets or sweep settings): a structural diff of keys added, removed and changed, so a new section appears here
  without code.

The hours are counted over one fixed week, never "the week from now": the same pull request must show the same
figures whenever CI runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from jobs.core.cloud_quotas import Demand, GroupSize, Shape, demand_of
from jobs.core.policy import NamespaceQuotas, NodeGroup, Policy, QuotaOffHours, QuotaRule
from jobs.core.policy_cloud_quotas import CloudQuota, InstancesTarget, NodeGroupsTarget
from jobs.core.quotas import NamespaceInfo, compile_quotas, same_hard
from jobs.core.resolved import schedule_fields, view_of

WEEK = timedelta(days=7)
HOURS_PER_WEEK = 168.0
#: The Monday of the reference week: ISO week 2026-W24. No clock change in either hemisphere and no public holiday
#: in DE, US (incl. NY, CA), GB, FR, NL, IE, CA, IN or JP that week, so it shows a policy's ordinary working week.
REFERENCE_MONDAY = date(2026, 6, 8)

Kind = Literal["added", "removed", "changed"]
#: Marks a value absent on one side (None is a value: JSON null).
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
#: Sections with their own comparison; every other top-level key of the policy gets the structural one.
_SPECIAL = ("apiVersion", "kind", "nodeGroups", "namespaceQuotas")
#: A list of mappings is compared item by item under the first of these keys that is present and unique on both
#: sides (node groups and clusters by name), else by position.
_ITEM_KEYS = ("name", "nodeGroup")


@dataclass(frozen=True)
class Week:
    """``[start, start + 7 days)``; ``with_overrides``: count temporary overrides (a calendar's concrete week) or
    only the regular schedule (the reference week: an override has no start, so it cannot be placed in it)."""

    start: datetime
    with_overrides: bool = False

    @property
    def end(self) -> datetime:
        return self.start + WEEK


def reference_week(policy: Policy, at: datetime | None = None) -> Week:
    """The ISO week (Monday 00:00 to Monday 00:00 in the policy's default timezone) containing ``at``, or the fixed
    reference week; the regular schedule, overrides left out."""
    tz = ZoneInfo(policy.defaults.timezone)
    day = at.astimezone(tz).date() if at is not None else REFERENCE_MONDAY
    monday = day - timedelta(days=day.weekday())
    return Week(datetime.combine(monday, time(0), tzinfo=tz))


@dataclass(frozen=True)
class GroupHours:
    up_hours: float
    gpu_hours: float | None  # None: the policy gives no up size or no gpusPerNode
    gpus_up: int | None  # GPUs while up: up.desired x gpusPerNode


@dataclass(frozen=True)
class ScheduleChange:
    name: str
    cluster: str
    before: GroupHours | None  # None: the group is new
    after: GroupHours | None  # None: the group was removed

    @property
    def up_delta(self) -> float:
        return round((self.after.up_hours if self.after else 0.0) - (self.before.up_hours if self.before else 0.0), 2)

    @property
    def gpu_delta(self) -> float | None:
        """None when either side that exists has no GPU figure."""
        sides = [s for s in (self.before, self.after) if s is not None]
        if any(s.gpu_hours is None for s in sides):
            return None
        after = self.after.gpu_hours if self.after and self.after.gpu_hours is not None else 0.0
        before = self.before.gpu_hours if self.before and self.before.gpu_hours is not None else 0.0
        return round(after - before, 2)


@dataclass(frozen=True)
class Totals:
    """Over every group in view (changed or not): the fleet before and after."""

    groups: tuple[int, int]
    up_hours: tuple[float, float]
    gpu_hours: tuple[float, float]  # groups with an up size and gpusPerNode only
    without_size: tuple[int, int]  # groups left out of gpu_hours

    @property
    def up_delta(self) -> float:
        return round(self.up_hours[1] - self.up_hours[0], 2)

    @property
    def gpu_delta(self) -> float:
        return round(self.gpu_hours[1] - self.gpu_hours[0], 2)


@dataclass(frozen=True)
class FieldChange:
    path: str  # e.g. "defaults.warmUp", "nodeGroups[training-a100].up.desired", "clusters[ml-prod]"
    before: Any  # JSON value, or MISSING
    after: Any

    @property
    def kind(self) -> Kind:
        return "added" if self.before is MISSING else "removed" if self.after is MISSING else "changed"

    @property
    def unit(self) -> str | None:
        """``%`` for a number the policy documents as a percent (``sweep.idlePods.below: 5``), else None."""
        return field_unit(self.path)


def field_unit(path: str) -> str | None:
    """The unit of the policy field at ``path`` (list items in brackets), from its model: ``%`` for a plain number
    whose description starts with "percent" (a ``Percent`` string carries its own ``%``)."""
    model: Any = Policy
    info: FieldInfo | None = None
    for key in re.sub(r"\[[^\]]*\]", "", path).split("."):
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict):
            return None
        info = next((f for name, f in fields.items() if (f.alias or name) == key), None)
        if info is None:
            return None
        model = _model_in(info.annotation)
    if info is None or not (info.description or "").startswith("percent") or info.annotation not in (int, float):
        return None
    return "%"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through Optional, tuples, lists and Annotated (None: a plain value)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in get_args(annotation) if (m := _model_in(a)) is not None), None)


@dataclass(frozen=True)
class QuotaChange:
    """One line of the namespace-quota section; the texts are what a reviewer reads (None: absent on that side)."""

    subject: str  # "default", "rules: namespaces fraud; clusters ml-prod", "quotaName", "exclude"
    before: str | None
    after: str | None

    @property
    def kind(self) -> Kind:
        return "added" if self.before is None else "removed" if self.after is None else "changed"


@dataclass(frozen=True)
class Section:
    name: str  # the policy's key, e.g. "overrides", "defaults", "cloudQuotas"
    changes: tuple[FieldChange, ...]


@dataclass(frozen=True)
class DerivedTarget:
    """A cloud quota's target given in nodes, not in the quota's unit: node groups each at its working maximum
    (``target: {nodeGroups}``), or a number of instances of one shape (``target: {instances, instanceType}``)."""

    nodes: tuple[tuple[str, int | None], ...]  # (group, up.max; None: no up, its live max size counts)
    value: int | None = None  # in the quota's unit, once the groups' shapes were read from the cloud
    unit: str | None = None  # "vCPU", "GPU"
    demand: str | None = None  # how it was counted: "training-a100: 12 x p4d.24xlarge x 96 vCPU = 1152"
    error: str | None = None  # why it could not be converted
    max: int | None = None  # the entry's max: the job never asks for more
    instances: tuple[str, int] | None = None  # (shape, count) of an instances target; ``nodes`` is then empty

    @property
    def capped(self) -> bool:
        return self.value is not None and self.max is not None and self.value > self.max


@dataclass(frozen=True)
class QuotaTargetChange:
    """A cloud quota whose derived target changes because a node group's working maximum (or the list) changes."""

    name: str
    where: str  # "aws eu-west-1"
    before: DerivedTarget | None  # None: no such entry, or a target that does not follow node groups
    after: DerivedTarget | None

    @property
    def delta(self) -> int | None:
        """After minus before in the quota's unit, when both sides were converted (or one is absent)."""
        sides = [s for s in (self.before, self.after) if s is not None]
        if any(s.value is None for s in sides) or len({s.unit for s in sides}) > 1:
            return None
        return (self.after.value if self.after and self.after.value else 0) - (
            self.before.value if self.before and self.before.value else 0
        )


#: Per cloud quota entry, what the cloud says of its node groups (live shape, zones, capacity; or why unreadable) and
#: of their shapes in the quota's unit: what converts a working maximum into the quota's unit.
Conversion = tuple[Mapping[str, GroupSize | str], Mapping[str, Shape | str]]


@dataclass(frozen=True)
class PolicyDiff:
    week: Week
    cluster: str | None
    schedules: tuple[ScheduleChange, ...]  # only the groups whose figures change
    totals: Totals
    node_group_fields: tuple[FieldChange, ...]  # every changed field of a node group, hours or not
    quotas: tuple[QuotaChange, ...]
    sections: tuple[Section, ...]  # every other section that changed, in the policy's order
    namespaces: tuple[NamespaceChange, ...] = ()  # with namespaces read from clusters: those whose quota changes
    namespaces_read: tuple[tuple[str, int], ...] = ()  # (cluster, namespaces read) when they were read
    quota_targets: tuple[QuotaTargetChange, ...] = ()  # cloud quotas whose derived target changes
    quota_targets_read: bool = False  # their groups' shapes were read from the cloud (values in the quota's unit)

    @property
    def empty(self) -> bool:
        return not (
            self.schedules
            or self.node_group_fields
            or self.quotas
            or self.sections
            or self.namespaces
            or self.quota_targets
        )


def diff_policies(before: Policy, after: Policy, week: Week, cluster: str | None = None) -> PolicyDiff:
    """Everything ``after`` changes relative to ``before`` (``cluster``: that cluster's groups and quota rules)."""
    cache: dict[Hashable, float] = {}
    old, new = _hours(before, week, cluster, cache), _hours(after, week, cluster, cache)
    names = list(old) + [n for n in new if n not in old]
    schedules = tuple(
        ScheduleChange(n, (new.get(n) or old[n])[0], old[n][1] if n in old else None, new[n][1] if n in new else None)
        for n in names
        if (old[n][1] if n in old else None) != (new[n][1] if n in new else None)
    )
    data_before, data_after = _dump(before), _dump(after)
    sections = []
    for key in list(data_before) + [k for k in data_after if k not in data_before]:
        if key in _SPECIAL:
            continue
        changes = tuple(structural_diff(data_before.get(key, MISSING), data_after.get(key, MISSING), key))
        if changes:
            sections.append(Section(key, changes))
    return PolicyDiff(
        week=week,
        cluster=cluster,
        schedules=schedules,
        totals=_totals(old, new),
        node_group_fields=tuple(
            c
            for c in structural_diff(data_before.get("nodeGroups", []), data_after.get("nodeGroups", []), "nodeGroups")
            if cluster is None or c.path.split("]", 1)[0].removeprefix("nodeGroups[") in names
        ),
        quotas=tuple(_quota_changes(before.namespace_quotas, after.namespace_quotas, cluster)),
        sections=tuple(sections),
        quota_targets=quota_target_changes(before, after, cluster),
    )


def _dump(policy: Policy) -> dict[str, Any]:
    data: dict[str, Any] = policy.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def _hours(
    policy: Policy, week: Week, cluster: str | None, cache: dict[Hashable, float]
) -> dict[str, tuple[str, GroupHours]]:
    groups = policy.groups_in(cluster) if cluster else policy.node_groups
    return {g.name: (policy.cluster_of(g).name, group_hours(policy, g, week, cache)) for g in groups}


def group_hours(policy: Policy, group: NodeGroup, week: Week, cache: dict[Hashable, float] | None = None) -> GroupHours:
    """Up-hours and GPU-hours over ``week``. ``cache``: up-hours by what they depend on, shared by the two policies
    of a diff, so that each distinct schedule (most groups keep the defaults, most are unchanged) is counted once."""
    overrides = tuple(o for o in policy.overrides if o.node_group == group.name) if week.with_overrides else ()
    key = (schedule_fields(policy.defaults, group), group.always_on, overrides, week)
    cache = {} if cache is None else cache
    if key not in cache:
        schedule = view_of(policy).group(group.name).schedule  # compiled once, at load
        cache[key] = round(schedule.up_hours(week.start, week.end, with_overrides=week.with_overrides), 2)
    up = cache[key]
    gpus = group.up.desired * group.gpus_per_node if group.up is not None and group.gpus_per_node else None
    return GroupHours(up, None if gpus is None else round(up * gpus, 2), gpus)


def _totals(old: Mapping[str, tuple[str, GroupHours]], new: Mapping[str, tuple[str, GroupHours]]) -> Totals:
    def side(hours: Sequence[GroupHours]) -> tuple[int, float, float, int]:
        known = [h.gpu_hours for h in hours if h.gpu_hours is not None]
        return len(hours), round(sum(h.up_hours for h in hours), 2), round(sum(known), 2), len(hours) - len(known)

    a, b = side([h for _, h in old.values()]), side([h for _, h in new.values()])
    return Totals((a[0], b[0]), (a[1], b[1]), (a[2], b[2]), (a[3], b[3]))


# --- cloud quota targets that follow node groups -------------------------------------------------------------------


def quota_target_changes(
    before: Policy, after: Policy, cluster: str | None = None, read: Mapping[str, Conversion] | None = None
) -> tuple[QuotaTargetChange, ...]:
    """The cloud quotas whose target follows node groups and changes with them: a pull request that raises a group's
    ``up.max`` raises the quota request too, and says so. ``read``: per entry, the cloud's data that converts the
    working maxima into the quota's unit (without it the maxima are shown in nodes). ``cluster``: entries that count
    a group of that cluster."""
    old = {e.name: e for e in before.cloud_quotas}
    new = {e.name: e for e in after.cloud_quotas}
    changes = []
    for name in list(old) + [n for n in new if n not in old]:
        conversion = (read or {}).get(name)
        was = _derived(before, old.get(name), conversion)
        now = _derived(after, new.get(name), conversion)
        if was == now:
            continue
        if cluster is not None and not any(
            n in {g.name for g in p.groups_in(cluster)}
            for p, side in ((before, was), (after, now))
            if side is not None
            for n, _ in side.nodes
        ):
            continue
        entry = new.get(name) or old[name]
        changes.append(QuotaTargetChange(name, f"{entry.cloud} {entry.where}", was, now))
    return tuple(changes)


def _derived(policy: Policy, entry: CloudQuota | None, conversion: Conversion | None) -> DerivedTarget | None:
    if entry is not None and isinstance(entry.target, InstancesTarget):
        counted = DerivedTarget((), max=entry.max, instances=(entry.target.shape, entry.target.instances))
        return counted if conversion is None else _converted(counted, demand_of(entry, {}, conversion[1]))
    if entry is None or not isinstance(entry.target, NodeGroupsTarget):
        return None
    sizes = {g.name: g.up.max for g in policy.node_groups if g.up is not None}
    nodes = tuple((n, sizes.get(n)) for n in entry.target.node_groups)
    derived = DerivedTarget(nodes, max=entry.max)
    if conversion is None:
        return derived
    live, shapes = conversion
    # The job's own count (jobs.cloud_quotas): the policy's up.max where it gives one, else the live max size.
    at_max = {
        n: found.at_policy_max(up_max) if isinstance(found, GroupSize) and up_max is not None else found
        for n, up_max in nodes
        if (found := live.get(n)) is not None
    }
    return _converted(derived, demand_of(entry, at_max, shapes))


def _converted(derived: DerivedTarget, demand: Demand) -> DerivedTarget:
    if demand.error is not None:
        return replace(derived, error=demand.error)
    units = {p.shape.unit for p in demand.parts}
    return replace(derived, value=demand.value, unit=units.pop() if len(units) == 1 else None, demand=demand.text())


# --- the structural diff -------------------------------------------------------------------------------------------


def structural_diff(before: Any, after: Any, path: str) -> Iterator[FieldChange]:
    """Keys added, removed and changed between two JSON values, depth first, in the documents' order."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in list(before) + [k for k in after if k not in before]:
            yield from structural_diff(before.get(key, MISSING), after.get(key, MISSING), f"{path}.{key}")
        return
    if isinstance(before, list) and isinstance(after, list) and _all_mappings(before + after):
        for label, old, new in _paired(before, after):
            yield from structural_diff(old, new, f"{path}[{label}]")
        return
    if before != after:
        yield FieldChange(path, before, after)


def _all_mappings(items: Sequence[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) for i in items)


def _paired(before: list[Any], after: list[Any]) -> Iterator[tuple[str | int, Any, Any]]:
    for key in _ITEM_KEYS:
        old, new = [i.get(key) for i in before], [i.get(key) for i in after]
        if None not in old + new and len(set(old)) == len(old) and len(set(new)) == len(new):
            by_old, by_new = dict(zip(old, before, strict=True)), dict(zip(new, after, strict=True))
            for name in old + [n for n in new if n not in by_old]:
                yield name, by_old.get(name, MISSING), by_new.get(name, MISSING)
            return
    for i in range(max(len(before), len(after))):
        yield i, before[i] if i < len(before) else MISSING, after[i] if i < len(after) else MISSING


# --- namespace quotas ----------------------------------------------------------------------------------------------


def hard_text(hard: Mapping[str, Any] | None) -> str:
    return "no quota" if hard is None else ", ".join(f"{k}: {v}" for k, v in hard.items()) or "{}"


def _rule_subject(rule: QuotaRule) -> str:
    parts = []
    if rule.namespaces is not None:
        parts.append("namespaces " + ", ".join(rule.namespaces))
    if rule.selector is not None:
        parts.append(
            "selector " + json.dumps(rule.selector.model_dump(mode="json", by_alias=True, exclude_defaults=True))
        )
    parts.append("clusters " + ", ".join(rule.clusters) if rule.clusters is not None else "every cluster")
    return "; ".join(parts)


def _off_text(off: QuotaOffHours | None) -> str:
    if off is None:
        return ""
    windows = ", ".join(w.describe() for w in off.working_hours)
    return f"; outside {windows}{f' {off.timezone}' if off.timezone else ''}: {hard_text(off.hard)}"


def _rule_text(index: int, rule: QuotaRule) -> str:
    return f"rules[{index}]: {hard_text(rule.hard)}{_off_text(rule.off_hours)}"


def _same_rule_limits(a: QuotaRule, b: QuotaRule) -> bool:
    return (
        same_hard(_strings(a.hard), _strings(b.hard))
        and (a.off_hours is None) == (b.off_hours is None)
        and (
            a.off_hours is None
            or b.off_hours is None
            or (
                same_hard(_strings(a.off_hours.hard), _strings(b.off_hours.hard))
                and a.off_hours.model_copy(update={"hard": {}}) == b.off_hours.model_copy(update={"hard": {}})
            )
        )
    )


def _strings(hard: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in hard.items()}


def _applies(rule: QuotaRule, cluster: str | None) -> bool:
    return cluster is None or rule.clusters is None or cluster in rule.clusters


def _quota_changes(
    before: NamespaceQuotas | None, after: NamespaceQuotas | None, cluster: str | None
) -> Iterator[QuotaChange]:
    if before is None and after is None:
        return
    if (before is None) != (after is None):
        yield QuotaChange(
            "namespaceQuotas",
            None if before is None else "managed by gpu-jobs",
            None if after is None else "managed by gpu-jobs",
        )
    old, new = before or NamespaceQuotas(), after or NamespaceQuotas()
    if old.quota_name != new.quota_name:
        yield QuotaChange("quotaName", old.quota_name, new.quota_name)
    if (old.default is None) != (new.default is None) or (
        old.default is not None
        and new.default is not None
        and not same_hard(_strings(old.default), _strings(new.default))
    ):
        yield QuotaChange("default (every namespace no rule matches)", hard_text(old.default), hard_text(new.default))
    if old.exclude != new.exclude:
        yield QuotaChange("exclude", ", ".join(old.exclude) or "none", ", ".join(new.exclude) or "none")
    yield from _rule_changes(old.rules, new.rules, cluster)


def _rule_changes(old: Sequence[QuotaRule], new: Sequence[QuotaRule], cluster: str | None) -> Iterator[QuotaChange]:
    """Rules are paired by what they match (namespaces, selector, clusters): the same match with new limits is a
    change, a new position a move (first match wins, so order is part of the policy)."""

    def key(rule: QuotaRule) -> tuple[Any, ...]:
        return rule.namespaces, rule.selector, rule.clusters

    unpaired = list(enumerate(old))
    pairs: list[tuple[tuple[int, QuotaRule] | None, tuple[int, QuotaRule] | None]] = []
    for j, rule in enumerate(new):
        found = next((p for p in unpaired if key(p[1]) == key(rule)), None)
        if found is not None:
            unpaired.remove(found)
        pairs.append((found, (j, rule)))
    pairs += [(p, None) for p in unpaired]
    # A rule moved when its place among the rules on both sides changed; a rule added or removed above it shifts
    # its index only, which changes nothing it matches.
    kept = [(was[0], now[0]) for was, now in pairs if was is not None and now is not None]
    old_rank = {i: r for r, i in enumerate(sorted(i for i, _ in kept))}
    new_rank = {j: r for r, j in enumerate(sorted(j for _, j in kept))}
    for was, now in pairs:
        subject = now[1] if now is not None else was[1] if was is not None else None
        if subject is None or not _applies(subject, cluster):
            continue
        if (
            was is not None
            and now is not None
            and old_rank[was[0]] == new_rank[now[0]]
            and _same_rule_limits(was[1], now[1])
        ):
            continue
        yield QuotaChange(
            f"rules: {_rule_subject(subject)}",
            _rule_text(*was) if was else None,
            _rule_text(*now) if now else None,
        )


# --- per namespace (namespaces read from a cluster) ----------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceChange:
    """Namespaces of one cluster whose managed quota goes from one rule's limits to another's."""

    cluster: str
    before: str  # e.g. "default: nvidia.com/gpu: 0", "rules[1]: ...", "excluded (no managed quota)"
    after: str
    namespaces: tuple[str, ...]


def _limits(policy: Policy, cluster: str, ns: NamespaceInfo, at: datetime) -> tuple[str, str]:
    """(what the namespace gets, as shown; the same without the rule's position, to compare): a rule can move without
    changing what the namespace gets."""
    config = policy.namespace_quotas
    if config is None:
        return ("not managed (no namespaceQuotas)",) * 2
    # Which rule governs does not depend on the time; only which of its two limits applies does, and both are shown.
    found = compile_quotas(policy, config, cluster).governing(ns, at).rule.removesuffix(".offHours")
    if found == "excluded":
        return ("excluded: no managed quota",) * 2
    if found == "none":
        return ("no rule and no default: no managed quota",) * 2
    if found == "default":
        return f"default: {hard_text(config.default)}", hard_text(config.default)
    rule = config.rules[int(found.removeprefix("rules[").removesuffix("]"))]
    limits = hard_text(rule.hard) + _off_text(rule.off_hours)
    return f"{found}: {limits}", limits


def namespace_changes(
    before: Policy, after: Policy, cluster: str, namespaces: Sequence[NamespaceInfo], week: Week
) -> tuple[NamespaceChange, ...]:
    """The namespaces of ``cluster`` (as read from it) whose quota limits change, grouped by before -> after."""
    groups: dict[tuple[str, str], list[str]] = {}
    for ns in sorted(namespaces, key=lambda n: n.name):
        if ns.terminating:
            continue
        was, was_key = _limits(before, cluster, ns, week.start)
        now, now_key = _limits(after, cluster, ns, week.start)
        if was_key != now_key:
            groups.setdefault((was, now), []).append(ns.name)
    return tuple(NamespaceChange(cluster, b, a, tuple(names)) for (b, a), names in groups.items())
