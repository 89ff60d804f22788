"""What the jobs did, kept where they did it: a small history per scope (a cluster, or an account), one object per
ISO week (``jobs.adapters.kube.history``), so ``gpu-jobs report`` measures savings from what really happened.

Entries are derived after a run from its report (``ScopeResult`` items) and what the run observed, in one place for
every job, never by the jobs themselves: a group went ``down`` (with nodes and GPUs before), its nodes were
``gone`` (the first run to see none of them), it came back ``up``; a shutdown ``postponed`` for busy work and the
end of that keep-up (``kept``); a ``wake``; a ``pod`` deleted or scaled after idling; an ``instance`` stopped.

An entry's id is derived from the run's instant, the job, the kind and the subject: an entry written twice (an
answer lost, then written again) is one entry. A failed write is a warning of the scope, never a failed item: the
action it describes happened.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal, Protocol, get_args
from zoneinfo import ZoneInfo

from jobs.core.policy import Policy
from jobs.core.timespec import parse_duration
from jobs.envelope import ItemResult, ScopeResult
from jobs.errors import CloudError

EntryKind = Literal["down", "gone", "up", "postponed", "kept", "wake", "pod", "instance"]
ENTRY_KINDS: tuple[str, ...] = get_args(EntryKind)
#: The skips of the nodegroups job that keep a group up for busy work (jobs.core.nodegroup_plan's words).
KEPT_UP_FOR_BUSY = ("shutdown postponed", "stays up")
#: The jobs whose items say something the history keeps.
RECORDED_JOBS = ("nodegroups", "sweep")


@dataclass(frozen=True)
class Entry:
    """One thing a job did (or saw) to one subject: a node group, a pod, an instance."""

    at: datetime
    job: str
    scope: str  # the cluster's name, or the account's
    kind: EntryKind
    subject: str  # the group, ``namespace/pod``, the instance id
    nodes: int | None = None  # down: the group's nodes before; up: the nodes restored
    gpus: int | None = None  # down: GPUs before (nodes x gpusPerNode); pod, instance: the GPUs it held
    gpus_per_node: int | None = None
    reason: str | None = None
    idle_gpu_hours: float | None = None  # pod: GPU-hours it idled before the sweep acted (at least)
    instance_type: str | None = None
    #: down, up: the nodes the group's autoscaler keeps once they are empty (its min; a Karpenter pool that
    #: consolidates: 0; None: nothing removes them).
    floor: int | None = None
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            key = f"{self.at.isoformat()}|{self.job}|{self.scope}|{self.kind}|{self.subject}"
            object.__setattr__(self, "id", hashlib.sha256(key.encode()).hexdigest()[:16])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "at": self.at.isoformat(),
            "job": self.job,
            "scope": self.scope,
            "kind": self.kind,
            "subject": self.subject,
        }
        extra = {
            "nodes": self.nodes,
            "gpus": self.gpus,
            "gpusPerNode": self.gpus_per_node,
            "reason": self.reason,
            "idleGpuHours": self.idle_gpu_hours,
            "instanceType": self.instance_type,
            "floorNodes": self.floor,
        }
        return out | {k: v for k, v in extra.items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        kind = data["kind"]
        if kind not in ENTRY_KINDS:
            raise ValueError(f"unknown entry kind {kind!r}")
        at = datetime.fromisoformat(str(data["at"]))
        if at.tzinfo is None:
            raise ValueError(f"entry time {data['at']!r} has no timezone")
        return cls(
            at,
            str(data["job"]),
            str(data["scope"]),
            kind,
            str(data["subject"]),
            _int(data.get("nodes")),
            _int(data.get("gpus")),
            _int(data.get("gpusPerNode")),
            data.get("reason"),
            float(data["idleGpuHours"]) if data.get("idleGpuHours") is not None else None,
            data.get("instanceType"),
            _int(data.get("floorNodes")),
            str(data["id"]),
        )

    def would_run(self) -> tuple[int | None, int | None]:
        """(nodes, GPUs) that would have run had the group not gone down: its size, but no more than its autoscaler's
        floor, because an autoscaler removes empty nodes down to its min by itself (a shutdown takes empty nodes:
        busy ones keep it up)."""
        if self.floor is None:
            return self.nodes, self.gpus
        nodes = self.floor if self.nodes is None else min(self.nodes, self.floor)
        return nodes, None if self.gpus_per_node is None else nodes * self.gpus_per_node


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def in_order(entry: Entry) -> tuple[datetime, int, str]:
    """Time order; at one instant (a run that sees the nodes gone at the instant of the shutdown) a group's entries
    in the order things happen to it: down, gone, up."""
    return entry.at, ENTRY_KINDS.index(entry.kind), entry.id


def iso_week(at: datetime) -> str:
    """``2026-W49``: the ISO week of an instant in UTC (where a history object is kept, whatever the timezone)."""
    year, week, _ = at.astimezone(UTC).isocalendar()
    return f"{year}-W{week:02d}"


def encode(entries: Iterable[Entry]) -> str:
    """One entry per line, in time order: a person reading the ConfigMap reads a log."""
    ordered = sorted(entries, key=in_order)
    return "".join(json.dumps(e.to_json(), sort_keys=True, separators=(",", ":")) + "\n" for e in ordered)


def decode(text: str) -> tuple[list[Entry], list[str]]:
    """The entries of one object, and a problem per line that is not one (kept out, reported, never fatal)."""
    found: list[Entry] = []
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(Entry.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"line {n}: {exc}")
    return found, problems


def merged(existing: Sequence[Entry], new: Iterable[Entry]) -> list[Entry]:
    """``existing`` plus each of ``new`` not already there (by id): writing an entry twice is writing it once."""
    seen = {e.id for e in existing}
    out = list(existing)
    for e in new:
        if e.id not in seen:
            seen.add(e.id)
            out.append(e)
    return out


def expired_weeks(weeks: Iterable[str], now: datetime, retention: timedelta) -> list[str]:
    """The weeks whose last instant is older than the retention: their objects are deleted."""
    cutoff = iso_week(now - retention)
    return sorted(w for w in weeks if w < cutoff)


# --- what a run's report says happened -----------------------------------------------------------------------------


def _last(history: Sequence[Entry], subject: str, kinds: tuple[str, ...]) -> Entry | None:
    found = [e for e in history if e.subject == subject and e.kind in kinds]
    return max(found, key=lambda e: e.at) if found else None


_GROUP_KINDS = ("down", "gone", "up", "postponed", "kept", "wake")


def _group_entries(result: ScopeResult, item: ItemResult, policy: Policy, history: Sequence[Entry]) -> list[Entry]:
    at, scope, detail = result.at, result.scope.name, item.detail
    last = _last(history, item.name, _GROUP_KINDS)
    try:
        per_node = policy.group(item.name).gpus_per_node
    except KeyError:  # an unmanaged group: not the product's doing
        return []
    if item.status == "applied" and detail.get("direction") in ("down", "up"):
        # The size before a shutdown; after a restore, the size restored (the record's: a GKE pool reports no live
        # size before it goes down, so its down entry may not know it).
        size = (detail.get("before") if detail["direction"] == "down" else detail.get("after")) or {}
        desired, zones = size.get("desired"), int(size.get("zones") or 1)
        nodes = None if desired is None else int(desired) * zones
        gpus = None if nodes is None or per_node is None else nodes * per_node
        # A Karpenter pool's "autoscaling" is its limits (it may launch): what removes its empty nodes is its
        # consolidation, down to none (its min is 0); one that keeps them ran its claims' GPUs.
        empties_go = size.get("consolidates") if size.get("limits") is not None else size.get("autoscaling")
        floor = int(size["min"]) * zones if empties_go and size.get("min") is not None else None
        kind: EntryKind = "down" if detail["direction"] == "down" else "up"
        return [Entry(at, result.job, scope, kind, item.name, nodes, gpus, per_node, detail.get("why"), floor=floor)]
    if item.status == "skipped" and (item.reason or "").startswith(KEPT_UP_FOR_BUSY):
        if last is not None and last.kind in ("postponed", "down"):
            # One entry per keep-up, not one per run; and a pool already down whose busy nodes alone stay
            # (Karpenter, onBusy wait) was not kept up: its nodes' end is the "gone" entry's.
            return []
        return [Entry(at, result.job, scope, "postponed", item.name, reason=item.reason)]
    if item.status == "unchanged":
        size = detail.get("size") or {}
        down = bool(size.get("stopped")) or size.get("desired") == 0
        # Gone is what the cluster's API shows after the product's shutdown, whatever the size reads: a GKE pool
        # reports no desired size outside a live read, so its size cannot say it is down.
        if detail.get("nodes") == 0 and last is not None and last.kind == "down":
            return [Entry(at, result.job, scope, "gone", item.name)]
        if not down and last is not None and last.kind in ("postponed", "wake"):
            return [Entry(at, result.job, scope, "kept", item.name, reason="working hours")]
    return []


def _sweep_entries(result: ScopeResult, item: ItemResult, policy: Policy) -> list[Entry]:
    detail = item.detail
    if item.status != "applied":
        return []
    at, scope = result.at, result.scope.name
    if item.kind == "pod" and detail.get("state") == "acted" and detail.get("action") in ("delete", "scale-owner"):
        gpus = int(detail.get("gpus") or 0)
        idle = policy.sweep.idle_pods if policy.sweep is not None else None
        # At least the window it was judged idle over and the grace period it was warned for.
        hours = (idle.window_td + parse_duration(idle.grace_period)).total_seconds() / 3600 if idle is not None else 0.0
        reason = f"{detail.get('action')} after idling ({detail.get('idleReason')})"
        return [Entry(at, result.job, scope, "pod", item.name, gpus=gpus, reason=reason, idle_gpu_hours=gpus * hours)]
    if item.kind == "instance" and detail.get("action") in ("stop", "terminate") and detail.get("state") == "acted":
        return [
            Entry(
                at,
                result.job,
                scope,
                "instance",
                item.name,
                gpus=_int(detail.get("gpus")),
                reason=f"{detail.get('action')}: missing tags {', '.join(detail.get('missingTags') or ())}",
                instance_type=detail.get("type"),
            )
        ]
    return []


def entries_of(result: ScopeResult, policy: Policy, history: Sequence[Entry]) -> list[Entry]:
    """What one scope's run adds to its history (``history``: what the scope's history already holds)."""
    if result.dry_run or result.state not in ("applied", "planned"):
        return []  # a dry run changed nothing; a scope refused, held or unread did nothing to record
    found: list[Entry] = []
    for item in result.items:
        if item.kind == "node group" and not item.detail.get("unmanaged"):
            found += _group_entries(result, item, policy, history)
        elif item.kind == "wake" and item.status == "applied" and item.detail.get("woke", True):
            # One per Pending pod that woke its group (the same entry for every pod of the group: one id); a
            # notice to a pod that woke nothing (``woke: false``) is no wake.
            group = str(item.detail.get("nodeGroup") or item.name)
            why = item.detail.get("why") or item.reason
            found.append(Entry(result.at, result.job, result.scope.name, "wake", group, reason=why))
        elif item.kind in ("pod", "instance"):
            found += _sweep_entries(result, item, policy)
    return found


class HistoryStore(Protocol):
    """One scope's history (``jobs.adapters.kube.history``)."""

    def read(self) -> list[Entry]:
        """Every entry kept (all weeks), in time order."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Add entries to their weeks' objects (each at most once); raises CloudError when it could not."""
        ...

    def prune(self, now: datetime, retention: timedelta) -> list[str]:
        """Delete the weeks older than the retention; the weeks deleted."""
        ...


