"""Backoff with an injected clock: its deadline is measured on the clock its sleeps advance, so no test waits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs.errors import Busy, CloudError, Denied, Unavailable
from jobs.retry import Backoff


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing(times: int, error: CloudError) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "ok"

    return calls, call


def test_retryable_errors_are_retried_until_they_clear() -> None:
    clock = FakeClock()
    calls, call = failing(3, Busy("in use"))
    assert Backoff(deadline_s=600, clock=clock).call(call, sleep=clock.sleep) == "ok"
    assert len(calls) == 4
    assert all(0 <= s <= 30 for s in clock.slept)


def test_the_deadline_ends_the_retries_on_the_clock_given() -> None:
    clock = FakeClock()
    calls, call = failing(10_000, Unavailable("503"))
    with pytest.raises(Unavailable):
        Backoff(deadline_s=120, base_s=1, cap_s=30, clock=clock).call(call, sleep=clock.sleep)
    assert clock.now <= 120
    assert len(calls) > 5  # it kept trying, on a clock that never waited


def test_what_is_not_retryable_is_raised_at_once() -> None:
    clock = FakeClock()
    calls, call = failing(1, Denied("forbidden"))
    with pytest.raises(Denied):
        Backoff(clock=clock).call(call, sleep=clock.sleep)
    assert (len(calls), clock.slept) == (1, [])


def test_a_write_that_may_have_happened_is_not_resent() -> None:
    clock = FakeClock()
    calls, call = failing(1, Unavailable("timeout after the request was sent"))
    with pytest.raises(Unavailable):
        Backoff(clock=clock).call(
            call,
            sleep=clock.sleep,
            retryable=lambda exc: exc.retryable and not isinstance(exc, Unavailable),
        )
    assert len(calls) == 1


def test_a_retry_after_from_the_api_is_waited_at_least() -> None:
    clock = FakeClock()
    _, call = failing(2, Busy("throttled", retry_after_s=7.0))
    assert Backoff(base_s=0.01, clock=clock).call(call, sleep=clock.sleep) == "ok"
    assert clock.slept == [7.0, 7.0]
