"""The pods part on one cluster through the runner, with in-memory Metrics and Pods: at most three queries and one
list, the Lease, a re-read before every write, Events, the view, the tally and the JSON contract.

NOW is Wed 2026-12-02 15:00 UTC; the window is 2h, the grace period 30m.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs import envelope
from jobs.core.idle_pods import Owner, PodInfo, Sample
from jobs.core.limits import ChangeLimit
from jobs.core.policy_sweep import IdlePods, LeakedMemory
from jobs.envelope import ScopeResult
from jobs.errors import CloudError, Conflict, Invalid, Throttled, Unavailable
from jobs.events import EventType, ObjectRef
from jobs.labels import IDLE_REASON_ANNOTATION, IDLE_SINCE_ANNOTATION
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings, Tally, outcome
from jobs.scopes import cluster
from jobs.sweep import pods, report
from tests.fakes import MemoryLease
from tests.fakes import RecordingLog as Log

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=5)
MARKED = {IDLE_SINCE_ANNOTATION: "2026-12-02T14:00:00Z", IDLE_REASON_ANNOTATION: "idle"}  # an hour ago: due
UTIL = "DCGM_FI_DEV_GPU_UTIL"


class MemoryMetrics:
    """Answers each query by the metric it names; ``faults`` are raised first, one per call."""

    def __init__(self, by_metric: Mapping[str, list[Sample]], faults: list[CloudError] | None = None) -> None:
        self.by_metric = by_metric
        self.faults = list(faults or [])
        self.down: CloudError | None = None  # raised on every call
        self.asked: list[str] = []

    def query(self, promql: str, at: datetime) -> list[Sample]:
        assert at == NOW
        self.asked.append(promql)
        if self.down is not None:
            raise self.down
        if self.faults:
            raise self.faults.pop(0)
        if "DCGM_FI_DEV_FB_USED" in promql:
            return list(self.by_metric.get("memory", []))
        metric = promql.removeprefix("avg_over_time(").split("{")[0].split("[")[0]
        return list(self.by_metric.get(metric, []))


class MemoryPods:
    """A cluster's GPU pods; ``later`` is what a re-read sees (a pod changed between the list and the write)."""

    def __init__(self, *listed: PodInfo) -> None:
        self.pods = {(p.namespace, p.name): p for p in listed}
        self.later: dict[tuple[str, str], PodInfo | None] = {}
        self.calls: list[str] = []
        self.events: list[tuple[str, str, str, bool]] = []
        self.fail: dict[str, CloudError] = {}

    def gpu_pods(self) -> list[PodInfo]:
        self.calls.append("list")
        return list(self.pods.values())

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        self.calls.append(f"get {namespace}/{name}")
        key = (namespace, name)
        return self.later[key] if key in self.later else self.pods.get(key)

    def _check(self, verb: str, pod: PodInfo) -> None:
        self.calls.append(f"{verb} {pod.namespace}/{pod.name}")
        if verb in self.fail:
            raise self.fail[verb]

    def annotate(self, pod: PodInfo, changes: Mapping[str, str | None]) -> None:
        self._check("annotate", pod)
        notes = {**pod.annotations, **{k: v for k, v in changes.items() if v is not None}}
        notes = {k: v for k, v in notes.items() if changes.get(k, "") is not None}
        self.pods[(pod.namespace, pod.name)] = replace(pod, annotations=notes)

    def delete(self, pod: PodInfo) -> None:
        self._check("delete", pod)
        self.pods[(pod.namespace, pod.name)] = replace(pod, deleting=True)

    def scale_owner(self, pod: PodInfo) -> str:
        self._check("scale", pod)
        return f"Deployment {pod.namespace}/llm from 2"

    def emit(self, ref: ObjectRef, reason: str, message: str, type: EventType = "Normal") -> None:
        assert ref.kind == "Pod"
        assert ref.uid.startswith("uid-")
        self.events.append((f"{ref.namespace}/{ref.name}", reason, message, type == "Warning"))


def gpu_pod(name: str, annotations: Mapping[str, str] | None = None, **fields: Any) -> PodInfo:
    base = PodInfo("ml", name, f"uid-{name}", "node-a", "Running", 1, OLD, False, dict(annotations or {}))
    return replace(base, **fields)


