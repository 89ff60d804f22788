"""Idle GPU pods, pure: DCGM series (as Prometheus returns them) joined with the cluster's GPU pods, judged over the
window, and the plan of marks, unmarks and actions for one cluster.

The queries are few and fixed (``queries``): the configured metric, the memory share when ``leakedMemory`` is set,
and the MIG slices' ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` when the metric is ``DCGM_FI_DEV_GPU_UTIL`` (which a MIG slice
does not have). ``plan_pods`` reads their answers with the pod list and decides, per pod, first match wins.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from jobs.core.policy_sweep import GPU_UTIL, GR_ENGINE_ACTIVE, Exempt, IdlePods, LabelNames, LeakedMemory, PodAction
from jobs.core.timespec import ECHO_LIMIT, quoted
from jobs.labels import (
    IDLE_REASON_ANNOTATION,
    IDLE_SINCE_ANNOTATION,
    KEEP_ALIVE_CAPPED_ASKED_ANNOTATION,
    KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION,
    KEEP_ALIVE_UNTIL_ANNOTATION,
)

FB_USED: Final = "DCGM_FI_DEV_FB_USED"
FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
MIG_INSTANCE_LABEL: Final = "GPU_I_ID"

PodState = Literal["marked", "acted", "unmarked", "exempt", "snoozed", "young", "unknown"]
IdleReason = Literal["idle", "leaked-memory"]
Write = Literal["mark", "unmark", "cap", "act"]


@dataclass(frozen=True)
class Sample:
    """One series of an instant PromQL query: its labels (``__name__`` dropped by ``*_over_time``) and value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Owner:
    """A pod's controller (its ``ownerReferences`` entry with ``controller: true``)."""

    kind: str  # ReplicaSet, StatefulSet, Job, DaemonSet, ...
    name: str
    uid: str


@dataclass(frozen=True)
class PodInfo:
    """A pod that asks for GPUs (whole, MIG or shared), as the cluster's API shows it now."""

    namespace: str
    name: str
    uid: str
    node: str | None
    phase: str  # Pending, Running, Unknown (Succeeded and Failed pods are not listed)
    gpus: int  # GPUs and GPU slices requested, summed over containers
    started: datetime | None  # status.startTime
    deleting: bool  # metadata.deletionTimestamp is set: Terminating, still listed and charged
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: Owner | None = None
    resources: tuple[str, ...] = ()  # the GPU resource names it asks for (nvidia.com/gpu, nvidia.com/mig-1g.10gb)


# --- the queries ------------------------------------------------------------------------------------------------


def _quote(value: str) -> str:
    """A PromQL double-quoted string: backslash, quote and line breaks escaped (a matcher value is any string)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def selector(metric: str, matchers: Mapping[str, str], *extra: str) -> str:
    """``metric{label="value",...}``: the cluster's matchers (label names are checked at load) plus ``extra``."""
    inner = [f"{name}={_quote(value)}" for name, value in sorted(matchers.items())] + list(extra)
    return f"{metric}{{{','.join(inner)}}}" if inner else metric


def _range(window: timedelta) -> str:
    return f"[{int(window.total_seconds())}s]"


def _avg(metric: str, matchers: Mapping[str, str], window: timedelta, *extra: str) -> str:
    return f"avg_over_time({selector(metric, matchers, *extra)}{_range(window)})"


@dataclass(frozen=True)
class Queries:
    """The at most three instant queries of one cluster's run."""

    util: str  # the configured metric, raw per series
    memory: str | None = None  # the used share of each device's memory (only with leakedMemory)
    mig: str | None = None  # GR_ENGINE_ACTIVE of MIG slices (only when the metric is GPU_UTIL)

    def all(self) -> tuple[str, ...]:
        return tuple(q for q in (self.util, self.memory, self.mig) if q is not None)


