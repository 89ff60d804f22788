"""Parsing of the small textual forms people write in the policy: day sets, clock times, durations."""

from __future__ import annotations

import re
from datetime import time, timedelta

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY_INDEX = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
_DURATION = re.compile(r"^(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")
_CLOCK = re.compile(r"^(?P<h>[01]\d|2[0-4]):(?P<m>[0-5]\d)$")


def parse_days(text: str) -> frozenset[int]:
    """``Mon-Fri``, ``Sat,Sun``, ``Mon-Wed,Fri`` or ``daily`` -> weekday numbers (Monday is 0).

    Ranges may wrap the week (``Fri-Mon``) because rotas do.
    """
    if text.strip().lower() == "daily":
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        bounds = [b.strip().lower() for b in part.split("-")]
        if len(bounds) > 2 or any(b not in _DAY_INDEX for b in bounds):
            raise ValueError(f'"{text}" is not a day range (use e.g. Mon-Fri, Sat,Sun, Mon-Wed,Fri or daily)')
        first, last = _DAY_INDEX[bounds[0]], _DAY_INDEX[bounds[-1]]
        span = (last - first) % 7
        days.update((first + i) % 7 for i in range(span + 1))
    return frozenset(days)


def format_days(days: frozenset[int]) -> str:
    if days == frozenset(range(7)):
        return "daily"
    return ",".join(DAY_NAMES[d] for d in sorted(days))


def parse_clock(text: str) -> time | None:
    """``HH:MM`` -> time; ``24:00`` (only meaningful as an end) -> None, meaning midnight after the day."""
    match = _CLOCK.match(text.strip())
    if not match:
        raise ValueError(f'"{text}" is not a time of day (use HH:MM, 24-hour clock)')
    hour, minute = int(match["h"]), int(match["m"])
    if hour == 24:
        if minute:
            raise ValueError(f'"{text}" is not a time of day (use HH:MM, 24-hour clock)')
        return None
    return time(hour, minute)


def parse_duration(text: str) -> timedelta:
    """``15m``, ``8h``, ``1h30m``, ``2d`` -> timedelta (strictly positive)."""
    match = _DURATION.match(text.strip())
    if not text.strip() or not match:
        raise ValueError(f'"{text}" is not a duration (use e.g. 15m, 8h, 1h30m, 2d)')
    parts = {k: int(v) for k, v in match.groupdict(default="0").items()}
    value = timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    if value <= timedelta(0):
        raise ValueError(f'"{text}" is not a positive duration')
    return value


def format_duration(value: timedelta) -> str:
    total = int(value.total_seconds())
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            out += f"{total // size}{unit}"
            total %= size
    return out or "0s"
