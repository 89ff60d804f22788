"""The pods part of the sweep on one cluster: observe (at most three PromQL queries and one pod list), plan (pure,
``jobs.core.idle_pods``), then under the cluster's Lease read each pod again and mark, unmark or act on it, each
pod on its own, with an Event on the pod."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from jobs.core.idle_pods import (
    Answers,
    PodInfo,
    PodsPlan,
    PodState,
    Queries,
    Sample,
    Unallocated,
    Verdict,
    plan_pods,
    queries,
    recheck,
)
from jobs.core.policy_sweep import IdlePods, LeakedMemory
from jobs.errors import Busy, CloudError, Conflict, NotFound, Throttled
from jobs.events import Events, NoEvents, ObjectRef
from jobs.labels import SCALED_FROM_ANNOTATION
from jobs.lease import RunLock
from jobs.retry import Backoff
from jobs.runner import ScopeReport, ScopeWork, State, Witness
from jobs.scopes import Scope
from jobs.sweep.ports import Metrics, Pods

ItemStatus = Literal["applied", "skipped", "failed"]
RowStatus = Literal["planned", "applied", "skipped", "failed", "refused", "none"]
WAITING: dict[str, RowStatus] = {"refused": "refused", "planned": "planned"}


@dataclass(frozen=True)
class Ports:
    metrics: Metrics | None  # None: the cluster has no Prometheus (``no_metrics`` says what to set)
    pods: Pods
    lock: RunLock
    witness: Witness | None = None  # which cluster ``pods`` reaches (jobs.runner)
    events: Events = field(default_factory=NoEvents)  # on the pods judged and acted on


@dataclass(frozen=True)
class Observation:
    pods: tuple[PodInfo, ...] = ()
    answers: Answers | None = None
    refusal: str | None = None  # nothing could be measured (no Prometheus configured)


@dataclass(frozen=True)
class SweepPodsPlan:
    plan: PodsPlan

    @property
    def items(self) -> tuple[Verdict, ...]:
        return self.plan.writes

    @property
    def changes(self) -> int:
        """Actions only: marks, unmarks and Events are writes (they take the Lease) but not changes."""
        return sum(v.counts for v in self.plan.verdicts)

    @property
    def considered(self) -> int:
        return self.plan.judged


@dataclass(frozen=True)
class PodResult:
    verdict: Verdict
    status: ItemStatus
    message: str = ""


SCALED_FROM = f"its {SCALED_FROM_ANNOTATION} annotation has the replicas it had"
#: The Event reason of an action, per action.
ACTED = {"delete": "GpuIdlePodDeleted", "scale-owner": "GpuIdleOwnerScaledToZero"}
#: The log event of an annotation write, per write.
DONE = {"mark": "sweep.marked", "unmark": "sweep.unmarked", "cap": "sweep.snooze_capped"}


@dataclass(frozen=True)
class SweepPodsWork(ScopeWork[Observation, SweepPodsPlan, Verdict, PodResult]):
    """The pods part on one cluster, as the runner drives it."""

    scope: Scope
    idle: IdlePods
    leaked: LeakedMemory | None
    matchers: Mapping[str, str]
    now: datetime
    backoff: Backoff
    ports: Ports
    log: Any
    no_metrics: str = "no Prometheus for this cluster: set clusters[].prometheus.url or GPU_JOBS_PROMETHEUS_URL"
    # Owners are scaled one at a time: two pods of one Deployment, acted on at once, would race on its
    # resourceVersion; one after the other, the second finds it already at 0.
    _scaling: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def queries(self) -> Queries:
        return queries(self.idle, self.leaked, self.matchers)

    def observe(self, first: Observation | None) -> Observation:
        metrics = self.ports.metrics
        if metrics is None:
            return Observation(refusal=self.no_metrics)
        pods = tuple(self.backoff.call(self.ports.pods.gpu_pods))
        if first is not None and first.answers is not None:
            # Under the Lease: the pods again (another run may have acted on them meanwhile; the runner plans again
            # when they changed), the metrics as measured a moment ago (a window of hours moves nothing in seconds).
            return Observation(pods, first.answers)
        q = self.queries

        def ask(promql: str | None) -> tuple[Sample, ...] | None:
            if promql is None:
                return None
            return tuple(self.backoff.call(lambda: metrics.query(promql, self.now)))

        util = ask(q.util)
        assert util is not None
        answers = Answers(util, ask(q.memory), ask(q.mig))
        self.log.info("sweep.observed", pods=len(pods), series=len(util), queries=len(q.all()))
        return Observation(pods, answers)

    def plan(self, observed: Observation) -> SweepPodsPlan:
        if observed.answers is None:
            return SweepPodsPlan(PodsPlan(refusal=observed.refusal))
        plan = plan_pods(list(observed.pods), observed.answers, self.idle, self.leaked, self.now)
        if plan.refusal is not None:
            self.log.error("sweep.refused", cluster=self.scope.name, reason=plan.refusal)
        for v in plan.verdicts:
            if v.failure is not None:
                self.log.error("sweep.cannot_act", namespace=v.pod.namespace, pod=v.pod.name, error=v.failure)
        return SweepPodsPlan(plan)

    def apply(self, item: Verdict, fence: Callable[[str], None]) -> PodResult:
        pod = item.pod
        where = f"{pod.namespace}/{pod.name}"
        try:
            now_pod = self.backoff.call(lambda: self.ports.pods.pod(pod.namespace, pod.name))
            changed = recheck(item, now_pod, self.idle, self.now)
            if changed is not None:
                self.log.info("sweep.pod_changed", namespace=pod.namespace, pod=pod.name, reason=changed)
                return PodResult(item, "skipped", f"nothing done: {changed}")
            assert now_pod is not None
            if item.write == "act":
                return self._act(item, now_pod, fence)
            fence(f"{item.write} {where}")
            notes = dict(item.annotations)
            self.backoff.call(lambda: self.ports.pods.annotate(now_pod, notes))
        except NotFound as exc:
            return PodResult(item, "skipped", f"nothing done: {where} is gone ({exc})")
        except Conflict as exc:  # the uid precondition: another pod of that name now; the next run judges it
            self.log.info("sweep.pod_changed", namespace=pod.namespace, pod=pod.name, reason=str(exc))
            return PodResult(item, "skipped", f"nothing done: {where} changed since it was read ({exc})")
        except CloudError as exc:
            self.log.error(f"sweep.{item.write}_failed", namespace=pod.namespace, pod=pod.name, error=str(exc))
            return PodResult(item, "failed", str(exc))
        self.log.info(DONE[item.write or ""], namespace=pod.namespace, pod=pod.name, message=item.message)
        if item.event is not None:
            reason, message, warning = item.event
            self._emit(now_pod, reason, message, warning=warning)
        return PodResult(item, "applied", item.message)

    def failed(self, item: Verdict, message: str, error: BaseException | None = None) -> PodResult:
        # Not done: a stop, a deadline, the Lease lost.
        self.log.error(f"sweep.{item.write}_failed", namespace=item.pod.namespace, pod=item.pod.name, error=message)
        return PodResult(item, "failed", message)

    def _act(self, item: Verdict, pod: PodInfo, fence: Callable[[str], None]) -> PodResult:
        action = item.action
        where = f"{pod.namespace}/{pod.name}"
        fence(f"{action} {where}")
        # Throttled and busy mean it was not done: resent. A lost answer is not resent blindly: the next run looks.
        retry: Callable[[CloudError], bool] = lambda e: isinstance(e, Throttled | Busy)  # noqa: E731
        if action == "delete":
            self.backoff.call(lambda: self.ports.pods.delete(pod), retryable=retry)
            done = f"deleted {where}"
        else:
            with self._scaling:
                scaled = self.backoff.call(lambda: self.ports.pods.scale_owner(pod), retryable=retry)
            # "Deployment ml/llm from 2", or "... already at 0" (another pod of the same owner came first).
            done = scaled if scaled.endswith("already at 0") else f"scaled {scaled} to 0 (restore: {SCALED_FROM})"
        message = f"{done}: {item.message}"
        self.log.warning("sweep.acted", namespace=pod.namespace, pod=pod.name, action=action, message=message)
        self._emit(pod, ACTED.get(action or "", "GpuIdleActed"), message, warning=True)
        return PodResult(item, "applied", message)

    def _emit(self, pod: PodInfo, reason: str, message: str, *, warning: bool) -> None:
        ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)  # the uid of the pod judged: no read for it
        self.ports.events.emit(ref, reason, message, "Warning" if warning else "Normal")


# --- the pods part's view of one cluster's envelope -------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    verdict: Verdict
    state: PodState  # what is true after the run (an act not done leaves the pod marked)
    message: str
    status: RowStatus


@dataclass(frozen=True)
class PodsReport:
    scope: Scope
    at: datetime
    dry_run: bool
    state: State  # the envelope's state, or "failed" when the plan refused to judge the cluster
    rows: tuple[Row, ...] = ()
    unallocated: tuple[Unallocated, ...] = ()
    reason: str | None = None
    judged: int = 0  # Running GPU pods judged


Envelope = ScopeReport[SweepPodsPlan, PodResult]


def report_of(envelope: Envelope) -> PodsReport:
    report = PodsReport(envelope.scope, envelope.at, envelope.dry_run, envelope.state, reason=envelope.reason)
    if envelope.plan is None:
        return report
    plan = envelope.plan.plan
    if plan.refusal is not None:
        return replace(report, state="failed", reason=plan.refusal)
    done = {(r.verdict.pod.namespace, r.verdict.pod.name): r for r in envelope.results}
    rows = []
    for v in plan.verdicts:
        result = done.get((v.pod.namespace, v.pod.name))
        if v.failure is not None:
            rows.append(Row(v, v.state, v.message, "failed"))
        elif v.write is None:
            rows.append(Row(v, v.state, v.message, "none"))
        elif result is None:  # a dry run, or refused, locked, failed: the plan as it was made
            rows.append(Row(v, v.state, v.message, WAITING.get(envelope.state, "none")))
        elif result.status == "applied":
            rows.append(Row(v, v.state, result.message, "applied"))
        else:
            # Not done: an act leaves the pod marked; a mark or unmark not made leaves it as it was.
            state: PodState = "marked" if v.write == "act" else v.state
            rows.append(Row(v, state, f"{result.status}: {result.message}", result.status))
    return replace(report, rows=tuple(rows), unallocated=plan.unallocated, judged=plan.judged)
