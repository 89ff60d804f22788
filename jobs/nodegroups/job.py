"""The nodegroups job on one cluster, as the runner drives it: observe (``observe``), plan (pure,
``jobs.core.nodegroup_plan``), apply each group's action or skip (``execute``); the report is the runner's envelope
with this job's rows and items (``report``).

Reads happen concurrently per group; nothing is written unless the plan has something to do, and then only under
the Lease, after observing and planning again (the world may have moved while waiting for it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobs.core.nodegroup_plan import GroupAction, GroupSkip, NodeGroupPlan, PodNotice, PodWarning, plan_nodegroups
from jobs.core.policy import Policy
from jobs.nodegroups.execute import Executor, GroupResult
from jobs.nodegroups.observe import Observation, observe
from jobs.nodegroups.settings import NodeGroupsSettings, Ports
from jobs.runner import ScopeReport, ScopeWork

Item = GroupAction | GroupSkip | PodWarning | PodNotice


@dataclass(frozen=True)
class NodeGroupsPlan:
    """One cluster's plan: what the runner applies item by item and counts against the limit."""

    observation: Observation
    plan: NodeGroupPlan

    @property
    def items(self) -> tuple[Item, ...]:
        """Each action, and each skip that writes (a record of when a shutdown was first postponed, an Event): a
        plan with no items has nothing to write and never takes the Lease. Each shutdown warning not given yet is
        an item too (an Event), never a change: ``changes`` does not count it."""
        skips = (s for s in self.plan.skips if s.save_record is not None or s.event)
        return (*self.plan.actions, *skips, *self.plan.warnings, *self.plan.notices)

    @property
    def changes(self) -> int:
        return sum(1 for a in self.plan.actions if a.steps)

    @property
    def considered(self) -> int:
        return len(self.observation.groups)


@dataclass
class NodeGroupsWork(ScopeWork[Observation, NodeGroupsPlan, Item, GroupResult]):
    """The nodegroups job on one cluster (``jobs.runner.ScopeWork``)."""

    policy: Policy
    now: datetime
    settings: NodeGroupsSettings  # with its ``cluster`` set
    ports: Ports
    log: Any
    sleep: Callable[[float], None] = time.sleep
    _locks: dict[tuple[str, ...], threading.Lock] = field(default_factory=dict)

    def observe(self, first: Observation | None) -> Observation:
        if first is None:
            return observe(self.policy, self.ports, self.settings, self.log)
        # The unmanaged groups and orphan records found a moment ago still stand: no need to list them twice.
        again = observe(self.policy, self.ports, self.settings, self.log, discover=False)
        return replace(again, unmanaged=first.unmanaged, orphans=first.orphans)

    def plan(self, observed: Observation) -> NodeGroupsPlan:
        every = self.settings.only is None
        plan = plan_nodegroups(self.policy, observed.groups, self.now, observed.pending, observed.told, every)
        return NodeGroupsPlan(observed, plan)

    def _executor(self, fence: Callable[[str], None] = lambda what: None) -> Executor:
        return Executor(self.policy, self.ports, self.settings, self.now, self.log, self.sleep, fence, self._locks)

    def apply(self, item: Item, fence: Callable[[str], None]) -> GroupResult:
        executor = self._executor(fence)
        if isinstance(item, GroupAction):
            return executor.apply(item)
        if isinstance(item, PodWarning):
            return executor.warn(item)
        if isinstance(item, PodNotice):
            return executor.notice(item)
        return executor.skip(item)

    def failed(self, item: Item, message: str, error: BaseException | None = None) -> GroupResult:
        if error is not None and isinstance(item, GroupAction):  # it raised part way: a Warning Event says so
            return self._executor().failed(item, error, message)
        self.log.error("nodegroup.failed", node_group=item.group, error=message)  # not done: a stop, a deadline
        warning = item if isinstance(item, PodWarning) else None
        notice = item if isinstance(item, PodNotice) else None
        action = item if isinstance(item, GroupAction) else None
        return GroupResult(item.group, "failed", message, action, warning, notice=notice)


Envelope = ScopeReport[NodeGroupsPlan, GroupResult]
