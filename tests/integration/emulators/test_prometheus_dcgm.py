"""The DCGM series generator and the binary check: pure, no server (the server tests are next door)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.emulators.prometheus.dataset import REPRESENTATIVE_WORKLOADS
from tests.emulators.prometheus.dcgm import (
    FB_FREE,
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    Workload,
    epoch_millis,
    openmetrics,
    sample_times,
    samples,
)
from tests.emulators.prometheus.fixtures import require_binaries
from tests.emulators.prometheus.server import PrometheusNotInstalledError, find_binaries

# A fixed instant, so every number below is reproducible: Monday 2026-03-02 09:15:30.250 UTC.
NOW = datetime(2026, 3, 2, 9, 15, 30, 250000, tzinfo=UTC)
BUSY = Workload("train-0", "ml", "trainer", 0, "node-a")
IDLE = Workload("nb-0", "ds", "notebook", 1, "node-a", profile="idle")
MIG = Workload("mig-0", "ml", "server", 0, "node-b", mig_profile="1g.10gb", mig_instance_id=7, memory_total_mib=9728)
NO_PROF = Workload("render-0", "gfx", "renderer", 2, "node-a", prof_metrics=False)
EXPORTED = Workload("batch-0", "inf", "server", 3, "node-a", exported_labels=True)
SERIES_LINE = re.compile(r"^(?P<metric>\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+) (?P<ts>\d+\.\d+)$")


def series_lines(text: str) -> list[re.Match[str]]:
    return [m for line in text.splitlines() if (m := SERIES_LINE.match(line))]


def test_output_is_openmetrics_gauges_ending_with_eof() -> None:
    text = openmetrics([BUSY, MIG], NOW, window=timedelta(minutes=5))

    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    assert text.endswith("\n")
    types = [line for line in lines if line.startswith("# TYPE")]
    assert types == [f"# TYPE {m} gauge" for m in (GPU_UTIL, GR_ENGINE_ACTIVE, FB_USED, FB_FREE)]
    # Every non-comment line is a sample with a timestamp.
    assert len(series_lines(text)) == sum(1 for line in lines if not line.startswith("#"))


def test_samples_every_30s_ending_exactly_at_now() -> None:
    times = sample_times(NOW, timedelta(hours=6), timedelta(seconds=30))

    assert len(times) == 720
    assert times[-1] == NOW
    assert times[0] == NOW - timedelta(hours=5, minutes=59, seconds=30)
    assert all(b - a == timedelta(seconds=30) for a, b in itertools.pairwise(times))


def test_timestamps_are_seconds_that_truncate_to_the_sample_millisecond() -> None:
    text = openmetrics([BUSY], NOW, window=timedelta(minutes=1))

    stamps = [m["ts"] for m in series_lines(text) if m["metric"] == GPU_UTIL]
    # "X.2505": Prometheus computes int64(ts * 1000), which must land on NOW's millisecond.
    assert stamps == [f"{epoch_millis(NOW) // 1000 - 30}.2505", f"{epoch_millis(NOW) // 1000}.2505"]


def test_same_inputs_give_the_same_document_and_the_seed_changes_it() -> None:
    first = openmetrics(REPRESENTATIVE_WORKLOADS, NOW, window=timedelta(hours=1))

    assert openmetrics(REPRESENTATIVE_WORKLOADS, NOW, window=timedelta(hours=1)) == first
    assert openmetrics(REPRESENTATIVE_WORKLOADS, NOW, window=timedelta(hours=1), seed=1) != first


def test_busy_is_70_to_95_percent_and_idle_is_0_to_3_but_rarely_exactly_0() -> None:
    busy = [s.gpu_util_pct for s in samples(BUSY, NOW)]
    idle = [s.gpu_util_pct for s in samples(IDLE, NOW)]

    assert all(70 <= u <= 95 for u in busy)
    assert all(0 <= u <= 3 for u in idle)
    zeros = idle.count(0) / len(idle)
    assert 0 < zeros < 0.3


def test_idle_after_busy_switches_at_idle_for_before_now() -> None:
    workload = Workload("ft-0", "ml", "trainer", 0, "node-c", profile="idle_after_busy", idle_for=timedelta(hours=2))

    rows = samples(workload, NOW)
    before = [s.gpu_util_pct for s in rows if s.at <= NOW - timedelta(hours=2)]
    after = [s.gpu_util_pct for s in rows if s.at > NOW - timedelta(hours=2)]
    assert min(before) >= 70
    assert max(after) <= 3
    assert workload.idle_over(timedelta(hours=1))
    assert not workload.idle_over(timedelta(hours=3))


def test_engine_active_is_a_ratio_that_tracks_utilisation_and_memory_adds_up() -> None:
    for row in samples(BUSY, NOW, window=timedelta(hours=1)):
        assert 0.0 <= row.gr_engine_active <= 1.0
        assert abs(row.gr_engine_active - row.gpu_util_pct / 100) < 0.03
        assert row.fb_used_mib + row.fb_free_mib == BUSY.memory_total_mib


def test_idle_pods_still_hold_memory() -> None:
    # Memory is not an idleness signal: an idle notebook keeps its model resident.
    assert min(s.fb_used_mib for s in samples(IDLE, NOW)) > IDLE.memory_total_mib * 0.2


def test_mig_slices_have_only_prof_utilisation_and_carry_the_gpu_instance() -> None:
    metrics = {m["metric"]: m["labels"] for m in series_lines(openmetrics([MIG], NOW, window=timedelta(minutes=1)))}

    assert set(metrics) == {GR_ENGINE_ACTIVE, FB_USED, FB_FREE}
    assert 'GPU_I_PROFILE="1g.10gb"' in metrics[FB_USED]
    assert 'GPU_I_ID="7"' in metrics[FB_USED]


def test_missing_prof_metrics_leave_util_and_memory() -> None:
    metrics = {m["metric"] for m in series_lines(openmetrics([NO_PROF], NOW, window=timedelta(minutes=1)))}

    assert metrics == {GPU_UTIL, FB_USED, FB_FREE}


def test_exported_labels_name_the_workload_and_plain_labels_the_exporter() -> None:
    labels = EXPORTED.labels()

    assert (labels["exported_pod"], labels["exported_namespace"], labels["exported_container"]) == (
        "batch-0",
        "inf",
        "server",
    )
    assert labels["pod"].startswith("nvidia-dcgm-exporter")
    assert labels["namespace"] == "gpu-operator"
    assert "exported_pod" not in BUSY.labels()
    assert BUSY.labels()["pod"] == "train-0"


def test_label_values_are_escaped() -> None:
    odd = Workload('we"ird\\pod', "ns", "c", 0, "node-z")

    line = series_lines(openmetrics([odd], NOW, window=timedelta(minutes=1)))[0]
    assert 'pod="we\\"ird\\\\pod"' in line["labels"]


def test_two_slices_of_one_gpu_share_its_uuid() -> None:
    other = Workload("mig-1", "ml", "server", 0, "node-b", mig_profile="1g.10gb", mig_instance_id=8)

    assert MIG.labels()["UUID"] == other.labels()["UUID"]
    assert MIG.labels()["UUID"] != BUSY.labels()["UUID"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: openmetrics([BUSY, BUSY], NOW), "share the label set"),
        (lambda: sample_times(NOW.replace(tzinfo=None)), "timezone-aware"),
        (
            lambda: Workload("m", "n", "c", 0, "h", mig_profile="1g.10gb", prof_metrics=False),
            "no utilisation",
        ),
        (
            lambda: Workload("w", "n", "c", 0, "h", profile="idle_after_busy", idle_for=timedelta(0)),
            "positive",
        ),
    ],
    ids=["duplicate-series", "naive-now", "mig-without-prof", "idle-for-zero"],
)
def test_impossible_inputs_are_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_representative_dataset_has_one_of_each_case() -> None:
    ws = REPRESENTATIVE_WORKLOADS

    assert any(w.profile == "busy" and not w.is_mig for w in ws)
    assert any(w.profile == "idle" and not w.is_mig for w in ws)
    assert any(w.profile == "idle_after_busy" for w in ws)
    assert sum(w.is_mig for w in ws) >= 2
    assert any(w.exported_labels and w.profile == "idle" for w in ws)
    assert any(not w.prof_metrics for w in ws)
    openmetrics(ws, NOW, window=timedelta(minutes=1))  # label sets are unique


def test_missing_binaries_name_the_install_script() -> None:
    with pytest.raises(
        PrometheusNotInstalledError, match=r"prometheus and promtool not found on PATH.*install-prometheus"
    ):
        find_binaries(path="")


def test_missing_binaries_with_an_empty_path_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")

    with pytest.raises(PrometheusNotInstalledError, match=r"\.ci/install-prometheus"):
        find_binaries()


def test_fixtures_fail_rather_than_skip_without_binaries() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"run \.ci/install-prometheus"):
        require_binaries(path="")


# --- production shapes -------------------------------------------------------------------------------------------

OLD = Workload("legacy-0", "res", "trainer", 0, "node-o", old_labels=True, hostname_label="hostname", cluster="c1")
BARE = Workload("", "", "", 4, "node-a", profile="idle")
HELD_BY_EXPORTER = Workload("", "", "", 5, "node-a", profile="idle", exporter_pod_labels=True)


def test_the_cluster_label_is_the_external_label_and_absent_by_default() -> None:
    assert OLD.labels()["cluster"] == "c1"
    assert list(OLD.labels())[-1] == "cluster"
    assert "cluster" not in BUSY.labels()


def test_old_label_names_and_a_lowercase_hostname() -> None:
    labels = OLD.labels()

    assert (labels["pod_name"], labels["pod_namespace"], labels["container_name"]) == ("legacy-0", "res", "trainer")
    assert not {"pod", "namespace", "container", "exported_pod", "Hostname"} & set(labels)
    assert labels["hostname"] == "node-o"


def test_a_gpu_no_pod_holds_has_no_pod_labels_or_the_exporters_own() -> None:
    bare, held = BARE.labels(), HELD_BY_EXPORTER.labels()

    assert not {"pod", "namespace", "container", "exported_pod", "pod_name"} & set(bare)
    # The trap: it looks like a pod attribution, to the dcgm-exporter pod of the node.
    assert (held["pod"], held["namespace"]) == ("nvidia-dcgm-exporter-node-a", "gpu-operator")
    assert "exported_pod" not in held
    assert BARE.unallocated
    assert not BUSY.unallocated


def test_time_sliced_copies_share_the_device_and_its_values() -> None:
    a = Workload("share-a", "ds", "nb", 0, "node-t", profile="idle", vgpu=0)
    b = Workload("share-b", "other", "nb", 0, "node-t", profile="idle", vgpu=1)

    assert a.labels()["UUID"] == b.labels()["UUID"]
    assert (a.labels()["vgpu"], b.labels()["vgpu"]) == ("0", "1")
    assert samples(a, NOW) == samples(b, NOW)
    with pytest.raises(ValueError, match="behave alike"):
        openmetrics([a, Workload("share-c", "ds", "nb", 0, "node-t", vgpu=2)], NOW, window=timedelta(minutes=5))


def test_leaked_memory_is_near_zero_utilisation_with_the_memory_nearly_full() -> None:
    leaked = Workload("crashed", "ml", "t", 0, "node-l", profile="leaked")
    rows = samples(leaked, NOW, window=timedelta(hours=2))

    assert max(r.gpu_util_pct for r in rows) <= 1
    assert all(0.93 <= r.fb_used_mib / leaked.memory_total_mib <= 0.96 for r in rows)
    assert leaked.idle_over(timedelta(hours=2))


def test_a_broken_prof_metric_reads_exactly_zero_even_when_busy() -> None:
    broken = Workload("busy-broken", "ml", "t", 0, "node-b", broken_prof=True)
    rows = samples(broken, NOW, window=timedelta(hours=1))

    assert {r.gr_engine_active for r in rows} == {0.0}
    assert min(r.gpu_util_pct for r in rows) >= 70


def test_a_young_pod_has_series_only_since_it_started() -> None:
    young = Workload("young", "ml", "t", 0, "node-y", profile="idle", started_ago=timedelta(minutes=30))
    rows = samples(young, NOW, window=timedelta(hours=2))

    assert len(rows) == 60
    assert rows[0].at > NOW - timedelta(minutes=30)
    assert rows[-1].at == NOW


@pytest.mark.parametrize(
    "build",
    [
        lambda: Workload("p", "n", "c", 0, "h", exported_labels=True, old_labels=True),
        lambda: Workload("", "", "", 0, "h", exported_labels=True),
        lambda: Workload("p", "n", "c", 0, "h", exporter_pod_labels=True),
        lambda: Workload("p", "n", "c", 0, "h", started_ago=timedelta(0)),
    ],
    ids=["two-shapes", "unallocated-exported", "exporter-labels-on-a-pod", "started-ago-zero"],
)
def test_impossible_shapes_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each has its own message; that it refuses is the point
        build()


def test_representative_dataset_has_every_production_shape() -> None:
    ws = REPRESENTATIVE_WORKLOADS

    assert {w.cluster for w in ws} == {"ml-prod", "research", "notebooks"}
    assert any(w.old_labels for w in ws)
    assert any(w.hostname_label == "hostname" for w in ws)
    assert any(w.unallocated and not w.exporter_pod_labels for w in ws)
    assert any(w.unallocated and w.exporter_pod_labels for w in ws)
    assert sum(w.vgpu is not None for w in ws) >= 2
    assert any(w.profile == "leaked" for w in ws)
    assert all(w.broken_prof for w in ws if w.cluster == "notebooks")
    assert any(w.started_ago is not None for w in ws)
    pods = [w.pod for w in ws if w.pod]
    assert any(pods.count(p) >= 2 and not any(w.vgpu is not None for w in ws if w.pod == p) for p in pods)
