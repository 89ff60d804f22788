"""The fakes every test shares, at the Protocol boundary: a logger with structlog's interface that records what the
code said, and a Lease store (``jobs.lease.RunLock``) in memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from jobs.errors import Unavailable
from jobs.lease import Holder


class RecordingLog:
    """structlog's interface (``info``/``warning``/``error``/``debug``/``bind``), recording ``(event, fields)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    info = warning = error = debug = exception = _add

    def bind(self, **kw: Any) -> RecordingLog:
        return self

    @property
    def names(self) -> list[str]:
        """The events logged, in order, without their fields."""
        return [event for event, _ in self.events]


class MemoryLease:
    """One holder at a time. ``holder`` set to someone else makes a run find the Lease taken (last renewed at
    ``renewed``, or at the moment it asks); ``fail`` makes every call raise like an API that is down; acquisitions
    and renewals are counted."""

    def __init__(self, holder: str | None = None, renewed: datetime | None = None) -> None:
        self.holder = holder
        self.renewed = renewed  # the other holder's last renewal
        self.acquired = 0
        self.renewals = 0
        self.fail = False

    def _maybe_fail(self) -> None:
        if self.fail:
            raise Unavailable("api down")

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> Holder | None:
        self._maybe_fail()
        if self.holder is not None and self.holder != holder:
            return Holder(self.holder, self.renewed or now, duration)
        self.holder, self.acquired = holder, self.acquired + 1
        return None

    def renew(self, holder: str, now: datetime, duration: timedelta) -> bool:
        self._maybe_fail()
        self.renewals += 1
        return self.holder == holder

    def release(self, holder: str) -> None:
        self._maybe_fail()
        if self.holder == holder:
            self.holder = None


def wait_until(condition: Callable[[], object], timeout_s: float = 10.0, what: str = "the condition") -> None:
    """Until ``condition()`` holds, checked every few milliseconds; a test waits on what it needs, never on a guess
    of how long that takes (bounded: a condition that never comes fails the test)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout_s} s")
        time.sleep(0.005)


class FakeMonotonic:
    """A ``time.monotonic`` that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
