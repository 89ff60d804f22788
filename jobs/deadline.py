"""The run's one deadline: every wait of a run (cloud operations, drains, settling, retries) ends when its own limit
or the run's deadline comes, whichever is first, so the run ends, undoes what is temporary and reports before its
CronJob's ``activeDeadlineSeconds`` kills it.

Made once per run at its start (``JobSpec.reconcile``) and passed down in the settings objects, never global. On the
monotonic clock, injectable so that tests advance it instead of waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jobs.errors import DeadlineReached

#: The nodegroups CronJob's ``GPU_JOBS_DEADLINE`` (its activeDeadlineSeconds, 1500, less the margin): what
#: ``validate`` checks each drainTimeout against unless told another.
NODEGROUPS_DEADLINE_S = 1440.0
#: The built-in run deadline: below the smallest ``activeDeadlineSeconds`` of the shipped CronJobs (600 s) by
#: :data:`CRONJOB_MARGIN_S`. Each CronJob sets ``GPU_JOBS_DEADLINE`` for its own.
DEFAULT_DEADLINE_S = 540.0
#: What a CronJob's ``activeDeadlineSeconds`` keeps beyond ``GPU_JOBS_DEADLINE``: the interpreter's start-up and SDK
#: imports before the deadline starts, and the pod's own ending.
CRONJOB_MARGIN_S = 60.0
#: The end of the deadline kept for undoing temporary changes (uncordon) and reporting: waits end this share of the
#: deadline early, at most :data:`MAX_RESERVE_S` (longer than one request's 30 s timeout).
RESERVE_SHARE = 0.1
MAX_RESERVE_S = 60.0
#: The words of an item the deadline left unstarted, the same in every job.
NOT_STARTED = "deadline: not started"


def reserve_for(seconds: float) -> float:
    """The end of a deadline of ``seconds`` kept for undoing and reporting: no wait runs into it."""
    return min(MAX_RESERVE_S, seconds * RESERVE_SHARE)


@dataclass(frozen=True)
class Deadline:
    """``seconds`` from ``started`` (on ``clock``)."""

    seconds: float
    started: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def start(cls, seconds: float = DEFAULT_DEADLINE_S, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(seconds, clock(), clock)

    @classmethod
    def unbounded(cls, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """No run deadline: each wait ends at its own limit only."""
        return cls(math.inf, clock(), clock)

    @property
    def reserve_s(self) -> float:
        return reserve_for(self.seconds)

    @property
    def _waits_end(self) -> float:
        return self.started + self.seconds - self.reserve_s

    def left(self) -> float:
        """Seconds a wait (or a write) may still start in: until the reserve at the end begins."""
        return max(0.0, self._waits_end - self.clock())

    def left_to_end(self) -> float:
        """Seconds until the deadline itself: what undoing a temporary change may still use."""
        return max(0.0, self.started + self.seconds - self.clock())

    def expired(self) -> bool:
        return self.left() <= 0.0

    def request_timeout(self, timeout_s: float) -> float:
        """A client's timeout for one request, no longer than the reserve (but at least a second): a request started
        before the reserve begins ends before the deadline, whichever client sends it."""
        return min(timeout_s, max(1.0, self.reserve_s))

    def wait(self, timeout_s: float) -> Wait:
        """A wait of ``timeout_s`` starting now, cut short by the deadline when that comes first."""
        own = self.clock() + timeout_s
        return Wait(self, min(own, self._waits_end), self._waits_end < own)

    def reached(self, what: str) -> DeadlineReached:
        """The failure of what the deadline ended (``what``: "waiting for the GKE operation ...")."""
        return DeadlineReached(f"deadline: the run's {self.seconds:g} s ran out {what}; the next run resumes")

    def check(self, what: str) -> None:
        """Raise :class:`DeadlineReached` once a write (``what``) may no longer start."""
        if self.expired():
            raise self.reached(f"before {what}")


@dataclass(frozen=True)
class Wait:
    """One wait: it ``ends`` (on the deadline's clock) at its own limit, or at the run's deadline when ``cut``."""

    deadline: Deadline
    ends: float
    cut: bool

    def over(self, interval_s: float = 0.0) -> bool:
        """Whether the wait has ended; with ``interval_s``, a wait the deadline cuts also ends when less than one
        interval is left: the poll after it would come when no write may start any more."""
        left = self.ends - self.deadline.clock()
        return left <= 0.0 or (self.cut and left < interval_s)

    def pause(self, interval_s: float) -> float:
        """How long to sleep before the next poll: the interval, or what is left of the wait if less."""
        return max(0.0, min(interval_s, self.ends - self.deadline.clock()))
