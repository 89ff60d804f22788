"""The one reconcile loop, with a job faked at its boundary (``ScopeWork``) and a Lease store in memory: every scope
planned before any write, one limit across scopes, dry run and no-op runs without the Lease, a held Lease, the
look-again under the Lease, per-item and per-scope isolation, stop requests, and the exit-code rule. The loop is
tested here once; the jobs' own tests test what they observe, plan and apply."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.core.limits import ChangeLimit
from jobs.errors import Unavailable
from jobs.lease import RunLock
from jobs.outcome import ExitCode
from jobs.runner import (
    STOPPED_BEFORE,
    Reconcile,
    RunSettings,
    ScopeReport,
    ScopeWork,
    Tally,
    Witness,
    Witnessed,
    outcome,
)
from jobs.scopes import Scope, account, cluster
from jobs.stopping import STOP
from tests.fakes import MemoryLease
from tests.fakes import RecordingLog as Log

NOW = datetime(2026, 12, 1, 20, 5, tzinfo=UTC)  # a Tuesday evening: any fixed instant will do


@dataclass(frozen=True)
class Plan:
    items: tuple[str, ...]
    considered: int = 4

    @property
    def changes(self) -> int:
        return len(self.items)


@dataclass
class Journal:
    calls: list[str] = field(default_factory=list)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: str) -> None:
        with self.guard:
            self.calls.append(call)


@dataclass
class FakeScope(ScopeWork[tuple[str, ...], Plan, str, str]):
    """A scope whose world is a tuple of item names still to do; ``world`` may change between the two looks."""

    name: str
    journal: Journal
    world: list[tuple[str, ...]]  # what each observe returns, in turn (the last one repeats)
    lease: MemoryLease = field(default_factory=MemoryLease)
    crash: str | None = None  # "observe", or an item's name
    unreadable: bool = False
    stop_at: str | None = None  # a stop is asked while this item is applied (a SIGTERM), or while planning: "plan"
    looks: int = 0

    @property
    def lock(self) -> RunLock:
        return self.lease

    @property
    def witness(self) -> Witness | None:
        return None  # no ports: the fake answers the runner itself

    def observe(self, first: tuple[str, ...] | None) -> tuple[str, ...]:
        self.journal.add(f"observe {self.name}")
        if self.unreadable:
            raise Unavailable("connection refused")
        if self.crash == "observe":
            raise RuntimeError("bug")
        seen = self.world[min(self.looks, len(self.world) - 1)]
        self.looks += 1
        return seen

    def plan(self, observed: tuple[str, ...]) -> Plan:
        self.journal.add(f"plan {self.name}")
        if self.stop_at == "plan":
            STOP.set()
        return Plan(observed)

    def apply(self, item: str, fence: Callable[[str], None]) -> str:
        if item == self.stop_at:
            STOP.set()
        fence(f"write {item}")
        if item == self.crash:
            raise RuntimeError("bug")
        self.journal.add(f"apply {self.name}/{item}")
        return f"{item}: done"

    def failed(self, item: str, message: str, error: BaseException | None = None) -> str:
        return f"{item}: failed ({message})"


Report = ScopeReport[Plan, str]


def reconcile(*scopes: tuple[Scope, FakeScope], limit: str = "10", dry_run: bool = False) -> list[Report]:
    settings = RunSettings(dry_run=dry_run, limit=ChangeLimit.parse(limit), holder="me", clock=lambda: NOW)
    runner: Reconcile[tuple[str, ...], Plan, str, str] = Reconcile(dict(scopes), settings, NOW, Log(), "groups")
    return runner.run()


@pytest.fixture(autouse=True)
def _no_stop_left() -> Any:
    yield
    STOP.clear()


def two(journal: Journal, a: Sequence[str] = ("x",), b: Sequence[str] = ("y", "z")) -> list[tuple[Scope, FakeScope]]:
    return [
        (cluster("a"), FakeScope("a", journal, [tuple(a)])),
        (cluster("b"), FakeScope("b", journal, [tuple(b)])),
    ]


def test_every_scope_is_planned_before_anything_is_written() -> None:
    journal = Journal()
    reports = reconcile(*two(journal))
    assert [(r.state, r.results) for r in reports] == [
        ("applied", ("x: done",)),
        ("applied", ("y: done", "z: done")),
    ]
    first_write = next(i for i, c in enumerate(journal.calls) if c.startswith("apply"))
    assert {"plan a", "plan b"} <= set(journal.calls[:first_write])


def test_a_total_over_the_limit_changes_nothing_anywhere() -> None:
    journal = Journal()
    reports = reconcile(*two(journal), limit="2")
    assert [r.state for r in reports] == ["refused", "refused"]
    assert reports[0].reason == (
        "the plan changes 3 groups across 2 clusters, more than the limit of 2 per run"
        " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
    )
    assert not any(c.startswith("apply") for c in journal.calls)
    assert reports[0].plan == Plan(("x",))  # what was refused is there to be shown


def test_a_percentage_limit_counts_the_items_of_every_scope() -> None:
    # 3 changes of 8 items considered: 40% allows 4 (rounded up), 25% allows 2.
    assert [r.state for r in reconcile(*two(Journal()), limit="40%")] == ["applied", "applied"]
    refused = reconcile(*two(Journal()), limit="25%")
    assert "more than the limit of 25% (2 of 8)" in (refused[0].reason or "")


def test_a_dry_run_plans_everything_and_takes_no_lease() -> None:
    journal = Journal()
    scopes = two(journal)
    reports = reconcile(*scopes, dry_run=True)
    assert [(r.state, r.dry_run, r.results) for r in reports] == [("planned", True, ())] * 2
    assert [s.lease.acquired for _, s in scopes] == [0, 0]
    assert not any(c.startswith("apply") for c in journal.calls)


def test_nothing_to_write_takes_no_lease_and_plans_once() -> None:
    journal = Journal()
    scope = FakeScope("a", journal, [()])
    assert reconcile((cluster("a"), scope))[0].state == "planned"
    assert (scope.lease.acquired, journal.calls) == (0, ["observe a", "plan a"])


def test_a_lease_held_by_another_run_does_nothing_there_only() -> None:
    journal = Journal()
    held = FakeScope("a", journal, [("x",)], lease=MemoryLease("the-cronjob-pod"))
    reports = reconcile((cluster("a"), held), (cluster("b"), FakeScope("b", journal, [("y",)])))
    assert [(r.state, r.reason) for r in reports] == [("locked", "the-cronjob-pod"), ("applied", None)]
    assert "apply a/x" not in journal.calls


def test_a_lease_whose_holder_missed_its_renewal_fails_that_scope() -> None:
    journal = Journal()
    # 30 minutes, renewed every 10: last renewed 14 minutes ago, 4 minutes late; taken over 6 minutes from now.
    late = MemoryLease("killed-pod", renewed=NOW - timedelta(minutes=14))
    report = reconcile((cluster("a"), FakeScope("a", journal, [("x",)], lease=late)))[0]
    assert (report.state, report.reason) == (
        "failed",
        "the Lease is held by killed-pod, whose renewal is 240 s overdue (a killed run?): it is taken over 360 s from now",
    )
    assert "apply a/x" not in journal.calls


def test_under_the_lease_an_unchanged_world_is_not_planned_again() -> None:
    journal = Journal()
    scope = FakeScope("a", journal, [("x", "y")])
    reconcile((cluster("a"), scope))
    assert journal.calls.count("observe a") == 2
    assert journal.calls.count("plan a") == 1
    assert scope.lease.holder is None  # released


def test_under_the_lease_a_changed_world_is_planned_again() -> None:
    journal = Journal()
    # Another run did "x" while this one waited for the Lease.
    report = reconcile((cluster("a"), FakeScope("a", journal, [("x", "y"), ("y",)])))[0]
    assert (report.state, report.results, report.plan) == ("applied", ("y: done",), Plan(("y",)))
    assert journal.calls.count("plan a") == 2


def test_a_plan_that_grew_under_the_lease_is_held_to_the_same_limit() -> None:
    journal = Journal()
    report = reconcile((cluster("a"), FakeScope("a", journal, [("x",), ("x", "y", "z")])), limit="2")[0]
    assert report.state == "refused"
    assert "3 groups" in (report.reason or "")
    assert not any(c.startswith("apply") for c in journal.calls)


def test_a_scope_that_cannot_be_read_fails_and_the_others_go_on() -> None:
    journal = Journal()
    reports = reconcile(
        (cluster("a"), FakeScope("a", journal, [("x",)], unreadable=True)),
        (cluster("b"), FakeScope("b", journal, [("y",)])),
    )
    assert [(r.state, r.plan) for r in reports] == [("failed", None), ("applied", Plan(("y",)))]
    assert reports[0].reason == "cluster a cannot be read (connection refused)"


def test_a_bug_in_one_scope_fails_that_scope_and_a_bug_in_one_item_that_item() -> None:
    journal = Journal()
    reports = reconcile(
        (cluster("a"), FakeScope("a", journal, [("x",)], crash="observe")),
        (cluster("b"), FakeScope("b", journal, [("y", "z")], crash="y")),
    )
    assert (reports[0].state, reports[0].reason) == ("failed", "unexpected error: RuntimeError('bug')")
    assert reports[1].results == ("y: failed (unexpected error: RuntimeError('bug'))", "z: done")


def test_a_stop_before_the_lease_starts_nothing_with_the_same_words_everywhere() -> None:
    journal = Journal()
    scopes = two(journal)
    scopes[1][1].stop_at = "plan"  # SIGTERM arrives while the run plans
    reports = reconcile(*scopes)
    assert [r.results for r in reports] == [
        (f"x: failed ({STOPPED_BEFORE})",),
        (f"y: failed ({STOPPED_BEFORE})", f"z: failed ({STOPPED_BEFORE})"),
    ]
    assert [s.lease.acquired for _, s in scopes] == [0, 0]


def test_a_stop_during_the_run_fails_what_was_not_started() -> None:
    journal = Journal()
    scope = FakeScope("a", journal, [("x", "y", "z")], stop_at="y")
    settings = RunSettings(workers=1, holder="me", clock=lambda: NOW)
    report = Reconcile({cluster("a"): scope}, settings, NOW, Log(), "groups").run()[0]
    assert report.results == (
        "x: done",
        "y: failed (write y not started: the run was asked to stop)",
        f"z: failed ({STOPPED_BEFORE})",
    )
    assert scope.lease.holder is None  # given back even so


def test_account_scopes_run_on_the_same_loop() -> None:
    journal = Journal()
    aws, gcp = account("aws", "eu-west-1"), account("gcp", "ml-research")
    reports = reconcile(
        (aws, FakeScope("aws", journal, [("p-quota",)])),
        (gcp, FakeScope("gcp", journal, [("h100", "a100")])),
        limit="2",
    )
    assert reports[0].reason == (
        "the plan changes 3 groups across 2 accounts, more than the limit of 2 per run"
        " (raise --max-changes / GPU_JOBS_MAX_CHANGES if this is intended)"
    )
    assert (aws.slug, str(gcp)) == ("aws-eu-west-1", "account gcp/ml-research")


@dataclass
class Meeting(FakeScope):
    """A scope whose observe waits (up to ``patience`` seconds) for the other scopes' observes to be under way."""

    meeting: threading.Barrier | None = None
    met: list[bool] = field(default_factory=list)

    def observe(self, first: tuple[str, ...] | None) -> tuple[str, ...]:
        assert self.meeting is not None
        try:
            self.meeting.wait()
            self.met.append(True)
        except threading.BrokenBarrierError:
            self.met.append(False)
        return super().observe(first)