def queries(idle: IdlePods, leaked: LeakedMemory | None, matchers: Mapping[str, str]) -> Queries:
    w = idle.window_td
    memory = None
    if leaked is not None:
        used = _avg(FB_USED, matchers, w)
        # One-to-one on all labels: both series of a device carry the same labels once __name__ is dropped.
        memory = f"{used} / ({used} + {_avg(FB_FREE, matchers, w)})"
    mig = _avg(GR_ENGINE_ACTIVE, matchers, w, f'{MIG_INSTANCE_LABEL}!=""') if idle.metric == GPU_UTIL else None
    return Queries(_avg(idle.metric, matchers, w), memory, mig)


@dataclass(frozen=True)
class Answers:
    """What the queries returned; ``memory`` and ``mig`` are None when not asked."""

    util: tuple[Sample, ...]
    memory: tuple[Sample, ...] | None = None
    mig: tuple[Sample, ...] | None = None


# --- reading the series ------------------------------------------------------------------------------------------

# Where dcgm-exporter and Prometheus put the pod: ``exported_*`` when a ServiceMonitor without honorLabels renamed
# them (plain ``pod`` then names the exporter itself), the current names, the names before dcgm-exporter 2.x.
_AUTO_SHAPES: Final = (
    ("exported_pod", "exported_namespace"),
    ("pod", "namespace"),
    ("pod_name", "pod_namespace"),
)


def pod_of(labels: Mapping[str, str], names: Literal["auto"] | LabelNames) -> tuple[str, str] | None:
    """The (namespace, pod) a series is attributed to, or None (a GPU no pod holds). Prometheus drops empty
    labels, and an empty value names nothing either."""
    shapes = _AUTO_SHAPES if names == "auto" else ((names.pod, names.namespace),)
    for pod_label, namespace_label in shapes:
        pod, namespace = labels.get(pod_label), labels.get(namespace_label)
        if pod and namespace:
            return namespace, pod
    return None


def node_of(labels: Mapping[str, str]) -> str | None:
    return labels.get("Hostname") or labels.get("hostname") or None


# Labels that differ between copies of one device's series, or name who uses it, not which device it is.
_NOT_DEVICE: Final = frozenset(
    {"pod", "namespace", "container", "vgpu", "instance", "job", "endpoint", "service"}
    | {"exported_pod", "exported_namespace", "exported_container", "exported_instance", "exported_job"}
    | {"pod_name", "pod_namespace", "container_name"}
)

Device = tuple[str, str]  # (the GPU: its UUID, or node/index; the MIG GPU instance id, "" for a whole GPU)


def device_of(labels: Mapping[str, str]) -> Device:
    """Which device a series measures: its UUID (else node and ``gpu`` index), plus the MIG GPU instance. Copies
    of one device's series (time-slicing's ``vgpu``) are the same device."""
    gpu = labels.get("UUID") or (
        f"{node_of(labels) or '?'}/{labels['gpu']}"
        if "gpu" in labels
        else ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in _NOT_DEVICE)
    )
    return gpu, labels.get(MIG_INSTANCE_LABEL, "")


def is_mig(labels: Mapping[str, str]) -> bool:
    return bool(labels.get(MIG_INSTANCE_LABEL))


@dataclass(frozen=True)
class Seen:
    """The devices the series attribute to one (namespace, pod), and each device's measurement."""

    devices: frozenset[Device] = frozenset()
    mig: bool = False  # some series of it is a MIG slice


@dataclass(frozen=True)
class Measured:
    """Per device: the utilisation in percent (max over copies, never a sum) and the memory share (0..1)."""

    util: Mapping[Device, float]
    memory: Mapping[Device, float]
    mig_by_engine: frozenset[Device]  # MIG devices judged by GR_ENGINE_ACTIVE because the metric cannot
    attributed: Mapping[tuple[str, str], Seen]
    nodes: Mapping[Device, str]  # the node each device was seen on


def _max_into(into: dict[Device, float], device: Device, value: float) -> None:
    into[device] = max(value, into.get(device, value))


