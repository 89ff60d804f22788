"""The schedule engine: a pure function of the policy and an instant.

Every window becomes concrete intervals ``[start, end)`` in UTC. Windows are anchored on the local day they
start (an overnight window belongs to the day it starts on, and a holiday cancels the windows that start on
it). Clock windows use wall-clock times in the group's timezone, so they stay at 08:00 across DST; cron windows
last ``duration`` of real time. All arithmetic is done in UTC: Python compares datetimes that share a tzinfo
by wall time, which is wrong across a DST fold.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType
from typing import Literal
from zoneinfo import ZoneInfo

from croniter import croniter

from jobs.core.policy_schedule import Holidays, Override, WorkingHours
from jobs.core.timespec import parse_clock, parse_days, parse_duration

State = Literal["up", "down"]
#: How far ahead ``next_change`` looks; a group with no change in this horizon reports ``None``.
HORIZON = timedelta(days=35)
#: Instants remembered per schedule: a run asks about one ``now``; a calendar about many (then it starts over).
_DESIRED_CACHE = 64


@dataclass(frozen=True)
class Interval:
    """One concrete occurrence of a window. ``warm_start`` is ``start`` minus the group's warm-up."""

    start: datetime
    end: datetime
    warm_start: datetime
    window: WorkingHours
    day: date
    holiday: str | None
    text: str = ""  # the window as people wrote it, for reasons (described once per schedule)

    def covers(self, at: datetime) -> bool:
        return self.warm_start <= at < self.end


@dataclass(frozen=True)
class Segment:
    """A stretch of time ``[start, end)`` over which a group's desired state and reason do not change."""

    start: datetime
    end: datetime
    state: State
    reason: str


@dataclass(frozen=True)
class Desired:
    state: State
    reason: str
    next_change: datetime | None


@functools.lru_cache(maxsize=256)
def _public_holidays(country: str, subdivision: str | None, year: int) -> Mapping[date, str]:
    """One country/subdivision's public holidays of one year, loaded once per process: every schedule with the
    same holidays shares the table."""
    import holidays as holidays_lib  # noqa: PLC0415 - loading country data is slow; only when needed

    return MappingProxyType(dict(holidays_lib.country_holidays(country, subdiv=subdivision, years=year).items()))


class HolidayCalendar:
    """Public holidays of a country/subdivision plus explicit dates."""

    def __init__(self, spec: Holidays | None) -> None:
        self._country = spec.country if spec else None
        self._subdivision = spec.subdivision if spec else None
        self._explicit = frozenset(spec.dates) if spec else frozenset()

    def name(self, day: date) -> str | None:
        if day in self._explicit:
            return f"holiday {day.isoformat()}"
        if self._country is None:
            return None
        found = _public_holidays(self._country, self._subdivision, day.year).get(day)
        return f"public holiday ({found})" if found else None


@dataclass(frozen=True)
class _Window:
    """A working-hours window with its text parsed once: a day set and clock times, or a cron and a length."""

    source: WorkingHours
    text: str
    days: frozenset[int] = frozenset()
    start: time | None = None
    end: time | None = None  # None: midnight after the day (24:00)
    cron: str | None = None
    length: timedelta = timedelta(0)

    @classmethod
    def of(cls, window: WorkingHours) -> _Window:
        if window.cron is not None and window.duration is not None:
            return cls(window, window.describe(), cron=window.cron, length=parse_duration(window.duration))
        assert window.days is not None
        assert window.start is not None
        assert window.end is not None
        days, start, end = parse_days(window.days), parse_clock(window.start), parse_clock(window.end)
        return cls(window, window.describe(), days=days, start=start, end=end)


def _local(day: date, clock: time, tz: ZoneInfo, fold: int = 0) -> datetime:
    """A wall time on a local day, in UTC. An ambiguous wall time (autumn) is its first occurrence unless ``fold``
    is 1; a wall time inside the spring gap, which never happens, is the first instant after the gap (02:30 on the
    night clocks jump from 02:00 to 03:00 is 03:00 summer time)."""
    wall = datetime.combine(day, clock, tzinfo=tz).replace(fold=fold)
    instant = wall.astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):
        return instant
    # In the gap. Python maps it by the old offset (03:30 here); the jump lies between the two readings.
    low, high = datetime.combine(day, clock, tzinfo=tz).replace(fold=1).astimezone(UTC), instant
    low, high = min(low, high), max(low, high)
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).replace(tzinfo=None) >= wall.replace(tzinfo=None):
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def _ambiguous(day: date, clock: time, tz: ZoneInfo) -> bool:
    """Whether the wall time happens twice (the repeated hour in autumn)."""
    return _local(day, clock, tz, fold=0) != _local(day, clock, tz, fold=1)


