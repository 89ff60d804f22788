"""The schedule sections of the policy: holidays, working-hours windows, the schedule fields a node group may
override from ``defaults``, and temporary overrides."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from jobs.core import holiday_regions
from jobs.core.policy_fields import (
    AwareDatetime,
    Clock,
    Cron,
    DaySet,
    Duration,
    Model,
    PolicyDate,
    Timezone,
    WarmUp,
    WarnBefore,
    WindowDuration,
)
from jobs.core.timespec import ECHO_LIMIT, parse_clock


class Holidays(Model):
    """Public holidays (``holidays`` package) plus explicit dates; windows that start on them are off."""

    country: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code, e.g. DE")
    subdivision: str | None = Field(default=None, description="e.g. BE for Berlin")
    dates: tuple[PolicyDate, ...] = Field(default=(), max_length=500)

    @model_validator(mode="after")
    def _known_country(self) -> Holidays:
        if self.subdivision and not self.country:
            raise ValueError("subdivision needs a country")
        if self.country:
            subdivisions = holiday_regions.subdivisions(self.country)
            if subdivisions is None:
                raise ValueError(f'country "{self.country}" is not known to the holidays package')
            if self.subdivision and self.subdivision not in subdivisions:
                raise ValueError(f'"{self.subdivision}" is not a subdivision of {self.country}')
        return self


class WorkingHours(Model):
    """A window: ``days`` + ``start`` + ``end`` local to the group, or ``cron`` + ``duration``."""

    days: DaySet | None = None
    start: Clock | None = None
    end: Clock | None = None
    cron: Cron | None = None
    duration: WindowDuration | None = None

    @model_validator(mode="after")
    def _one_form(self) -> WorkingHours:
        clock_form = (self.days, self.start, self.end)
        cron_form = (self.cron, self.duration)
        if any(v is not None for v in clock_form) and any(v is not None for v in cron_form):
            raise ValueError("use either days/start/end or cron/duration, not both")
        if all(v is None for v in clock_form + cron_form):
            raise ValueError("a window needs days/start/end or cron/duration")
        if any(v is not None for v in clock_form) and any(v is None for v in clock_form):
            raise ValueError("days, start and end go together")
        if any(v is not None for v in cron_form) and any(v is None for v in cron_form):
            raise ValueError("cron and duration go together")
        if self.start is not None and self.start == self.end:
            raise ValueError(f"start and end are both {self.start}: the window is empty")
        return self

    @field_validator("start")
    @classmethod
    def _start_not_24(cls, value: str | None) -> str | None:
        if value is not None and parse_clock(value) is None:
            raise ValueError('"24:00" can only end a window')
        return value

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} for {self.duration}"
        return f"{self.days} {self.start}-{self.end}"


class Schedule(Model):
    """The schedule fields a node group may override from ``defaults``."""

    timezone: Timezone | None = None
    holidays: Holidays | None = None
    working_hours: Annotated[tuple[WorkingHours, ...], Field(max_length=50)] | None = None
    warm_up: WarmUp | None = None
    on_busy: Literal["wait", "drain", "force"] | None = Field(
        default=None, description="GPU pods still running at shutdown: wait (default), drain or force"
    )
    max_delay: Duration | None = Field(default=None, description="with onBusy wait: how long to postpone (default 2h)")
    after_delay: Literal["drain", "force", "stay"] | None = Field(
        default=None, description="with onBusy wait, once maxDelay has passed: drain (default), force, or stay up"
    )
    drain_timeout: Duration | None = Field(default=None, description="how long evictions may take (default 10m)")
    warn_before: WarnBefore | None = Field(
        default=None,
        description="a Warning Event on each running GPU pod this long before the group goes down (0s or unset: none)",
    )


class Defaults(Schedule):
    timezone: Timezone = "UTC"


class Override(Model):
    """A temporary state for one node group; it expires by itself at ``until``."""

    node_group: str
    state: Literal["up", "down"]
    until: AwareDatetime
    # A sentence, repeated in Events, reports and logs: bounded like every value people write.
    reason: str = Field(min_length=1, max_length=ECHO_LIMIT)
