"""Following an asynchronous operation (jobs/adapters/polling.py) with a fake clock: no test sleeps real time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from jobs.adapters.polling import poll_until
from jobs.errors import CloudError, Denied, Throttled, Unavailable


class Clock:
    """Time that moves only when the poller sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def answers(*items: str | CloudError) -> Callable[[], str]:
    """A poll that gives these answers (or raises these errors) in turn."""
    queue: Iterator[str | CloudError] = iter(items)

    def poll() -> str:
        item = next(queue)
        if isinstance(item, CloudError):
            raise item
        return item

    return poll


def follow(first: str, poll: Callable[[], str], clock: Clock, timeout_s: float = 10.0) -> str:
    return poll_until(
        first,
        lambda status: status in ("DONE", "FAILED"),
        poll,
        interval_s=2.0,
        timeout_s=timeout_s,
        timed_out=lambda last: Unavailable(f"still {last}", code="OperationTimeout"),
        sleep=clock.sleep,
        clock=clock,
    )


def test_polls_at_the_interval_until_the_operation_ends() -> None:
    clock = Clock()

    assert follow("RUNNING", answers("RUNNING", "RUNNING", "FAILED"), clock) == "FAILED"
    assert clock.sleeps == [2.0, 2.0, 2.0]


def test_an_operation_that_already_ended_is_not_polled() -> None:
    clock = Clock()

    assert follow("DONE", answers(), clock) == "DONE"
    assert clock.sleeps == []


def test_a_failed_poll_is_polled_again_not_reported() -> None:
    clock = Clock()

    assert follow("RUNNING", answers(Throttled("slow down"), Unavailable("503"), "DONE"), clock) == "DONE"
    assert len(clock.sleeps) == 3


def test_a_refused_poll_is_reported() -> None:
    with pytest.raises(Denied):
        follow("RUNNING", answers(Denied("no operations.get")), Clock())


def test_the_deadline_reports_the_last_status_seen() -> None:
    clock = Clock()

    with pytest.raises(Unavailable, match="still PENDING") as raised:
        follow("RUNNING", answers("RUNNING", Throttled("slow down"), "PENDING", "PENDING", "DONE"), clock, 6.0)
    assert raised.value.code == "OperationTimeout"
    assert clock.now - 100.0 == 6.0  # three polls of 2 s, then the deadline: no real time spent