@dataclass(frozen=True)
class Recorded:
    """What the hook did for one scope: the entries written, the scope's history after it, and a warning."""

    scope: str
    entries: tuple[Entry, ...] = ()
    history: tuple[Entry, ...] = ()
    warning: str | None = None


def record(result: ScopeResult, policy: Policy, store: HistoryStore, now: datetime, log: Any) -> Recorded:
    """Append what ``result`` says happened to its scope's history and prune old weeks. Never raises for the
    store: what could not be written comes back as a warning (the action it describes happened all the same)."""
    scope = result.scope.name
    try:
        history = store.read()
        new = entries_of(result, policy, history)
        if new:
            store.append(new)
    except CloudError as exc:
        log.warning("history.unwritten", scope=scope, error=str(exc))
        return Recorded(scope, warning=f"history not written ({exc}): the report will miss this run's entries")
    kept = tuple(merged(history, new))
    try:
        pruned = store.prune(now, policy.history.retention_td)
    except CloudError as exc:
        log.warning("history.unpruned", scope=scope, error=str(exc))
        return Recorded(scope, tuple(new), kept, f"history weeks past the retention not deleted ({exc})")
    if new or pruned:
        log.info("history.written", scope=scope, entries=len(new), pruned=pruned)
    return Recorded(scope, tuple(new), kept)


