"""The nodegroups job's imperative shell: observe, plan (pure), guard, apply, report.

Reads happen concurrently per group; nothing is written unless the plan has something to do, and then only
under the Lease, after observing and planning again (the world may have moved while waiting for it).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import DrainBlock, GroupIdentity, Record, RecordError
from jobs.core.limits import DEFAULT_LIMIT, ChangeLimit
from jobs.core.nodegroup_plan import (
    RESTORE_NOT_DELIVERED,
    BudgetRefused,
    GpuPod,
    GroupAction,
    GroupSkip,
    NodeGroupPlan,
    ObservedGroup,
    plan_nodegroups,
)
from jobs.core.nodegroups import CloudGroup, Step, step_applied
from jobs.core.orphan_records import OrphanRecord
from jobs.core.policy import NodeGroup, Policy
from jobs.core.providers import CLUSTER_SERIAL_KINDS, ProviderKind
from jobs.core.resolved import view_of
from jobs.deadline import Deadline
from jobs.errors import Busy, CloudError, DeadlineReached, NotDelivered, OutcomeUnknown, Stopped, Unavailable
from jobs.lease import RunLock
from jobs.nodegroups.ports import Cluster, Events, NodeGroupCloud, RecordStore
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings, ScopeReport, ScopeWork, Tally, Witness
from jobs.scopes import cluster

Status = Literal["planned", "applied", "failed", "skipped", "refused"]
_LOCKS_GUARD = threading.Lock()
# AKS runs one agent pool operation per cluster ("Another agentpool operation ... is in progress"); GKE runs one per
# node pool (plus cluster-level ones), so its pools need not take turns.
# A write that got no answer is observed, then resent at most this many times if it does not show.
UNKNOWN_OUTCOME_RESENDS = 2


@dataclass(frozen=True)
class JobSettings:
    dry_run: bool = False
    limit: ChangeLimit = DEFAULT_LIMIT
    only: str | None = None
    cluster: str | None = None  # act on this cluster's groups (None: every group of the policy, one API for all)
    workers: int = 16
    backoff: Backoff = field(default_factory=Backoff)
    lease_duration: timedelta = timedelta(minutes=30)
    holder: str = "gpu-jobs"
    drain_poll_s: float = 5.0
    settle_timeout_s: float = 1200.0  # how long an update in flight may take before its outcome is judged
    deadline: Deadline = field(default_factory=Deadline.start)  # the run's: bounds the drain and the settling

    @property
    def run_settings(self) -> RunSettings:
        """What the runner is told: the part every job shares."""
        return RunSettings(
            self.dry_run, self.limit, self.workers, self.holder, self.lease_duration, deadline=self.deadline
        )


@dataclass(frozen=True)
class Ports:
    clouds: Mapping[str, NodeGroupCloud]
    cluster: Cluster
    records: RecordStore
    lock: RunLock
    events: Events
    witness: Witness | None = None  # which cluster ``cluster`` reaches (jobs.runner)


@dataclass(frozen=True)
class GroupResult:
    group: str
    status: Status
    message: str
    action: GroupAction | None = None


@dataclass(frozen=True)
class Report:
    at: datetime
    dry_run: bool
    cluster: str | None = None
    results: tuple[GroupResult, ...] = ()
    skips: tuple[GroupSkip, ...] = ()
    unmanaged: tuple[CloudGroup, ...] = ()
    refused: str | None = None
    lock_holder: str | None = None  # another run holds the lease: nothing done
    observed: tuple[ObservedGroup, ...] = ()  # every group looked at, for the text report's table
    orphans: tuple[OrphanRecord, ...] = ()  # records of groups the policy no longer names


@dataclass(frozen=True)
class Observation:
    groups: tuple[ObservedGroup, ...]
    unmanaged: tuple[CloudGroup, ...]
    orphans: tuple[OrphanRecord, ...] = ()


def identities(policy: Policy, cluster: str | None) -> dict[str, GroupIdentity]:
    """What each node group of ``cluster`` (every cluster: None) is in its cloud, for the records it keeps."""
    return {g.name: view_of(policy).group(g.name).identity for g in _groups_of(policy, cluster)}


def _groups_of(policy: Policy, cluster: str | None) -> tuple[NodeGroup, ...]:
    return policy.groups_in(cluster) if cluster else policy.node_groups


def selected_groups(policy: Policy, settings: JobSettings) -> list[NodeGroup]:
    return [g for g in _groups_of(policy, settings.cluster) if settings.only in (None, g.name)]


def observe(policy: Policy, ports: Ports, settings: JobSettings, log: Any, *, discover: bool = True) -> Observation:
    groups = selected_groups(policy, settings)
    # Kubernetes reads are retried like cloud reads: one 500 must not fail a whole cluster.
    records = settings.backoff.call(ports.records.load)
    nodes = settings.backoff.call(ports.cluster.nodes)
    pods_by_node: dict[str, list[GpuPod]] = {}
    for pod in settings.backoff.call(ports.cluster.gpu_pods):
        pods_by_node.setdefault(pod.node, []).append(pod)
    cluster = settings.cluster or ""
    cordoned_by_job = {n.name for n in nodes if n.cordoned_by_job}

    def one(group: NodeGroup) -> ObservedGroup:
        cloud = ports.clouds[group.cloud]
        resolved = view_of(policy).group(group.name)  # its kind and node label follow from its locator, at load
        kind = resolved.kind
        stored = records.get(group.name)
        if isinstance(stored, RecordError):
            # Its sizes to restore are unknown: leave the group as it is and say so (this group only).
            return ObservedGroup(group, kind, None, None, error=str(stored), cluster=cluster, record_error=str(stored))
        record = stored
        selector = resolved.node_selector
        mine = tuple(n.name for n in nodes if selector.items() <= n.labels.items()) if selector else ()
        # Where the provider reports no live size (GKE), read it (one more call) when it matters: before judging
        # "no nodes", and when the job believes the group down while nodes are in sight (resized by hand at
        # night): level-triggered means the real size, not the size this job last set.
        live = not mine or (record is not None and record.phase != "up")
        try:
            config = settings.backoff.call(lambda: cloud.describe(group, live_size=live))
        except CloudError as exc:
            return ObservedGroup(group, kind, None, record, error=str(exc), cluster=cluster)
        except Exception as exc:  # a bug or an untranslated SDK error: this group only, not the run
            log.error("nodegroup.describe_crashed", node_group=group.name, error=repr(exc), exc_info=True)
            return ObservedGroup(group, kind, None, record, error=f"unexpected error: {exc!r}", cluster=cluster)
        if selector is None:
            reason = "no node label for this group: its nodes and GPU pods cannot be seen (set nodeSelector)"
            return ObservedGroup(group, kind, config, record, cluster=cluster, nodes_error=reason)
        pods = tuple(p for n in mine for p in pods_by_node.get(n, []))
        cordoned = tuple(name for name in mine if name in cordoned_by_job)
        budgets = _budgets(ports.cluster, record, settings.backoff)
        observed = ObservedGroup(group, kind, config, record, pods, mine, cluster=cluster, cordoned=cordoned)
        return replace(observed, budgets=budgets)

    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        observed = tuple(pool.map(one, groups))
        unmanaged = _unmanaged(policy, ports, groups, pool, log) if discover and settings.only is None else ()
    orphans = _orphans(policy, ports, settings) if discover and settings.only is None else ()
    return Observation(observed, unmanaged, orphans)


def _orphans(policy: Policy, ports: Ports, settings: JobSettings) -> tuple[OrphanRecord, ...]:
    """Records in this cluster's store that no group of the policy claims. Where one API serves several clusters
    of the policy, each cluster's run reports its own; a record of a cluster the policy no longer has is reported
    by every run that sees it (no other run would)."""
    found = settings.backoff.call(ports.records.orphans)
    if settings.cluster is None:
        return found
    names = {c.name for c in policy.clusters}
    context = next((c.kube_context for c in policy.clusters if c.name == settings.cluster), None)

    def ours(orphan: OrphanRecord) -> bool:
        identity = orphan.identity
        return identity is None or identity.cluster == settings.cluster or identity.cluster not in names

    return tuple(replace(o, context=context) for o in found if ours(o))


def _budgets(cluster: Cluster, record: Record | None, backoff: Backoff) -> tuple[tuple[str, int | None], ...]:
    """The budgets that blocked the group's last drain, as they are now (read only after a drain gave up). One that
    cannot be read counts as changed (-1): the drain is tried again rather than held back on an unknown."""
    block = record.drain_blocked if record is not None else None
    if block is None:
        return ()
    found: list[tuple[str, int | None]] = []
    for name, _ in block.budgets:
        try:
            found.append((name, backoff.call(partial(cluster.disruptions_allowed, name))))
        except CloudError:
            found.append((name, -1))
    return tuple(found)


def _cluster_key(group: NodeGroup) -> tuple[str, ...]:
    loc = group.locator.model_dump(exclude_none=True)
    return (group.cloud, *(str(loc[k]) for k in ("region", "project", "subscription", "cluster") if k in loc))


def _unmanaged(
    policy: Policy, ports: Ports, groups: list[NodeGroup], pool: ThreadPoolExecutor, log: Any
) -> tuple[CloudGroup, ...]:
    """GPU node groups in the same clusters as the policy's, that the policy does not list (one list per cluster,
    clusters concurrently)."""
    listed = {
        (g.cloud, tuple(sorted((k, str(v)) for k, v in g.locator.model_dump(by_alias=True, exclude_none=True).items())))
        for g in policy.node_groups
    }
    clusters: dict[tuple[str, ...], list[NodeGroup]] = {}
    for group in groups:
        clusters.setdefault(_cluster_key(group), []).append(group)

    def one(members: list[NodeGroup]) -> list[CloudGroup]:
        try:
            return ports.clouds[members[0].cloud].discover(members)
        except CloudError as exc:
            log.warning("nodegroup.discover_failed", cloud=members[0].cloud, error=str(exc))
            return []

    found = [c for batch in pool.map(one, clusters.values()) for c in batch]
    unique = {(c.cloud, tuple(sorted(c.locator.items()))): c for c in found}
    return tuple(c for key, c in unique.items() if key not in listed)


def _describe_step_change(action: GroupAction) -> str:
    if action.only_uncordon:
        return f"uncordon {', '.join(action.uncordon)}"
    steps = ", ".join(s.describe() for s in action.steps) or "bookkeeping only"
    then = f", then uncordon {', '.join(action.uncordon)}" if action.uncordon else ""
    return f"{action.direction}: {steps}{then}"


class Executor:
    """Applies one group's action: record first, then drain, then each step, then mark the record."""

    def __init__(
        self,
        policy: Policy,
        ports: Ports,
        settings: JobSettings,
        now: datetime,
        log: Any,
        sleep: Callable[[float], None] = time.sleep,
        fence: Callable[[str], None] = lambda what: None,
        cluster_locks: dict[tuple[str, ...], threading.Lock] | None = None,
    ) -> None:
        self.policy, self.ports, self.settings, self.now, self.log, self.sleep = (
            policy,
            ports,
            settings,
            now,
            log,
            sleep,
        )
        self.fence = fence  # raises Stopped before a write this run may no longer make (Lease lost, SIGTERM)
        # Shared by the executors of one cluster's run (one per item).
        self._cluster_locks = cluster_locks if cluster_locks is not None else {}

    def _cluster_lock(self, group: NodeGroup, kind: str) -> threading.Lock | contextlib.nullcontext[None]:
        """AKS runs one operation per cluster at a time: updates to its pools take turns here, instead of racing
        into each other's busy errors."""
        if kind not in CLUSTER_SERIAL_KINDS:
            return contextlib.nullcontext()
        with _LOCKS_GUARD:
            return self._cluster_locks.setdefault(_cluster_key(group), threading.Lock())

    def _retry(
        self, what: str, fn: Callable[[], Any], group: str, *, undo: bool = False, resend_unknown: bool = True
    ) -> Any:
        """``fn`` with backoff; fenced before every attempt (a retry may come after the Lease is gone), except
        for undoing the run's own temporary changes, which must happen even as it stops. ``resend_unknown=False``
        for writes that are not idempotent: an Unavailable error comes back to the caller to observe and decide."""

        def on_retry(exc: CloudError, delay: float) -> None:
            self.log.info("nodegroup.retry", node_group=group, call=what, error=str(exc), wait_s=round(delay, 2))

        def fenced() -> Any:
            if not undo:
                self.fence(what)
            return fn()

        def retryable(exc: CloudError) -> bool:
            return exc.retryable and (resend_unknown or not isinstance(exc, Unavailable))

        return self.settings.backoff.call(fenced, sleep=self.sleep, on_retry=on_retry, retryable=retryable, undo=undo)

    def _write(self, group: NodeGroup, kind: ProviderKind, cloud: NodeGroupCloud, step: Step) -> None:
        """Apply one step. Busy and throttled answers are refusals, resent with backoff; a 5xx or a timeout may
        mean "done, answer lost", so the group is observed (once its update settles) and the step resent only if
        it does not show. An update that was applied is never sent twice."""
        what = step.describe()
        for _ in range(UNKNOWN_OUTCOME_RESENDS + 1):
            try:
                self._retry(what, partial(cloud.apply, group, step), group.name, resend_unknown=False)
                return
            except Unavailable as exc:
                self.log.warning("nodegroup.outcome_unknown", node_group=group.name, step=what, error=str(exc))
                if step_applied(kind, self._settled(group, cloud), step):
                    self.log.info("nodegroup.applied_after_all", node_group=group.name, step=what)
                    return
        raise OutcomeUnknown(
            f"{what}: no answer {UNKNOWN_OUTCOME_RESENDS + 1} times and the group does not show it: next run",
            operation=what,
        )

    def save_record(self, group: str, record: Record) -> None:
        """Write a record. Its writes carry a resourceVersion, so a blind resend after a lost answer would conflict
        with itself: read the record back, and resend only if it is not what was written."""
        for _ in range(UNKNOWN_OUTCOME_RESENDS + 1):
            try:
                self._retry("save record", partial(self.ports.records.save, group, record), group, resend_unknown=False)
                return
            except Unavailable as exc:
                self.log.warning("nodegroup.outcome_unknown", node_group=group, step="save record", error=str(exc))
                stored = self._retry("load records", self.ports.records.load, group).get(group)
                if isinstance(stored, Record) and replace(stored, describes=None) == replace(record, describes=None):
                    return
        raise OutcomeUnknown(f"save record: no answer {UNKNOWN_OUTCOME_RESENDS + 1} times", operation="save record")

    def skip(self, skip: GroupSkip) -> GroupResult:
        """What a skip writes: the record it asks for (when a shutdown was first postponed) and its Event."""
        if skip.save_record is not None:
            try:
                self.save_record(skip.group, skip.save_record)
            except CloudError as exc:
                self.log.error("nodegroup.record_failed", node_group=skip.group, error=str(exc))
                return GroupResult(skip.group, "failed", f"cannot save record: {exc}")
            if skip.save_record.busy_since is not None:
                self.event(skip.group, "ShutdownPostponed", skip.reason)  # the first postponement only
        if skip.event is not None:
            self.event(skip.group, skip.event, skip.reason, warning=True)
        return GroupResult(skip.group, "skipped", skip.reason)

    def _settled(self, group: NodeGroup, cloud: NodeGroupCloud) -> GroupConfig:
        """The group's live configuration once no update is running on it (the lost write may still be)."""
        wait = self.settings.deadline.wait(self.settings.settle_timeout_s)
        while True:
            live: GroupConfig = self._retry("describe", lambda: cloud.describe(group, live_size=True), group.name)
            if live.busy and wait.cut and wait.over(self.settings.drain_poll_s):
                raise self.settings.deadline.reached(f"waiting for {group.name}'s update to settle")
            if not live.busy or wait.over():
                return live
            self.sleep(wait.pause(self.settings.drain_poll_s))

    def event(self, group: str, reason: str, message: str, *, warning: bool = False) -> None:
        try:
            self.ports.events.emit(group, reason, message, warning=warning)
        except CloudError as exc:  # an event is a courtesy; losing one must not fail the group
            self.log.warning("event.failed", node_group=group, reason=reason, error=str(exc))

    def apply(self, action: GroupAction) -> GroupResult:
        try:
            confirmed = self._apply(action)
        except Exception as exc:  # one group's failure, whatever it is, must not stop the others
            self.log.error(
                "nodegroup.failed",
                node_group=action.group,
                direction=action.direction,
                error=str(exc),
                error_kind=type(exc).__name__,
                exc_info=not isinstance(exc, CloudError | DeadlineReached),
            )
            reason = RESTORE_NOT_DELIVERED if isinstance(exc, NotDelivered) else "NodeGroupFailed"
            what = "shutdown" if action.direction == "down" else "restore"
            self.event(action.group, reason, f"The {what} failed: {exc}", warning=True)
            return GroupResult(action.group, "failed", str(exc), action)
        note = "" if confirmed else "; nodes not all there yet: the next run confirms the restore"
        return GroupResult(action.group, "applied", _describe_step_change(action) + note, action)

    def _apply(self, action: GroupAction) -> bool:
        """Carry out one action; False when a restore was applied but its nodes are not confirmed yet."""
        group = self.policy.group(action.group)
        cloud = self.ports.clouds[group.cloud]
        record = action.record
        if action.only_uncordon:
            self._uncordon(action.group, action.uncordon)
            return True
        if action.take_record:
            live = self._retry("describe", lambda: cloud.describe(group, live_size=True), group.name)
            # When the wait for running pods began stays known: a shutdown the next run has to finish (this one was
            # stopped mid-drain) must not start its maxDelay over.
            busy_since = action.prior.busy_since if action.prior is not None else None
            record = Record(replace(live, busy=False, shortfall=None, missing=0), "stopping", self.now, busy_since)
            # Durable before anything changes: a crash from here on still knows the size to restore.
            self.save_record(group.name, record)
            self.log.info("nodegroup.recorded", node_group=group.name, config=record.config.to_json())
            self.event(
                group.name, "ConfigurationRecorded", f"Recorded the size before shutdown: {record.config.describe()}"
            )
        if action.evict:
            try:
                self._drain(action)
            except DrainGaveUp as exc:
                assert record is not None  # the drain comes after the record
                raise self._gave_up(action, record, exc) from exc
            except DeadlineReached:
                # The run ran out, not the pods' time: no back-off recorded, the group stays up and takes work again,
                # and the record (phase stopping) lets the next run drain again and finish.
                self._uncordon(action.group, action.cordon)
                raise
        for pod in action.doomed:
            self.log.warning("nodegroup.pod_lost", node_group=group.name, pod=str(pod), reason="onBusy force")
        for step in action.steps:
            with self._cluster_lock(group, action.kind):
                self._write(group, action.kind, cloud, step)
            self.log.info(
                "nodegroup.changed",
                node_group=group.name,
                direction=action.direction,
                step=step.describe(),
                before=action.before.to_json(),
                after=action.after.to_json(),
                reason=action.reason,
            )
            self.event(
                group.name,
                "NodeGroupScaled" if action.direction == "down" else "NodeGroupRestored",
                f"{step.done()}: {action.reason}",
            )
        # Not known yet: the record stays as it is, and the next run confirms (unknown is never done).
        confirmed = action.direction == "down" or not action.steps or self._delivered(group, cloud)
        final = Record(
            record.config if record else action.after, action.direction, record.recorded_at if record else self.now
        )
        if confirmed and final != record:
            self.save_record(group.name, final)
        self._uncordon(action.group, action.uncordon)
        return confirmed

    def _delivered(self, group: NodeGroup, cloud: NodeGroupCloud) -> bool:
        """Whether a restore brought its nodes. A provider that says why it could not (an EKS node group DEGRADED
        after a Successful update, an ASG's failed launch activity) fails the group; nodes merely not there yet
        (launches still going) leave it unconfirmed. Either way the pre-shutdown record stays, so the next run
        looks again."""
        live = self._settled(group, cloud)
        if live.shortfall is not None:
            raise NotDelivered(f"restore not delivered: {live.shortfall}", operation="describe", code="Shortfall")
        if live.missing:
            self.log.warning("nodegroup.not_delivered_yet", node_group=group.name, missing=live.missing)
            return False
        return True

    def _gave_up(self, action: GroupAction, record: Record, exc: DrainGaveUp) -> DrainGaveUp:
        """Remember durably why the drain gave up, so the next runs neither cordon nor evict again before the
        back-off passed or the blockers changed. Nothing was scaled: a record taken for this shutdown goes back to
        phase ``up`` (the group is up), one from an earlier half-done shutdown keeps its phase and its sizes."""
        block = DrainBlock(self.now, 1, exc.pods, exc.budgets)
        previous = action.prior.drain_blocked if action.prior is not None else None
        if previous is not None and previous.same_blockers(block):
            block = replace(block, attempts=previous.attempts + 1)
        if action.take_record:
            busy_since = action.prior.busy_since if action.prior is not None else None
            kept = Record(record.config, "up", record.recorded_at, busy_since, drain_blocked=block)
        else:
            kept = replace(record, drain_blocked=block)
        message = f"{exc}; the group stays up, next drain at {block.retry_at.isoformat()} (attempt {block.attempts}"
        message += " on these blockers), or as soon as those pods or budgets change"
        try:
            self.save_record(action.group, kept)
        except CloudError as save_exc:
            message += f" (the back-off could not be recorded: {save_exc}: the next run drains again)"
        self.event(action.group, "DrainBlocked", message, warning=True)
        return DrainGaveUp(message, pods=exc.pods, budgets=exc.budgets)

    def _uncordon(self, group: str, nodes: tuple[str, ...]) -> None:
        for node in nodes:
            self._retry("uncordon", partial(self.ports.cluster.uncordon, node), group, undo=True)
            self.log.info("nodegroup.uncordoned", node_group=group, node=node)
        if nodes:
            self.event(group, "NodesUncordoned", f"Uncordoned {', '.join(nodes)} (cordoned by an earlier drain)")

    def _drain(self, action: GroupAction) -> None:
        for node in action.cordon:
            self._retry("cordon", partial(self.ports.cluster.cordon, node), action.group)
        deadline = self.settings.deadline.wait(action.drain_timeout.total_seconds())  # or the run's, if sooner
        pending: list[GpuPod] = list(action.evict)
        evicted: set[GpuPod] = set()
        refused_by: dict[GpuPod, str] = {}  # the budget that last refused each pod
        while pending:
            still: list[GpuPod] = []
            try:
                self.fence("drain")
            except Stopped as exc:
                self._uncordon(action.group, action.cordon)  # the group stays up: its nodes take work again
                done = ", ".join(sorted(map(str, evicted))) or "none"
                raise Stopped(
                    f"drain stopped after evicting {len(evicted)} of {len(action.evict)} pods ({done});"
                    f" nodes uncordoned, the group stays up; its record keeps the sizes to restore and the next run"
                    f" finishes the shutdown: {exc.why}",
                    why=exc.why,
                ) from exc
            for pod in pending:
                if pod not in evicted:
                    try:
                        sent = self.ports.cluster.evict(pod)
                        evicted.add(pod)
                        self.log.info(
                            "nodegroup.evicted" if sent else "nodegroup.pod_gone", node_group=action.group, pod=pod.key
                        )
                    except Busy as exc:  # a PodDisruptionBudget says not now
                        if isinstance(exc, BudgetRefused) and exc.budget:
                            refused_by[pod] = exc.budget
                # Scaling down before an evicted pod has terminated would cut its grace period short. Followed by
                # uid: a same-named replacement (a StatefulSet's, Pending or elsewhere) is not the pod evicted.
                if self.ports.cluster.pod_exists(pod):
                    still.append(pod)
            if still and deadline.over(self.settings.drain_poll_s):
                names = ", ".join(map(str, still))
                if deadline.cut:  # the caller uncordons
                    raise self.settings.deadline.reached(f"draining {action.group}: still running {names}")
                # The group stays up: its nodes must take work again, not sit cordoned through the next day.
                self._uncordon(action.group, action.cordon)
                budgets = []
                for name in sorted({refused_by[p] for p in still if p in refused_by}):
                    try:
                        allowed = self.ports.cluster.disruptions_allowed(name)
                    except CloudError:
                        allowed = None
                    budgets.append((name, -1 if allowed is None else allowed))
                # What blocked it: the pods whose eviction was refused. An evicted pod still in its grace period
                # (Terminating) is on its way out: it is no blocker, and its absence next run is no change.
                blockers = [p for p in still if p not in evicted] or still
                raise DrainGaveUp(
                    f"drain timed out after {action.drain_timeout}: still running {names}",
                    pods=tuple(sorted(p.key for p in blockers)),
                    budgets=tuple(budgets),
                )
            if still:
                self.sleep(deadline.pause(self.settings.drain_poll_s))
            pending = still


