"""Retries of what is worth retrying (busy, throttled, unavailable), with exponential backoff, until their own deadline
or the run's (``jobs.deadline``), whichever comes first."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from jobs.deadline import Deadline
from jobs.errors import CloudError

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    deadline_s: float = 600.0
    base_s: float = 1.0
    cap_s: float = 30.0
    # The clock the deadline is measured on: tests pass one that their ``sleep`` advances, so none waits for real.
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    # The run's deadline: a retry that would wait past it is not made, and the call fails "deadline: ...".
    run: Deadline | None = field(default=None, compare=False, repr=False)

    def call(
        self,
        fn: Callable[[], T],
        *,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[CloudError, float], None] | None = None,
        retryable: Callable[[CloudError], bool] = lambda exc: exc.retryable,
        undo: bool = False,
    ) -> T:
        """Call ``fn``; on a retryable error wait (full jitter, doubling) and try again until the deadline. A write
        passes its own ``retryable``: Unavailable may mean "done, answer lost", which is not for resending. ``undo``
        (of the run's own temporary change) may also use the reserve at the end of the run's deadline."""
        started = self.clock()
        attempt = 0
        while True:
            try:
                return fn()
            except CloudError as exc:
                attempt += 1
                delay = random.uniform(0, min(self.cap_s, self.base_s * 2 ** (attempt - 1)))  # noqa: S311 - jitter
                delay = max(delay, exc.retry_after_s or 0.0)  # the API said how long to wait (Retry-After)
                if not retryable(exc) or self.clock() - started + delay > self.deadline_s:
                    raise
                if self.run is not None and delay >= (self.run.left_to_end() if undo else self.run.left()):
                    what = f"{exc.operation} " if exc.operation else ""
                    raise self.run.reached(f"retrying {what}({exc})") from exc
                if on_retry is not None:
                    on_retry(exc, delay)
                sleep(delay)
