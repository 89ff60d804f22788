"""The ``history:`` and ``pricing:`` sections of the policy: how long the jobs' history of what they did is kept
(one ConfigMap per cluster per ISO week, ``jobs.history``), and what a GPU-hour costs for ``gpu-jobs report``.

A group's price is the first of: its own ``gpuHour`` in ``pricing.nodeGroups``; the policy's price of its
``instanceType`` (``pricing.instanceTypes``, per instance-hour); the project's dated list-price table
(``jobs.core.list_prices``) for that instance type. A group with none of them has GPU-hours and no money.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from jobs.core.policy_fields import Model, Name

_RETENTION = re.compile(r"([1-9][0-9]{0,2})([dw])")
#: A year and a bit: a report of last year's same week still works; more is not "small and bounded".
MAX_RETENTION = timedelta(weeks=60)


def parse_retention(text: str) -> timedelta:
    """``12w`` or ``90d`` -> timedelta, at least a week (a report reads whole ISO weeks), at most 60 weeks."""
    match = _RETENTION.fullmatch(text)
    if match is None:
        raise ValueError(f'"{text}" is not a retention (use e.g. 12w or 90d)')
    value = timedelta(weeks=int(match[1])) if match[2] == "w" else timedelta(days=int(match[1]))
    if value < timedelta(weeks=1):
        raise ValueError(f'"{text}" is shorter than a week: a report reads whole ISO weeks')
    if value > MAX_RETENTION:
        raise ValueError(f'"{text}" is longer than 60w')
    return value


def _check_retention(value: str) -> str:
    parse_retention(value)
    return value


Retention = Annotated[str, AfterValidator(_check_retention)]
Price = Annotated[float, Field(ge=0, le=10_000)]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code")]
InstanceType = Annotated[str, Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9._-]+$")]


class History(Model):
    retention: Retention = Field(default="12w", description="how long weekly history ConfigMaps are kept (4w, 90d)")

    @property
    def retention_td(self) -> timedelta:
        return parse_retention(self.retention)


class GroupPrice(Model):
    """One group's price: per GPU-hour, or its instance type (priced by ``instanceTypes`` or the shipped table)."""

    gpu_hour: Price | None = Field(default=None, description="price per GPU-hour")
    instance_type: InstanceType | None = Field(default=None, description="e.g. p4d.24xlarge, a2-highgpu-8g")

    @model_validator(mode="after")
    def _one_of(self) -> GroupPrice:
        if (self.gpu_hour is None) == (self.instance_type is None):
            raise ValueError("give exactly one of gpuHour and instanceType")
        return self


class Pricing(Model):
    currency: Currency = "USD"
    node_groups: dict[Name, GroupPrice] = Field(default_factory=dict, max_length=500)
    instance_types: dict[InstanceType, Price] = Field(
        default_factory=dict, max_length=500, description="price per instance-hour (your negotiated rate)"
    )
