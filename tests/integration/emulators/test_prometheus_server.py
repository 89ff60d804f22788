"""The real Prometheus, loaded by the real promtool, answers PromQL over HTTP with the generated truth."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.emulators.prometheus.dcgm import (
    FB_FREE,
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    Workload,
    epoch_millis,
    samples,
)
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.emulators.prometheus.server import PrometheusQueryError, PrometheusServer, rfc3339_millis, start_prometheus

pytestmark = [pytest.mark.integration, pytest.mark.prometheus]

HOUR = timedelta(hours=1)
# Well apart from the wall clock on purpose: retention and lookback must follow the data, not today.
PAST_NOW = datetime(2026, 3, 2, 9, 15, 30, 250000, tzinfo=UTC)


def owner(metric: dict[str, str]) -> tuple[str, str]:
    """(namespace, pod) of the workload, whichever label naming the series uses; ("", "") for none."""
    for namespace, pod in (("exported_namespace", "exported_pod"), ("namespace", "pod"), ("pod_namespace", "pod_name")):
        if metric.get(pod):
            return metric.get(namespace, ""), metric[pod]
    return "", ""


def device_key(metric: dict[str, str]) -> tuple[str, ...]:
    """One series of one metric: its cluster, owner, device and time-slicing copy."""
    return (
        metric.get("cluster", ""),
        *owner(metric),
        metric["UUID"],
        metric.get("GPU_I_ID", ""),
        metric.get("vgpu", ""),
    )


def http_query(url: str, promql: str, at: datetime) -> dict[str, Any]:
    """A bare urllib POST to /api/v1/query, as any HTTP client would send it."""
    form = urllib.parse.urlencode({"query": promql, "time": rfc3339_millis(at)}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/api/v1/query", data=form), timeout=10) as response:
        body: dict[str, Any] = json.load(response)
    return body


def test_avg_utilisation_over_the_last_hour_separates_busy_and_idle_pods(
    prometheus: PrometheusServer,
) -> None:
    body = http_query(prometheus.url, f"avg_over_time({GPU_UTIL}[1h])", prometheus.now)

    assert body["status"] == "success"
    averages = {device_key(r["metric"]): float(r["value"][1]) for r in body["data"]["result"]}
    truth = {device_key(w.labels()): w.idle_over(HOUR) for w in prometheus.workloads if not w.is_mig}
    assert set(averages) == set(truth)
    idle = {key for key, avg in averages.items() if avg <= 3}
    busy = {key for key, avg in averages.items() if avg >= 50}
    assert idle == {key for key, is_idle in truth.items() if is_idle}
    assert busy == {key for key, is_idle in truth.items() if not is_idle}
    # The pod that went idle 20 min ago is idle *now* but not over the hour: the window matters.
    assert {key[1:3] for key in busy} >= {("ml-research", "eval-run-42")}
    assert {key[1:3] for key in idle} >= {("ml-research", "finetune-bert-0")}


def test_idle_is_rarely_exactly_zero(prometheus: PrometheusServer) -> None:
    result = prometheus.query(f'max_over_time({GPU_UTIL}{{pod="jupyter-alice"}}[1h])')

    assert 0 < float(result[0]["value"][1]) <= 3


def test_engine_active_separates_mig_slices(prometheus: PrometheusServer) -> None:
    result = prometheus.query(f'avg_over_time({GR_ENGINE_ACTIVE}{{GPU_I_PROFILE!=""}}[1h])')

    ratios = {owner(r["metric"])[1]: float(r["value"][1]) for r in result}
    assert set(ratios) == {"mig-infer-a", "mig-notebook-b"}
    assert ratios["mig-infer-a"] > 0.6
    assert ratios["mig-notebook-b"] < 0.05


def test_mig_slices_only_have_prof_utilisation(prometheus: PrometheusServer) -> None:
    names = prometheus.query('count by (__name__) ({__name__=~"DCGM_.+", GPU_I_PROFILE!=""})')

    assert {r["metric"]["__name__"] for r in names} == {GR_ENGINE_ACTIVE, FB_USED, FB_FREE}
    assert prometheus.query(f'{GPU_UTIL}{{GPU_I_PROFILE!=""}}') == []


def test_series_without_prof_metrics_still_report_util(prometheus: PrometheusServer) -> None:
    without = [w.pod for w in prometheus.workloads if not w.prof_metrics]
    selector = f'{{pod=~"{"|".join(without)}"}}'

    assert len(without) == 2
    assert prometheus.query(f"{GR_ENGINE_ACTIVE}{selector}") == []
    assert sorted(r["metric"]["pod"] for r in prometheus.query(f"{GPU_UTIL}{selector}")) == sorted(without)


def test_exported_labels_present_exactly_where_chosen(prometheus: PrometheusServer) -> None:
    exported = prometheus.query(f'{FB_USED}{{exported_pod!=""}}')
    plain = prometheus.query(f'{FB_USED}{{exported_pod=""}}')

    assert {r["metric"]["exported_pod"] for r in exported} == {w.pod for w in prometheus.workloads if w.exported_labels}
    # Without honor_labels, the plain labels point at the exporter: attributing by `pod` alone is wrong.
    assert all(r["metric"]["pod"].startswith("nvidia-dcgm-exporter-") for r in exported)
    assert all(r["metric"]["namespace"] == "gpu-operator" for r in exported)
    assert {owner(r["metric"]) for r in plain} == {
        owner(w.labels()) for w in prometheus.workloads if not w.exported_labels
    }


def test_data_ends_at_now_and_goes_stale_after_the_lookback(prometheus: PrometheusServer) -> None:
    newest = prometheus.query(f"max(timestamp({FB_USED}))")
    after = prometheus.query(FB_USED, at=prometheus.now + timedelta(minutes=6))

    assert float(newest[0]["value"][1]) == pytest.approx(epoch_millis(prometheus.now) / 1000, abs=1e-6)
    assert after == []


def test_range_query_returns_every_generated_sample(prometheus: PrometheusServer) -> None:
    workload = next(w for w in prometheus.workloads if w.pod == "train-llm-0" and w.gpu == 0)
    expected = samples(workload, prometheus.now, prometheus.window, prometheus.step)

    result = prometheus.query_range(
        f'{GPU_UTIL}{{pod="train-llm-0", gpu="0"}}',
        start=prometheus.now - prometheus.window - HOUR,
        end=prometheus.now,
        step=prometheus.step,
    )

    assert len(result) == 1
    points = [(round(t * 1000), int(v)) for t, v in result[0]["values"]]
    assert points == [(epoch_millis(s.at), s.gpu_util_pct) for s in expected]
    assert len(points) == 720  # 6 h of 30 s scrapes


def test_factory_serves_its_own_data_at_a_past_now(prometheus_factory: PrometheusFactory) -> None:
    workloads = [
        Workload("solo-busy", "team-a", "main", 0, "node-x"),
        Workload("solo-idle", "team-b", "main", 1, "node-x", profile="idle", exported_labels=True),
    ]

    server = prometheus_factory(workloads, now=PAST_NOW, window=timedelta(hours=2))

    assert server.now == PAST_NOW
    result = server.query(f"avg_over_time({GPU_UTIL}[1h])")
    averages = {owner(r["metric"])[1]: float(r["value"][1]) for r in result}
    assert averages["solo-busy"] > 70
    assert averages["solo-idle"] < 3
    assert server.timings.total_s > 0


def test_long_windows_outlive_the_default_retention(prometheus_factory: PrometheusFactory) -> None:
    # Samples 16, 8 and 0 days before now: the oldest is past Prometheus' 15 d default retention, which would
    # drop its block at startup. A coarse step keeps this fast: promtool 2.42 writes one 2 h block per 2 h of
    # data (~80 ms each), so 16 days of 30 s samples would take ~16 s to backfill.
    window, step = timedelta(days=24), timedelta(days=8)

    server = prometheus_factory([Workload("old", "ns", "c", 0, "n")], now=PAST_NOW, window=window, step=step)

    result = server.query(f"count_over_time({GPU_UTIL}[25d])")
    assert int(result[0]["value"][1]) == 3


def test_stop_ends_the_server_and_removes_its_files() -> None:
    server = start_prometheus([], PAST_NOW)
    running_before = server.running
    answer = server.query("vector(1)")[0]["value"][1]

    server.stop()
    server.stop()  # idempotent

    assert (running_before, answer) == (True, "1")
    assert server.running is False
    assert not server.workdir.exists()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{server.url}/-/ready", timeout=2)


def test_bad_promql_is_reported_with_prometheus_own_error(prometheus: PrometheusServer) -> None:
    with pytest.raises(PrometheusQueryError, match="parse error"):
        prometheus.query("avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h]")


# --- production shapes in the representative dataset, as Prometheus serves them -----------------------------------


def test_every_series_carries_its_cluster_and_a_cluster_matcher_selects_one(prometheus: PrometheusServer) -> None:
    clusters = {r["metric"]["cluster"] for r in prometheus.query(f"count by (cluster) ({FB_USED})")}
    research = prometheus.query(f'{FB_USED}{{cluster="research"}}')

    assert clusters == {"ml-prod", "research", "notebooks"}
    assert prometheus.query(f'{FB_USED}{{cluster=""}}') == []
    assert {owner(r["metric"]) for r in research} == {("research", "legacy-train-0"), ("research", "legacy-nb-0")}


def test_old_label_names_and_lowercase_hostname_are_queryable(prometheus: PrometheusServer) -> None:
    result = prometheus.query(f'avg_over_time({GPU_UTIL}{{pod_name!=""}}[1h])')

    values = {r["metric"]["pod_name"]: float(r["value"][1]) for r in result}
    assert values.keys() == {"legacy-train-0", "legacy-nb-0"}
    assert values["legacy-train-0"] > 50
    assert values["legacy-nb-0"] < 3
    assert all(r["metric"]["hostname"] == "gpu-v100-1" and "Hostname" not in r["metric"] for r in result)
    assert all("pod" not in r["metric"] for r in result)


def test_gpus_no_pod_holds_are_served_with_no_pod_labels_or_the_exporters(prometheus: PrometheusServer) -> None:
    bare = prometheus.query(f'{GPU_UTIL}{{pod="", exported_pod="", pod_name=""}}')
    exporter = prometheus.query(f'{GPU_UTIL}{{pod=~"nvidia-dcgm-exporter-.+", exported_pod=""}}')

    assert [(r["metric"]["Hostname"], r["metric"]["gpu"]) for r in bare] == [("gpu-a10g-2", "3")]
    assert [(r["metric"]["pod"], r["metric"]["namespace"]) for r in exporter] == [
        ("nvidia-dcgm-exporter-gpu-l4-1", "gpu-operator")
    ]


def test_time_sliced_copies_are_one_device_with_identical_values(prometheus: PrometheusServer) -> None:
    result = prometheus.query(f'avg_over_time({GPU_UTIL}{{vgpu!=""}}[1h])')

    by_device: dict[str, set[tuple[str, str]]] = {}
    values: dict[str, set[str]] = {}
    for r in result:
        by_device.setdefault(r["metric"]["UUID"], set()).add((r["metric"]["pod"], r["metric"]["vgpu"]))
        values.setdefault(r["metric"]["UUID"], set()).add(r["value"][1])
    assert sorted(map(sorted, by_device.values())) == [
        [("share-api-a", "0"), ("share-api-b", "1")],
        [("share-nb-a", "0"), ("share-nb-b", "1")],
    ]
    assert all(len(v) == 1 for v in values.values())  # the very same string: the device's series, copied


def test_leaked_memory_shows_as_a_full_framebuffer_at_near_zero_utilisation(prometheus: PrometheusServer) -> None:
    used = f'avg_over_time({FB_USED}{{pod="llm-crashed-0"}}[1h])'
    free = f'avg_over_time({FB_FREE}{{pod="llm-crashed-0"}}[1h])'
    share = prometheus.query(f"{used} / ({used} + {free})")
    util = prometheus.query(f'avg_over_time({GPU_UTIL}{{pod="llm-crashed-0"}}[1h])')

    assert 0.93 < float(share[0]["value"][1]) < 0.96
    assert float(util[0]["value"][1]) < 1


def test_the_broken_prof_metric_is_exactly_zero_on_every_gpu_of_its_cluster(prometheus: PrometheusServer) -> None:
    prof = prometheus.query(f'max_over_time({GR_ENGINE_ACTIVE}{{cluster="notebooks"}}[6h])')
    util = prometheus.query(f'avg_over_time({GPU_UTIL}{{cluster="notebooks", pod="nb-busy-0"}}[1h])')

    assert len(prof) == 2
    assert {r["value"][1] for r in prof} == {"0"}
    assert float(util[0]["value"][1]) > 50  # busy all the same


def test_a_multi_gpu_pod_has_one_series_per_gpu(prometheus: PrometheusServer) -> None:
    result = prometheus.query(f'avg_over_time({GPU_UTIL}{{pod=~"ddp-.+"}}[1h])')

    per_gpu = {(r["metric"]["pod"], r["metric"]["gpu"]): float(r["value"][1]) for r in result}
    assert set(per_gpu) == {("ddp-idle-0", "0"), ("ddp-idle-0", "1"), ("ddp-half-0", "2"), ("ddp-half-0", "3")}
    assert per_gpu[("ddp-half-0", "2")] > 50
    assert per_gpu[("ddp-half-0", "3")] < 3
    assert len({r["metric"]["UUID"] for r in result}) == 4


def test_a_young_pod_has_samples_only_for_its_last_30_minutes(prometheus: PrometheusServer) -> None:
    counts = prometheus.query(f'count_over_time({GPU_UTIL}{{pod="notebook-new"}}[2h])')
    old = prometheus.query(f'count_over_time({GPU_UTIL}{{pod="jupyter-alice"}}[2h])')

    assert int(counts[0]["value"][1]) == 60  # 30 min of 30 s scrapes
    # Prometheus 2.x range selectors are closed at both ends ([now-2h, now]: 241 samples); 3.x left-opens them.
    assert int(old[0]["value"][1]) in (240, 241)
