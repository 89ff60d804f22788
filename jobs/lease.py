"""Holding a run's Lease while it writes: renewed in the background, checked before every write, and given up when
the run is asked to stop (SIGTERM from the kubelet or Ctrl-C from a laptop).

A step may outlast the Lease (an operation timeout, a retry deadline, a drain), and a CLI run has no
``activeDeadlineSeconds``: without renewal a second run could take the Lease and act on the same groups. Renewal
alone is not enough either (a renewal that fails silently), so every write first asks :meth:`HeldLease.check`,
which refuses once the Lease is lost, about to expire without a renewal, or the run was told to stop.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobs.errors import CloudError, Stopped
from jobs.stopping import STOP

#: A holder renews its Lease this many times per duration.
RENEWALS = 3
#: A holder this many renewal intervals past its last renewal is dead, and its Lease is taken over: a killed run
#: blocks the next one for two intervals, not for the whole duration.
TAKEOVER_INTERVALS = 2
# A write must have this much of a renewal interval left before the takeover point, so that it ends before anyone
# else could take the Lease (with room for clock skew between pods).
MARGIN = 0.2


def renewal_interval(duration: timedelta) -> timedelta:
    return duration / RENEWALS


def taken_over(renewed: datetime | None, duration: timedelta, now: datetime) -> bool:
    """Whether a Lease last renewed at ``renewed`` (for ``duration``) may be taken over at ``now``: its holder
    would have renewed it by now, twice, were it alive."""
    return renewed is None or now >= renewed + TAKEOVER_INTERVALS * renewal_interval(duration)


@dataclass(frozen=True)
class Holder:
    """Another run holding the Lease this run could not take."""

    name: str
    renewed: datetime | None  # its last renewal
    duration: timedelta

    def overdue(self, now: datetime) -> timedelta | None:
        """How late its renewal is (a live holder renews every interval), or None while it keeps renewing."""
        if self.renewed is None:
            return None
        late = now - self.renewed - renewal_interval(self.duration)
        return late if late > timedelta(0) else None

    def takeover_in(self, now: datetime) -> timedelta:
        """How long until this run may take the Lease over."""
        if self.renewed is None:
            return timedelta(0)
        return self.renewed + TAKEOVER_INTERVALS * renewal_interval(self.duration) - now

    def __str__(self) -> str:
        return self.name


class RunLock(Protocol):
    """Keeps two runs (the CronJob and a manual ``kubectl create job``) from interleaving, in one cluster."""

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> Holder | None:
        """Take the lock, also from a holder past :func:`taken_over`; return None on success or the live holder."""
        ...

    def renew(self, holder: str, now: datetime, duration: timedelta) -> bool:
        """Extend the lock if ``holder`` still holds it; False when someone else has it now."""
        ...

    def release(self, holder: str) -> None: ...


def run_holder() -> str:
    """Who holds a Lease: the pod (HOSTNAME in a Job) or the machine, and the process."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{os.getpid()}"


class HeldLease:
    """A Lease just acquired by ``holder``: renewed every :func:`renewal_interval` until :meth:`close`. Writes are
    allowed until shortly before the point where another run could take it over."""

    def __init__(
        self,
        lock: RunLock,
        holder: str,
        duration: timedelta,
        log: Any,
        clock: Callable[[], datetime],
        stop: threading.Event = STOP,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lock, self.holder, self.duration, self.log, self.clock, self.stop = (
            lock,
            holder,
            duration,
            log,
            clock,
            stop,
        )
        self.monotonic = monotonic  # injected by tests, so that no test waits real seconds for a deadline
        self._interval = renewal_interval(duration).total_seconds()
        self._valid_until = monotonic() + TAKEOVER_INTERVALS * self._interval
        self._lost: str | None = None
        self._done = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def check(self, what: str) -> None:
        """Raise :class:`Stopped` unless this run may still start ``what`` (a write)."""
        why = None
        if self.stop.is_set():
            why = "the run was asked to stop"
        elif self._lost is not None:
            why = self._lost
        elif self._valid_until - self.monotonic() < MARGIN * self._interval:
            why = "the Lease could not be renewed and is about to expire"
        if why is not None:
            raise Stopped(f"{what} not started: {why}", why=why)

    def _renew_loop(self) -> None:
        while not self._done.wait(self._interval):
            try:
                if self.lock.renew(self.holder, self.clock(), self.duration):
                    self._valid_until = self.monotonic() + TAKEOVER_INTERVALS * self._interval
                else:
                    self._lost = "the Lease was taken by another run"
                    self.log.error("lease.lost", holder=self.holder)
                    return
            except CloudError as exc:  # try again at the next interval; check() refuses once it runs out
                self.log.warning("lease.renew_failed", error=str(exc))

    def close(self) -> None:
        """Stop renewing and give the Lease back; a failure here never replaces the run's own outcome."""
        self._done.set()
        self._renewer.join()
        if self._lost is not None:
            return
        try:
            self.lock.release(self.holder)
        except CloudError as exc:
            self.log.error(
                "lease.release_failed",
                error=str(exc),
                message=f"the Lease expires by itself within {self.duration}",
            )
