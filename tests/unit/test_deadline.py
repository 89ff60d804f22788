"""The run's one deadline (jobs/deadline.py) on a fake clock, so no test waits: how a wait is cut by it, and how the
waits that take it (retries, operation polling, the runner's items and writes) end with a reason starting
``deadline:``, leaving its reserve for undoing and reporting."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from jobs.adapters.polling import poll_until
from jobs.core.limits import ChangeLimit
from jobs.deadline import NOT_STARTED, Deadline
from jobs.errors import Busy, DeadlineReached, Unavailable
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings
from jobs.scopes import cluster
from jobs.settings import SettingsError, deadline_setting
from tests.unit.test_runner import NOW, FakeScope, Journal, Log, Plan


class Clock:
    """Monotonic time that moves only when something sleeps (or a test says so)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def test_a_wait_ends_at_its_own_limit_or_the_deadline_less_its_reserve() -> None:
    clock = Clock()
    deadline = Deadline.start(100, clock)  # 10 s reserve: waits end at 90 s
    assert (deadline.reserve_s, deadline.left(), deadline.left_to_end()) == (10, 90, 100)
    short = deadline.wait(30)
    assert (short.ends - clock.now, short.cut) == (30, False)
    long = deadline.wait(600)
    assert (long.ends - clock.now, long.cut) == (90, True)
    clock.sleep(85)
    assert not long.over()
    assert long.over(interval_s=10)  # cut, and the next poll would land past the end: over now
    assert not deadline.wait(600).over(interval_s=4)
    assert long.pause(10) == 5  # never sleeps past the end
    clock.sleep(5)
    assert long.over()
    assert deadline.expired()
    assert deadline.left_to_end() == 10  # the reserve: for undoing and reporting


def test_a_large_deadline_keeps_at_most_a_minute_in_reserve() -> None:
    assert Deadline.start(1440, Clock()).reserve_s == 60


def test_the_setting_is_a_number_of_seconds_of_at_least_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_JOBS_DEADLINE", "900")
    assert deadline_setting(None) == 900
    assert deadline_setting("30") == 30  # the flag wins over the environment
    for bad in ("0", "-5", "10m", "inf"):
        monkeypatch.setenv("GPU_JOBS_DEADLINE", bad)
        with pytest.raises(SettingsError, match="GPU_JOBS_DEADLINE"):
            deadline_setting(None)


def test_retries_are_cut_by_the_run_deadline_with_its_reason() -> None:
    clock = Clock()
    run = Deadline.start(60, clock)  # waits end at 54 s
    calls: list[float] = []

    def busy() -> str:
        calls.append(clock.now)
        raise Busy("ResourceInUseException", operation="UpdateNodegroupConfig")

    with pytest.raises(DeadlineReached) as cut:
        Backoff(deadline_s=180, base_s=1, cap_s=30, clock=clock, run=run).call(busy, sleep=clock.sleep)
    assert str(cut.value).startswith(
        "deadline: the run's 60 s ran out retrying UpdateNodegroupConfig (ResourceInUseException)"
    )
    assert len(calls) > 3  # it retried while there was time
    assert clock.now - 1000 < 54  # and never slept into the reserve
    assert isinstance(cut.value.__cause__, Busy)


def test_undoing_a_temporary_change_may_retry_into_the_reserve() -> None:
    clock = Clock()
    run = Deadline.start(60, clock)
    clock.sleep(55)  # past the waits' end: only the reserve is left
    answers = iter([Unavailable("503"), "uncordoned"])

    def uncordon() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def unavailable() -> str:
        raise Unavailable("503")

    backoff = Backoff(deadline_s=180, base_s=1, cap_s=1, clock=clock, run=run)
    assert backoff.call(uncordon, sleep=clock.sleep, undo=True) == "uncordoned"
    with pytest.raises(DeadlineReached):  # anything else is not retried into the reserve
        backoff.call(unavailable, sleep=clock.sleep)


def _follow(clock: Clock, deadline: Deadline | None, timeout_s: float) -> str:
    return poll_until(
        "RUNNING",
        lambda status: status == "DONE",
        lambda: "RUNNING",  # an operation that takes longer than anyone waits
        interval_s=5,
        timeout_s=timeout_s,
        timed_out=lambda last: Unavailable(f"still {last}", code="OperationTimeout"),
        sleep=clock.sleep,
        clock=clock,
        deadline=deadline,
        what="the GKE operation op-1",
    )