def measure(answers: Answers, idle: IdlePods) -> Measured:
    ratio = idle.metric == GR_ENGINE_ACTIVE  # PROF metrics are 0..1
    util: dict[Device, float] = {}
    engine: set[Device] = set()
    attributed: dict[tuple[str, str], set[Device]] = {}
    mig_pods: set[tuple[str, str]] = set()
    nodes: dict[Device, str] = {}

    def see(sample: Sample) -> Device:
        device = device_of(sample.labels)
        owner = pod_of(sample.labels, idle.labels)
        if owner is not None:
            attributed.setdefault(owner, set()).add(device)
            if is_mig(sample.labels):
                mig_pods.add(owner)
        if (node := node_of(sample.labels)) is not None:
            nodes.setdefault(device, node)
        return device

    for sample in answers.util:
        device = see(sample)
        if ratio or not is_mig(sample.labels):  # GPU_UTIL on a MIG slice is 0 or missing: it judges nothing
            _max_into(util, device, sample.value * 100 if ratio else sample.value)
    for sample in answers.mig or ():
        device = see(sample)
        engine.add(device)
        _max_into(util, device, sample.value * 100)
    memory: dict[Device, float] = {}
    for sample in answers.memory or ():
        _max_into(memory, device_of(sample.labels), sample.value)
    seen = {p: Seen(frozenset(d), p in mig_pods) for p, d in attributed.items()}
    return Measured(util, memory, frozenset(engine), seen, nodes)


# --- the cluster-wide refusals -----------------------------------------------------------------------------------


def refusal(answers: Answers, idle: IdlePods, pods: Sequence[PodInfo]) -> str | None:
    """Why nothing of the cluster can be judged, or None. Only where GPU pods run: an empty cluster has nothing to
    judge, and its idle GPUs may well read 0."""
    if not any(p.phase == "Running" and not p.deleting for p in pods):
        return None
    if not answers.util:
        return f"no DCGM series for this cluster ({idle.metric} over {idle.window}): nothing is judged idle"
    judging = [s.value for s in answers.util if idle.metric == GR_ENGINE_ACTIVE or not is_mig(s.labels)]
    if judging and all(v == 0 for v in judging):
        return (
            f"broken metric: {idle.metric} reads exactly 0 on every GPU of the cluster ({len(judging)} series; a"
            " known dcgm-exporter failure mode): nothing is judged idle"
        )
    return None


# --- unallocated GPUs --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unallocated:
    node: str
    gpus: int


def unallocated(measured: Measured, pods: Iterable[PodInfo]) -> tuple[Unallocated, ...]:
    """Devices no listed GPU pod holds (no pod labels, or a pod that asks for no GPU, such as the exporter itself
    under honorLabels), counted per node: capacity the node groups pay for."""
    listed = {(p.namespace, p.name) for p in pods}
    held = {d for owner, seen in measured.attributed.items() if owner in listed for d in seen.devices}
    every = set(measured.nodes) | set(measured.util)
    per_node: dict[str, int] = {}
    for device in every - held:
        node = measured.nodes.get(device, "unknown")
        per_node[node] = per_node.get(node, 0) + 1
    return tuple(Unallocated(node, n) for node, n in sorted(per_node.items()))


# --- judging one pod ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the sweep decided about one GPU pod, and the write it makes (None: none)."""

    pod: PodInfo
    state: PodState
    message: str
    utilization: float | None = None  # percent, the max over its devices
    memory_used: float | None = None  # 0..1, the max over its devices
    reason: IdleReason | None = None
    action: PodAction | None = None
    write: Write | None = None
    annotations: Mapping[str, str | None] = field(default_factory=dict)  # for mark and unmark
    event: tuple[str, str, bool] | None = None  # (reason, message, warning) after the write
    mark: str | None = None  # the idle-since annotation the plan saw (acts check it again)
    failure: str | None = None  # found at planning: the item fails without a write (an owner that cannot scale)
    snooze: Snooze | None = None  # a person's snooze as applied (in the future, or capped)

    @property
    def counts(self) -> bool:
        """An action (delete, scale the owner) counts against the limit; marks, unmarks and Events do not."""
        return self.write == "act"


