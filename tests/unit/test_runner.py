"""The shared runner with a job faked at its Protocol boundary: clusters planned before any change, one limit across
them, a crash kept to its cluster, the exit-code rule."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobs.core.limits import ChangeLimit
from jobs.outcome import ExitCode
from jobs.runner import Early, FleetRun, Tally, outcome


@dataclass
class Journal:
    """What the fake clusters were asked, in order, and how many ran at once."""

    calls: list[str] = field(default_factory=list)
    running: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, what: str) -> None:
        with self.lock:
            self.calls.append(what)
            self.running += 1
            self.most = max(self.most, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


@dataclass
class FakeCluster:
    name: str
    journal: Journal
    changes_planned: int = 1
    crash: str | None = None  # "plan" or "apply"
    early: str | None = None  # planning ends with this report

    def plan(self) -> int | Early[str]:
        self.journal.enter(f"plan {self.name}")
        try:
            if self.crash == "plan":
                raise RuntimeError("bug")
            return Early(self.early) if self.early else self.changes_planned
        finally:
            self.journal.leave()

    def changes(self, plan: int) -> tuple[int, int]:
        return plan, 4  # of 4 items each

    def apply(self, plan: int) -> str:
        self.journal.enter(f"apply {self.name}")
        try:
            if self.crash == "apply":
                raise RuntimeError("bug")
            return f"{self.name}: applied {plan}"
        finally:
            self.journal.leave()

    def failed(self, message: str) -> str:
        return f"{self.name}: failed ({message})"

    def refused(self, reason: str, plan: int | None) -> str:
        return f"{self.name}: refused ({reason}; {plan} planned)"


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def error(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))


def fleet(*clusters: FakeCluster, limit: str = "10", workers: int = 8) -> FleetRun[int, str]:
    return FleetRun(
        {c.name: c for c in clusters}, limit=ChangeLimit.parse(limit), workers=workers, log=Log(), noun="groups"
    )


def test_every_cluster_is_planned_before_any_is_changed() -> None:
    journal = Journal()
    reports = fleet(FakeCluster("a", journal), FakeCluster("b", journal, changes_planned=2)).run()
    assert reports == ["a: applied 1", "b: applied 2"]
    assert {c.split()[0] for c in journal.calls[:2]} == {"plan"}
    assert {c.split()[0] for c in journal.calls[2:]} == {"apply"}


def test_a_total_over_the_limit_changes_nothing_anywhere() -> None:
    journal = Journal()
    reports = fleet(FakeCluster("a", journal, 2), FakeCluster("b", journal, 2), limit="3").run()
    reason = "the plan changes 4 groups across 2 clusters, more than the limit of 3 per run"
    assert all(r.startswith(f"{name}: refused ({reason}") for r, name in zip(reports, "ab", strict=True))
    assert not any(c.startswith("apply") for c in journal.calls)


def test_a_percentage_limit_counts_the_items_of_every_cluster() -> None:
    journal = Journal()
    # 4 changes of 8 items considered: 50% allows them, 40% (4 of 8, rounded up) too, 37% (3 of 8) does not.
    assert fleet(FakeCluster("a", journal, 2), FakeCluster("b", journal, 2), limit="40%").run()[0] == "a: applied 2"
    reports = fleet(FakeCluster("a", journal, 2), FakeCluster("b", journal, 2), limit="37%").run()
    assert reports[0].startswith("a: refused (the plan changes 4 groups across 2 clusters, more than the limit of 37%")
    assert "37% (3 of 8)" in reports[0]


@pytest.mark.parametrize("where", ["plan", "apply"])
def test_a_crash_in_one_cluster_fails_that_cluster_only(where: str) -> None:
    journal = Journal()
    run = fleet(FakeCluster("a", journal, crash=where), FakeCluster("b", journal))
    reports = run.run()
    assert reports == ["a: failed (unexpected error: RuntimeError('bug'))", "b: applied 1"]
    assert run.log.events[0][0] == "cluster.crashed"


def test_a_cluster_whose_planning_ended_keeps_its_report() -> None:
    journal = Journal()
    reports = fleet(FakeCluster("a", journal, early="a: cannot be read"), FakeCluster("b", journal)).run()
    assert reports == ["a: cannot be read", "b: applied 1"]
    assert "apply a" not in journal.calls


def test_one_worker_means_one_cluster_at_a_time() -> None:
    journal = Journal()
    fleet(*(FakeCluster(str(i), journal) for i in range(5)), workers=1).run()
    assert journal.most == 1


@pytest.mark.parametrize(
    ("tallies", "code"),
    [
        ([Tally(planned=2, applied=2), Tally(skipped=1)], ExitCode.OK),
        ([Tally(planned=2, applied=1, failed=1), Tally()], ExitCode.ITEM_FAILED),
        ([Tally(failed=1), Tally(refused="too many")], ExitCode.REFUSED),
    ],
)
def test_one_exit_code_rule(tallies: list[Tally], code: ExitCode) -> None:
    result = outcome(tallies, dry_run=True)
    assert result.exit_code == code
    assert (result.planned, result.applied, result.failed, result.skipped, result.dry_run) == (
        sum(t.planned for t in tallies),
        sum(t.applied for t in tallies),
        sum(t.failed for t in tallies),
        sum(t.skipped for t in tallies),
        True,
    )
