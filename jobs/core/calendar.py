"""What the schedule means for people: the state now, the next changes, a week grid, hours and GPU-hours.

Pure: everything is derived from the policy and an instant. The CLI renders these values as text, JSON or
markdown (for a pull-request comment).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from jobs.core.policy import NodeGroup, Policy
from jobs.core.policy_diff import PolicyDiff, Week, diff_policies, group_hours
from jobs.core.resolved import view_of
from jobs.core.schedule import Segment, State
from jobs.core.wake import WakeRecord

HOURS_PER_WEEK = 168.0
SLOTS_PER_DAY = 48  # half hours
UP, DOWN = "█", "·"


@dataclass(frozen=True)
class Change:
    at: datetime
    state: State
    reason: str


@dataclass(frozen=True)
class GroupCalendar:
    group: NodeGroup
    cluster: str  # the cluster its nodes join (its resolved view)
    timezone: str
    state: State
    reason: str
    next_change: datetime | None
    changes: tuple[Change, ...]
    up_hours_per_week: float  # the 7 days from `at`, overrides included (as the grid; calendar_week)
    grid: tuple[tuple[date, str, str | None], ...]  # (local day, 48 cells, holiday name)
    woken: WakeRecord | None = None  # a wake in force (read from the group's record with --live)

    @property
    def wake_text(self) -> str | None:
        """Who may wake the group out of hours, as a person reads it (None: nobody)."""
        wake = self.group.wake
        if wake is None or not wake.on_pending_pods:
            return None
        nodes = f"{wake.max_nodes} node{'' if wake.max_nodes == 1 else 's'}"
        return f"a Pending GPU pod in {', '.join(wake.namespaces)} wakes it for {wake.for_}, at most {nodes}"

    @property
    def gpu_hours_avoided_per_week(self) -> float | None:
        """GPU-hours a week not paid for, against the same group always on at its working size (None: the policy
        lacks what it takes, ``avoided_needs``)."""
        if self.up_hours_per_week >= HOURS_PER_WEEK:
            return 0.0  # up all week (alwaysOn, or held up): nothing avoided, whatever its size
        up, gpus = self.group.up, self.group.gpus_per_node
        if up is None or gpus is None:  # avoided_needs names which
            return None
        return (HOURS_PER_WEEK - self.up_hours_per_week) * up.desired * gpus

    @property
    def avoided_needs(self) -> tuple[str, ...]:
        """The policy fields the GPU-hours avoided still need (empty: known); a group up all week needs none."""
        if self.up_hours_per_week >= HOURS_PER_WEEK:
            return ()
        if self.group.karpenter is not None:  # a pool sizes itself: `up` cannot be set, its node count is Karpenter's
            return ()
        return tuple(
            name for name, value in (("gpusPerNode", self.group.gpus_per_node), ("up", self.group.up)) if value is None
        )


@dataclass(frozen=True)
class Calendar:
    at: datetime
    days: int
    groups: tuple[GroupCalendar, ...]


def locator_text(group: NodeGroup) -> str:
    loc = group.locator
    return "/".join(str(v) for v in loc.model_dump(exclude_none=True).values())


def build_calendar(
    policy: Policy,
    at: datetime,
    days: int = 7,
    cluster: str | None = None,
    wakes: Mapping[str, WakeRecord] | None = None,
) -> Calendar:
    """Every node group's calendar (``cluster``: only that cluster's groups), with the wakes found in force."""
    if at.tzinfo is None:
        raise ValueError("at must be timezone-aware")
    groups = policy.groups_in(cluster) if cluster else policy.node_groups
    found = wakes or {}
    return Calendar(
        at,
        days,
        tuple(replace(_group_calendar(policy, g, at, days), woken=_in_force(found.get(g.name), at)) for g in groups),
    )


def _in_force(wake: WakeRecord | None, at: datetime) -> WakeRecord | None:
    return wake if wake is not None and at < wake.until else None


def _group_calendar(policy: Policy, group: NodeGroup, at: datetime, days: int) -> GroupCalendar:
    resolved = view_of(policy).group(group.name)
    schedule = resolved.schedule
    tz = schedule.tz
    desired = schedule.desired(at)
    segments = schedule.segments(at, at + timedelta(days=days))
    changes = tuple(
        Change(s.start.astimezone(tz), s.state, s.reason)
        for prev, s in itertools.pairwise(segments)
        if s.state != prev.state
    )
    first_day = at.astimezone(tz).date()
    grid_start = datetime.combine(first_day, time(0), tzinfo=tz).astimezone(UTC)
    grid_segments = schedule.segments(grid_start, grid_start + timedelta(days=days + 1))
    # Looked up by bisection: a scan per cell made the grid quadratic in --days (1500 days took 51 s).
    starts = [s.start for s in grid_segments]
    rows = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        cells = "".join(
            UP if _state_at(grid_segments, starts, _slot(day, slot, tz)) == "up" else DOWN
            for slot in range(SLOTS_PER_DAY)
        )
        rows.append((day, cells, schedule.holidays.name(day)))
    return GroupCalendar(
        group=group,
        cluster=resolved.cluster,
        timezone=str(tz),
        state=desired.state,
        reason=desired.reason,
        next_change=desired.next_change,
        changes=changes,
        up_hours_per_week=group_hours(policy, group, calendar_week(at)).up_hours,
        grid=tuple(rows),
    )


def _slot(day: date, slot: int, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, time(slot // 2, 30 * (slot % 2)), tzinfo=tz).astimezone(UTC)


def _state_at(segments: Sequence[Segment], starts: Sequence[datetime], at: datetime) -> State:
    """The state of the segment covering ``at``; ``segments`` are sorted and ``starts`` are their starts."""
    i = bisect.bisect_right(starts, at) - 1
    return segments[i].state if i >= 0 and at < segments[i].end else "down"


def calendar_week(at: datetime) -> Week:
    """The week a calendar counts: the 7 days from ``at``, overrides included, as its grid draws them. Its table and
    its comparison both count this week, so they agree."""
    return Week(at, with_overrides=True)


def compare(before: Policy, after: Policy, at: datetime, cluster: str | None = None) -> PolicyDiff:
    """What a change does over the calendar's week (``cluster``: only groups and quota rules of that cluster)."""
    return diff_policies(before, after, calendar_week(at), cluster)