class GroupSchedule:
    """A schedule compiled once (windows parsed, holidays shared), queried at any instant."""

    def __init__(
        self,
        tz: ZoneInfo,
        holidays: Holidays | None,
        windows: tuple[WorkingHours, ...],
        warm_up: timedelta = timedelta(0),
        overrides: tuple[Override, ...] = (),
        *,
        always_on: bool = False,
    ) -> None:
        self.tz, self.windows, self.warm_up = tz, windows, warm_up
        self.holidays = HolidayCalendar(holidays)
        self.overrides = overrides
        self.always_on = always_on
        self._windows = tuple(_Window.of(w) for w in windows)
        longest = max((w.length for w in self._windows), default=timedelta(days=1))
        self._lookback = max(longest, timedelta(days=1)) + warm_up + timedelta(days=1)
        # desired() per (instant, horizon): a quota rule is asked once per namespace at the same ``now``.
        self._desired: dict[tuple[datetime, timedelta], Desired] = {}

    @classmethod
    def of_windows(cls, tz: ZoneInfo, holidays: Holidays | None, windows: tuple[WorkingHours, ...]) -> GroupSchedule:
        """Working hours without a node group (a quota rule's off-hours): no warm-up, no overrides."""
        return compiled_schedule(tz, holidays, windows)

    def intervals(self, start: datetime, end: datetime) -> list[Interval]:
        """Every window occurrence that can cover an instant in ``[start, end)``, holidays included (flagged)."""
        first = (start - self._lookback).astimezone(self.tz).date()
        last = (end + self.warm_up).astimezone(self.tz).date()
        found: list[Interval] = []
        for window in self._windows:
            for s, e, day in self._occurrences(window, first, last):
                if e > start - self.warm_up and s - self.warm_up < end:
                    found.append(
                        Interval(s, e, s - self.warm_up, window.source, day, self.holidays.name(day), window.text)
                    )
        return sorted(found, key=lambda i: (i.warm_start, i.end))

    def _occurrences(self, window: _Window, first: date, last: date) -> Iterator[tuple[datetime, datetime, date]]:
        if window.cron is not None:
            length = window.length
            # Iterate on naive local wall time, as a cron daemon does, then place each time in the timezone.
            it = croniter(window.cron, datetime.combine(first, time(0)) - timedelta(minutes=1))
            # A cron that fires every hour fires in the repeated autumn hour too (as cron daemons run wildcard-hour
            # jobs by real time); one for a fixed hour fires once, at its first occurrence.
            every_hour = window.cron.split()[1].startswith("*")
            while (naive := it.get_next(datetime)).date() <= last:
                begin = _local(naive.date(), naive.time(), self.tz)
                yield begin, begin + length, naive.date()
                if every_hour and _ambiguous(naive.date(), naive.time(), self.tz):
                    again = _local(naive.date(), naive.time(), self.tz, fold=1)
                    yield again, again + length, naive.date()
            return
        days, start_clock, end_clock = window.days, window.start, window.end
        assert start_clock is not None
        day = first
        while day <= last:
            if day.weekday() in days:
                begin = _local(day, start_clock, self.tz)
                if end_clock is None:
                    finish = _local(day + timedelta(days=1), time(0), self.tz)
                elif end_clock > start_clock:
                    finish = _local(day, end_clock, self.tz)
                else:  # overnight: ends on the next day, belongs to this one
                    finish = _local(day + timedelta(days=1), end_clock, self.tz)
                yield begin, finish, day
            day += timedelta(days=1)

    def _state(self, at: datetime, intervals: Iterable[Interval]) -> tuple[State, str]:
        active = [o for o in self.overrides if at < o.until]
        if active:
            # The last active override listed wins: later lines are the newer edits.
            override = active[-1]
            return override.state, f"override until {override.until.isoformat()}: {override.reason}"
        if self.always_on:
            return "up", "alwaysOn"
        covering = [i for i in intervals if i.covers(at)]
        working = [i for i in covering if i.holiday is None]
        inside = [i for i in working if i.start <= at]
        if inside:
            return "up", f"inside working hours ({inside[0].text})"
        if working:
            opens = working[0].start.astimezone(self.tz).strftime("%a %H:%M")
            return "up", f"warming up for {working[0].text} opening {opens}"
        if covering:
            return "down", f"{covering[0].holiday}: no working hours"
        return "down", "outside working hours"

    def segments(self, start: datetime, end: datetime) -> list[Segment]:
        """The desired state over ``[start, end)`` as consecutive segments (adjacent equal ones merged)."""
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        intervals = self.intervals(start, end)
        cuts = {start, end}
        for i in intervals:
            cuts.update((i.warm_start, i.start, i.end))
        cuts.update(o.until.astimezone(UTC) for o in self.overrides)
        points = sorted(c for c in cuts if start <= c <= end)
        out: list[Segment] = []
        # Sweep: at each point only the intervals covering it are passed on (in their sorted order). Filtering all
        # of them per point made a long calendar quadratic.
        active: list[Interval] = []
        pending = iter(intervals)  # sorted by warm_start
        upcoming = next(pending, None)
        for a, b in itertools.pairwise(points):
            while upcoming is not None and upcoming.warm_start <= a:
                active.append(upcoming)
                upcoming = next(pending, None)
            active = [i for i in active if a < i.end]
            state, reason = self._state(a, active)
            if out and out[-1].state == state and out[-1].reason == reason:
                out[-1] = Segment(out[-1].start, b, state, reason)
            else:
                out.append(Segment(a, b, state, reason))
        return out

    def desired(self, at: datetime, horizon: timedelta = HORIZON) -> Desired:
        """The state at ``at`` (timezone-aware), why, and when that next changes within ``horizon``."""
        if at.tzinfo is None:
            raise ValueError("at must be timezone-aware")
        key = (at, horizon)
        found = self._desired.get(key)
        if found is None:
            found = self._first_change(at, horizon)
            if len(self._desired) >= _DESIRED_CACHE:
                self._desired.clear()
            self._desired[key] = found
        return found

    def _first_change(self, at: datetime, horizon: timedelta) -> Desired:
        # The next change is usually within a day or two: look that far first, and further only when needed (the
        # state now and the first change do not depend on how far the segments reach beyond it).
        for reach in (min(timedelta(days=2), horizon), min(timedelta(days=8), horizon), horizon):
            segments = self.segments(at, at + reach)
            state, reason = segments[0].state, segments[0].reason
            change = next((s.start for s in segments[1:] if s.state != state), None)
            if change is not None or reach == horizon:
                return Desired(state, reason, change.astimezone(self.tz) if change else None)
        raise AssertionError("unreachable: the last reach is the horizon")

    def working_at(self, at: datetime) -> bool:
        """Whether ``at`` lies inside a window (holidays cancel the windows that start on them)."""
        return self.desired(at, timedelta(days=1)).state == "up"

    def up_hours(self, start: datetime, end: datetime, *, with_overrides: bool = False) -> float:
        """Hours the group is desired up in ``[start, end)``; overrides left out unless asked (they are temporary)."""
        schedule = self if with_overrides else self._without_overrides()
        seconds = sum((s.end - s.start).total_seconds() for s in schedule.segments(start, end) if s.state == "up")
        return seconds / 3600

    def _without_overrides(self) -> GroupSchedule:
        clone = object.__new__(GroupSchedule)
        clone.__dict__.update(self.__dict__)
        clone.overrides = ()
        clone._desired = {}
        return clone


@functools.lru_cache(maxsize=1024)
def compiled_schedule(
    tz: ZoneInfo, holidays: Holidays | None, windows: tuple[WorkingHours, ...], warm_up: timedelta = timedelta(0)
) -> GroupSchedule:
    """Working hours compiled once per process for the same (timezone, holidays, windows, warm-up): a quota rule's
    offHours asked for 5,000 namespaces is one schedule, evaluated once per ``now``."""
    return GroupSchedule(tz, holidays, windows, warm_up)


def in_working_hours(tz: ZoneInfo, holidays: Holidays | None, windows: tuple[WorkingHours, ...], at: datetime) -> bool:
    """Whether ``at`` lies inside one of ``windows`` (holidays cancel the windows that start on them)."""
    return compiled_schedule(tz, holidays, windows).working_at(at)
