"""The sweep's instances part on one account scope (an AWS region, a GCP project, an Azure subscription): list the
account's GPU instances (one paginated list, by the cloud's own type data), judge each (pure,
``jobs.core.untagged``), then under the scope's Lease write the marks, clears and due actions, each on its own.

Under the Lease ``observe`` lists the instances again (the runner plans again only when something changed), so an
instance tagged, stopped or re-marked meanwhile is judged as it is now. Every write here is idempotent on every
cloud (setting or removing a tag, stopping a stopped instance, terminating a terminated one): throttling, 5xx and
lost answers are resent with backoff. A stale GCP label fingerprint (Conflict) fails the item; the next run looks
again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from jobs.core.policy_sweep import UntaggedInstances
from jobs.core.untagged import GpuInstance, InstancePlan, plan_instances
from jobs.envelope import PlanRow, ScopeRows, plan_rows
from jobs.errors import CloudError, NotFound
from jobs.lease import RunLock
from jobs.retry import Backoff
from jobs.runner import ScopeReport, ScopeWork
from jobs.scopes import Scope, account
from jobs.sweep.ports import Instances

ItemStatus = Literal["done", "gone", "failed"]


def extra_scopes(section: UntaggedInstances) -> tuple[Scope, ...]:
    """The account scopes ``untaggedInstances.scopes`` names (for ``account_scopes(policy, extra=...)``)."""
    return tuple(account(s.cloud, name) for s in section.scopes for name in s.accounts)


@dataclass(frozen=True)
class Ports:
    cloud: Instances
    lock: RunLock
    witness: None = None  # an account scope: no cluster to prove (jobs.runner)


@dataclass(frozen=True)
class Observation:
    instances: tuple[GpuInstance, ...]  # by id, so two lists of the same account compare equal


@dataclass(frozen=True)
class SweepInstancesPlan:
    plans: tuple[InstancePlan, ...]  # the reported instances
    seen: int  # GPU instances judged

    @property
    def items(self) -> tuple[InstancePlan, ...]:
        return tuple(p for p in self.plans if p.writes)

    @property
    def changes(self) -> int:
        """Stops and terminations count against the limit; marks and clears are writes that do not."""
        return sum(p.counts for p in self.plans)

    @property
    def considered(self) -> int:
        return self.seen


@dataclass(frozen=True)
class InstanceResult:
    plan: InstancePlan
    status: ItemStatus
    message: str


@dataclass(frozen=True)
class SweepInstancesWork(ScopeWork[Observation, SweepInstancesPlan, InstancePlan, InstanceResult]):
    """The instances part on one account scope, as the runner drives it."""

    scope: Scope
    section: UntaggedInstances
    now: datetime
    backoff: Backoff
    ports: Ports
    log: Any

    def observe(self, first: Observation | None) -> Observation:
        account = str(self.scope.account)
        listed = self.backoff.call(lambda: self.ports.cloud.gpu_instances(account))
        return Observation(tuple(sorted(listed, key=lambda i: i.id)))

    def plan(self, observed: Observation) -> SweepInstancesPlan:
        return SweepInstancesPlan(plan_instances(self.section, observed.instances, self.now), len(observed.instances))

    def apply(self, item: InstancePlan, fence: Callable[[str], None]) -> InstanceResult:
        instance, write = item.instance, item.write
        what = f"{write} {instance.id}"
        fence(what)
        try:
            if write in ("stop", "terminate"):
                self.backoff.call(lambda: self.ports.cloud.act(instance, write))
            else:
                self.backoff.call(lambda: self.ports.cloud.set_tags(instance, item.tags))
        except NotFound as exc:  # terminated since it was listed: nothing is left to mark or stop
            self.log.info("instance.gone", instance=instance.id, write=write, error=str(exc))
            return InstanceResult(item, "gone", f"{instance.id} is gone: nothing to {write}")
        except CloudError as exc:
            self.log.error("instance.failed", instance=instance.id, write=write, error=str(exc))
            return InstanceResult(item, "failed", f"{write} failed: {exc}")
        say = self.log.warning if item.counts else self.log.info
        say(
            f"instance.{_DONE[write or 'mark']}",
            instance=instance.id,
            type=instance.type,
            gpus=instance.gpus,
            missing=list(item.missing),
            due=item.due.isoformat() if item.due else None,
            message=item.reason,
        )
        return InstanceResult(item, "done", f"{_DONE[write]}: {item.reason}" if item.counts and write else item.reason)

    def failed(self, item: InstancePlan, message: str, error: BaseException | None = None) -> InstanceResult:
        # Not done: a stop, a deadline, the Lease lost.
        self.log.error("instance.failed", instance=item.instance.id, write=item.write, error=message)
        return InstanceResult(item, "failed", message)


_DONE = {"mark": "marked", "unmark": "cleared", "stop": "stopped", "terminate": "terminated"}


# --- the instances view of one scope's envelope ------------------------------------------------------------------


#: One account's report, as this part reads it: a row per instance, ``state`` its contract's ("failed" for an
#: instance whose write failed).
Row = PlanRow[InstancePlan, InstanceResult]
InstanceReport = ScopeRows[Row]
Envelope = ScopeReport[SweepInstancesPlan, InstanceResult]


def report_of(envelope: Envelope) -> InstanceReport:
    return plan_rows(envelope, lambda p: p.instance.id, lambda p: (p.state, p.reason, False), "failed")