def util(value: float, name: str | None, uuid: str) -> Sample:
    labels = {"UUID": uuid, "gpu": "0", "Hostname": "node-a"}
    return Sample({**labels, "pod": name, "namespace": "ml"} if name else labels, value)


def policy(**fields: Any) -> IdlePods:
    return IdlePods.model_validate({"window": "2h", "gracePeriod": "30m", "action": "delete", **fields})


SCOPE = cluster("ml-prod")


def sweep(
    metrics: MemoryMetrics | None,
    kube: MemoryPods,
    idle: IdlePods | None = None,
    *,
    leaked: LeakedMemory | None = None,
    lease: MemoryLease | None = None,
) -> pods.SweepPodsWork:
    ports = pods.Ports(metrics, kube, lease or MemoryLease(), events=kube)  # the fake cluster keeps its Events
    backoff = Backoff(deadline_s=5, base_s=0.001, cap_s=0.001)
    return pods.SweepPodsWork(SCOPE, idle or policy(), leaked, {"cluster": "ml-prod"}, NOW, backoff, ports, Log())


@dataclass(frozen=True)
class Section:
    """One cluster's result, as the JSON envelope says it (its pods and unallocated GPUs) and as it counts."""

    result: ScopeResult

    @property
    def state(self) -> str:
        return self.result.state

    @property
    def reason(self) -> str | None:
        return self.result.reason

    @property
    def tally(self) -> Tally:
        return envelope.tally(self.result)

    def _items(self, kind: str) -> tuple[dict[str, Any], ...]:
        items = envelope.document("sweep", [self.result], outcome([self.tally], dry_run=False))["items"]
        return tuple(i for i in items if i["kind"] == kind)

    @property
    def pods(self) -> tuple[dict[str, Any], ...]:
        return self._items("pod")

    @property
    def unallocated(self) -> tuple[dict[str, Any], ...]:
        return self._items("unallocated GPU")


def to_text(sections: list[Section]) -> str:
    return envelope.to_text([s.result for s in sections], "")


def run(work: pods.SweepPodsWork, *, dry_run: bool = False, limit: str = "10") -> Section:
    settings = RunSettings(dry_run=dry_run, limit=ChangeLimit.parse(limit), holder="me", clock=lambda: NOW)
    runner: Reconcile[Any, Any, Any, Any] = Reconcile({SCOPE: work}, settings, NOW, Log(), "actions")
    (scope,) = runner.run()
    return Section(report.pods_result(pods.report_of(scope)))


def states(section: Section) -> dict[str, str]:
    return {row["pod"]: row["state"] for row in section.pods}


def world() -> tuple[MemoryMetrics, MemoryPods]:
    metrics = MemoryMetrics(
        {
            UTIL: [
                util(0.4, "new-idle", "GPU-1"),
                util(0.3, "due", "GPU-2"),
                util(70, "busy", "GPU-3"),
                util(55, "was-idle", "GPU-4"),
                util(0, None, "GPU-5"),  # no pod holds it
            ]
        }
    )
    kube = MemoryPods(
        gpu_pod("new-idle"),
        gpu_pod("due", MARKED),
        gpu_pod("busy"),
        gpu_pod("was-idle", MARKED),
        gpu_pod("unseen"),
    )
    return metrics, kube


def test_one_run_marks_acts_unmarks_and_tells_each_pod() -> None:
    metrics, kube = world()
    section = run(sweep(metrics, kube))
    assert len(metrics.asked) == 2  # the metric and the MIG slices, once; no memory query without leakedMemory
    assert all('cluster="ml-prod"' in q for q in metrics.asked)
    assert kube.calls.count("list") == 2  # to plan, and again under the Lease (the runner's look-again)
    assert states(section) == {"new-idle": "marked", "due": "acted", "was-idle": "unmarked", "unseen": "unknown"}
    assert kube.pods[("ml", "due")].deleting
    assert kube.pods[("ml", "new-idle")].annotations[IDLE_SINCE_ANNOTATION] == "2026-12-02T15:00:00Z"
    assert IDLE_SINCE_ANNOTATION not in kube.pods[("ml", "was-idle")].annotations
    events = {pod: (reason, warning) for pod, reason, _, warning in kube.events}
    assert events == {
        "ml/new-idle": ("GpuIdle", True),
        "ml/due": ("GpuIdlePodDeleted", True),
        "ml/was-idle": ("GpuBusyAgain", False),
    }
    assert section.unallocated == (
        {
            "kind": "unallocated GPU",
            "scope": "ml-prod",
            "name": "node-a",
            "status": "unchanged",
            "reason": "no pod holds them",
            "cluster": "ml-prod",
            "node": "node-a",
            "gpus": 1,
        },
    )
    # Every write read its pod again first.
    assert kube.calls.index("get ml/due") < kube.calls.index("delete ml/due")
    assert section.tally.failed == 0
    assert section.tally.applied == 3
    assert section.tally.skipped == 1  # the unknown pod: reported, not a failure


