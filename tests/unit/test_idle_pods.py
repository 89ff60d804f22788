"""Idle GPU pods, pure: the queries, the series' shapes, devices, the per-pod judgement and the plan.

Times: NOW is Wed 2026-12-02 15:00 UTC; the window is 2h and the grace period 30m unless a test says otherwise.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.core.idle_pods import (
    Answers,
    Owner,
    PodInfo,
    Sample,
    Unallocated,
    Verdict,
    device_of,
    plan_pods,
    pod_of,
    queries,
    recheck,
    selector,
)
from jobs.core.policy_sweep import IdlePods, LabelNames, LeakedMemory
from jobs.labels import (
    IDLE_REASON_ANNOTATION,
    IDLE_SINCE_ANNOTATION,
    KEEP_ALIVE_CAPPED_ASKED_ANNOTATION,
    KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION,
    KEEP_ALIVE_UNTIL_ANNOTATION,
)

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=5)  # started long before the window
UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def idle(**fields: Any) -> IdlePods:
    return IdlePods.model_validate({"below": 5, "window": "2h", "gracePeriod": "30m", "action": "delete", **fields})


LEAKED = LeakedMemory.model_validate({"utilBelow": 1, "memoryUsedAbove": "90%"})


def pod(
    name: str = "train-0",
    namespace: str = "ml",
    *,
    gpus: int = 1,
    uid: str | None = None,
    phase: str = "Running",
    started: datetime | None = OLD,
    deleting: bool = False,
    annotations: Mapping[str, str] | None = None,
    owner: Owner | None = None,
    resources: tuple[str, ...] = ("nvidia.com/gpu",),
    node: str = "node-a",
) -> PodInfo:
    return PodInfo(
        namespace,
        name,
        uid or f"uid-{name}",
        node,
        phase,
        gpus,
        started,
        deleting,
        dict(annotations or {}),
        owner,
        resources,
    )


def series(value: float, uuid: str = "GPU-1", **labels: str) -> Sample:
    base = {"UUID": uuid, "gpu": "0", "Hostname": "node-a", "modelName": "NVIDIA A100", "pci_bus_id": "0000:00:1E.0"}
    return Sample({**base, **labels}, value)


def on(value: float, uuid: str = "GPU-1", name: str = "train-0", namespace: str = "ml", **labels: str) -> Sample:
    """A series attributed the current way (``pod``/``namespace``/``container``)."""
    return series(value, uuid, pod=name, namespace=namespace, container="main", **labels)


def plan(
    pods: list[PodInfo],
    util: list[Sample],
    policy: IdlePods | None = None,
    *,
    memory: list[Sample] | None = None,
    mig: list[Sample] | None = None,
    leaked: LeakedMemory | None = None,
    now: datetime = NOW,
) -> dict[str, Verdict]:
    policy = policy or idle()
    answers = Answers(tuple(util), tuple(memory) if memory is not None else None, tuple(mig or ()))
    done = plan_pods(pods, answers, policy, leaked, now)
    assert done.refusal is None, done.refusal
    return {v.pod.name: v for v in done.verdicts}


# --- queries -----------------------------------------------------------------------------------------------------


def test_the_queries_carry_the_clusters_matchers_escaped() -> None:
    q = queries(idle(), LEAKED, {"cluster": 'ml "prod"\\eu', "env": "a\nb"})
    assert q.util == ('avg_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="ml \\"prod\\"\\\\eu",env="a\\nb"}[7200s])')
    assert q.mig == (
        'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="ml \\"prod\\"\\\\eu",env="a\\nb",GPU_I_ID!=""}[7200s])'
    )
    assert q.memory is not None
    assert q.memory.count("DCGM_FI_DEV_FB_USED") == 2
    assert "DCGM_FI_DEV_FB_FREE" in q.memory
    assert len(q.all()) == 3


def test_the_fewest_queries_without_leaked_memory_or_with_the_engine_metric() -> None:
    assert queries(idle(), None, {}).all() == (
        "avg_over_time(DCGM_FI_DEV_GPU_UTIL[7200s])",
        'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""}[7200s])',
    )
    assert queries(idle(metric=ENGINE), None, {"cluster": "a"}).all() == (
        'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="a"}[7200s])',
    )


@pytest.mark.skipif(shutil.which("promtool") is None, reason="the Debian promtool parses PromQL")
def test_promtool_parses_every_query(tmp_path: Path) -> None:
    q = queries(idle(), LEAKED, {"cluster": 'we"ird\\name\n', "region": "eu-west-1"})
    rules = "groups:\n- name: sweep\n  rules:\n" + "".join(
        f"  - record: sweep:q{i}\n    expr: '{expr.replace(chr(39), chr(39) * 2)}'\n" for i, expr in enumerate(q.all())
    )
    (tmp_path / "rules.yml").write_text(rules)
    done = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "rules.yml")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_selector_without_matchers_is_the_bare_metric() -> None:
    assert selector("up", {}) == "up"
    assert selector("up", {"b": "2", "a": "1"}) == 'up{a="1",b="2"}'


# --- label shapes ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"pod": "p", "namespace": "n", "container": "c"}, ("n", "p")),
        # A ServiceMonitor without honorLabels: `pod` names the exporter, exported_pod the workload.
        (
            {"pod": "dcgm-exporter-x", "namespace": "gpu-operator", "exported_pod": "p", "exported_namespace": "n"},
            ("n", "p"),
        ),
        ({"pod_name": "p", "pod_namespace": "n", "container_name": "c"}, ("n", "p")),  # before dcgm-exporter 2.x
        ({"pod": "", "namespace": ""}, None),  # a GPU no pod holds
        ({"UUID": "GPU-1"}, None),
    ],
)
def test_auto_recognises_each_label_shape(labels: dict[str, str], expected: tuple[str, str] | None) -> None:
    assert pod_of(labels, "auto") == expected


def test_explicit_labels_use_only_those() -> None:
    names = LabelNames(pod="workload", namespace="ns")
    assert pod_of({"workload": "p", "ns": "n", "pod": "other", "namespace": "x"}, names) == ("n", "p")
    assert pod_of({"pod": "p", "namespace": "n"}, names) is None


def test_devices_by_uuid_else_hostname_and_index_plus_mig_instance() -> None:
    assert device_of({"UUID": "GPU-1", "gpu": "0", "pod": "a"}) == ("GPU-1", "")
    assert device_of({"UUID": "GPU-1", "gpu": "0", "vgpu": "3"}) == ("GPU-1", "")  # a time-sliced copy
    assert device_of({"hostname": "node-b", "gpu": "2"}) == ("node-b/2", "")  # lowercase hostname
    assert device_of({"UUID": "GPU-1", "GPU_I_ID": "7"}) == ("GPU-1", "7")


def test_exported_trap_judges_the_workload_and_the_exporter_holds_nothing() -> None:
    exporter = {"pod": "dcgm-exporter-x", "namespace": "gpu-operator"}
    util = [
        series(0.4, "GPU-1", exported_pod="train-0", exported_namespace="ml", **exporter),
        series(0.0, "GPU-2", **exporter),  # no workload on GPU-2: only the exporter's own labels
    ]
    done = plan_pods([pod()], Answers(tuple(util)), idle(), None, NOW)
    assert [(v.pod.name, v.state) for v in done.verdicts] == [("train-0", "marked")]
    assert done.unallocated == (Unallocated("node-a", 1),)


def test_old_pod_name_shape_and_lowercase_hostname() -> None:
    util = [Sample({"hostname": "node-a", "gpu": "0", "pod_name": "train-0", "pod_namespace": "ml"}, 1.0)]
    assert plan([pod()], util)["train-0"].state == "marked"


def test_explicit_labels_ignore_the_exporters_pod() -> None:
    policy = idle(labels={"pod": "exported_pod", "namespace": "exported_namespace"})
    util = [series(50, pod="train-0", namespace="ml")]  # the wrong labels for this policy: nothing attributed
    verdict = plan([pod()], util, policy)["train-0"]
    assert verdict.state == "unknown"
    assert "no DCGM_FI_DEV_GPU_UTIL series" in verdict.message


# --- MIG ---------------------------------------------------------------------------------------------------------


def test_mig_pod_judged_by_gr_engine_active_when_util_cannot() -> None:
    mig_pod = pod("mig-0", resources=("nvidia.com/mig-1g.10gb",))
    util = [on(0, "GPU-9", "mig-0", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb"), on(40, "GPU-2", "busy-0")]
    engine = [on(0.002, "GPU-9", "mig-0", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb")]
    verdicts = plan([mig_pod, pod("busy-0")], util, mig=engine)
    assert verdicts["mig-0"].state == "marked"
    assert verdicts["mig-0"].utilization == pytest.approx(0.2)
    assert "(0.2% by DCGM_FI_PROF_GR_ENGINE_ACTIVE: a MIG slice)" in verdicts["mig-0"].message
    assert "busy-0" not in verdicts


def test_busy_mig_slice_is_busy_by_engine_ratio() -> None:
    mig_pod = pod("mig-0", resources=("nvidia.com/mig-1g.10gb",))
    engine = [on(0.5, "GPU-9", "mig-0", GPU_I_ID="3")]
    assert plan([mig_pod], [on(0, "GPU-9", "mig-0", GPU_I_ID="3"), on(30, "GPU-2", "x")], mig=engine) == {}


def test_mig_pod_without_engine_series_cannot_be_judged() -> None:
    mig_pod = pod("mig-0", resources=("nvidia.com/mig-1g.10gb",))
    verdict = plan([mig_pod], [on(0, "GPU-9", "mig-0", GPU_I_ID="3"), on(30, "GPU-2", "x")])["mig-0"]
    assert verdict.state == "unknown"
    assert verdict.write is None
    assert verdict.message.startswith(
        "DCGM_FI_DEV_GPU_UTIL cannot judge a MIG slice and DCGM_FI_PROF_GR_ENGINE_ACTIVE has no series"
    )
    assert "set idlePods.metric" in verdict.message


def test_engine_metric_judges_whole_gpus_and_slices_as_ratios() -> None:
    util = [on(0.01, "GPU-1", "train-0"), on(0.9, "GPU-9", "mig-0", GPU_I_ID="3")]
    verdicts = plan([pod(), pod("mig-0", resources=("nvidia.com/mig-1g.10gb",))], util, idle(metric=ENGINE))
    assert verdicts["train-0"].state == "marked"
    assert verdicts["train-0"].utilization == pytest.approx(1.0)
    assert "mig-0" not in verdicts  # 90% busy


# --- time-slicing and multi-GPU ----------------------------------------------------------------------------------


def test_time_sliced_copies_are_one_device_and_never_summed() -> None:
    shared = ("nvidia.com/gpu.shared",)
    a, b = pod("a", resources=shared), pod("b", resources=shared)
    # Each sharing pod gets a copy of the device's series; the values are identical and are not added up.
    util = [on(3, "GPU-1", "a", vgpu="0"), on(3, "GPU-1", "b", vgpu="1")]
    verdicts = plan([a, b], util)
    assert {n: (v.state, v.utilization) for n, v in verdicts.items()} == {"a": ("marked", 3), "b": ("marked", 3)}


def test_a_shared_device_busy_for_one_is_busy_for_all() -> None:
    shared = ("nvidia.com/gpu.shared",)
    util = [on(3, "GPU-1", "a", vgpu="0"), on(60, "GPU-1", "b", vgpu="1")]  # max over copies: the device is busy
    assert plan([pod("a", resources=shared), pod("b", resources=shared)], util) == {}


def test_multi_gpu_pod_idle_only_when_all_its_gpus_are() -> None:
    util = [on(0.5, "GPU-1", "big"), on(80, "GPU-2", "big"), on(0.1, "GPU-3", "both"), on(0.2, "GPU-4", "both")]
    verdicts = plan([pod("big", gpus=2), pod("both", gpus=2)], util)
    assert "big" not in verdicts
    assert verdicts["both"].state == "marked"
    assert verdicts["both"].utilization == pytest.approx(0.2)


def test_fewer_devices_seen_than_gpus_is_unknown() -> None:
    verdict = plan([pod("big", gpus=2)], [on(0.5, "GPU-1", "big")])["big"]
    assert verdict.state == "unknown"
    assert "1 of its 2 GPUs" in verdict.message


# --- the per-pod judgement ---------------------------------------------------------------------------------------


def test_first_detection_marks_with_a_warning_that_says_what_and_when() -> None:
    verdict = plan([pod()], [on(0.4)])["train-0"]
    assert verdict.state == "marked"
    assert verdict.write == "mark"
    assert verdict.reason == "idle"
    assert verdict.annotations == {IDLE_SINCE_ANNOTATION: "2026-12-02T15:00:00Z", IDLE_REASON_ANNOTATION: "idle"}
    assert verdict.event == (
        "GpuIdle",
        "idle below 5% for 2h (0.4%): will be deleted after 2026-12-02T15:30Z unless it becomes busy, is annotated"
        " gpu-jobs/keep-alive, or gpu-jobs/keep-alive-until=<RFC 3339>",
        True,
    )
    assert not verdict.counts


def test_busy_pod_without_a_mark_is_not_reported() -> None:
    assert plan([pod()], [on(5.0)]) == {}  # at the threshold is busy


def test_grace_cycle_marked_waits_then_acts() -> None:
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T14:40:00Z", IDLE_REASON_ANNOTATION: "idle"})
    waiting = plan([marked], [on(0.4)])["train-0"]
    assert (waiting.state, waiting.write) == ("marked", None)
    assert "will be deleted after 2026-12-02T15:10Z" in waiting.message
    due = plan([marked], [on(0.4)], now=datetime(2026, 12, 2, 15, 10, tzinfo=UTC))["train-0"]
    assert (due.state, due.write, due.action, due.counts) == ("acted", "act", "delete", True)
    assert due.mark == "2026-12-02T14:40:00Z"


def test_an_unreadable_mark_is_marked_again_now() -> None:
    verdict = plan([pod(annotations={IDLE_SINCE_ANNOTATION: "yesterday"})], [on(0.4)])["train-0"]
    assert verdict.write == "mark"
    assert verdict.annotations[IDLE_SINCE_ANNOTATION] == "2026-12-02T15:00:00Z"


def test_busy_again_is_unmarked_with_a_normal_event() -> None:
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T14:40:00Z", IDLE_REASON_ANNOTATION: "idle"})
    verdict = plan([marked], [on(45)])["train-0"]
    assert (verdict.state, verdict.write) == ("unmarked", "unmark")
    assert verdict.annotations == {IDLE_SINCE_ANNOTATION: None, IDLE_REASON_ANNOTATION: None}
    assert verdict.event is not None
    assert verdict.event[0] == "GpuBusyAgain"
    assert verdict.event[2] is False


def test_young_pod_reported_only_if_it_would_be_idle() -> None:
    young = pod(started=NOW - timedelta(minutes=90))
    verdict = plan([young], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("young", None)
    assert plan([young], [on(50)]) == {}


def test_no_series_for_a_pod_is_unknown_never_idle() -> None:
    verdicts = plan([pod(), pod("other")], [on(50, "GPU-2", "other")])
    assert verdicts["train-0"].state == "unknown"
    assert verdicts["train-0"].write is None
    assert verdicts["train-0"].utilization is None


@pytest.mark.parametrize(
    ("target", "policy"),
    [
        (pod("srv", "serving"), idle(exempt={"namespaces": ["serving"]})),
        (pod(annotations={"gpu-jobs/keep-alive": ""}), idle()),
        (pod(annotations={"team/hands-off": "yes"}), idle(exempt={"annotation": "team/hands-off"})),
    ],
)
def test_exempt_pods_are_reported_if_idle_and_never_written(target: PodInfo, policy: IdlePods) -> None:
    verdict = plan([target], [on(0.4, name=target.name, namespace=target.namespace)], policy)[target.name]
    assert (verdict.state, verdict.write) == ("exempt", None)
    assert plan([target], [on(50, name=target.name, namespace=target.namespace)], policy) == {}


def test_an_exempt_pod_loses_a_mark_made_before_its_exemption() -> None:
    """Else, once the exemption goes, an old mark would let the pod be acted on at once, without a fresh warning."""
    notes = {"gpu-jobs/keep-alive": "", IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}
    verdict = plan([pod(annotations=notes)], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("exempt", "unmark")
    assert verdict.event is not None
    assert verdict.event[0] == "GpuIdleExempt"


def test_snooze_in_the_future_removes_the_mark() -> None:
    notes = {KEEP_ALIVE_UNTIL_ANNOTATION: "2026-12-03T09:00:00+01:00", IDLE_SINCE_ANNOTATION: "2026-12-02T14:00:00Z"}
    verdict = plan([pod(annotations=notes)], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("snoozed", "unmark")
    assert "snoozed until 2026-12-03T08:00Z" in verdict.message
    unmarked = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: "2026-12-03T09:00:00Z"})], [on(0.4)])["train-0"]
    assert (unmarked.state, unmarked.write) == ("snoozed", None)


def test_snooze_in_the_past_is_ignored() -> None:
    verdict = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: "2026-12-02T14:59:00Z"})], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("marked", "mark")


@pytest.mark.parametrize("text", ["next week", "2026-12-03T09:00:00", ""])
def test_unparseable_snooze_is_exempt_with_the_reason(text: str) -> None:
    verdict = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: text})], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("exempt", None)
    assert "is not an RFC 3339 time with an offset" in verdict.message


# --- snoozes end: sweep.idlePods.maxSnooze (7d by default) ---------------------------------------------------------

FOREVER = "2099-01-01T00:00:00+01:00"  # a forgotten snooze
CAP = "2026-12-09T15:00:00Z"  # NOW + 7d: the cap first seen at NOW
CAPPED = {KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER, KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION: CAP,
          KEEP_ALIVE_CAPPED_ASKED_ANNOTATION: FOREVER}  # fmt: skip


def test_a_snooze_within_the_cap_is_as_asked_and_writes_nothing() -> None:
    notes = {KEEP_ALIVE_UNTIL_ANNOTATION: "2026-12-09T14:59:00Z"}  # a minute short of NOW + 7d
    verdict = plan([pod(annotations=notes)], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("snoozed", None)
    assert verdict.message == "snoozed until 2026-12-09T14:59Z (gpu-jobs/keep-alive-until)"
    assert verdict.snooze is not None
    assert verdict.snooze.capped is None


def test_a_snooze_beyond_the_cap_is_recorded_once_with_a_warning_event() -> None:
    verdict = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER})], [on(0.4)])["train-0"]
    assert (verdict.state, verdict.write) == ("snoozed", "cap")
    assert verdict.message == (
        "snoozed until 2026-12-09T15:00Z (capped by sweep.idlePods.maxSnooze 7d; asked 2098-12-31T23:00Z)"
    )
    assert verdict.annotations == {KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION: CAP, KEEP_ALIVE_CAPPED_ASKED_ANNOTATION: FOREVER}
    assert verdict.event == (
        "GpuSnoozeCapped",
        'gpu-jobs/keep-alive-until="2099-01-01T00:00:00+01:00" is beyond sweep.idlePods.maxSnooze (7d): snoozed until'
        " 2026-12-09T15:00Z only, then judged as usual",
        True,
    )
    assert not verdict.counts  # a record, not an action: no change limit spent


def test_a_busy_pod_gets_its_cap_recorded_too() -> None:
    """The cap counts from when the value was first seen, not from when the pod later goes idle."""
    verdict = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER})], [on(70)])["train-0"]
    assert (verdict.state, verdict.write, verdict.reason) == ("snoozed", "cap", None)


def test_a_marked_pod_beyond_the_cap_loses_its_mark_in_the_same_write() -> None:
    notes = {KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER, IDLE_SINCE_ANNOTATION: "2026-12-02T14:00:00Z"}
    verdict = plan([pod(annotations=notes)], [on(0.4)])["train-0"]
    assert verdict.write == "cap"
    assert verdict.annotations == {
        KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION: CAP,
        KEEP_ALIVE_CAPPED_ASKED_ANNOTATION: FOREVER,
        IDLE_SINCE_ANNOTATION: None,
        IDLE_REASON_ANNOTATION: None,
    }
    assert verdict.event is not None
    assert verdict.event[1].endswith("then judged as usual; the idle mark is removed")


@pytest.mark.parametrize(
    ("later", "state", "write"),
    [
        (timedelta(days=1), "snoozed", None),  # the recorded cap holds: no new cap, no write, no second Event
        (timedelta(days=7), "marked", "mark"),  # the cap reached: judged as usual, a fresh warning
        (timedelta(days=30), "marked", "mark"),  # a late run: the same
    ],
)
def test_the_snooze_really_ends_at_the_recorded_cap(later: timedelta, state: str, write: str | None) -> None:
    verdict = plan([pod(annotations=CAPPED)], [on(0.4)], now=NOW + later)["train-0"]
    assert (verdict.state, verdict.write) == (state, write)
    assert verdict.snooze is not None
    assert verdict.snooze.until == datetime(2026, 12, 9, 15, tzinfo=UTC)  # stable across runs


def test_the_warning_after_a_capped_snooze_says_why_it_ended() -> None:
    verdict = plan([pod(annotations=CAPPED)], [on(0.4)], now=NOW + timedelta(days=7, minutes=15))["train-0"]
    assert verdict.event is not None
    tail = (
        ' (the snooze gpu-jobs/keep-alive-until="2099-01-01T00:00:00+01:00" ended 2026-12-09T15:00Z: capped by'
        " sweep.idlePods.maxSnooze 7d)"
    )
    assert verdict.message.endswith(tail)
    assert verdict.event[1].endswith(tail)


def test_a_new_value_is_a_new_snooze_and_the_same_value_again_is_not() -> None:
    later = NOW + timedelta(days=8)
    again = plan([pod(annotations=CAPPED)], [on(0.4)], now=later)["train-0"]
    assert again.state == "marked"  # removed and set again to the same value: still ended
    renewed = {**CAPPED, KEEP_ALIVE_UNTIL_ANNOTATION: "2100-01-01T00:00:00Z"}
    verdict = plan([pod(annotations=renewed)], [on(0.4)], now=later)["train-0"]
    assert (verdict.state, verdict.write) == ("snoozed", "cap")  # a person's new answer, capped again, said again
    assert verdict.annotations[KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION] == "2026-12-17T15:00:00Z"


def test_a_lowered_max_snooze_caps_a_recorded_cap_again() -> None:
    verdict = plan([pod(annotations=CAPPED)], [on(0.4)], idle(maxSnooze="1d"))["train-0"]
    assert verdict.write == "cap"
    assert verdict.annotations[KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION] == "2026-12-03T15:00:00Z"
    assert "capped by sweep.idlePods.maxSnooze 1d" in verdict.message


def test_an_unreadable_cap_record_is_recorded_again_from_now() -> None:
    notes = {**CAPPED, KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION: "soon"}
    verdict = plan([pod(annotations=notes)], [on(0.4)], now=NOW + timedelta(days=1))["train-0"]
    assert (verdict.write, verdict.annotations[KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION]) == ("cap", "2026-12-10T15:00:00Z")


def test_a_malformed_snooze_is_reported_as_before_whatever_the_cap() -> None:
    notes = {KEEP_ALIVE_UNTIL_ANNOTATION: "next year", KEEP_ALIVE_CAPPED_ASKED_ANNOTATION: "next year"}
    verdict = plan([pod(annotations=notes)], [on(0.4)], idle(maxSnooze="1h"))["train-0"]
    assert (verdict.state, verdict.write) == ("exempt", None)
    assert verdict.message == (
        'gpu-jobs/keep-alive-until="next year" is not an RFC 3339 time with an offset: treated as exempt until it is'
        " fixed"
    )


def test_deleting_and_not_running_pods_are_ignored() -> None:
    pods = [pod("gone", deleting=True), pod("pending", phase="Pending"), pod()]
    util = [on(0.2, "GPU-1", "gone"), on(0.2, "GPU-2", "pending"), on(0.2, "GPU-3")]
    assert list(plan(pods, util)) == ["train-0"]


def test_leaked_memory_is_its_own_reason() -> None:
    util, memory = [on(0.4), on(0.4, "GPU-2", "half")], [on(0.95), on(0.5, "GPU-2", "half")]
    verdicts = plan([pod(), pod("half")], util, memory=memory, leaked=LEAKED)
    leaked = verdicts["train-0"]
    assert (leaked.reason, leaked.memory_used) == ("leaked-memory", 0.95)
    assert leaked.annotations[IDLE_REASON_ANNOTATION] == "leaked-memory"
    assert "95% of its GPU memory in use: it probably crashed" in leaked.message
    assert verdicts["half"].reason == "idle"


def test_leaked_memory_needs_util_below_its_own_threshold() -> None:
    verdict = plan([pod()], [on(3)], memory=[on(0.99)], leaked=LEAKED)["train-0"]
    assert verdict.reason == "idle"  # below 5% but not below 1%


def test_annotate_action_stays_marked_forever() -> None:
    policy = idle(action="annotate")
    first = plan([pod()], [on(0.4)], policy)["train-0"]
    assert first.event is not None
    assert "annotate only" in first.event[1]
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-01T10:00:00Z"})
    later = plan([marked], [on(0.4)], policy)["train-0"]
    assert (later.state, later.write, later.action) == ("marked", None, "annotate")


@pytest.mark.parametrize(
    ("owner", "failure"),
    [
        (Owner("ReplicaSet", "llm-7d9", "u1"), None),
        (Owner("StatefulSet", "llm", "u1"), None),
        (Owner("Job", "batch-1", "u1"), "cannot scale-owner a pod owned by Job: use action delete or exempt it"),
        (None, "cannot scale-owner a pod owned by nothing (a bare pod): use action delete or exempt it"),
    ],
)
def test_scale_owner_only_for_deployments_and_statefulsets(owner: Owner | None, failure: str | None) -> None:
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}, owner=owner)
    verdict = plan([marked], [on(0.4)], idle(action="scale-owner"))["train-0"]
    assert verdict.failure == failure
    assert (verdict.state, verdict.write) == (("acted", "act") if failure is None else ("marked", None))


def test_job_owned_pod_is_deleted_under_delete() -> None:
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}, owner=Owner("Job", "b", "u"))
    assert plan([marked], [on(0.4)])["train-0"].write == "act"


# --- cluster-wide ------------------------------------------------------------------------------------------------


def test_no_series_at_all_refuses_the_cluster() -> None:
    done = plan_pods([pod()], Answers(()), idle(), None, NOW)
    assert done.refusal == "no DCGM series for this cluster (DCGM_FI_DEV_GPU_UTIL over 2h): nothing is judged idle"
    assert done.verdicts == ()
    assert done.judged == 0


def test_every_gpu_exactly_zero_is_a_broken_metric() -> None:
    done = plan_pods([pod(), pod("b")], Answers((on(0), on(0, "GPU-2", "b"), series(0, "GPU-3"))), idle(), None, NOW)
    assert done.refusal is not None
    assert done.refusal.startswith("broken metric: DCGM_FI_DEV_GPU_UTIL reads exactly 0")
    one_above = plan_pods([pod()], Answers((on(0), series(0.1, "GPU-3"))), idle(), None, NOW)
    assert one_above.refusal is None


def test_an_empty_cluster_is_not_refused_and_reports_its_gpus() -> None:
    done = plan_pods([], Answers((series(0, "GPU-1"), series(0, "GPU-2", Hostname="node-b"))), idle(), None, NOW)
    assert done.refusal is None
    assert done.unallocated == (Unallocated("node-a", 1), Unallocated("node-b", 1))


def test_unallocated_counts_distinct_devices_per_node_not_copies() -> None:
    util = [
        on(30),
        series(0, "GPU-2"),
        series(0, "GPU-2", vgpu="1"),
        series(0, "GPU-5", Hostname="node-b"),
        on(0, "GPU-6", "finished"),  # a finished pod (not listed) no longer holds its GPU
    ]
    done = plan_pods([pod()], Answers(tuple(util)), idle(), None, NOW)
    assert done.unallocated == (Unallocated("node-a", 2), Unallocated("node-b", 1))
    assert done.judged == 1


# --- recheck before a write --------------------------------------------------------------------------------------


def _act() -> Verdict:
    marked = pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"})
    return plan([marked], [on(0.4)])["train-0"]


@pytest.mark.parametrize(
    ("now_pod", "words"),
    [
        (None, "is gone since it was listed"),
        (pod(uid="other", annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}), "is another pod now"),
        (pod(deleting=True, annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}), "is being deleted"),
        (pod(phase="Failed", annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}), "is Failed now"),
        (pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z", "gpu-jobs/keep-alive": ""}), "exempt now"),
        (
            pod(
                annotations={
                    IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z",
                    KEEP_ALIVE_UNTIL_ANNOTATION: "2027-01-01T00:00:00Z",
                }
            ),
            "snoozed meanwhile",
        ),
        (pod(), "idle mark changed"),
    ],
)
def test_recheck_refuses_a_pod_that_changed(now_pod: PodInfo | None, words: str) -> None:
    why = recheck(_act(), now_pod, idle(), NOW)
    assert why is not None
    assert words in why


def test_recheck_of_a_cap_needs_the_value_it_was_planned_for() -> None:
    planned = plan([pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER})], [on(0.4)])["train-0"]
    changed = pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: "2026-12-03T00:00:00Z"})
    assert "keep-alive-until changed since it was judged" in (recheck(planned, changed, idle(), NOW) or "")
    assert recheck(planned, pod(annotations={KEEP_ALIVE_UNTIL_ANNOTATION: FOREVER}), idle(), NOW) is None


def test_recheck_lets_an_act_go_ahead_once_a_capped_snooze_ended() -> None:
    notes = {**CAPPED, IDLE_SINCE_ANNOTATION: "2026-12-09T16:00:00Z"}
    later = NOW + timedelta(days=7, hours=2)
    acted = plan([pod(annotations=notes)], [on(0.4)], now=later)["train-0"]
    assert acted.write == "act"
    assert recheck(acted, pod(annotations=notes), idle(), later) is None


def test_recheck_goes_ahead_on_the_same_pod() -> None:
    assert recheck(_act(), pod(annotations={IDLE_SINCE_ANNOTATION: "2026-12-02T10:00:00Z"}), idle(), NOW) is None
