"""The pods part against series shaped as real fleets shape them, in the real Prometheus: a shared Thanos holding two
clusters (the ``cluster`` matcher), the old ``pod_name`` labels with a lowercase ``hostname``, the exporter's own pod
labels on a GPU no pod holds, time-sliced copies, leaked memory; and the cluster-wide refusals (a broken all-zero
PROF metric, no series for the cluster). Dry runs: what is judged, not what is written (tests/integration/sweep/
test_pods.py writes)."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.emulators.prometheus.dcgm import Workload
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.emulators.prometheus.server import PrometheusServer
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli

pytestmark = pytest.mark.integration

SHARED = "nvidia.com/gpu.shared"


def policy(metric: str = "DCGM_FI_DEV_GPU_UTIL", cluster: str = "ml-prod") -> str:
    return textwrap.dedent(f"""\
        apiVersion: gpu-jobs/v1
        kind: GpuPolicy
        defaults: {{timezone: UTC}}
        clusters:
          - name: ml-prod
            cloud: aws
            aws: {{region: eu-west-1, cluster: ml-prod}}
            prometheus: {{url: "http://thanos.invalid:9090", matchers: {{cluster: {cluster}}}}}
        sweep:
          idlePods: {{metric: {metric}, window: 2h, gracePeriod: 30m, action: delete}}
          leakedMemory: {{utilBelow: 1, memoryUsedAbove: 90%}}
        """)


def ml(pod: str, gpu: int, host: str, **options: Any) -> Workload:
    return Workload(pod, "ml", "main", gpu, host, cluster="ml-prod", **options)


WORKLOADS = (
    ml("old-0", 0, "gpu-1", profile="idle", old_labels=True, hostname_label="hostname"),
    ml("leak-0", 1, "gpu-1", profile="leaked"),
    # Time-slicing: two pods share one device, each with a copy of its series.
    ml("shared-a", 0, "gpu-2", profile="idle", vgpu=0),
    ml("shared-b", 0, "gpu-2", profile="idle", vgpu=1),
    ml("shared-busy-a", 1, "gpu-2", vgpu=0),
    ml("shared-busy-b", 1, "gpu-2", vgpu=1),
    ml("busy-0", 0, "gpu-3"),
    ml("", 1, "gpu-3", profile="idle", exporter_pod_labels=True),  # no pod holds it: the exporter's own labels
    ml("idle-x", 0, "gpu-4", profile="idle"),
    # Another cluster in the same Thanos, a pod of the same name that is busy there: not ml-prod's.
    Workload("idle-x", "ml", "main", 0, "batch-gpu-1", cluster="batch"),
)
PODS = {
    "old-0": "nvidia.com/gpu",
    "leak-0": "nvidia.com/gpu",
    "shared-a": SHARED,
    "shared-b": SHARED,
    "shared-busy-a": SHARED,
    "shared-busy-b": SHARED,
    "busy-0": "nvidia.com/gpu",
    "idle-x": "nvidia.com/gpu",
}


@pytest.fixture
def world(kube: KubeHandle, prometheus_factory: PrometheusFactory) -> tuple[KubeHandle, PrometheusServer]:
    now = datetime.now(UTC).replace(microsecond=0)
    for name in ("gpu-jobs", "ml"):
        kube.create(namespace(name))
    for name, resource in PODS.items():
        kube.create(gpu_pod(name, "ml", "gpu-1", resource=resource, started=now - timedelta(hours=5)))
    kube.identify("ml-prod")  # what the cluster's install created: its API proves it is ml-prod
    kube.log.clear()
    return kube, prometheus_factory(WORKLOADS, now)


def sweep(kube: KubeHandle, tmp_path: Path, server: PrometheusServer, text: str) -> tuple[CliRun, dict[str, Any]]:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    env = {"KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_PROMETHEUS_URL": server.url}
    argv = ["sweep", "--part", "pods", "--policy", str(path), "--cluster", "ml-prod", "--at", server.now.isoformat()]
    done = run_cli([*argv, "--dry-run", "--output", "json"], env)
    return done, json.loads(done.stdout)


def test_every_shape_is_attributed_and_judged(world: tuple[KubeHandle, PrometheusServer], tmp_path: Path) -> None:
    kube, server = world
    done, document = sweep(kube, tmp_path, server, policy())
    assert done.code == 0, done.stderr
    rows = {p["pod"]: p for p in items(document, "pod")}
    assert {p: r["state"] for p, r in rows.items()} == {
        "old-0": "marked",  # pod_name/pod_namespace and a lowercase hostname
        "leak-0": "marked",
        "shared-a": "marked",  # copies of one idle device: both idle, the same figure
        "shared-b": "marked",
        "idle-x": "marked",  # the busy pod of that name is another cluster's
    }
    assert (rows["leak-0"]["idleReason"], rows["old-0"]["idleReason"]) == ("leaked-memory", "idle")
    assert rows["leak-0"]["memoryUsed"] > 0.9
    assert "probably crashed" in rows["leak-0"]["reason"]
    assert rows["shared-a"]["utilization"] == rows["shared-b"]["utilization"]
    # The exporter's own pod labels on gpu-3's second GPU are no pod of the cluster: unallocated.
    unallocated = [(u["cluster"], u["node"], u["gpus"]) for u in items(document, "unallocated GPU")]
    assert unallocated == [("ml-prod", "gpu-3", 1)]
    assert kube.log.writes() == []


def test_a_broken_all_zero_prof_metric_refuses_the_cluster(
    kube: KubeHandle, prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    kube.create(namespace("ml"))
    kube.create(gpu_pod("busy-0", "ml", "gpu-1", started=now - timedelta(hours=5)))
    kube.identify("ml-prod")
    server = prometheus_factory([ml("busy-0", 0, "gpu-1", broken_prof=True)], now)
    done, document = sweep(kube, tmp_path, server, policy(metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE"))
    assert done.code == 1, done.stderr
    (scope,) = document["scopes"]
    assert scope["state"] == "failed"
    assert "broken metric: DCGM_FI_PROF_GR_ENGINE_ACTIVE reads exactly 0 on every GPU" in scope["reason"]
    assert items(document, "pod") == []


def test_no_series_for_the_cluster_refuses_it(world: tuple[KubeHandle, PrometheusServer], tmp_path: Path) -> None:
    kube, server = world
    done, document = sweep(kube, tmp_path, server, policy(cluster="staging"))  # a matcher nothing carries
    assert done.code == 1, done.stderr
    (scope,) = document["scopes"]
    assert (scope["state"], items(document, "pod")) == ("failed", [])
    assert scope["reason"].startswith("no DCGM series for this cluster")