def with_warning(result: ScopeResult, recorded: Recorded) -> ScopeResult:
    return result if recorded.warning is None else replace(result, warnings=(*result.warnings, recorded.warning))


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime

    def clipped(self, start: datetime, end: datetime) -> timedelta:
        return max(timedelta(0), min(self.end, end) - max(self.start, start))


@dataclass(frozen=True)
class Gone:
    """An interval a group's nodes were gone, and the nodes and GPUs that would have run in it."""

    interval: Interval
    nodes: int | None
    gpus: int | None
    floor: int | None = None  # the autoscaler floor that capped the size recorded (None: it capped nothing)


def _gone(interval: Interval, down: Entry, up: Entry | None, known: Entry | None) -> Gone:
    """What a night took away (:meth:`Entry.would_run`): the shutdown's own size, else the restore's, else the last
    size any entry of the group knew (a GKE pool under its autoscaler, down at the window's end, may have recorded
    none)."""
    for e in (down, up, known):
        if e is not None and (e.nodes is not None or e.floor is not None):
            capped = e.floor is not None and (e.nodes is None or e.floor < e.nodes)
            return Gone(interval, *e.would_run(), e.floor if capped else None)
    return Gone(interval, None, None)


@dataclass(frozen=True)
class GroupTimes:
    """A group's measured intervals: nodes gone (with the GPUs that would have run), kept up for busy work, by a
    wake."""

    gone: tuple[Gone, ...] = ()
    busy: tuple[Interval, ...] = ()
    wake: tuple[Interval, ...] = ()
    #: While a wake brought some of a night's nodes back: the ones it did not (avoided, though not all were gone).
    partly: tuple[Gone, ...] = ()


