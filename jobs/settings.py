"""Settings: flags with environment-variable defaults.

Environment variables let a CronJob (and ``kubectl create job --from=cronjob/...``) set what a person would pass
as flags. A flag given on the command line wins over the environment.
"""

from __future__ import annotations

import os
from datetime import datetime
from zoneinfo import ZoneInfo

ENV_PREFIX = "GPU_JOBS_"
DEFAULT_POLICY = "gitops/policy.yaml"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class SettingsError(ValueError):
    """A flag or environment variable has a value that cannot be used."""


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
    return value if value.tzinfo else value.replace(tzinfo=ZoneInfo(default_tz))
