"""The nodegroups job's execute step: one group's action (record first, then drain, then each step, then mark the
record) or skip (the record and Event it asks for), fenced by the Lease and the run's deadline."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, Literal

from jobs.core.group_config import GroupConfig
from jobs.core.group_record import DrainBlock, Record
from jobs.core.nodegroup_plan import (
    RESTORE_NOT_DELIVERED,
    SHUTDOWN_WARNING,
    BudgetRefused,
    GpuPod,
    GroupAction,
    GroupSkip,
    PodNotice,
    PodWarning,
)
from jobs.core.nodegroups import Step, step_applied
from jobs.core.policy import NodeGroup, Policy
from jobs.core.providers import CLUSTER_SERIAL_KINDS, ProviderKind
from jobs.core.resolved import view_of
from jobs.core.wake import WAKING
from jobs.errors import Busy, CloudError, DeadlineReached, NotDelivered, OutcomeUnknown, Stopped, Unavailable
from jobs.events import ObjectRef
from jobs.nodegroups.observe import cluster_key
from jobs.nodegroups.ports import NodeGroupCloud
from jobs.nodegroups.settings import NodeGroupsSettings, Ports

Status = Literal["planned", "applied", "failed", "skipped", "refused"]
_LOCKS_GUARD = threading.Lock()
# AKS runs one agent pool operation per cluster ("Another agentpool operation ... is in progress"); GKE runs one per
# node pool (plus cluster-level ones), so its pools need not take turns.
# A write that got no answer is observed, then resent at most this many times if it does not show.
UNKNOWN_OUTCOME_RESENDS = 2


#: A shutdown warning whose Event could not be written: the person is not told yet, so it is not reported as done.
NOT_WARNED = "not warned yet: its Event could not be written (event.failed in the log); the next run tries again"


@dataclass(frozen=True)
class GroupResult:
    group: str
    status: Status
    message: str
    action: GroupAction | None = None
    warning: PodWarning | None = None  # a shutdown warning on a pod, not the group's own result
    notice: PodNotice | None = None  # a Pending pod told why it woke nothing, not the group's own result


def describe_step_change(action: GroupAction) -> str:
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
        settings: NodeGroupsSettings,
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
            return self._cluster_locks.setdefault(cluster_key(group), threading.Lock())

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
            if skip.save_record.busy_since is not None and not skip.kept:
                self.event(skip.group, "ShutdownPostponed", skip.reason)  # the first postponement only
        if skip.event is not None:
            self.event(skip.group, skip.event, skip.reason, warning=True)
        for kept in skip.kept:  # once: with the record that saves when each keep-up was first seen
            ref = ObjectRef("Pod", kept.pod.name, kept.pod.namespace, kept.pod.uid)
            self.ports.events.emit_once(ref, kept.event, kept.reason, kept.message, "Normal")
        return GroupResult(skip.group, "skipped", skip.reason)

    def warn(self, warning: PodWarning) -> GroupResult:
        """The Warning Event on the pod, named for the pod and the shutdown: a run that finds it there adds none.
        A warning never fails the group: one that could not be written is skipped, and the next run (which finds no
        Event of that name) tries again."""
        self.fence("warn")
        pod = warning.pod
        ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
        if not self.ports.events.emit_once(ref, warning.event, SHUTDOWN_WARNING, warning.message, "Warning"):
            return GroupResult(warning.group, "skipped", NOT_WARNED, warning=warning)
        self.log.info("nodegroup.warned", node_group=warning.group, pod=pod.key, at=warning.at.isoformat())
        return GroupResult(warning.group, "applied", warning.message, warning=warning)

    def notice(self, notice: PodNotice) -> GroupResult:
        """The Event on a Pending pod saying why it woke no group, named per pod: once, like a warning."""
        self.fence("notice")
        pod = notice.pod
        ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
        if not self.ports.events.emit_once(ref, notice.event, notice.reason, notice.message, "Warning"):
            return GroupResult(notice.group, "skipped", NOT_WARNED, notice=notice)
        self.log.info("nodegroup.not_woken", node_group=notice.group, pod=str(pod), why=notice.message)
        return GroupResult(notice.group, "applied", notice.message, notice=notice)

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
        # On the group's record ConfigMap, by the uid the store read or wrote.
        self.ports.events.emit(self.ports.records.ref(group), reason, message, "Warning" if warning else "Normal")

    def apply(self, action: GroupAction) -> GroupResult:
        """Carry out one action. What it raises fails this group only: the runner catches it (``jobs.runner``) and
        hands it to :meth:`failed`."""
        confirmed = self._apply(action)
        note = "" if confirmed else "; nodes not all there yet: the next run confirms the restore"
        return GroupResult(action.group, "applied", describe_step_change(action) + note, action)

    def failed(self, action: GroupAction, exc: BaseException, message: str) -> GroupResult:
        """An action that raised ``exc`` part way: said in the log and in a Warning Event on the group's record."""
        self.log.error(
            "nodegroup.failed",
            node_group=action.group,
            direction=action.direction,
            error=str(exc),
            error_kind=type(exc).__name__,
            exc_info=not isinstance(exc, CloudError | DeadlineReached | Stopped),
        )
        reason = RESTORE_NOT_DELIVERED if isinstance(exc, NotDelivered) else "NodeGroupFailed"
        what = "shutdown" if action.direction == "down" else "restore"
        self.event(action.group, reason, f"The {what} failed: {exc}", warning=True)
        return GroupResult(action.group, "failed", message, action)

    def _apply(self, action: GroupAction) -> bool:
        """Carry out one action; False when a restore was applied but its nodes are not confirmed yet."""
        group = self.policy.group(action.group)
        cloud = self.ports.clouds[view_of(self.policy).group(group.name).kind]
        record = action.record
        if action.only_uncordon:
            self._uncordon(action.group, action.uncordon)
            return True
        if action.take_record:
            live = self._retry("describe", lambda: cloud.describe(group, live_size=True), group.name)
            # When the wait for running pods began stays known: a shutdown the next run has to finish (this one was
            # stopped mid-drain) must not start its maxDelay over.
            busy_since = action.prior.busy_since if action.prior is not None else None
            busy_since = action.busy_since or busy_since
            record = Record(
                live.recordable(), "stopping", self.now, busy_since, shape=action.shape, displaced=_displaced(action)
            )
            # Durable before anything changes: a crash from here on still knows the size to restore.
            self.save_record(group.name, record)
            self.log.info("nodegroup.recorded", node_group=group.name, config=record.config.to_json())
            self.event(
                group.name, "ConfigurationRecorded", f"Recorded the size before shutdown: {record.config.describe()}"
            )
        elif record is not None and action.wake is not None:
            # The wake first, durably: a crash from here on keeps it (and the pre-shutdown size stays the record's).
            self.save_record(group.name, record)
            self.log.info("nodegroup.wake_recorded", node_group=group.name, wake=action.wake.to_json())
        elif record is not None and action.direction == "down" and set(_displaced(action)) - set(record.displaced):
            # A shutdown that evicts again (after a wake): its pods' controllers are remembered before any eviction.
            record = replace(record, displaced=_displaced(action, record), shape=record.shape or action.shape)
            self.save_record(group.name, record)
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
            kind = "NodeGroupScaled" if action.direction == "down" else "NodeGroupRestored"
            self.event(group.name, "NodeGroupWoken" if action.wake else kind, f"{step.done()}: {action.reason}")
        for waker, name, message in action.wakers:  # told once the resize is asked for, not before
            ref = ObjectRef("Pod", waker.name, waker.namespace, waker.uid)
            self.ports.events.emit_once(ref, name, WAKING, message, "Normal")
        # Not known yet: the record stays as it is, and the next run confirms (unknown is never done).
        # A Karpenter pool's nodes come with pods, not with its restore: nothing to wait for.
        by_limits = view_of(self.policy).group(group.name).rules.by_limits
        confirmed = action.direction == "down" or not action.steps or by_limits or self._delivered(group, cloud)
        final = _final(action, record, self.now)
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


