"""What every job that acts on a fleet shares: its clusters worked on at once, each planned before anything is
changed anywhere, one blast-radius limit across them, a bug in one cluster kept to that cluster, a stop request
honoured, and one exit-code rule. A job plugs in its own per-cluster work (:class:`ClusterWork`); the runner
never knows what a node group or a quota is.

    plan every cluster  ->  limit across clusters  ->  apply each cluster  ->  outcome (exit code + counts)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from jobs.core.limits import ChangeLimit
from jobs.lease import stop_on_signals
from jobs.outcome import ExitCode, Outcome

# A run works on at most this many clusters at once (and never more than its workers), each with its own workers.
CLUSTERS_AT_ONCE = 8

P = TypeVar("P")  # a cluster's plan, before any write
R = TypeVar("R")  # a cluster's report, after


@dataclass(frozen=True)
class Tally:
    """What one cluster's report counts for the summary and the exit code. ``failed`` includes items that could
    not be judged (unreadable, unseen): an unknown is a failure, never a skip."""

    planned: int = 0
    applied: int = 0
    failed: int = 0
    skipped: int = 0
    refused: str | None = None


@dataclass(frozen=True)
class Early(Generic[R]):
    """Planning ended with the cluster's report: nothing more to do there (refused, unreadable)."""

    report: R


class ClusterWork(Protocol[P, R]):
    """One job's work on one cluster, through that cluster's own ports."""

    def plan(self) -> P | Early[R]:
        """Observe and plan."""
        ...

    def changes(self, plan: P) -> tuple[int, int]:
        """How many items the plan would change, and of how many it considered: what the limit across clusters
        counts."""
        ...

    def apply(self, plan: P) -> R:
        """Carry the plan out under the cluster's Lease (a dry run reports it)."""
        ...

    def failed(self, message: str) -> R:
        """Every item of this cluster failed for ``message``; nothing was changed."""
        ...

    def refused(self, reason: str, plan: P | None) -> R:
        """The run was refused (the limit across clusters); nothing was changed. ``plan``: what was refused."""
        ...


@dataclass
class FleetRun(Generic[P, R]):
    """Runs one job over its clusters."""

    work: Mapping[str, ClusterWork[P, R]]
    limit: ChangeLimit
    workers: int
    log: Any
    noun: str = "items"

    def run(self) -> list[R]:
        with stop_on_signals(), ThreadPoolExecutor(max_workers=self._at_once()) as pool:
            firsts = dict(zip(self.work, pool.map(self._plan, self.work), strict=True))
            sizes = [self.work[name].changes(p) for name, p in firsts.items() if not isinstance(p, Early)]
            changes, considered = sum(c for c, _ in sizes), sum(n for _, n in sizes)
            reason = self.limit.refusal(changes, considered, self.noun, f" across {len(self.work)} clusters")
            if len(self.work) > 1 and reason is not None:
                return [
                    self.work[name].refused(reason, None if isinstance(p, Early) else p) for name, p in firsts.items()
                ]
            return list(pool.map(lambda name: self._apply(name, firsts[name]), self.work))

    def _at_once(self) -> int:
        return max(1, min(len(self.work), CLUSTERS_AT_ONCE, self.workers))

    def _plan(self, name: str) -> P | Early[R]:
        try:
            return self.work[name].plan()
        except Exception as exc:
            return Early(self._crashed(name, exc))

    def _apply(self, name: str, first: P | Early[R]) -> R:
        if isinstance(first, Early):
            return first.report
        try:
            return self.work[name].apply(first)
        except Exception as exc:
            return self._crashed(name, exc)

    def _crashed(self, name: str, exc: Exception) -> R:
        # A bug met in one cluster fails that cluster's items, not the clusters running beside it.
        self.log.error("cluster.crashed", cluster=name, error=repr(exc), exc_info=True)
        return self.work[name].failed(f"unexpected error: {exc!r}")


def outcome(tallies: Sequence[Tally], *, dry_run: bool) -> Outcome:
    """The one exit-code rule: refused (3) over failed (1) over OK (0)."""
    failed = sum(t.failed for t in tallies)
    refused = any(t.refused for t in tallies)
    code = ExitCode.REFUSED if refused else ExitCode.ITEM_FAILED if failed else ExitCode.OK
    return Outcome(
        code,
        planned=sum(t.planned for t in tallies),
        applied=sum(t.applied for t in tallies),
        failed=failed,
        skipped=sum(t.skipped for t in tallies),
        dry_run=dry_run,
    )
