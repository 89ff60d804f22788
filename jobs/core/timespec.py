"""Parsing of the small textual forms people write in the policy: day sets, clock times, durations."""

from __future__ import annotations

import json
import re
from datetime import time, timedelta

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY_INDEX = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
# Used with fullmatch: ``$`` alone would also match before a trailing newline.
_DURATION = re.compile(r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")
_CLOCK = re.compile(r"(?P<h>[01]\d|2[0-4]):(?P<m>[0-5]\d)")
#: No duration in a policy is longer (a cron window may last up to this; the knobs have their own, shorter limits).
MAX_DURATION = timedelta(days=31)
#: Dates, override expiries and ``--at`` instants outside these years are typos, and near year 1 or 9999 the UTC
#: arithmetic of the schedule overflows.
MIN_YEAR, MAX_YEAR = 2000, 2100


#: How much of a value people control (an annotation, a label, a tag, a record they edited, a reason they wrote) a
#: report, a log line or an Event repeats. Kubernetes takes 256 KiB of annotations on one object.
ECHO_LIMIT = 200


def quoted(value: object, limit: int = 60) -> str:
    """``value`` in double quotes for a message (JSON: escaped, line breaks included), cut past ``limit`` characters
    to its start, an ellipsis and its real length: input can hold anything, at any length, and whatever a person
    wrote is repeated in reports, logs and Events. ``limit`` is 60 in policy errors, :data:`ECHO_LIMIT` elsewhere."""
    shown = json.dumps(value, ensure_ascii=False, default=str)
    if len(shown) <= limit:
        return shown
    if isinstance(value, str):
        return f'{shown[: limit - 2]}…" ({len(value)} characters)'
    return f"{shown[: limit - 1]}… ({len(shown)} characters)"


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
            raise ValueError(f"{quoted(text)} is not a day range (use e.g. Mon-Fri, Sat,Sun, Mon-Wed,Fri or daily)")
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
    match = _CLOCK.fullmatch(text)
    if not match:
        raise ValueError(f"{quoted(text)} is not a time of day (use HH:MM, 24-hour clock)")
    hour, minute = int(match["h"]), int(match["m"])
    if hour == 24:
        if minute:
            raise ValueError(f"{quoted(text)} is not a time of day (use HH:MM, 24-hour clock)")
        return None
    return time(hour, minute)


def parse_duration(text: str, limit: timedelta = MAX_DURATION) -> timedelta:
    """``15m``, ``8h``, ``1h30m``, ``2d`` -> timedelta (strictly positive, at most ``limit``)."""
    match = _DURATION.fullmatch(text)
    if not text or not match:
        raise ValueError(f"{quoted(text)} is not a duration (use e.g. 15m, 8h, 1h30m, 2d)")
    too_long = f"{quoted(text)} is longer than the limit of {format_duration(limit)}"
    # Seven digits of any unit are already more than any limit; more would overflow timedelta (99999999999d).
    if any(len(v) > 7 for v in match.groupdict(default="").values()):
        raise ValueError(too_long)
    parts = {k: int(v) for k, v in match.groupdict(default="0").items()}
    value = timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    if value <= timedelta(0):
        raise ValueError(f"{quoted(text)} is not a positive duration")
    if value > limit:
        raise ValueError(too_long)
    return value


def format_duration(value: timedelta) -> str:
    total = int(value.total_seconds())
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            out += f"{total // size}{unit}"
            total %= size
    return out or "0s"