def _displaced(action: GroupAction, record: Record | None = None) -> tuple[str, ...]:
    """The controllers (uids) of the pods this shutdown evicts or takes down with its nodes, with those the record
    already holds: a replacement they create this off-hours period never wakes the group."""
    owners = {p.owner for p in (*action.evict, *action.doomed) if p.owner}
    earlier = record.displaced if record is not None else (action.prior.displaced if action.prior else ())
    if action.prior is not None and action.prior.phase == "up" and record is None:
        earlier = ()  # a new shutdown: what happened last night is no reason tonight
    return tuple(sorted(owners | set(earlier)))


def _final(action: GroupAction, record: Record | None, now: datetime) -> Record:
    """The record once the action is done: a wake keeps its record as saved; a shutdown keeps the pre-shutdown size,
    the shape, and the night's displaced controllers and wakers (the wake is over); a restore starts a new day."""
    # ``busy_since``: None but for a pool whose busy nodes stay (Karpenter, onBusy wait).
    if record is None:
        return Record(action.after, action.direction, now, action.busy_since)
    if action.wake is not None:
        return record
    if action.direction == "down":
        return Record(
            record.config,
            "down",
            record.recorded_at,
            action.busy_since,
            shape=record.shape,
            displaced=record.displaced,
            woke=record.woke,
        )
    return Record(record.config, "up", record.recorded_at, action.busy_since)


class DrainGaveUp(Busy):
    """A drain that timed out: the pods still running and the budgets that refused them (with what they allowed)."""

    def __init__(self, message: str, *, pods: tuple[str, ...], budgets: tuple[tuple[str, int], ...]) -> None:
        super().__init__(message, operation="drain")
        self.pods, self.budgets = pods, budgets