def _partly(interval: Interval, night: Entry, known: Entry | None, woken: int | None) -> Gone | None:
    """The nodes of the night's size a wake of ``woken`` nodes left down, for ``interval``; None when none (or the
    wake's size is unknown: nothing is guessed)."""
    whole = _gone(interval, night, None, known)
    if woken is None or whole.nodes is None or whole.nodes <= woken:
        return None
    left = whole.nodes - woken
    gpus = None if whole.gpus is None else whole.gpus * left // whole.nodes
    return Gone(interval, left, gpus, whole.floor)


@dataclass
class _Timeline:
    """One group's entries walked in time order: what is open between them, and the intervals they close."""

    woken: set[datetime]  # the instants of its wakes (a wake's restore is an "up" at the same instant)
    gone: list[Gone] = field(default_factory=list)
    busy: list[Interval] = field(default_factory=list)
    wake: list[Interval] = field(default_factory=list)
    partly: list[Gone] = field(default_factory=list)
    down: Entry | None = None
    night: Entry | None = None  # the shutdown a wake interrupted: the size its night took, until the morning
    known: Entry | None = None  # the last entry that knew the group's size: the size a down that did not know
    gone_at: datetime | None = None
    busy_at: datetime | None = None
    wake_at: datetime | None = None
    partly_at: datetime | None = None  # a wake brought some nodes back: since when
    woke_nodes: int | None = None  # how many

    def see(self, e: Entry) -> None:
        waking = e.kind == "wake" or (e.kind == "up" and e.at in self.woken)
        if self.partly_at is not None and (e.kind in ("down", "kept") or (e.kind == "up" and not waking)):
            self._end_partly(e.at)  # the woken nodes go down again, or the morning comes
        if e.kind == "up" and waking:
            self.woke_nodes = e.nodes
        if e.kind == "down":
            # After a wake, a shutdown takes the woken nodes only: the night still avoids the size it began with.
            self.down, self.gone_at = (self.night if self.night is not None else e), None
            self._end_keep_ups(e.at)
        elif e.kind == "gone" and self.down is not None and self.gone_at is None:
            self.gone_at = e.at
        elif e.kind in ("up", "wake"):
            self._up(e, waking)
        elif e.kind == "postponed" and self.busy_at is None:
            self.busy_at = e.at
        elif e.kind == "kept":
            self._end_keep_ups(e.at)
        if (e.nodes, e.floor) != (None, None) and e.kind in ("down", "up") and not waking and self.night is None:
            self.known = e  # not a wake's size, nor the shutdown of what a wake brought

    def _up(self, e: Entry, waking: bool) -> None:
        if self.gone_at is not None and self.down is not None:
            self.gone.append(_gone(Interval(self.gone_at, e.at), self.down, None if waking else e, self.known))
        self.night = (self.night or self.down) if waking else None
        self.down, self.gone_at = None, None
        if e.kind == "wake" and self.wake_at is None:
            self.wake_at = e.at
        if waking and self.night is not None and self.partly_at is None:
            self.partly_at = e.at

    def _end_keep_ups(self, at: datetime) -> None:
        if self.busy_at is not None:
            self.busy.append(Interval(self.busy_at, at))
        if self.wake_at is not None:
            self.wake.append(Interval(self.wake_at, at))
        self.busy_at = self.wake_at = None

    def _end_partly(self, at: datetime) -> None:
        if self.partly_at is not None and self.night is not None:
            part = _partly(Interval(self.partly_at, at), self.night, self.known, self.woke_nodes)
            if part is not None:
                self.partly.append(part)
        self.partly_at = self.woke_nodes = None

    def close(self, until: datetime) -> GroupTimes:
        """The intervals, those still open ending at ``until``."""
        if self.gone_at is not None and self.down is not None:
            self.gone.append(_gone(Interval(self.gone_at, until), self.down, None, self.known))
        self._end_keep_ups(until)
        self._end_partly(until)
        return GroupTimes(tuple(self.gone), tuple(self.busy), tuple(self.wake), tuple(self.partly))


