"""``gpu-jobs sweep`` without ``--part``: both parts in one run (a cluster scope and an account scope), one report,
one limit across them: a plan over it changes nothing anywhere (exit 3)."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobs.core.untagged import mark_value
from jobs.labels import SWEEP_MARK_TAG
from tests.emulators.aws import moto_state
from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.emulators.prometheus.dcgm import Workload
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
POLICY = textwrap.dedent(f"""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {{timezone: UTC}}
    clusters:
      - name: ml-prod
        cloud: aws
        aws: {{region: {REGION}, cluster: ml-prod}}
        prometheus: {{url: "http://thanos.invalid:9090"}}
    sweep:
      idlePods: {{window: 2h, gracePeriod: 30m, action: delete}}
      untaggedInstances: {{requiredTags: [owner], gracePeriod: 24h, action: stop}}
      limits: {{maxActionsPerRun: 1, maxPercentPerRun: 100%}}
    """)


def run(
    tmp_path: Path, kube: KubeHandle, aws: AwsEmulator, url: str, at: datetime, *args: str
) -> tuple[CliRun, dict[str, Any]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {
        **aws.env(REGION),
        "KUBECONFIG": str(kube.kubeconfig),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_PROMETHEUS_URL": url,
    }
    done = run_cli(["sweep", "--policy", str(policy), "--cluster", "ml-prod", "--at", at.isoformat(), *args], env)
    return done, json.loads(done.stdout) if "--output" in args else {}


def test_both_parts_share_one_report_and_one_limit(
    tmp_path: Path, kube: KubeHandle, aws: AwsEmulator, prometheus_factory: PrometheusFactory
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    prometheus = prometheus_factory([Workload("idle-0", "ml", "main", 0, "gpu-1", profile="idle")], now)
    for name in ("gpu-jobs", "ml"):
        kube.create(namespace(name))
    pod = gpu_pod("idle-0", "ml", "gpu-1", created=now - timedelta(hours=5))
    pod["status"]["startTime"] = timestamp(now - timedelta(hours=5))
    pod["metadata"]["annotations"] = {"gpu-jobs/idle-since": timestamp(now - timedelta(hours=1))}  # due
    kube.create(pod)
    kube.identify("ml-prod")  # what the cluster's install created: its API proves it is ml-prod
    # Untagged and marked a day ago: due too.
    due = aws.add_instance(REGION, "g5.xlarge", {SWEEP_MARK_TAG: mark_value("stop", now - timedelta(minutes=5))})
    kube.log.clear()
    aws.log.clear()

    refused, document = run(tmp_path, kube, aws, prometheus.url, now, "--output", "json")
    assert refused.code == 3, refused.stderr
    assert {s["name"]: s["state"] for s in document["scopes"]} == {"ml-prod": "refused", f"aws/{REGION}": "refused"}
    assert kube.log.writes() == []
    assert not [r for r in aws.log.all() if r.operation in ("StopInstances", "CreateTags", "DeleteTags")]

    done, document = run(tmp_path, kube, aws, prometheus.url, now, "--output", "json", "--max-changes", "2")
    assert done.code == 0, done.stderr
    assert [(p["pod"], p["state"]) for p in items(document, "pod")] == [("idle-0", "acted")]
    assert [(i["id"], i["state"], i["action"]) for i in items(document, "instance")] == [(due, "acted", "stop")]
    assert str(moto_state.ec2(REGION).get_instance(due).state) in ("stopping", "stopped")
    assert done.summary["applied"] == 2

    text, _ = run(tmp_path, kube, aws, prometheus.url, now, "--dry-run")
    assert text.code == 0, text.stderr
    assert "gpu-jobs sweep in cluster ml-prod" in text.stdout
    assert f"gpu-jobs sweep in account aws/{REGION}" in text.stdout