class DrainGaveUp(Busy):
    """A drain that timed out: the pods still running and the budgets that refused them (with what they allowed)."""

    def __init__(self, message: str, *, pods: tuple[str, ...], budgets: tuple[tuple[str, int], ...]) -> None:
        super().__init__(message, operation="drain")
        self.pods, self.budgets = pods, budgets


@dataclass(frozen=True)
class Planned:
    """One cluster's plan: what the runner applies item by item and counts against the limit."""

    observation: Observation
    plan: NodeGroupPlan

    @property
    def items(self) -> tuple[GroupAction | GroupSkip, ...]:
        """Each action, and each skip that writes (a record of when a shutdown was first postponed, an Event): a
        plan with no items has nothing to write and never takes the Lease."""
        return (*self.plan.actions, *(s for s in self.plan.skips if s.save_record is not None or s.event))

    @property
    def changes(self) -> int:
        return sum(1 for a in self.plan.actions if a.steps)

    @property
    def considered(self) -> int:
        return len(self.observation.groups)


@dataclass
class ClusterRun(ScopeWork[Observation, Planned, GroupAction | GroupSkip, GroupResult]):
    """The nodegroups job on one cluster, as the runner drives it (``jobs.runner.ScopeWork``)."""

    policy: Policy
    now: datetime
    settings: JobSettings  # with its ``cluster`` set
    ports: Ports
    log: Any
    sleep: Callable[[float], None] = time.sleep
    _locks: dict[tuple[str, ...], threading.Lock] = field(default_factory=dict)

    @property
    def lock(self) -> RunLock:
        return self.ports.lock

    @property
    def witness(self) -> Witness | None:
        return self.ports.witness

    def observe(self, first: Observation | None) -> Observation:
        if first is None:
            return observe(self.policy, self.ports, self.settings, self.log)
        # The unmanaged groups and orphan records found a moment ago still stand: no need to list them twice.
        again = observe(self.policy, self.ports, self.settings, self.log, discover=False)
        return replace(again, unmanaged=first.unmanaged, orphans=first.orphans)

    def plan(self, observation: Observation) -> Planned:
        return Planned(observation, plan_nodegroups(self.policy, observation.groups, self.now))

    def apply(self, item: GroupAction | GroupSkip, fence: Callable[[str], None]) -> GroupResult:
        executor = Executor(self.policy, self.ports, self.settings, self.now, self.log, self.sleep, fence, self._locks)
        if isinstance(item, GroupAction):
            return executor.apply(item)
        return executor.skip(item)

    def failed(self, item: GroupAction | GroupSkip, message: str) -> GroupResult:
        self.log.error("nodegroup.failed", node_group=item.group, error=message)  # not done: a stop, a deadline
        return GroupResult(item.group, "failed", message, item if isinstance(item, GroupAction) else None)


