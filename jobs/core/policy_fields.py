"""The policy's field types: the base model and the small validated strings every section uses (timezones,
day sets, clock times, durations, crons, dates, names, namespace globs, contexts, URLs).

Validators raise ``ValueError`` with a message that reads well after ``FILE:LINE: PATH:``.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from fractions import Fraction
from functools import cached_property
from typing import Annotated, Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from jobs.core.timespec import MAX_YEAR, MIN_YEAR, parse_clock, parse_days, parse_duration, quoted


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        # The cached_property helpers below are derived, not fields.
        ignored_types=(cached_property,),
    )


# The shape of every IANA name (Area/Location[/Sub], Etc/GMT+5, EST5EDT), checked before ZoneInfo sees the text:
# ZoneInfo turns "a/a/a/..." into a chain of package imports that ends in RecursionError.
_TIMEZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9][A-Za-z0-9_+-]*){0,2}")


def _check_timezone(value: str) -> str:
    unknown = f"{quoted(value)} is not a known IANA timezone (e.g. Europe/Berlin)"
    if len(value) > 64 or not _TIMEZONE.fullmatch(value):
        raise ValueError(unknown)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(unknown) from None
    return value


def _check_days(value: str) -> str:
    parse_days(value)
    return value


def _check_clock(value: str) -> str:
    parse_clock(value)
    return value


#: The longest warmUp, warnBefore, maxDelay and drainTimeout: each is about one night or weekend, never weeks.
MAX_SETTING_DURATION = timedelta(days=7)


def _check_duration(value: str) -> str:
    parse_duration(value, MAX_SETTING_DURATION)
    return value


_ZERO = re.compile(r"0+[dhms]")


def warm_up_of(value: str | None) -> timedelta:
    """A warm-up: ``0s`` (or ``0m``...) switches a default warm-up off for one group."""
    if value is None or _ZERO.fullmatch(value):
        return timedelta(0)
    return parse_duration(value, MAX_SETTING_DURATION)


def _check_warm_up(value: str) -> str:
    warm_up_of(value)
    return value


def _check_window_duration(value: str) -> str:
    parse_duration(value)
    return value


# croniter's R (random) and H (hashed) pick a value when the expression is read: the schedule would change from
# one run to the next. The lookarounds keep day and month names (FRI, THU, MAR) out of it.
_RANDOM_CRON_FIELD = re.compile(r"(?<![A-Za-z])[RrHh](?![A-Za-z])")
# A leap year's start, so that a cron for 29 February fires within the year checked.
_CRON_CHECK_FROM = datetime(2028, 1, 1) - timedelta(minutes=1)  # noqa: DTZ001 - crons run on naive wall time


def _check_cron(value: str) -> str:
    fields = value.split()
    if len(value) > 100 or len(fields) != 5 or not croniter.is_valid(value):
        raise ValueError(f'{quoted(value)} is not a 5-field cron expression (e.g. "0 22 * * 1-5")')
    if any(_RANDOM_CRON_FIELD.search(f) for f in fields):
        raise ValueError(f"{quoted(value)}: R and H (random or hashed) would move the window from run to run")
    try:
        croniter(value, _CRON_CHECK_FROM, max_years_between_matches=1).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"{quoted(value)} never fires (no such date within a year)") from None
    return value


def _check_year(value: date) -> date:
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise ValueError(f"{value.isoformat()} is outside the years {MIN_YEAR}-{MAX_YEAR}")
    return value


def _not_a_number(what: str) -> Any:
    """Pydantic reads a number as a Unix timestamp; in a policy it is a typo (the JSON Schema says string)."""

    def check(value: Any) -> Any:
        if isinstance(value, bool | int | float):
            raise ValueError(f"{json.dumps(value)} is not a {what}: write {_EXAMPLES[what]}")
        return value

    return BeforeValidator(check)


_EXAMPLES = {"date": "YYYY-MM-DD, e.g. 2026-12-24", "date-time": 'e.g. "2026-12-02T23:00:00+01:00"'}


def _check_aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("needs a UTC offset, e.g. 2026-12-02T23:00:00+01:00")
    return value


Timezone = Annotated[str, AfterValidator(_check_timezone)]


def _check_name(value: str) -> str:
    # fullmatch: with match, the pattern's $ also accepts "vision-t4\n".
    if not _NAME.fullmatch(value):
        raise ValueError(f'{quoted(value)} is not a valid name (lowercase letters, digits and "-", at most 63)')
    return value


# Patterns appear in the JSON Schema for editors; validation itself goes through the checks above so that the
# messages name the problem instead of quoting a regular expression.
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
DaySet = Annotated[
    str,
    AfterValidator(_check_days),
    WithJsonSchema({"type": "string", "examples": ["Mon-Fri", "Sat,Sun", "daily"]}),
]
Clock = Annotated[str, AfterValidator(_check_clock), WithJsonSchema({"type": "string", "pattern": r"^\d{2}:\d{2}$"})]
_DURATION_SCHEMA = {"type": "string", "pattern": r"^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$", "examples": ["15m", "8h"]}
Duration = Annotated[str, AfterValidator(_check_duration), WithJsonSchema(_DURATION_SCHEMA)]
WarmUp = Annotated[str, AfterValidator(_check_warm_up), WithJsonSchema(_DURATION_SCHEMA)]
# A lead time like warmUp: "0s" switches a default off for one group.
WarnBefore = Annotated[str, AfterValidator(_check_warm_up), WithJsonSchema(_DURATION_SCHEMA)]
WindowDuration = Annotated[str, AfterValidator(_check_window_duration), WithJsonSchema(_DURATION_SCHEMA)]
Cron = Annotated[str, AfterValidator(_check_cron), WithJsonSchema({"type": "string", "examples": ["0 22 * * 1-5"]})]
AwareDatetime = Annotated[
    datetime,
    _not_a_number("date-time"),
    AfterValidator(_check_aware),
    AfterValidator(_check_year),
    PlainSerializer(lambda v: v.isoformat(), return_type=str),
]
PolicyDate = Annotated[date, _not_a_number("date"), AfterValidator(_check_year)]
Name = Annotated[str, AfterValidator(_check_name), WithJsonSchema({"type": "string", "pattern": _NAME.pattern})]

# A namespace name or an fnmatch glob of one: letters of a name, ``*``, ``?`` and closed classes ``[a-c]``,
# ``[!0-9]``. fnmatch takes an unclosed ``[`` (or a stray ``]``) as a literal, which no namespace name contains: such
# a rule would silently match nothing, so it is refused at load.
_GLOB_CLASS = r"\[!?[a-z0-9-]+\]"
_NAMESPACE_GLOB = re.compile(rf"(?:[a-z0-9*?-]|{_GLOB_CLASS}){{1,63}}")
_RANGE = re.compile(r"([a-z0-9])-([a-z0-9])")


def _check_namespace_pattern(value: str) -> str:
    if len(value) > 63 or not _NAMESPACE_GLOB.fullmatch(value):
        why = (
            "an unclosed or empty [...] class"
            if "[" in value or "]" in value
            else "at most 63 lowercase letters, digits, '-', '*' or '?'"
        )
        raise ValueError(f"{quoted(value)} is not a namespace name or glob ({why}; e.g. ml-team, team-*, team-[ab])")
    for low, high in _RANGE.findall("".join(re.findall(_GLOB_CLASS, value))):
        if low > high:
            raise ValueError(f"{quoted(value)}: the range {low}-{high} is backwards, so it matches nothing")
    return value


NamespacePattern = Annotated[
    str,
    AfterValidator(_check_namespace_pattern),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": f"^{_NAMESPACE_GLOB.pattern}$",
            "maxLength": 63,
            "examples": ["ml-team", "team-*"],
        }
    ),
]


def _check_context(value: str) -> str:
    # kubeconfig context names are free-form (EKS ARNs, gke_<project>_<zone>_<name>), but never empty, padded or
    # carrying whitespace/control characters: such a name is a copy-paste accident.
    if not value or len(value) > 253 or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"{value!r} is not a kubeconfig context name (no spaces or control characters, at most 253)")
    return value


def check_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f'"{value}" is not an http(s) URL without query or fragment (e.g. http://prometheus:9090)')
    if parts.username or parts.password:
        raise ValueError("credentials do not belong in a URL in Git: use the job's identity or a Secret")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise ValueError(f'"{value}" has a malformed port') from None
    return value


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def check_matchers(value: dict[str, str]) -> dict[str, str]:
    for label in value:
        if not _LABEL_NAME.fullmatch(label):
            raise ValueError(f'"{label}" is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)')
    return value


KubeContext = Annotated[str, AfterValidator(_check_context)]


_PERCENT = re.compile(r"^(\d{1,3}(\.\d{1,2})?)%$")


def _check_percent(value: str) -> str:
    matched = _PERCENT.fullmatch(value)
    if not matched or not 0 < Fraction(matched.group(1)) <= 1000:
        raise ValueError(f'"{value}" is not a percentage above 0 (e.g. "80%")')
    return value


def percent(value: str) -> Fraction:
    """ "80%" as 4/5."""
    return Fraction(value.removesuffix("%")) / 100


Percent = Annotated[
    str, AfterValidator(_check_percent), WithJsonSchema({"type": "string", "pattern": _PERCENT.pattern})
]
