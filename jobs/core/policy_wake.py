"""A node group's ``wake:`` section: out of hours, a Pending GPU pod of an allowed namespace brings the group up for a
bounded time (``for``), with at most ``maxNodes`` nodes; then the normal shutdown path applies.

It supersedes ``autoscalerWakeUp`` (EKS only, unbounded, blind to namespaces): that flag keeps working as documented,
``validate`` warns that ``wake:`` replaces it, and a group may not have both (two mechanisms would fight over its
size at night).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from pydantic import Field, StrictBool, StrictInt, model_validator

from jobs.core.policy_fields import Model, NamespacePattern, WindowDuration
from jobs.core.timespec import parse_duration

#: A wake lasts at least this long: shorter would bring nodes up only to take them down before the pod starts.
MIN_WAKE = timedelta(minutes=10)


class Wake(Model):
    """``nodeGroups[].wake``: who may wake the group out of hours, for how long, and with how many nodes."""

    on_pending_pods: StrictBool = Field(
        default=True, description="a Pending GPU pod out of hours that would run on the group brings it up"
    )
    namespaces: tuple[NamespacePattern, ...] = Field(
        min_length=1, max_length=100, description="whose pods may wake it (names or globs, as in namespaceQuotas)"
    )
    for_: WindowDuration = Field(
        default="2h", alias="for", description="how long it stays up; then the normal shutdown path applies"
    )
    max_nodes: StrictInt = Field(default=1, ge=1, le=1000, description="never more nodes than this for a wake")

    @model_validator(mode="after")
    def _long_enough(self) -> Wake:
        if self.duration < MIN_WAKE:
            raise ValueError(f"for {self.for_} is shorter than 10m: GPU nodes take minutes to boot")
        return self

    @property
    def duration(self) -> timedelta:
        return parse_duration(self.for_)

    def allows(self, namespace: str) -> bool:
        return bool(_globs(self.namespaces).fullmatch(namespace))


def _globs(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


class _Group(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def autoscaler_wake_up(self) -> bool: ...
    @property
    def wake(self) -> Wake | None: ...


def wake_problems(groups: Sequence[_Group]) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, message) for each group that sets both ``wake`` and ``autoscalerWakeUp``: at night the discovery tags
    would let the Cluster Autoscaler size the group while a wake sizes it too."""
    return [
        (
            ("nodeGroups", i, "autoscalerWakeUp"),
            "autoscalerWakeUp and wake both wake this group at night and would fight over its size: keep wake"
            " (bounded, per namespace) and remove autoscalerWakeUp",
        )
        for i, group in enumerate(groups)
        if group.wake is not None and group.autoscaler_wake_up
    ]


def wake_warnings(groups: Sequence[_Group]) -> list[tuple[tuple[str | int, ...], str]]:
    """``autoscalerWakeUp`` is deprecated: it wakes to max 1, for ever, for any namespace; ``wake:`` replaces it."""
    return [
        (
            ("nodeGroups", i, "autoscalerWakeUp"),
            "autoscalerWakeUp is deprecated (EKS only, unbounded in time, any namespace): use"
            f" wake: {{namespaces: [...], for: 2h, maxNodes: 1}} on {group.name} instead",
        )
        for i, group in enumerate(groups)
        if group.autoscaler_wake_up and group.wake is None
    ]
