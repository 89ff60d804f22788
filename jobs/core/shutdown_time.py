"""Whether a node group's shutdown fits in one nodegroups run: its drain (``drainTimeout``) and the scale-down
operations after it must end before the run's deadline, or the deadline cuts every such drain short and the group
stays up until a later run gets through it. Pure: the run's time for waits is a parameter."""

from __future__ import annotations

from datetime import timedelta

from jobs.core.policy import Policy
from jobs.core.resolved import view_of
from jobs.core.timespec import format_duration

#: What the scale-down after a drain takes, as an estimate: one or two provider operations (disable the autoscaler,
#: resize) of a minute or two each on GKE and AKS, less on EKS.
SHUTDOWN_OPERATIONS = timedelta(minutes=5)


def shutdown_time_warnings(policy: Policy, waits: timedelta, deadline: str) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, message) for each drainTimeout that, with :data:`SHUTDOWN_OPERATIONS`, needs more than ``waits`` (the
    run's deadline less its reserve; ``deadline`` says which deadline, for the message). A default many groups
    inherit is named once, at ``defaults.drainTimeout``."""
    found: dict[tuple[str | int, ...], str] = {}
    for i, group in enumerate(policy.node_groups):
        settings = view_of(policy).group(group.name).settings
        drains = settings.on_busy == "drain" or (settings.on_busy == "wait" and settings.after_delay == "drain")
        need = settings.drain_timeout + SHUTDOWN_OPERATIONS
        if not drains or need <= waits:
            continue
        if group.drain_timeout is not None:
            path: tuple[str | int, ...] = ("nodeGroups", i, "drainTimeout")
        elif policy.defaults.drain_timeout is not None:
            path = ("defaults", "drainTimeout")
        else:
            path = ("nodeGroups", i)  # the built-in 10m: the deadline is the odd one out
        found.setdefault(
            path,
            f"drainTimeout {format_duration(settings.drain_timeout)} plus about {format_duration(SHUTDOWN_OPERATIONS)}"
            f" for the scale-down does not fit in the nodegroups run's deadline ({deadline}, {format_duration(waits)}"
            " of it for waits): such a drain would be cut short, leaving the group up until a later run gets"
            " through it; lower drainTimeout, or raise GPU_JOBS_DEADLINE with the CronJob's activeDeadlineSeconds"
            " (docs/deadline.md)",
        )
    return list(found.items())
