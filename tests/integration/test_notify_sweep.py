"""Notifications need no code of the job that announces: ``gpu-jobs sweep --part pods`` (the real Prometheus, the
Kubernetes emulator) marks idle pods, and the same hook that sends the nodegroups' warnings posts one message per
owner to the receiver; the next run, inside the grace period, marks nothing new and sends nothing."""

from __future__ import annotations

import base64
import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.emulators.prometheus.dcgm import Workload
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.emulators.webhook.receiver import WebhookReceiver
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli

pytestmark = pytest.mark.integration

POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: UTC}
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}}
    sweep:
      idlePods: {window: 2h, gracePeriod: 30m, action: delete}
    notify:
      webhook: {secretRef: {name: gpu-jobs-notify, key: url}}
      owner: {namespaceLabel: team.example.com/owner}
    """)
#: Idle pods by namespace; "ml" is Carol's, "lab" names nobody.
PODS = {"ml": ("idle-0", "idle-1"), "lab": ("idle-2",)}


def sweep(kube: KubeHandle, policy: Path, url: str, at: datetime) -> CliRun:
    env = {"KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_PROMETHEUS_URL": url}
    argv = ["sweep", "--part", "pods", "--policy", str(policy), "--cluster", "ml-prod", "--at", at.isoformat()]
    return run_cli([*argv, "--output", "json"], env)


def test_the_sweeps_marks_go_to_their_owners_once(
    kube: KubeHandle, prometheus_factory: PrometheusFactory, webhook: WebhookReceiver, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    kube.create(namespace("gpu-jobs"))
    kube.create(namespace("ml", {"team.example.com/owner": "carol"}))
    kube.create(namespace("lab"))
    workloads = []
    for ns, pods in PODS.items():
        for pod in pods:
            obj = gpu_pod(pod, ns, "gpu-1", created=now - timedelta(hours=5))
            obj["status"]["startTime"] = timestamp(now - timedelta(hours=5))
            kube.create(obj)
            workloads.append(Workload(pod, ns, "main", len(workloads), "gpu-1", profile="idle"))
    url = base64.b64encode(webhook.url.encode()).decode()
    kube.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gpu-jobs-notify", "namespace": "gpu-jobs"}}
        | {"data": {"url": url}}
    )
    kube.identify("ml-prod")
    prometheus = prometheus_factory(workloads, now)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)

    first = sweep(kube, policy, prometheus.url, now)

    assert first.code == 0, first.stderr
    assert {p["pod"]: p["state"] for p in items(json.loads(first.stdout), "pod")} == dict.fromkeys(
        ("idle-0", "idle-1", "idle-2"), "marked"
    )
    received = webhook.received()
    assert [(m["owner"], sorted(i["pod"] for i in m["items"])) for m in received] == [
        ("carol", ["idle-0", "idle-1"]),
        (None, ["idle-2"]),
    ]
    assert {i["kind"] for m in received for i in m["items"]} == {"idle pod marked"}
    assert all(i["reason"] for m in received for i in m["items"])  # the mark's words: when it is deleted

    webhook.clear()
    second = sweep(kube, policy, prometheus.url, now + timedelta(minutes=10))  # marked already, not yet due

    assert second.code == 0, second.stderr
    assert webhook.attempts() == 0