def test_a_second_run_writes_nothing() -> None:
    metrics, kube = world()
    run(sweep(metrics, kube))
    kube.calls.clear()
    kube.events.clear()
    again = run(sweep(metrics, kube))
    assert [c for c in kube.calls if not c.startswith(("list", "get"))] == []
    assert kube.events == []
    assert states(again) == {"new-idle": "marked", "unseen": "unknown"}  # deleting: not reported; busy: quiet


def test_dry_run_plans_and_writes_nothing() -> None:
    metrics, kube = world()
    section = run(sweep(metrics, kube), dry_run=True)
    assert kube.calls == ["list"]
    assert states(section)["due"] == "acted"
    assert section.tally.planned == 3
    assert section.tally.applied == 0


def test_the_limit_counts_actions_only() -> None:
    metrics, kube = world()
    assert run(sweep(metrics, kube), limit="1").state == "applied"  # 1 delete; the mark and unmark do not count
    metrics, kube = world()
    kube.pods[("ml", "new-idle")] = gpu_pod("new-idle", MARKED)
    refused = run(sweep(metrics, kube), limit="1")
    assert refused.state == "refused"
    assert refused.tally.refused
    assert not any(c.startswith(("annotate", "delete")) for c in kube.calls)


def test_a_pod_changed_since_the_list_is_left_alone() -> None:
    metrics, kube = world()
    kube.later[("ml", "due")] = gpu_pod("due", {**MARKED, "gpu-jobs/keep-alive": "true"})
    kube.later[("ml", "new-idle")] = replace(gpu_pod("new-idle"), uid="uid-replaced")
    section = run(sweep(metrics, kube))
    rows = {row["pod"]: row for row in section.pods}
    assert rows["due"]["state"] == "marked"
    assert "exempt now" in rows["due"]["reason"]
    assert "is another pod now" in rows["new-idle"]["reason"]
    assert "delete ml/due" not in kube.calls
    assert "annotate ml/new-idle" not in kube.calls
    assert section.tally.failed == 0
    assert section.tally.skipped == 3


def test_scale_owner_of_a_job_pod_fails_that_pod_only() -> None:
    metrics, kube = world()
    kube.pods[("ml", "due")] = gpu_pod("due", MARKED, owner=Owner("Job", "batch", "u"))
    kube.pods[("ml", "llm")] = gpu_pod("llm", MARKED, owner=Owner("ReplicaSet", "llm-7d9", "u2"))
    metrics.by_metric[UTIL].append(util(0.2, "llm", "GPU-6"))
    section = run(sweep(metrics, kube, policy(action="scale-owner")))
    rows = {row["pod"]: row for row in section.pods}
    assert rows["due"]["state"] == "marked"
    assert "cannot scale-owner a pod owned by Job: use action delete or exempt it" in rows["due"]["reason"]
    assert rows["llm"]["state"] == "acted"
    assert rows["llm"]["reason"].startswith("scaled Deployment ml/llm from 2 to 0")
    assert "scale ml/due" not in kube.calls
    assert section.tally.failed == 1


def test_an_action_that_fails_is_a_failed_item_and_the_others_go_on() -> None:
    metrics, kube = world()
    kube.fail["delete"] = Invalid("admission webhook denied the request")
    section = run(sweep(metrics, kube))
    rows = {row["pod"]: row for row in section.pods}
    assert rows["due"]["state"] == "marked"
    assert "admission webhook" in rows["due"]["reason"]
    assert rows["new-idle"]["state"] == "marked"
    assert section.tally.failed == 1
    assert outcome([section.tally], dry_run=False).exit_code == 1