def group_times(entries: Sequence[Entry], until: datetime) -> dict[tuple[str, str], GroupTimes]:
    """Each group's intervals, by (scope, group), from its entries in time order; an interval still open ends at
    ``until`` (the end of the report's window, or now)."""
    by_group: dict[tuple[str, str], list[Entry]] = {}
    for e in sorted(entries, key=in_order):
        if e.kind in _GROUP_KINDS:
            by_group.setdefault((e.scope, e.subject), []).append(e)
    out: dict[tuple[str, str], GroupTimes] = {}
    for key, events in by_group.items():
        timeline = _Timeline({e.at for e in events if e.kind == "wake"})
        for e in events:
            timeline.see(e)
        out[key] = timeline.close(until)
    return out


@dataclass(frozen=True)
class GroupSavings:
    scope: str
    group: str
    gone_hours: float = 0.0  # hours the group's nodes were gone
    avoided_node_hours: float = 0.0
    avoided_gpu_hours: float | None = 0.0  # None: the GPUs are unknown (no gpusPerNode, no recorded size)
    busy_hours: float = 0.0
    wake_hours: float = 0.0
    #: The autoscaler floor that capped the nodes counted (the lowest, if several nights): None where none did.
    floor: int | None = None


@dataclass(frozen=True)
class Savings:
    groups: tuple[GroupSavings, ...] = ()
    pods: int = 0
    idle_gpu_hours: float = 0.0  # the sweep's pods: GPU-hours they idled before it acted (at least)
    instances: int = 0
    instance_gpus: int = 0
    downs: int = 0
    wakes: int = 0
    notes: tuple[str, ...] = field(default=())