Envelope = ScopeReport[Planned, GroupResult]


def report_of(envelope: Envelope, policy: Policy, settings: JobSettings) -> Report:
    """The nodegroups view of one cluster's envelope: what the text and JSON reports render."""
    report = partial(Report, envelope.at, envelope.dry_run, envelope.scope.name or None)
    planned = envelope.plan
    if planned is None:  # nothing could be judged: every group of the cluster failed, nothing changed
        message = f"not judged: {envelope.reason}"
        return report(tuple(GroupResult(g.name, "failed", message) for g in selected_groups(policy, settings)))
    plan, unmanaged = planned.plan, planned.observation.unmanaged
    report = partial(report, observed=planned.observation.groups, orphans=planned.observation.orphans)
    if envelope.state == "locked":
        # Nothing done here: the run holding the Lease reports the orphan records, this one does not fail on them.
        return report(lock_holder=envelope.reason, orphans=())
    if envelope.state == "refused":
        results = tuple(GroupResult(a.group, "refused", _describe_step_change(a), a) for a in plan.actions)
        return report(results, plan.skips, unmanaged, refused=envelope.reason)
    if envelope.state == "failed":
        message = f"not applied: {envelope.reason}"
        return report(tuple(GroupResult(a.group, "failed", message, a) for a in plan.actions), plan.skips, unmanaged)
    if envelope.state == "planned":
        results = tuple(GroupResult(a.group, "planned", _describe_step_change(a), a) for a in plan.actions)
        return report(results, plan.skips, unmanaged)
    return report(tuple(r for r in envelope.results if r.status != "skipped"), plan.skips, unmanaged)


def run(
    policy: Policy,
    now: datetime,
    settings: JobSettings,
    ports: Ports,
    log: Any,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], datetime] | None = None,
) -> Report:
    """One run of one cluster at the schedule instant ``now``, through the runner (what the tests drive)."""
    run_settings = settings.run_settings if clock is None else replace(settings.run_settings, clock=clock)
    work = ClusterRun(policy, now, settings, ports, log, sleep)
    runner: Reconcile[Observation, Planned, GroupAction | GroupSkip, GroupResult]
    runner = Reconcile({cluster(settings.cluster or ""): work}, run_settings, now, log, "node groups")
    envelope = runner.run()[0]
    return report_of(envelope, policy, settings)


def tally(report: Report) -> Tally:
    """A cluster's report for the summary: a skip that is a failure (unseen, unreadable) counts as failed."""
    return Tally(
        planned=len(report.results),
        applied=sum(r.status == "applied" for r in report.results),
        failed=sum(r.status == "failed" for r in report.results)
        + sum(s.failed for s in report.skips)
        + sum(o.failed for o in report.orphans),
        skipped=len(report.skips),
        refused=report.refused is not None,
    )
