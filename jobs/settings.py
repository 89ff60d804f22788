"""Settings: flags with environment-variable defaults.

Environment variables let a CronJob (and ``kubectl create job --from=cronjob/...``) set what a person would pass
as flags. A flag given on the command line wins over the environment.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Collection
from datetime import datetime
from zoneinfo import ZoneInfo

from jobs.core.limits import ChangeLimit
from jobs.core.timespec import MAX_YEAR, MIN_YEAR
from jobs.deadline import DEFAULT_DEADLINE_S
from jobs.errors import ConfigError

ENV_PREFIX = "GPU_JOBS_"
DEFAULT_POLICY = "gitops/policy.yaml"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class SettingsError(ConfigError, ValueError):
    """A flag or environment variable has a value that cannot be used."""


class UsageError(SettingsError):
    """The command line itself cannot be parsed (unknown flag, missing value)."""


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV_PREFIX + name, default)


def env_flag(name: str) -> bool:
    raw = (env(name) or "").strip().lower()
    if raw not in _TRUE | _FALSE:
        raise SettingsError(f"{ENV_PREFIX}{name}={raw!r}: use true or false")
    return raw in _TRUE


def parse_at(text: str | None, default_tz: str) -> datetime | None:
    """ISO 8601; without an offset the time is read in the policy's default timezone."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise SettingsError(f"--at {text!r} is not an ISO 8601 date-time (e.g. 2026-12-01T07:29:00+01:00)") from None
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        # Near year 1 or 9999 the schedule's UTC arithmetic overflows; policy dates are held to the same years.
        raise SettingsError(f"--at {text!r} is outside the years {MIN_YEAR}-{MAX_YEAR}")
    return value if value.tzinfo else value.replace(tzinfo=ZoneInfo(default_tz))


def _raw(flag: str | None, name: str, option: str | None = None) -> tuple[str | None, str]:
    """A flag wins over the environment; an empty value (a manifest's ``value: ""``) means unset. ``option`` is the
    flag as typed where it is not the variable's name (``--part`` for ``GPU_JOBS_SWEEP_PART``)."""
    if flag is not None:
        return flag.strip() or None, option or f"--{name.lower().replace('_', '-')}"
    value = env(name)
    return (value.strip() or None) if value is not None else None, f"{ENV_PREFIX}{name}"


def int_setting(flag: str | None, name: str, default: int, *, minimum: int) -> int:
    raw, source = _raw(flag, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{source}={raw!r}: not a whole number") from None
    if value < minimum:
        raise SettingsError(f"{source}={raw!r}: must be at least {minimum}")
    return value


def limit_setting(flag: str | None, name: str, default: ChangeLimit) -> ChangeLimit:
    """A blast-radius limit: ``20`` items or ``25%`` of those considered."""
    raw, source = _raw(flag, name)
    if raw is None:
        return default
    try:
        return ChangeLimit.parse(raw)
    except ValueError as exc:
        raise SettingsError(f"{source}={raw!r}: {exc}") from None


def seconds_setting(name: str, default: float, *, minimum: float = 0.0, flag: str | None = None) -> float:
    """A duration in seconds from the flag or the environment (``5``, ``0.5``; not ``5s``)."""
    raw, source = _raw(flag, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{source}={raw!r}: a number of seconds, e.g. {default:g}") from None
    if not math.isfinite(value) or value < minimum:
        raise SettingsError(f"{source}={raw!r}: a finite number of seconds, at least {minimum:g}")
    return value


def choice_setting(
    flag: str | None, name: str, default: str, choices: Collection[str], *, option: str | None = None
) -> str:
    raw, source = _raw(flag, name, option)
    if raw is None:
        return default
    if raw.lower() not in choices:
        raise SettingsError(f"{source}={raw!r}: use one of {', '.join(choices)}")
    return raw.lower()


def add_run_arguments(
    parser: argparse.ArgumentParser, items: str, at: str, *, default: str = "50", clusters: bool = True
) -> None:
    """The flags every job takes, each with its environment variable; ``--cluster`` for the jobs that act on
    clusters (not cloud-quotas: its quotas belong to accounts)."""
    parser.add_argument("--policy", default=env("POLICY", DEFAULT_POLICY), help="policy file [GPU_JOBS_POLICY]")
    parser.add_argument(
        "--dry-run", action="store_true", default=None, help="plan and report, change nothing [GPU_JOBS_DRY_RUN]"
    )
    parser.add_argument("--output", metavar="text|json", help="[GPU_JOBS_OUTPUT]")
    parser.add_argument("--at", default=env("AT"), help=f"evaluate {at} at this instant [GPU_JOBS_AT]")
    if clusters:
        parser.add_argument(
            "--cluster",
            default=env("CLUSTER"),
            metavar="NAME",
            help="act on this cluster only, through the in-cluster config or current context (a per-cluster"
            " install); without it, on every cluster with a kubeContext [GPU_JOBS_CLUSTER]",
        )
    parser.add_argument(
        "--max-changes",
        metavar="N|P%",
        help=f"refuse a plan changing more {items} than this, a number or a percentage of those considered"
        f" (exit 3; default {default}) [GPU_JOBS_MAX_CHANGES]",
    )
    add_deadline_argument(parser)


def add_deadline_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deadline",
        metavar="SECONDS",
        help="the run's deadline: every wait ends by then, what is unfinished fails ('deadline: ...') and the run"
        f" reports; keep it below the CronJob's activeDeadlineSeconds (default {DEFAULT_DEADLINE_S:g})"
        " [GPU_JOBS_DEADLINE]",
    )


def deadline_setting(flag: str | None) -> float:
    """The run's deadline in seconds, from ``--deadline`` or ``GPU_JOBS_DEADLINE``."""
    return seconds_setting("DEADLINE", DEFAULT_DEADLINE_S, minimum=1.0, flag=flag)