def test_a_pod_replaced_at_the_write_is_skipped_not_failed() -> None:
    metrics, kube = world()
    kube.fail["annotate"] = Conflict("Precondition failed: UID in precondition: uid-new-idle, UID in object meta: x")
    section = run(sweep(metrics, kube))
    row = next(r for r in section.pods if r["pod"] == "new-idle")
    assert "changed since it was read" in row["reason"]
    assert section.tally.failed == 0
    assert not any(e[0] == "ml/new-idle" for e in kube.events)


def test_throttled_reads_are_retried() -> None:
    metrics, kube = world()
    metrics.faults = [Throttled("429 slow down")]
    section = run(sweep(metrics, kube))
    assert section.state == "applied"
    assert len(metrics.asked) == 3


def test_prometheus_down_fails_the_cluster_and_changes_nothing() -> None:
    metrics, kube = world()
    metrics.down = Unavailable("connection refused")
    work = replace(sweep(metrics, kube), backoff=Backoff(deadline_s=0.05, base_s=0.001, cap_s=0.001))
    section = run(work)
    assert section.state == "failed"
    assert "connection refused" in (section.reason or "")
    assert section.pods == ()
    assert section.tally.failed == 1
    assert not any(c.startswith(("annotate", "delete")) for c in kube.calls)


def test_no_prometheus_configured_fails_the_cluster() -> None:
    _, kube = world()
    section = run(sweep(None, kube))
    assert section.state == "failed"
    assert "GPU_JOBS_PROMETHEUS_URL" in (section.reason or "")
    assert kube.calls == []


@pytest.mark.parametrize(
    ("series", "words"),
    [([], "no DCGM series for this cluster"), ([util(0, "due", "GPU-2"), util(0, None, "GPU-5")], "broken metric")],
)
def test_a_cluster_without_usable_series_fails_and_judges_nothing(series: list[Sample], words: str) -> None:
    _, kube = world()
    section = run(sweep(MemoryMetrics({UTIL: series}), kube))
    assert section.state == "failed"
    assert words in (section.reason or "")
    assert section.pods == ()
    assert section.tally.failed == 1
    text = to_text([section])
    assert "FAILED" in text
    assert "nothing to do" not in text


def test_leaked_memory_asks_the_memory_share_and_says_so() -> None:
    metrics, kube = world()
    metrics.by_metric = {**metrics.by_metric, "memory": [util(0.97, "new-idle", "GPU-1")]}
    leaked = LeakedMemory.model_validate({"utilBelow": 1, "memoryUsedAbove": "90%"})
    section = run(sweep(metrics, kube, leaked=leaked))
    assert len(metrics.asked) == 3
    row = next(r for r in section.pods if r["pod"] == "new-idle")
    assert (row["idleReason"], row["memoryUsed"]) == ("leaked-memory", 0.97)
    assert kube.pods[("ml", "new-idle")].annotations[IDLE_REASON_ANNOTATION] == "leaked-memory"


def test_another_run_holding_the_lease_does_nothing() -> None:
    metrics, kube = world()
    section = run(sweep(metrics, kube, lease=MemoryLease("other-run")))
    assert section.state == "locked"
    assert not any(c.startswith(("get", "annotate", "delete")) for c in kube.calls)
    assert "another run holds the lease (other-run)" in to_text([section])


def test_the_json_envelope_is_one_line() -> None:
    metrics, kube = world()
    section = run(sweep(metrics, kube))
    text = envelope.to_json("sweep", [section.result], outcome([section.tally], dry_run=False))
    assert text.count("\n") == 1
    document = json.loads(text)
    assert tuple(document) == envelope.ENVELOPE_KEYS
    (scope,) = document["scopes"]
    assert (scope["kind"], scope["name"], scope["state"], scope["reason"]) == ("cluster", "ml-prod", "applied", None)
    due = next(p for p in document["items"] if p["kind"] == "pod" and p["pod"] == "due")
    assert set(due) == {
        "kind", "scope", "name", "status", "reason",
        "cluster", "namespace", "pod", "gpus", "utilization", "memoryUsed", "idleReason", "state", "action", "snooze",
    }  # fmt: skip
    assert (due["cluster"], due["state"], due["action"], due["utilization"]) == ("ml-prod", "acted", "delete", 0.3)


