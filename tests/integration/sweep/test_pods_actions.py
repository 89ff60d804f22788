"""The pods part's actions end to end (real Prometheus, Kubernetes emulator with apps/v1 and graceful deletion):
``scale-owner`` scales a Deployment to zero with its replicas recorded and refuses a Job's pod; ``delete`` deletes a
Job's pod gracefully (documented: the Job controller may start another)."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.labels import IDLE_SINCE_ANNOTATION, SCALED_FROM_ANNOTATION
from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.emulators.prometheus.dcgm import Workload
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli

pytestmark = pytest.mark.integration


def policy(action: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: gpu-jobs/v1
        kind: GpuPolicy
        defaults: {{timezone: UTC}}
        clusters:
          - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}}}
        sweep:
          idlePods: {{window: 2h, gracePeriod: 30m, action: {action}}}
          limits: {{maxActionsPerRun: 10, maxPercentPerRun: 100%}}
        """)


def sweep(kube: KubeHandle, tmp_path: Path, url: str, action: str, at: datetime) -> tuple[CliRun, dict[str, Any]]:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(action))
    env = {"KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_PROMETHEUS_URL": url}
    argv = ["sweep", "--part", "pods", "--policy", str(path), "--cluster", "ml-prod", "--at", at.isoformat()]
    done = run_cli([*argv, "--output", "json"], env)
    return done, json.loads(done.stdout)


def seeded(kube: KubeHandle, now: datetime) -> dict[str, list[str]]:
    """A Deployment of two idle pods and a Job's idle pod, all marked an hour ago (due)."""
    for name in ("gpu-jobs", "ml"):
        kube.create(namespace(name))
    mark = {IDLE_SINCE_ANNOTATION: timestamp(now - timedelta(hours=1))}
    started = now - timedelta(hours=5)
    llm = kube.seed_deployment("llm", "ml", nodes=("gpu-1", "gpu-2"), pod_annotations=mark, started=started)
    batch = kube.seed_job("batch", "ml", nodes=("gpu-3",), pod_annotations=mark, started=started)
    kube.identify("ml-prod")  # what the cluster's install created: its API proves it is ml-prod
    kube.log.clear()
    return {
        "llm": [p["metadata"]["name"] for p in llm.pods],
        "batch": [p["metadata"]["name"] for p in batch.pods],
    }


def idle_series(names: dict[str, list[str]]) -> list[Workload]:
    pods = [pod for group in names.values() for pod in group]
    return [Workload(pod, "ml", "main", i, "gpu-1", profile="idle") for i, pod in enumerate(pods)]


def test_scale_owner_scales_the_deployment_and_refuses_the_jobs_pod(
    kube: KubeHandle, prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    names = seeded(kube, now)
    prometheus = prometheus_factory(idle_series(names), now)

    done, document = sweep(kube, tmp_path, prometheus.url, "scale-owner", now)

    assert done.code == 1, done.stderr  # the Job's pod cannot be scaled: a failed item
    rows = {p["pod"]: p for p in items(document, "pod")}
    (job_pod,) = names["batch"]
    assert rows[job_pod]["state"] == "marked"
    assert "cannot scale-owner a pod owned by Job: use action delete or exempt it" in rows[job_pod]["reason"]
    assert {rows[p]["state"] for p in names["llm"]} == {"acted"}
    assert any("scaled Deployment ml/llm from 2 to 0" in rows[p]["reason"] for p in names["llm"])
    deployment = kube.get("Deployment", "llm", "ml", "apps/v1")
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 0
    assert deployment["metadata"]["annotations"][SCALED_FROM_ANNOTATION] == "2"
    assert kube.get("Pod", job_pod, "ml") is not None  # untouched
    assert done.summary["failed"] == 1


def test_delete_deletes_a_jobs_pod_gracefully(
    kube: KubeHandle, prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    names = seeded(kube, now)
    prometheus = prometheus_factory(idle_series(names), now)

    done, document = sweep(kube, tmp_path, prometheus.url, "delete", now)

    assert done.code == 0, done.stderr
    assert {p["pod"]: p["state"] for p in items(document, "pod")} == dict.fromkeys(
        names["llm"] + names["batch"], "acted"
    )
    (job_pod,) = names["batch"]
    pod = kube.get("Pod", job_pod, "ml")
    assert pod is None or pod["metadata"].get("deletionTimestamp")
    events = {(e["involvedObject"]["name"], e["reason"]) for e in kube.list("Event", "ml")}
    assert (job_pod, "GpuIdlePodDeleted") in events