def _hours(delta: timedelta) -> float:
    return delta.total_seconds() / 3600


def measure(entries: Sequence[Entry], start: datetime, end: datetime) -> Savings:
    """What the entries measure within [start, end): per group the hours its nodes were gone times the GPUs that
    would have run, the hours it was kept up; the sweep's pods and instances acted on in the window."""
    # In UTC: two instants of one ZoneInfo subtract as wall clocks (a DST week would have 168 hours).
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    entries = [replace(e, at=e.at.astimezone(UTC)) for e in entries]
    times = group_times(entries, end)
    groups: list[GroupSavings] = []
    for (scope, group), t in sorted(times.items()):
        gone_hours = node_hours = 0.0
        gpu_hours: float | None = 0.0
        floors: list[int] = []
        for night in t.gone:
            hours = _hours(night.interval.clipped(start, end))
            gone_hours += hours
            node_hours += hours * (night.nodes or 0)
            if night.gpus is None and hours > 0:
                gpu_hours = None
            elif gpu_hours is not None and night.gpus is not None:
                gpu_hours += hours * night.gpus
            if night.floor is not None and hours > 0:
                floors.append(night.floor)
        for part in t.partly:  # nodes a wake left down: avoided, but the group's nodes were not all gone
            hours = _hours(part.interval.clipped(start, end))
            node_hours += hours * (part.nodes or 0)
            if gpu_hours is not None and hours > 0:
                gpu_hours = None if part.gpus is None else gpu_hours + hours * part.gpus
        busy = sum(_hours(i.clipped(start, end)) for i in t.busy)
        woke = sum(_hours(i.clipped(start, end)) for i in t.wake)
        if gone_hours or busy or woke:
            groups.append(
                GroupSavings(scope, group, gone_hours, node_hours, gpu_hours, busy, woke, min(floors, default=None))
            )
    inside = [e for e in entries if start <= e.at < end]
    pods = [e for e in inside if e.kind == "pod"]
    instances = [e for e in inside if e.kind == "instance"]
    return Savings(
        tuple(groups),
        pods=len(pods),
        idle_gpu_hours=sum(e.idle_gpu_hours or 0.0 for e in pods),
        instances=len(instances),
        instance_gpus=sum(e.gpus or 0 for e in instances),
        downs=sum(e.kind == "down" for e in inside),
        wakes=sum(e.kind == "wake" for e in inside),
    )


# --- report windows ------------------------------------------------------------------------------------------------

_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")


def week_window(label: str, timezone: str) -> tuple[datetime, datetime]:
    """``2026-W49`` -> Monday 00:00 to the next Monday 00:00 in ``timezone`` (167 or 169 hours in a DST week)."""
    match = _WEEK.fullmatch(label)
    if match is None:
        raise ValueError(f"--week {label!r}: use an ISO week like 2026-W49")
    try:
        monday = date.fromisocalendar(int(match[1]), int(match[2]), 1)
    except ValueError as exc:
        raise ValueError(f"--week {label!r}: {exc}") from None
    zone = ZoneInfo(timezone)
    return (
        datetime.combine(monday, time(0), tzinfo=zone),
        datetime.combine(monday + timedelta(days=7), time(0), tzinfo=zone),
    )


def current_week(now: datetime, timezone: str) -> str:
    """The ISO week ``now`` is in, in ``timezone``."""
    year, week, _ = now.astimezone(ZoneInfo(timezone)).isocalendar()
    return f"{year}-W{week:02d}"