@pytest.mark.parametrize(("at_once", "together"), [(2, True), (1, False)])
def test_scopes_at_once_bounds_how_many_scopes_are_worked_on_together(at_once: int, together: bool) -> None:
    """``--scopes-at-once 1`` (``RunSettings.scopes_at_once``) makes a run serial: one scope's observe never meets
    another's."""
    journal, meeting = Journal(), threading.Barrier(2, timeout=0.5 if not together else 10)
    scopes = {cluster(n): Meeting(n, journal, [("x",)], meeting=meeting) for n in ("a", "b")}
    settings = RunSettings(scopes_at_once=at_once, holder="me", clock=lambda: NOW)
    reports = Reconcile(dict(scopes), settings, NOW, Log(), "groups").run()
    assert [r.state for r in reports] == ["applied", "applied"]
    assert [s.met for s in scopes.values()] == [[together, together]] * 2  # each observes twice (once under the Lease)
    if not together:
        assert journal.calls[:2] == ["observe a", "plan a"]


@pytest.mark.parametrize(
    ("tallies", "code"),
    [
        ([Tally(planned=2, applied=2), Tally(skipped=1)], ExitCode.OK),
        ([Tally(planned=2, applied=1, failed=1), Tally()], ExitCode.ITEM_FAILED),
        ([Tally(failed=1), Tally(refused=True)], ExitCode.REFUSED),
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


# --- which cluster: a cluster scope proves its identity before anything is read or written ------------------------


@dataclass
class ConfigMapSays:
    """A cluster's API, as far as its identity goes: what its identity ConfigMap names (None: there is none)."""

    cluster: str | None
    journal: Journal
    fails: bool = False

    def witness(self) -> Witnessed:
        self.journal.add("identity")
        if self.fails:
            raise Unavailable("get configmaps: connection refused")
        return Witnessed(self.cluster, "the API at https://10.0.0.9 (kubeconfig context 'research')", "gpu-jobs/id")


@dataclass
class ProvenScope(FakeScope):
    says: ConfigMapSays | None = None

    @property
    def witness(self) -> Witness | None:
        return self.says


@pytest.mark.parametrize(
    ("says", "words"),
    [
        ("notebooks", "is cluster notebooks (ConfigMap gpu-jobs/id), not research. Point --cluster"),
        (None, "has no cluster identity (ConfigMap gpu-jobs/id, key cluster), so nothing proves it is research"),
    ],
)
def test_a_cluster_whose_api_names_another_cluster_or_none_is_refused_before_it_is_read(
    says: str | None, words: str
) -> None:
    journal = Journal()
    wrong = ProvenScope("research", journal, [("a", "b")], says=ConfigMapSays(says, journal))
    right = ProvenScope("ml-prod", journal, [("c",)], says=ConfigMapSays("ml-prod", journal))

    refused, done = reconcile((cluster("research"), wrong), (cluster("ml-prod"), right))

    assert (refused.state, refused.plan) == ("failed", None)
    assert refused.reason is not None
    assert refused.reason.startswith("cluster research: refused before reading anything: the API at https://10.0.0.9")
    assert words in refused.reason
    # research was never observed, planned or written; the cluster beside it ran as usual.
    assert "observe research" not in journal.calls
    assert wrong.lease.acquired == 0
    assert done.state == "applied"
    assert "apply ml-prod/c" in journal.calls
    assert journal.calls.count("identity") == 2  # once each, not again under the Lease


def test_a_refused_cluster_fails_even_a_dry_run() -> None:
    journal = Journal()
    wrong = ProvenScope("research", journal, [("a",)], says=ConfigMapSays("batch", journal))

    (report,) = reconcile((cluster("research"), wrong), dry_run=True)

    assert (report.state, report.plan) == ("failed", None)
    assert journal.calls == ["identity"]


def test_an_identity_that_cannot_be_read_is_an_unreadable_cluster() -> None:
    journal = Journal()
    work = ProvenScope("research", journal, [("a",)], says=ConfigMapSays("research", journal, fails=True))

    (report,) = reconcile((cluster("research"), work))

    assert report.state == "failed"
    assert report.reason == "cluster research cannot be read (get configmaps: connection refused)"
    assert journal.calls == ["identity"]
