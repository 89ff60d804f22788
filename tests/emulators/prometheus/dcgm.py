"""Deterministic DCGM-exporter series as OpenMetrics text, ready for ``promtool tsdb create-blocks-from``.

Pure: no clock, no I/O. The caller passes ``now``; the window ends exactly there, so a Prometheus loaded with
the output answers instant queries at ``now`` as if dcgm-exporter had been scraped every 30 s until then.

What the output mimics (see DESIGN.md "Metrics"):

- ``DCGM_FI_DEV_GPU_UTIL`` is an integer percent and does not exist for MIG slices.
- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is a 0..1 ratio; it works on MIG slices and may be missing entirely
  (profiling metrics disabled, or unsupported GPU).
- ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` are MiB. Idle pods often still hold memory (a notebook
  with a model loaded), so memory is *not* a usable idleness signal, utilisation is.
- Idle is rarely exactly 0: 0..3 % with noise.
- Without ``honor_labels``, Prometheus renames the exporter's ``pod``/``namespace``/``container`` labels to
  ``exported_*`` and the plain labels then name the dcgm-exporter pod itself, a classic attribution trap.
- Older exporters (and kubelets before 1.16) name them ``pod_name``/``pod_namespace``/``container_name``; some
  deployments relabel ``Hostname`` to ``hostname``.
- A GPU no pod holds has no pod labels from the exporter. Scraped with plain target labels it has none at all;
  through a ServiceMonitor (with or without ``honor_labels``: nothing conflicts) it gets the *exporter's own*
  ``pod``/``namespace``/``container``, which looks exactly like a pod attribution: the trap is a pod named
  ``nvidia-dcgm-exporter-<node>`` that seems to hold a GPU. Only a join with the cluster's pods tells them apart.
- Time-slicing: every pod sharing a device gets a copy of the device's series, with a ``vgpu`` label and the
  same values (the device's, not the pod's share).
- A shared Thanos adds the source Prometheus's external labels, ``cluster`` at least.
- Profiling metrics may be broken: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` exactly 0 on every GPU while work runs.
- A pod younger than the window has series only since it started.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

#: ``leaked``: a crashed workload that left its memory allocated: utilisation ~0, ~95 % of the memory used.
Profile = Literal["busy", "idle", "idle_after_busy", "leaked"]
HostnameLabel = Literal["Hostname", "hostname"]

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"

#: Help strings as dcgm-exporter's default counters file words them.
METRIC_HELP: dict[str, str] = {
    GPU_UTIL: "GPU utilization (in %).",
    GR_ENGINE_ACTIVE: "Ratio of time the graphics engine is active.",
    FB_USED: "Framebuffer memory used (in MiB).",
    FB_FREE: "Framebuffer memory free (in MiB).",
}
METRICS: tuple[str, ...] = (GPU_UTIL, GR_ENGINE_ACTIVE, FB_USED, FB_FREE)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_STEP = timedelta(seconds=30)
DEFAULT_WINDOW = timedelta(hours=6)

BUSY_UTIL_PCT = (70.0, 95.0)
IDLE_UTIL_PCT = (0.0, 3.0)
LEAKED_UTIL_PCT = (0.0, 0.9)
LEAKED_MEMORY_SHARE = (0.94, 0.96)

# Labels the scrape adds; with exported_* naming the plain pod/namespace/container name the exporter itself.
EXPORTER_JOB = "nvidia-dcgm-exporter"
EXPORTER_NAMESPACE = "gpu-operator"
EXPORTER_CONTAINER = "nvidia-dcgm-exporter"


@dataclass(frozen=True)
class Workload:
    """One GPU (or MIG slice, or time-sliced copy) attributed to one container of one pod; a 2-GPU pod is two
    workloads. ``pod=""``: a GPU no pod holds."""

    pod: str
    namespace: str
    container: str
    gpu: int
    hostname: str
    model_name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = ""
    profile: Profile = "busy"
    #: For ``idle_after_busy``: how long before ``now`` the pod stopped working.
    idle_for: timedelta = timedelta(hours=2)
    #: MIG profile such as ``"1g.10gb"``; a MIG slice has no DCGM_FI_DEV_GPU_UTIL.
    mig_profile: str | None = None
    mig_instance_id: int = 0
    #: False for GPUs whose DCGM profiling metrics are off or unsupported.
    prof_metrics: bool = True
    #: Label pod/namespace/container as Prometheus does without honor_labels.
    exported_labels: bool = False
    memory_total_mib: int = 81920
    #: The ``cluster`` external label a shared Thanos adds; None: a cluster's own Prometheus, no such label.
    cluster: str | None = None
    #: The old attribution labels ``pod_name``/``pod_namespace``/``container_name``.
    old_labels: bool = False
    #: ``Hostname`` (dcgm-exporter's default) or ``hostname`` (relabelled).
    hostname_label: HostnameLabel = "Hostname"
    #: For a GPU no pod holds (``pod=""``): the series carry the exporter pod's own pod/namespace/container, as
    #: a ServiceMonitor's target labels add them (see the module docstring); False: no pod labels at all.
    exporter_pod_labels: bool = False
    #: Time-slicing: the copy number of a shared device (label ``vgpu``); copies of one device share its values.
    vgpu: int | None = None
    #: DCGM_FI_PROF_GR_ENGINE_ACTIVE reads exactly 0 whatever the GPU does (the broken-profiling failure mode).
    broken_prof: bool = False
    #: A pod that started this long before ``now``: series only since then (None: older than any window).
    started_ago: timedelta | None = None

    def __post_init__(self) -> None:
        if self.mig_profile is not None and not self.prof_metrics:
            # A MIG slice reports utilisation only through PROF metrics: without them it has no signal at all.
            raise ValueError(f"{self.pod}: a MIG slice without PROF metrics would have no utilisation series")
        if self.profile == "idle_after_busy" and self.idle_for <= timedelta(0):
            raise ValueError(f"{self.pod}: idle_for must be positive")
        if self.exported_labels and self.old_labels:
            raise ValueError(f"{self.pod}: exported_* and the old pod_name labels are two different shapes")
        if self.unallocated and (self.exported_labels or self.old_labels):
            raise ValueError("a GPU no pod holds has no pod labels to rename: use exporter_pod_labels")
        if self.exporter_pod_labels and not self.unallocated:
            raise ValueError(f"{self.pod}: exporter_pod_labels is for a GPU no pod holds (pod='')")
        if self.started_ago is not None and self.started_ago <= timedelta(0):
            raise ValueError(f"{self.pod}: started_ago must be positive")

    @property
    def unallocated(self) -> bool:
        """No pod holds this GPU."""
        return not self.pod

    @property
    def device(self) -> tuple[str | None, str, int, int]:
        """(cluster, host, gpu, MIG instance): what one physical device (or slice) is, whatever shares it."""
        return (self.cluster, self.hostname, self.gpu, self.mig_instance_id if self.is_mig else -1)

    @property
    def is_mig(self) -> bool:
        return self.mig_profile is not None

    @property
    def gpu_uuid(self) -> str:
        # Stable per (host, gpu) so two slices of one GPU share a UUID, as they do in dcgm-exporter.
        return self.uuid or f"GPU-{UUID(int=hash_str(f'{self.hostname}/{self.gpu}'))}"

    def idle_at(self, at: datetime, now: datetime) -> bool:
        """The truth the generator follows: is this workload idle at ``at``?"""
        if self.profile in ("idle", "leaked"):
            return True
        if self.profile == "busy":
            return False
        return at > now - self.idle_for

    def idle_over(self, window: timedelta) -> bool:
        """Idle for the whole ``window`` before ``now``: what a sweep over that window should conclude."""
        if self.profile == "idle_after_busy":
            return self.idle_for >= window
        return self.profile in ("idle", "leaked")

    def series_from(self, now: datetime) -> datetime | None:
        """The first instant with samples: when a young pod started (None: the whole window)."""
        return None if self.started_ago is None else now - self.started_ago

    def labels(self) -> dict[str, str]:
        """The label set of every series of this workload, in exposition order."""
        labels = {
            "gpu": str(self.gpu),
            "UUID": self.gpu_uuid,
            "pci_bus_id": f"00000000:{0x10 + self.gpu:02X}:00.0",
            "device": f"nvidia{self.gpu}",
            "modelName": self.model_name,
            self.hostname_label: self.hostname,
        }
        if self.mig_profile is not None:
            labels["GPU_I_PROFILE"] = self.mig_profile
            labels["GPU_I_ID"] = str(self.mig_instance_id)
        if self.vgpu is not None:
            labels["vgpu"] = str(self.vgpu)
        exporter = {
            "container": EXPORTER_CONTAINER,
            "namespace": EXPORTER_NAMESPACE,
            "pod": f"nvidia-dcgm-exporter-{self.hostname}",
        }
        if self.unallocated:
            labels |= exporter if self.exporter_pod_labels else {}
        elif self.old_labels:
            labels |= {"container_name": self.container, "pod_namespace": self.namespace, "pod_name": self.pod}
        elif self.exported_labels:
            labels |= {
                "exported_container": self.container,
                "exported_namespace": self.namespace,
                "exported_pod": self.pod,
            } | exporter
        else:
            labels |= {"container": self.container, "namespace": self.namespace, "pod": self.pod}
        labels |= {"job": EXPORTER_JOB, "instance": f"{self.hostname}:9400"}
        if self.cluster is not None:
            labels["cluster"] = self.cluster  # the external label comes last, as Thanos appends it
        return labels

    def metrics(self) -> tuple[str, ...]:
        """Which DCGM metrics exist for this workload."""
        names = [FB_USED, FB_FREE]
        if not self.is_mig:
            names.append(GPU_UTIL)
        if self.prof_metrics:
            names.append(GR_ENGINE_ACTIVE)
        return tuple(n for n in METRICS if n in names)


def hash_str(text: str) -> int:
    """A process-independent hash (Python's ``hash`` is salted per process; tests need stable output)."""
    return random.Random(text).getrandbits(128)


@dataclass(frozen=True)
class Sample:
    at: datetime
    gpu_util_pct: int
    gr_engine_active: float
    fb_used_mib: int
    fb_free_mib: int

    def value(self, metric: str) -> float | int:
        return {
            GPU_UTIL: self.gpu_util_pct,
            GR_ENGINE_ACTIVE: self.gr_engine_active,
            FB_USED: self.fb_used_mib,
            FB_FREE: self.fb_free_mib,
        }[metric]


_SAMPLE_FIELD = {
    GPU_UTIL: "gpu_util_pct",
    GR_ENGINE_ACTIVE: "gr_engine_active",
    FB_USED: "fb_used_mib",
    FB_FREE: "fb_free_mib",
}


def sample_times(now: datetime, window: timedelta = DEFAULT_WINDOW, step: timedelta = DEFAULT_STEP) -> list[datetime]:
    """Scrape instants in ``(now - window, now]``, oldest first, the last one exactly at ``now``."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if step <= timedelta(0) or window < step:
        raise ValueError("need 0 < step <= window")
    count = window // step
    return [now - step * k for k in range(count - 1, -1, -1)]


def samples(
    workload: Workload,
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    step: timedelta = DEFAULT_STEP,
    seed: int = 0,
) -> list[Sample]:
    """The series of one workload; the same inputs always give the same numbers."""
    w = workload
    # Time-sliced copies are the device's series copied per pod: seeded by the device alone, identical values.
    owner = "vgpu" if w.vgpu is not None else f"{w.namespace}/{w.pod}"
    cluster = "" if w.cluster is None else f"{w.cluster}/"
    rng = random.Random(f"{seed}/{cluster}{w.hostname}/{w.gpu}/{w.mig_instance_id}/{owner}")
    total = workload.memory_total_mib
    # A pod's memory footprint is mostly stable: what its model/data occupies, plus a little jitter.
    resident = rng.uniform(0.25, 0.55) * total
    out: list[Sample] = []
    since = workload.series_from(now)
    for at in sample_times(now, window, step):
        if workload.profile == "leaked":
            # Crashed with its memory still allocated: next to no activity, the framebuffer nearly full.
            util = 0.0 if rng.random() < 0.5 else rng.uniform(*LEAKED_UTIL_PCT)
            used = total * rng.uniform(*LEAKED_MEMORY_SHARE)
        elif workload.idle_at(at, now):
            # Mostly 1..3 %, sometimes 0: idle GPUs still show driver/housekeeping activity.
            util = 0.0 if rng.random() < 0.15 else rng.uniform(0.5, IDLE_UTIL_PCT[1])
            used = resident * rng.uniform(0.98, 1.0)
        else:
            util = rng.uniform(*BUSY_UTIL_PCT)
            used = min(total * 0.97, resident * rng.uniform(1.3, 1.6))
        # The graphics engine ratio tracks utilisation but is finer-grained and never a clean integer.
        active = max(0.0, min(1.0, util / 100.0 + rng.uniform(-0.02, 0.02)))
        used_mib = int(used)
        if since is not None and at <= since:  # (since, now], like the window
            continue  # drawn all the same, so a young copy of a shared device keeps the device's values
        out.append(
            Sample(at, round(util), 0.0 if workload.broken_prof else round(active, 4), used_mib, total - used_mib)
        )
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())


def epoch_millis(at: datetime) -> int:
    """Milliseconds since the epoch, floored, in exact integer arithmetic (Prometheus keeps milliseconds)."""
    return (at - _EPOCH) // timedelta(milliseconds=1)


def _timestamp(at: datetime) -> str:
    # OpenMetrics timestamps are float seconds and Prometheus' parser truncates `ts * 1000`: "X.805" can land
    # on X.804 after float rounding. Writing the middle of the millisecond ("X.8055") always truncates to 805.
    millis = epoch_millis(at)
    return f"{millis // 1000}.{millis % 1000:03d}5"


def _format_value(value: float | int) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def openmetrics_lines(
    workloads: Sequence[Workload],
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    step: timedelta = DEFAULT_STEP,
    seed: int = 0,
) -> Iterator[str]:
    """OpenMetrics lines (no newlines): one metric family at a time, each series in time order."""
    _check_unique(w.labels() for w in workloads)
    _check_shared(workloads)
    series = [(w, _label_text(w.labels()), samples(w, now, window, step, seed)) for w in workloads]
    # Every workload samples the same instants: format each timestamp once (10,000 GPUs share them).
    stamps = {at: _timestamp(at) for at in sample_times(now, window, step)}
    for metric in METRICS:
        members = [(labels, rows) for w, labels, rows in series if metric in w.metrics()]
        if not members:
            continue
        field_name = _SAMPLE_FIELD[metric]
        yield f"# TYPE {metric} gauge"
        yield f"# HELP {metric} {METRIC_HELP[metric]}"
        for labels, rows in members:
            prefix = f"{metric}{{{labels}}} "
            for row in rows:
                yield f"{prefix}{_format_value(getattr(row, field_name))} {stamps[row.at]}"
    yield "# EOF"


def openmetrics(
    workloads: Sequence[Workload],
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    step: timedelta = DEFAULT_STEP,
    seed: int = 0,
) -> str:
    """The whole OpenMetrics document as one string (ends with ``# EOF`` and a newline)."""
    return "\n".join(openmetrics_lines(workloads, now, window, step, seed)) + "\n"


def _check_unique(label_sets: Iterable[dict[str, str]]) -> None:
    # Two workloads with identical labels would silently interleave into one corrupt series.
    seen: set[tuple[tuple[str, str], ...]] = set()
    for labels in label_sets:
        key = tuple(sorted(labels.items()))
        if key in seen:
            raise ValueError(f"two workloads share the label set {dict(key)}")
        seen.add(key)


def _check_shared(workloads: Sequence[Workload]) -> None:
    # Copies of one time-sliced device show the device: they cannot differ in what the device does.
    behaviour: dict[tuple[str | None, str, int, int], tuple[object, ...]] = {}
    for w in workloads:
        if w.vgpu is None:
            continue
        what = (w.profile, w.idle_for, w.memory_total_mib, w.prof_metrics, w.broken_prof, w.model_name, w.mig_profile)
        if behaviour.setdefault(w.device, what) != what:
            raise ValueError(f"time-sliced copies of {w.hostname}/gpu{w.gpu} must behave alike (profile, memory...)")
