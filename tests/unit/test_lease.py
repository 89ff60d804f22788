"""Holding the Lease while writing: renewal, fencing before writes, stopping on request, release that never hides
the outcome. Faked at the Protocol boundary (a Lease store in memory)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.errors import Unavailable
from jobs.lease import HeldLease, Holder, Stopped


class MemoryLease:
    """A Lease store: one holder, renewals counted; ``fail`` makes every call raise like an API that is down."""

    def __init__(self, holder: str) -> None:
        self.holder: str | None = holder
        self.renewals = 0
        self.fail = False

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> Holder | None:
        return None if self.holder in (None, holder) else Holder(self.holder, now, duration)

    def renew(self, holder: str, now: datetime, duration: timedelta) -> bool:
        if self.fail:
            raise Unavailable("api down")
        self.renewals += 1
        return self.holder == holder

    def release(self, holder: str) -> None:
        if self.fail:
            raise Unavailable("api down")
        if self.holder == holder:
            self.holder = None


class Log:
    def __init__(self) -> None:
        self.events: list[str] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.events.append(event)

    info = warning = error = _add


def held(store: MemoryLease, seconds: float, stop: threading.Event | None = None) -> tuple[HeldLease, Log]:
    log = Log()
    lease = HeldLease(
        store, "me", timedelta(seconds=seconds), log, lambda: datetime.now(UTC), stop or threading.Event()
    )
    return lease, log


def test_renewal_keeps_a_run_that_outlasts_its_lease_writing() -> None:
    store = MemoryLease("me")
    lease, _ = held(store, 0.3)
    time.sleep(0.6)  # twice the Lease's duration
    lease.check("set size")
    assert store.renewals >= 3
    lease.close()
    assert store.holder is None


def test_a_lease_taken_by_another_run_refuses_the_next_write() -> None:
    store = MemoryLease("me")
    lease, log = held(store, 0.3)
    store.holder = "rival"
    time.sleep(0.25)
    with pytest.raises(Stopped, match="set size not started: the Lease was taken by another run"):
        lease.check("set size")
    assert "lease.lost" in log.events
    lease.close()
    assert store.holder == "rival"  # never released from under its new holder


def test_renewals_that_keep_failing_refuse_writes_before_the_lease_expires() -> None:
    store = MemoryLease("me")
    store.fail = True
    lease, log = held(store, 0.3)
    time.sleep(0.26)  # less than the duration, more than 80% of it
    with pytest.raises(Stopped, match="could not be renewed and is about to expire"):
        lease.check("set size")
    assert "lease.renew_failed" in log.events
    lease.close()  # a failing release is logged, never raised
    assert "lease.release_failed" in log.events


def test_a_stop_request_refuses_every_write_from_then_on() -> None:
    stop = threading.Event()
    lease, _ = held(MemoryLease("me"), 60, stop)
    lease.check("cordon")
    stop.set()
    with pytest.raises(Stopped, match="cordon not started: the run was asked to stop"):
        lease.check("cordon")
    lease.close()