@dataclass(frozen=True)
class Judgement:
    """A pod's measurement: whether the series can judge it, and whether it is idle."""

    utilization: float | None
    memory_used: float | None
    unknown: str | None  # why it cannot be judged
    reason: IdleReason | None  # None: busy (or unknown)
    by_engine: bool


def _needed(pod: PodInfo) -> int:
    # Shared (time-sliced) replicas may all sit on one device: one device seen is enough to judge them.
    if pod.resources and all(r.endswith(".shared") for r in pod.resources):
        return 1
    return pod.gpus


def _mig_message(idle: IdlePods) -> str:
    return (
        f"{GPU_UTIL} cannot judge a MIG slice and {GR_ENGINE_ACTIVE} has no series for it: set idlePods.metric:"
        f" {GR_ENGINE_ACTIVE} once DCGM profiling metrics are exported, or exempt the pod"
        f" ({idle.exempt.annotation})"
    )


def judge(
    pod: PodInfo, measured: Measured, idle: IdlePods, leaked: LeakedMemory | None, answers_memory: bool
) -> Judgement:
    seen = measured.attributed.get((pod.namespace, pod.name), Seen())
    mig = seen.mig or any(r.startswith("nvidia.com/mig-") for r in pod.resources)
    devices = [d for d in seen.devices if d in measured.util]
    by_engine = any(d in measured.mig_by_engine for d in devices)
    if not seen.devices:
        if mig and idle.metric == GPU_UTIL:
            return Judgement(None, None, _mig_message(idle), None, False)
        return Judgement(None, None, f"no {idle.metric} series for it over {idle.window}", None, False)
    if mig and idle.metric == GPU_UTIL and not any(d[1] and d in measured.util for d in seen.devices):
        return Judgement(None, None, _mig_message(idle), None, False)
    if len(devices) < _needed(pod):
        return Judgement(
            None,
            None,
            f"{len(devices)} of its {pod.gpus} GPUs have {idle.metric} series: it cannot be judged",
            None,
            by_engine,
        )
    util = max(measured.util[d] for d in devices)
    shares = [measured.memory[d] for d in devices if d in measured.memory]
    memory = max(shares) if shares else None
    if util >= idle.below:
        return Judgement(util, memory, None, None, by_engine)
    leaking = (
        leaked is not None
        and answers_memory
        and memory is not None
        and util < leaked.util_below
        and memory > float(leaked.memory_ratio)
    )
    return Judgement(util, memory, None, "leaked-memory" if leaking else "idle", by_engine)


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 time with its offset, or None."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def stamp(at: datetime) -> str:
    """An annotation's time: RFC 3339, UTC, to the second."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _minute(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


def _percent(value: float) -> str:
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def _what(j: Judgement, idle: IdlePods, leaked: LeakedMemory | None) -> str:
    if j.reason == "leaked-memory" and leaked is not None and j.memory_used is not None:
        return (
            f"idle below {leaked.util_below:g}% for {idle.window} ({_percent(j.utilization or 0)}) with"
            f" {j.memory_used:.0%} of its GPU memory in use: it probably crashed and left its memory allocated"
        )
    by = f" by {GR_ENGINE_ACTIVE}: a MIG slice" if j.by_engine else ""
    return f"idle below {idle.below:g}% for {idle.window} ({_percent(j.utilization or 0)}{by})"


def _will(action: PodAction) -> str:
    return {
        "delete": "will be deleted",
        "scale-owner": "its Deployment or StatefulSet will be scaled to zero",
        "annotate": "annotate only (idlePods.action: annotate): nothing will be done to it",
    }[action]


def warning(j: Judgement, idle: IdlePods, leaked: LeakedMemory | None, due: datetime) -> str:
    """The Warning Event of a mark: what was seen, what will happen and when, and how to stop it."""
    if idle.action == "annotate":
        return f"{_what(j, idle, leaked)}: {_will('annotate')}"
    return (
        f"{_what(j, idle, leaked)}: {_will(idle.action)} after {_minute(due)} unless it becomes busy, is annotated"
        f" {idle.exempt.annotation}, or {KEEP_ALIVE_UNTIL_ANNOTATION}=<RFC 3339>"
    )


_UNMARK: Final = {IDLE_SINCE_ANNOTATION: None, IDLE_REASON_ANNOTATION: None}


def exemption(pod: PodInfo, exempt: Exempt) -> str | None:
    if any(fnmatch.fnmatchcase(pod.namespace, pattern) for pattern in exempt.namespaces):
        return f"namespace {pod.namespace} is exempt (idlePods.exempt.namespaces)"
    if exempt.annotation in pod.annotations:
        return f"annotated {exempt.annotation}"
    return None


@dataclass(frozen=True)
class Snooze:
    """A person's ``gpu-jobs/keep-alive-until`` as the sweep applies it: until the asked time, or until the cap."""

    until: datetime  # when it ends
    asked: str  # the annotation's value, as written
    capped: datetime | None = None  # the cap (``until``) when the asked time is beyond it
    record: Mapping[str, str] | None = None  # the cap to write now: first seen (None: recorded already, or no cap)


