"""The jobs' gauges on a real Pushgateway (Debian ``prometheus-pushgateway``) scraped by a real Prometheus: a night
of ``gpu-jobs nodegroups`` across the central world's clusters, then a morning whose restores fail. The alert rules and
the PromQL query of docs/report.md are checked by ``promtool`` and run against that Prometheus as typed there."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs import ROOT, blocks
from tests.emulators.prometheus.fixtures import require_binaries
from tests.emulators.prometheus.pushgateway import PushgatewayServer, start_pushgateway
from tests.emulators.prometheus.server import PrometheusServer, query, start_prometheus
from tests.integration.nodegroups.world import EVENING, MORNING, Fleet
from tests.integration.test_history import _aks_api, _research_api, central, gpu_jobs  # noqa: F401  # fixtures

pytestmark = pytest.mark.integration
PAGE = "docs/report.md"


def fenced(lang: str, after: str) -> str:
    """The first ``lang`` block of the page after ``after``."""
    text = (ROOT / PAGE).read_text()
    line = text.count("\n", 0, text.index(after)) + 1
    return next(b.text for b in blocks(PAGE) if b.lang == lang and b.line >= line)


@pytest.fixture
def monitoring() -> Iterator[tuple[PushgatewayServer, PrometheusServer]]:
    binaries = require_binaries()
    gateway = start_pushgateway()
    try:
        server = start_prometheus([], datetime.now(UTC), binaries=binaries, scrape=[gateway.address])
        try:
            yield gateway, server
        finally:
            server.stop()
    finally:
        gateway.stop()


def scraped(server: PrometheusServer, promql: str, until: Any, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    """``promql`` now, once ``until(result)`` holds (the scrape runs four times a second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = query(server.url, promql, datetime.now(UTC))
        if until(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def values(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {r["metric"][label]: float(r["value"][1]) for r in result}


def test_a_night_pushes_its_gauges_and_a_failed_morning_fires_the_alert(
    central: Fleet,  # noqa: F811
    tmp_path: Path,
    monitoring: tuple[PushgatewayServer, PrometheusServer],
) -> None:
    gateway, server = monitoring
    for at in (EVENING, EVENING + timedelta(minutes=10), EVENING + timedelta(minutes=70)):
        done = gpu_jobs(central, tmp_path, "nodegroups", "--at", at.isoformat(), GPU_JOBS_PUSHGATEWAY_URL=gateway.url)
        assert done.code == 0, done.stderr
        central.sync_nodes()

    down = scraped(server, "gpu_jobs_groups_down", lambda r: len(r) == 3)
    assert values(down, "cluster") == {"ml-prod": 2.0, "research": 1.0, "aks-ml": 2.0}
    (code,) = scraped(server, 'gpu_jobs_last_exit_code{gpu_job="nodegroups"}', bool)
    assert (code["metric"]["job"], code["metric"]["install"], code["value"][1]) == ("gpu-jobs", "central", "0")

    # The docs' query: the week's GPU-hours avoided per cluster, for the hour between the run that saw the nodes
    # gone and the last. train's 3 nodes went, but its Cluster Autoscaler (min 1) would have removed two of them by
    # itself: 1 node x 8 GPUs. research's GKE pool reads no size, and its autoscaler keeps 1 node in each of its 2
    # zones: 2 x 8 GPUs. The other groups have no gpusPerNode.
    promql = fenced("promql", "the week's savings per cluster")
    assert values(scraped(server, promql, bool), "cluster") == {"ml-prod": 8.0, "research": 16.0}

    # The docs' alert rules: valid for promtool, and quiet while every run succeeds.
    rules = tmp_path / "rules.yml"
    rules.write_text(fenced("yaml", "Two alert rules"))
    checked = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = {r["alert"]: r["expr"] for r in yaml.safe_load(rules.read_text())["groups"][0]["rules"]}
    assert scraped(server, alerts["GpuJobFailed"], lambda r: r == []) == []
    assert scraped(server, alerts["GpuJobNotRunning"], lambda r: r == []) == []

    # A morning whose EKS restores fail: exit 1, and the alert's expression fires with the job's labels.
    central.aws.faults.inject("UpdateNodegroupConfig", "server_error", times=1000)
    done = gpu_jobs(central, tmp_path, "nodegroups", "--at", MORNING.isoformat(), GPU_JOBS_PUSHGATEWAY_URL=gateway.url)
    assert done.code == 1
    (firing,) = scraped(server, alerts["GpuJobFailed"], bool)
    assert (firing["metric"]["gpu_job"], firing["value"][1]) == ("nodegroups", "1")
    failed = scraped(server, "gpu_jobs_items_failed > 0", bool)
    assert values(failed, "scope") == {"ml-prod": 1.0}  # train (EKS); batch is a plain ASG, restored


def test_a_pushgateway_that_cannot_be_reached_changes_nothing(central: Fleet, tmp_path: Path) -> None:  # noqa: F811
    done = gpu_jobs(
        central, tmp_path, "nodegroups", "--at", EVENING.isoformat(), GPU_JOBS_PUSHGATEWAY_URL="http://127.0.0.1:9"
    )
    assert (done.code, done.summary["applied"]) == (0, 5)
    assert '"event": "metrics.unpushed"' in done.stderr
