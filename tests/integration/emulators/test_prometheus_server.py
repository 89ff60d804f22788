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
    """(namespace, pod) of the workload, whichever label naming the series uses."""
    return (
        metric.get("exported_namespace") or metric["namespace"],
        metric.get("exported_pod") or metric["pod"],
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
    body = http_query(
        prometheus.url,
        f"avg by (namespace, pod, exported_namespace, exported_pod) (avg_over_time({GPU_UTIL}[1h]))",
        prometheus.now,
    )

    assert body["status"] == "success"
    averages = {owner(r["metric"]): float(r["value"][1]) for r in body["data"]["result"]}
    truth = {(w.namespace, w.pod): w.idle_over(HOUR) for w in prometheus.workloads if not w.is_mig}
    assert set(averages) == set(truth)
    idle = {key for key, avg in averages.items() if avg <= 3}
    busy = {key for key, avg in averages.items() if avg >= 50}
    assert idle == {key for key, is_idle in truth.items() if is_idle}
    assert busy == {key for key, is_idle in truth.items() if not is_idle}
    # The pod that went idle 20 min ago is idle *now* but not over the hour: the window matters.
    assert ("ml-research", "eval-run-42") in busy
    assert ("ml-research", "finetune-bert-0") in idle


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
    assert {r["metric"]["pod"] for r in plain} == {w.pod for w in prometheus.workloads if not w.exported_labels}


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