def test_operation_polling_ends_at_the_deadline_not_at_the_operation_timeout() -> None:
    clock = Clock()
    with pytest.raises(DeadlineReached) as cut:
        _follow(clock, Deadline.start(5, clock), timeout_s=1200)
    assert str(cut.value) == "deadline: the run's 5 s ran out waiting for the GKE operation op-1; the next run resumes"
    assert clock.now - 1000 == pytest.approx(4.5)  # the reserve (10%) is left for the rest of the run
    # A timeout shorter than what is left is the operation's own, as before.
    with pytest.raises(Unavailable, match="still RUNNING"):
        _follow(clock, Deadline.start(600, clock), timeout_s=20)


@dataclass
class SlowScope(FakeScope):
    """Each item takes ``seconds`` on the run's clock."""

    clock: Clock = field(default_factory=Clock)
    seconds: float = 0.0

    def apply(self, item: str, fence: Callable[[str], None]) -> str:
        done = super().apply(item, fence)
        self.clock.sleep(self.seconds)
        return done


def _run(scope: SlowScope, deadline: Deadline) -> tuple[str, ...]:
    settings = RunSettings(limit=ChangeLimit.parse("10"), workers=1, holder="me", clock=lambda: NOW, deadline=deadline)
    runner: Reconcile[tuple[str, ...], Plan, str, str] = Reconcile({cluster("a"): scope}, settings, NOW, Log())
    (report,) = runner.run()
    return report.results


def test_items_the_deadline_leaves_unstarted_fail_in_the_same_words() -> None:
    clock = Clock()
    scope = SlowScope("a", Journal(), [("x", "y", "z")], clock=clock, seconds=6)
    # 10 s, waits end at 9 s: x starts at 0 s, y at 6 s, z would start at 12 s.
    assert _run(scope, Deadline.start(10, clock)) == ("x: done", "y: done", f"z: failed ({NOT_STARTED})")


def test_a_scope_reached_after_the_deadline_takes_no_lease_and_writes_nothing() -> None:
    clock = Clock()
    deadline = Deadline.start(10, clock)
    clock.sleep(9.5)
    journal = Journal()
    scope = SlowScope("a", journal, [("x", "y")], clock=clock)
    assert _run(scope, deadline) == (f"x: failed ({NOT_STARTED})", f"y: failed ({NOT_STARTED})")
    assert scope.lease.acquired == 0
    assert not any(c.startswith("apply") for c in journal.calls)


@dataclass
class SlowReads(FakeScope):
    """Its reads are retried until the run's deadline: the first look (``first``), or the look again under the
    Lease."""

    deadline: Deadline = field(default_factory=lambda: Deadline.start(10, Clock()))
    cut_look: int = 0

    def observe(self, first: tuple[str, ...] | None) -> tuple[str, ...]:
        if self.looks == self.cut_look:
            raise self.deadline.reached("retrying list nodes (503)")
        return super().observe(first)


def test_reads_cut_by_the_deadline_fail_the_scope_or_leave_its_items_unstarted() -> None:
    clock = Clock()
    deadline = Deadline.start(10, clock)
    before = SlowReads("a", Journal(), [("x",)], deadline=deadline, cut_look=0)
    settings = RunSettings(limit=ChangeLimit.parse("10"), holder="me", clock=lambda: NOW, deadline=deadline)
    runner: Reconcile[tuple[str, ...], Plan, str, str] = Reconcile({cluster("a"): before}, settings, NOW, Log())
    (report,) = runner.run()
    assert (report.state, report.plan) == ("failed", None)
    assert report.reason == "deadline: the run's 10 s ran out retrying list nodes (503); the next run resumes"
    # Cut while looking again under the Lease: the plan's items are not started, and the Lease is given back.
    again = SlowReads("a", Journal(), [("x", "y")], deadline=deadline, cut_look=1)
    runner = Reconcile({cluster("a"): again}, settings, NOW, Log())
    (report,) = runner.run()
    assert (report.state, report.results) == ("applied", (f"x: failed ({NOT_STARTED})", f"y: failed ({NOT_STARTED})"))
    assert again.lease.holder is None
