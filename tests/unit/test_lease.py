"""Holding the Lease while writing: renewal, fencing before writes, stopping on request, release that never hides
the outcome. Faked at the Protocol boundary (a Lease store in memory)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.lease import HeldLease, Stopped
from tests.fakes import FakeMonotonic, MemoryLease, wait_until
from tests.fakes import RecordingLog as Log


def held(
    store: MemoryLease, seconds: float, stop: threading.Event | None = None, monotonic: Any = time.monotonic
) -> tuple[HeldLease, Log]:
    log = Log()
    lease = HeldLease(
        store, "me", timedelta(seconds=seconds), log, lambda: datetime.now(UTC), stop or threading.Event(), monotonic
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
    wait_until(lambda: "lease.lost" in log.names, what="the renewal that finds the rival")
    with pytest.raises(Stopped, match="set size not started: the Lease was taken by another run"):
        lease.check("set size")
    assert "lease.lost" in log.names
    lease.close()
    assert store.holder == "rival"  # never released from under its new holder


def test_renewals_that_keep_failing_refuse_writes_before_the_lease_expires() -> None:
    store = MemoryLease("me")
    store.fail = True
    clock = FakeMonotonic()
    lease, log = held(store, 0.3, monotonic=clock)
    wait_until(lambda: "lease.renew_failed" in log.names, what="a failed renewal")
    clock.advance(0.26)  # less than the duration, more than 80% of it
    with pytest.raises(Stopped, match="could not be renewed and is about to expire"):
        lease.check("set size")
    assert "lease.renew_failed" in log.names
    lease.close()  # a failing release is logged, never raised
    assert "lease.release_failed" in log.names


def test_a_stop_request_refuses_every_write_from_then_on() -> None:
    stop = threading.Event()
    lease, _ = held(MemoryLease("me"), 60, stop)
    lease.check("cordon")
    stop.set()
    with pytest.raises(Stopped, match="cordon not started: the run was asked to stop"):
        lease.check("cordon")
    lease.close()