def snooze(pod: PodInfo, now: datetime, max_snooze: timedelta) -> tuple[Snooze | None, str | None]:
    """(snooze, None) for a snooze in the future, or a capped one (ended or not); (None, why) when the annotation is
    unparseable; else (None, None): no snooze, or one that has passed.

    The cap is ``maxSnooze`` from when the sweep first saw that value, recorded on the pod: a cap of "now +
    maxSnooze" recomputed every run would never end. The record names the value it caps, so a new value is a new
    (visible, again capped) snooze, and the same value set again is not. A record beyond now + maxSnooze (the policy
    lowered it) is capped again."""
    text = pod.annotations.get(KEEP_ALIVE_UNTIL_ANNOTATION)
    if text is None:
        return None, None
    asked = parse_time(text)
    if asked is None:
        return None, (
            f"{KEEP_ALIVE_UNTIL_ANNOTATION}={quoted(text, ECHO_LIMIT)} is not an RFC 3339 time with an offset:"
            " treated as exempt until it is fixed"
        )
    limit = parse_time(stamp(now + max_snooze))  # to the second, as recorded: a dry run shows what a run writes
    assert limit is not None
    recorded = None
    if pod.annotations.get(KEEP_ALIVE_CAPPED_ASKED_ANNOTATION) == text:
        recorded = parse_time(pod.annotations.get(KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION))
    if recorded is not None and recorded <= limit:
        return (Snooze(recorded, text, recorded) if recorded < asked else Snooze(asked, text)), None
    if asked <= limit:
        return (Snooze(asked, text), None) if asked > now else (None, None)
    record = {KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION: stamp(limit), KEEP_ALIVE_CAPPED_ASKED_ANNOTATION: text}
    return Snooze(limit, text, limit, record), None


def snoozed(s: Snooze, idle: IdlePods) -> str:
    """The report's words for a snooze in force."""
    if s.capped is None:
        return f"snoozed until {_minute(s.until)} ({KEEP_ALIVE_UNTIL_ANNOTATION})"
    asked = parse_time(s.asked)
    shown = _minute(asked) if asked is not None else quoted(s.asked, ECHO_LIMIT)
    return f"snoozed until {_minute(s.until)} (capped by sweep.idlePods.maxSnooze {idle.max_snooze}; asked {shown})"


def _capped_event(s: Snooze, idle: IdlePods, marked: bool) -> str:
    then = "; the idle mark is removed" if marked else ""
    return (
        f"{KEEP_ALIVE_UNTIL_ANNOTATION}={quoted(s.asked, ECHO_LIMIT)} is beyond sweep.idlePods.maxSnooze"
        f" ({idle.max_snooze}): snoozed until {_minute(s.until)} only, then judged as usual{then}"
    )


