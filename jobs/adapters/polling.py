"""Following an asynchronous cloud operation (an EKS update, a GKE operation) until it ends, the same way for
every cloud: poll at the adapters' interval until the operation timeout or the run's deadline; a failed poll is
only a failed read of an operation that is already running, so it is polled again rather than reported (resending
the change would now be refused as busy)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from jobs.deadline import Deadline
from jobs.errors import CloudError, Throttled, Unavailable

T = TypeVar("T")


def poll_until(
    current: T,
    done: Callable[[T], bool],
    poll: Callable[[], T],
    *,
    interval_s: float,
    timeout_s: float,
    timed_out: Callable[[T], CloudError],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    deadline: Deadline | None = None,
    what: str = "an operation",
) -> T:
    """``current`` polled with ``poll`` until ``done``; raises ``timed_out(last seen)`` after ``timeout_s``, or
    :class:`DeadlineReached` (waiting for ``what``) when the run's ``deadline`` comes first."""
    wait = (deadline or Deadline.unbounded(clock)).wait(timeout_s)
    while not done(current):
        if wait.over():
            if wait.cut:
                assert deadline is not None
                raise deadline.reached(f"waiting for {what}")
            raise timed_out(current)
        sleep(wait.pause(interval_s))
        try:
            current = poll()
        except (Throttled, Unavailable):
            continue
    return current