def test_text_report_names_each_pod_and_the_unallocated_gpus() -> None:
    metrics, kube = world()
    text = to_text([run(sweep(metrics, kube), dry_run=True)])
    assert text.startswith("gpu-jobs sweep in cluster ml-prod at 2026-12-02T15:00:00+00:00 (dry run: nothing changed)")
    assert "ml/due" in text
    assert "delete (due)" in text
    assert "unallocated GPUs (no pod holds them): 1 on node-a (1)" in text


def test_a_quiet_cluster_says_nothing_to_do() -> None:
    kube = MemoryPods(gpu_pod("busy"))
    section = run(sweep(MemoryMetrics({UTIL: [util(70, "busy", "GPU-3")]}), kube))
    assert "nothing to do: 1 running GPU pods judged, none idle or marked" in to_text([section])


def test_a_snooze_beyond_max_snooze_is_capped_reported_and_said_once() -> None:
    metrics, kube = world()
    kube.pods[("ml", "due")] = gpu_pod("due", {**MARKED, "gpu-jobs/keep-alive-until": "2099-01-01T00:00:00Z"})
    planned = run(sweep(metrics, kube), dry_run=True)
    assert "gpu-jobs/keep-alive-capped-until" not in kube.pods[("ml", "due")].annotations  # a dry run writes nothing
    assert not [c for c in kube.calls if c.startswith("annotate")]
    section = run(sweep(metrics, kube))
    shown = "snoozed until 2026-12-09T15:00Z (capped by sweep.idlePods.maxSnooze 7d; asked 2099-01-01T00:00Z)"
    for done in (planned, section):
        row = next(r for r in done.pods if r["pod"] == "due")
        assert (row["state"], row["reason"]) == ("snoozed", shown)
        assert row["snooze"] == {
            "until": "2026-12-09T15:00:00Z",
            "asked": "2099-01-01T00:00:00Z",
            "cappedBy": "sweep.idlePods.maxSnooze",
        }
    lines = to_text([section]).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  ml/due "))
    assert "snoozed" in lines[at]
    assert lines[at + 1].strip() == shown
    notes = kube.pods[("ml", "due")].annotations
    assert notes["gpu-jobs/keep-alive-capped-until"] == "2026-12-09T15:00:00Z"
    assert notes["gpu-jobs/keep-alive-until"] == "2099-01-01T00:00:00Z"  # a person's answer stays as written
    assert IDLE_SINCE_ANNOTATION not in notes
    (event,) = [e for e in kube.events if e[0] == "ml/due"]
    assert event[1:] == (
        "GpuSnoozeCapped",
        'gpu-jobs/keep-alive-until="2099-01-01T00:00:00Z" is beyond sweep.idlePods.maxSnooze (7d): snoozed until'
        " 2026-12-09T15:00Z only, then judged as usual; the idle mark is removed",
        True,
    )
    again = run(sweep(metrics, kube))  # the next run: the cap recorded, nothing written, no second Event
    assert next(r for r in again.pods if r["pod"] == "due")["reason"] == shown
    assert len([e for e in kube.events if e[0] == "ml/due"]) == 1


def test_a_snooze_removes_the_mark_and_says_until_when() -> None:
    metrics, kube = world()
    kube.pods[("ml", "due")] = gpu_pod("due", {**MARKED, "gpu-jobs/keep-alive-until": "2026-12-03T09:00:00+01:00"})
    section = run(sweep(metrics, kube))
    row = next(r for r in section.pods if r["pod"] == "due")
    assert row["state"] == "snoozed"
    assert IDLE_SINCE_ANNOTATION not in kube.pods[("ml", "due")].annotations
    assert "gpu-jobs/keep-alive-until" in kube.pods[("ml", "due")].annotations  # a person's answer stays
    (event,) = [e for e in kube.events if e[0] == "ml/due"]
    assert event[1:] == (
        "GpuIdleSnoozed",
        "snoozed until 2026-12-03T08:00Z (gpu-jobs/keep-alive-until): the idle mark is removed",
        False,
    )
    assert not kube.pods[("ml", "due")].deleting