def judge_pod(
    pod: PodInfo,
    measured: Measured,
    idle: IdlePods,
    leaked: LeakedMemory | None,
    now: datetime,
    *,
    answers_memory: bool = True,
) -> Verdict | None:
    """One GPU pod's verdict, first match wins (None: not reported, nothing to write)."""
    if pod.deleting or pod.phase != "Running":
        return None  # on its way out (a second run must not delete again), or not running yet
    j = judge(pod, measured, idle, leaked, answers_memory)
    seen = Verdict(pod, "unknown", "", j.utilization, j.memory_used, j.reason)
    marked = pod.annotations.get(IDLE_SINCE_ANNOTATION)
    why = exemption(pod, idle.exempt)
    asleep, unparseable = snooze(pod, now, idle.max_snooze_td)
    if why is not None or unparseable is not None:
        message = why or unparseable or ""
        if marked is not None:
            # Our own mark from before the exemption is removed: once the exemption goes, the pod is warned again
            # and gets a full grace period, never acted on at once on a stale warning.
            event = ("GpuIdleExempt", f"{message}: the idle mark is removed", False)
            return replace(
                seen, state="exempt", message=message, write="unmark", annotations=_UNMARK, event=event, mark=marked
            )
        return replace(seen, state="exempt", message=message) if j.reason is not None else None
    if asleep is not None and asleep.until > now:
        seen = replace(seen, snooze=asleep)
        message = snoozed(asleep, idle)
        if asleep.record is not None:  # first seen beyond the cap: recorded (whether idle or not), said once
            notes = {**asleep.record, **(_UNMARK if marked is not None else {})}
            event = ("GpuSnoozeCapped", _capped_event(asleep, idle, marked is not None), True)
            return replace(
                seen, state="snoozed", message=message, write="cap", annotations=notes, event=event, mark=marked
            )
        if marked is not None:
            event = ("GpuIdleSnoozed", f"{message}: the idle mark is removed", False)
            return replace(
                seen, state="snoozed", message=message, write="unmark", annotations=_UNMARK, event=event, mark=marked
            )
        return replace(seen, state="snoozed", message=message) if j.reason is not None else None
    seen = replace(seen, snooze=asleep)  # a capped snooze that has ended: judged as usual, the report says so
    if pod.started is not None and pod.started > now - idle.window_td:
        message = f"started {_minute(pod.started)}, less than {idle.window} ago: too little data"
        return replace(seen, state="young", message=message) if j.reason is not None else None
    if j.unknown is not None:
        return replace(seen, state="unknown", message=j.unknown)
    if j.reason is None:
        if marked is None:
            return None
        message = f"busy again ({_percent(j.utilization or 0)} over {idle.window}, at or above {idle.below:g}%)"
        event = ("GpuBusyAgain", f"{message}: the idle mark is removed", False)
        return replace(
            seen, state="unmarked", message=message, write="unmark", annotations=_UNMARK, event=event, mark=marked
        )
    verdict = _idle(replace(seen, action=idle.action, mark=marked), j, idle, leaked, now)
    if asleep is not None and verdict.write == "mark" and verdict.event is not None:
        # The first warning after a capped snooze ended says why the person's later time did not hold.
        note = (
            f" (the snooze {KEEP_ALIVE_UNTIL_ANNOTATION}={quoted(asleep.asked, ECHO_LIMIT)} ended"
            f" {_minute(asleep.until)}: capped by sweep.idlePods.maxSnooze {idle.max_snooze})"
        )
        reason, text, warn = verdict.event
        verdict = replace(verdict, message=verdict.message + note, event=(reason, text + note, warn))
    return verdict


def _idle(seen: Verdict, j: Judgement, idle: IdlePods, leaked: LeakedMemory | None, now: datetime) -> Verdict:
    since = parse_time(seen.mark)
    if since is None:  # no mark, or one nobody can read: marked now
        text = warning(j, idle, leaked, now + idle.grace)
        notes = {IDLE_SINCE_ANNOTATION: stamp(now), IDLE_REASON_ANNOTATION: j.reason or "idle"}
        return replace(
            seen, state="marked", message=text, write="mark", annotations=notes, event=("GpuIdle", text, True)
        )
    due = since + idle.grace
    if now < due or idle.action == "annotate":
        then = _will("annotate") if idle.action == "annotate" else f"{_will(idle.action)} after {_minute(due)}"
        return replace(seen, state="marked", message=f"{_what(j, idle, leaked)}, marked {_minute(since)}: {then}")
    text = f"{_what(j, idle, leaked)}, marked {_minute(since)} and still idle after {idle.grace_period}"
    failure = scale_refusal(seen.pod) if idle.action == "scale-owner" else None
    if failure is not None:  # the item fails without a write; the pod stays marked
        return replace(seen, state="marked", message=f"{text}: {failure}", failure=failure)
    return replace(seen, state="acted", message=text, write="act")


def scale_refusal(pod: PodInfo) -> str | None:
    """Only a Deployment (through its ReplicaSet) or a StatefulSet can be scaled to zero by the sweep."""
    if pod.owner is not None and pod.owner.kind in ("ReplicaSet", "StatefulSet"):
        return None
    kind = pod.owner.kind if pod.owner is not None else "nothing (a bare pod)"
    return f"cannot scale-owner a pod owned by {kind}: use action delete or exempt it"


# --- the plan ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodsPlan:
    verdicts: tuple[Verdict, ...] = ()
    unallocated: tuple[Unallocated, ...] = ()
    judged: int = 0  # Running GPU pods judged
    refusal: str | None = None  # nothing of the cluster is judged: the cluster fails

    @property
    def writes(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.write is not None)


def plan_pods(
    pods: Sequence[PodInfo], answers: Answers, idle: IdlePods, leaked: LeakedMemory | None, now: datetime
) -> PodsPlan:
    """Every GPU pod's verdict and the cluster's unallocated GPUs, or the refusal that judges nothing."""
    why = refusal(answers, idle, pods)
    if why is not None:
        return PodsPlan(refusal=why)
    measured = measure(answers, idle)
    verdicts = [judge_pod(p, measured, idle, leaked, now, answers_memory=answers.memory is not None) for p in pods]
    judged = sum(p.phase == "Running" and not p.deleting for p in pods)
    return PodsPlan(
        tuple(v for v in verdicts if v is not None),
        unallocated(measured, pods),
        judged,
    )


def recheck(verdict: Verdict, pod: PodInfo | None, idle: IdlePods, now: datetime) -> str | None:
    """Why the pod read again before a write is no longer the one planned for (None: go ahead)."""
    planned = verdict.pod
    where = f"{planned.namespace}/{planned.name}"
    if pod is None:
        return f"{where} is gone since it was listed"
    if pod.uid != planned.uid:
        return f"{where} is another pod now (uid {pod.uid}, planned for {planned.uid})"
    if pod.deleting:
        return f"{where} is being deleted"
    if pod.phase != "Running":
        return f"{where} is {pod.phase} now, not Running"
    if verdict.write == "cap":  # the cap belongs to the value the plan saw (a removed mark is harmless)
        asked = verdict.snooze.asked if verdict.snooze is not None else None
        if pod.annotations.get(KEEP_ALIVE_UNTIL_ANNOTATION) != asked:
            return f"{where}'s {KEEP_ALIVE_UNTIL_ANNOTATION} changed since it was judged"
        return None
    if verdict.write == "unmark":  # snoozed, busy again, exempt: removing our own mark
        if pod.annotations.get(IDLE_SINCE_ANNOTATION) is None:
            return f"{where} carries no idle mark any more"
        return None
    why = exemption(pod, idle.exempt)
    if why is not None:
        return f"{where} is exempt now ({why})"
    asleep, unparseable = snooze(pod, now, idle.max_snooze_td)
    if unparseable is not None or (asleep is not None and asleep.until > now):
        return f"{where} was snoozed meanwhile ({KEEP_ALIVE_UNTIL_ANNOTATION})"
    if pod.annotations.get(IDLE_SINCE_ANNOTATION) != verdict.mark:
        return f"{where}'s idle mark changed since it was judged"
    return None
