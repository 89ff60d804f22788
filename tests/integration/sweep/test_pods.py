"""``gpu-jobs sweep --part pods`` as its CronJob runs it: the real Prometheus backfilled with DCGM series, the
Kubernetes API emulator holding the pods, the grace cycle over three runs (``--at``), the limit, Prometheus down."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace
from tests.emulators.prometheus.dcgm import Workload
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.emulators.prometheus.server import PrometheusServer
from tests.envelope import items
from tests.integration.cli import CliRun, run_cli

pytestmark = pytest.mark.integration

POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: UTC}
    clusters:
      - name: ml-prod
        cloud: aws
        aws: {region: eu-west-1, cluster: ml-prod}
        prometheus: {url: "http://thanos.invalid:9090"}   # GPU_JOBS_PROMETHEUS_URL replaces it
    sweep:
      idlePods:
        below: 5
        window: 2h
        gracePeriod: 30m
        action: delete
        exempt: {namespaces: [serving]}
    """)
MIG = "nvidia.com/mig-1g.10gb"

#: The DCGM series (the truth Prometheus holds): each pod's GPUs, one trap each.
WORKLOADS = (
    Workload("idle-0", "ml", "main", 0, "gpu-1", profile="idle"),
    Workload("busy-0", "ml", "main", 1, "gpu-1"),
    Workload("exported-0", "ml", "main", 0, "gpu-2", profile="idle", exported_labels=True),  # exporter's `pod`
    Workload("young-0", "ml", "main", 1, "gpu-2", profile="idle"),
    Workload("mig-0", "ml", "main", 0, "gpu-3", profile="idle", mig_profile="1g.10gb", mig_instance_id=1),
    Workload("finished-0", "ml", "main", 1, "gpu-3", profile="idle"),  # no such pod: an unallocated GPU
    Workload("multi-0", "ml", "main", 0, "gpu-4", profile="idle"),  # one of its two GPUs is busy
    Workload("multi-0", "ml", "main", 1, "gpu-4"),
    Workload("serving-0", "serving", "main", 0, "gpu-5", profile="idle"),  # exempt namespace
)


def seed(kube: KubeHandle, now: datetime) -> None:
    for name in ("gpu-jobs", "ml", "serving"):
        kube.create(namespace(name))
    pods: list[tuple[str, str, str, int, str, timedelta]] = [
        ("idle-0", "ml", "gpu-1", 1, "nvidia.com/gpu", timedelta(hours=5)),
        ("busy-0", "ml", "gpu-1", 1, "nvidia.com/gpu", timedelta(hours=5)),
        ("exported-0", "ml", "gpu-2", 1, "nvidia.com/gpu", timedelta(hours=5)),
        ("young-0", "ml", "gpu-2", 1, "nvidia.com/gpu", timedelta(minutes=30)),
        ("mig-0", "ml", "gpu-3", 1, MIG, timedelta(hours=5)),
        ("multi-0", "ml", "gpu-4", 2, "nvidia.com/gpu", timedelta(hours=5)),
        ("serving-0", "serving", "gpu-5", 1, "nvidia.com/gpu", timedelta(hours=5)),
        ("dark-0", "ml", "gpu-6", 1, "nvidia.com/gpu", timedelta(hours=5)),  # no series at all
    ]
    for name, ns, node, gpus, resource, age in pods:
        obj = gpu_pod(name, ns, node, gpus, resource, created=now - age)
        obj["status"]["startTime"] = timestamp(now - age)
        kube.create(obj)
    kube.identify("ml-prod")  # what the cluster's install created: its API proves it is ml-prod
    kube.log.clear()


@pytest.fixture
def world(kube: KubeHandle, prometheus_factory: PrometheusFactory) -> tuple[KubeHandle, PrometheusServer]:
    now = datetime.now(UTC).replace(microsecond=0)
    server = prometheus_factory(WORKLOADS, now, window=timedelta(hours=3))
    seed(kube, now)
    return kube, server


def sweep(
    kube: KubeHandle, tmp_path: Path, url: str, at: datetime, *args: str, env: dict[str, str] | None = None
) -> tuple[CliRun, dict[str, Any]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    environ = {
        "KUBECONFIG": str(kube.kubeconfig),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_PROMETHEUS_URL": url,
        **(env or {}),
    }
    argv = ["sweep", "--part", "pods", "--policy", str(policy), "--cluster", "ml-prod", "--at", at.isoformat()]
    done = run_cli([*argv, "--output", "json", *args], environ)
    document: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return done, document


def states(document: dict[str, Any]) -> dict[str, str]:
    return {p["pod"]: p["state"] for p in items(document, "pod")}


def pod_annotations(kube: KubeHandle, name: str, ns: str = "ml") -> dict[str, str]:
    pod = kube.get("Pod", name, ns)
    assert pod is not None
    notes: dict[str, str] = pod["metadata"].get("annotations") or {}
    return notes


def events(kube: KubeHandle) -> list[tuple[str, str, str]]:
    found = kube.list("Event", "ml")
    return [(e["involvedObject"]["name"], e["reason"], e["type"]) for e in found]


def test_the_grace_cycle_marks_then_deletes_and_a_second_run_writes_nothing(
    world: tuple[KubeHandle, PrometheusServer], tmp_path: Path
) -> None:
    kube, prometheus = world
    now = prometheus.now

    first, document = sweep(kube, tmp_path, prometheus.url, now)
    assert first.code == 0, first.stderr
    assert states(document) == {
        "idle-0": "marked",
        "exported-0": "marked",
        "mig-0": "marked",
        "young-0": "young",
        "serving-0": "exempt",
        "dark-0": "unknown",
    }
    mig = next(p for p in items(document, "pod") if p["pod"] == "mig-0")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in mig["reason"]
    unallocated = [(u["cluster"], u["node"], u["gpus"]) for u in items(document, "unallocated GPU")]
    assert unallocated == [("ml-prod", "gpu-3", 1)]
    assert kube.log.operations().count("list pods") == 2  # to plan, and again under the Lease (the look-again)
    assert "gpu-jobs/idle-since" in pod_annotations(kube, "idle-0")
    assert "gpu-jobs/idle-since" not in pod_annotations(kube, "busy-0")
    assert ("idle-0", "GpuIdle", "Warning") in events(kube)

    # Within the grace period: still marked, nothing written.
    kube.log.clear()
    waiting, document = sweep(kube, tmp_path, prometheus.url, now + timedelta(minutes=10))
    assert waiting.code == 0, waiting.stderr
    assert states(document)["idle-0"] == "marked"
    assert kube.log.writes() == []

    # Due: three deletes, over the policy's limit (20% of 8 pods judged: 2): refused as a whole.
    due = now + timedelta(minutes=31)
    refused, document = sweep(kube, tmp_path, prometheus.url, due)
    assert refused.code == 3, refused.stderr
    assert document["scopes"][0]["state"] == "refused"
    assert kube.log.writes() == []

    acted, document = sweep(kube, tmp_path, prometheus.url, due, "--max-changes", "5")
    assert acted.code == 0, acted.stderr
    assert {p: s for p, s in states(document).items() if s == "acted"} == {
        "idle-0": "acted",
        "exported-0": "acted",
        "mig-0": "acted",
    }
    for name in ("idle-0", "exported-0", "mig-0"):
        pod = kube.get("Pod", name, "ml")
        assert pod is None or pod["metadata"].get("deletionTimestamp"), name  # deleted gracefully
    assert kube.get("Pod", "busy-0", "ml") is not None

    # Again: the deleted pods are on their way (Terminating or gone): nothing is written twice.
    kube.log.clear()
    again, document = sweep(kube, tmp_path, prometheus.url, due, "--max-changes", "5")
    assert again.code == 0, again.stderr
    assert "acted" not in states(document).values()
    assert kube.log.writes() == []


def test_a_pod_busy_again_is_unmarked(world: tuple[KubeHandle, PrometheusServer], tmp_path: Path) -> None:
    kube, prometheus = world
    pod = kube.get("Pod", "busy-0", "ml")
    assert pod is not None
    pod["metadata"]["annotations"] = {"gpu-jobs/idle-since": timestamp(prometheus.now - timedelta(hours=1))}
    kube.put(pod)
    done, document = sweep(kube, tmp_path, prometheus.url, prometheus.now, "--dry-run")
    assert done.code == 0, done.stderr
    assert states(document)["busy-0"] == "unmarked"
    assert kube.log.writes() == []  # a dry run writes nothing
    done, document = sweep(kube, tmp_path, prometheus.url, prometheus.now)
    assert done.code == 0, done.stderr
    assert "gpu-jobs/idle-since" not in pod_annotations(kube, "busy-0")
    assert ("busy-0", "GpuBusyAgain", "Normal") in events(kube)


def test_an_exempt_pod_loses_a_mark_made_before_it_was_exempted(
    world: tuple[KubeHandle, PrometheusServer], tmp_path: Path
) -> None:
    kube, prometheus = world
    pod = kube.get("Pod", "idle-0", "ml")
    assert pod is not None
    long_ago = timestamp(prometheus.now - timedelta(hours=1))  # past its grace period
    pod["metadata"]["annotations"] = {"gpu-jobs/idle-since": long_ago, "gpu-jobs/keep-alive": "true"}
    kube.put(pod)
    done, document = sweep(kube, tmp_path, prometheus.url, prometheus.now)
    assert done.code == 0, done.stderr
    assert states(document)["idle-0"] == "exempt"
    assert pod_annotations(kube, "idle-0") == {"gpu-jobs/keep-alive": "true"}
    assert ("idle-0", "GpuIdleExempt", "Normal") in events(kube)
    # The exemption is lifted: a fresh warning and a full grace period, never the old mark's action at once.
    pod = kube.get("Pod", "idle-0", "ml")
    assert pod is not None
    pod["metadata"]["annotations"] = {}
    kube.put(pod)
    done, document = sweep(kube, tmp_path, prometheus.url, prometheus.now)
    assert done.code == 0, done.stderr
    assert states(document)["idle-0"] == "marked"
    assert kube.get("Pod", "idle-0", "ml") is not None


def test_a_huge_snooze_value_is_repeated_cut_in_the_report_the_logs_and_the_event(
    world: tuple[KubeHandle, PrometheusServer], tmp_path: Path
) -> None:
    kube, prometheus = world
    pod = kube.get("Pod", "idle-0", "ml")
    assert pod is not None
    huge = "9" * 20_000  # a person's typo, or a paste: Kubernetes takes up to 256 KiB of annotations
    marked = timestamp(prometheus.now - timedelta(minutes=10))
    pod["metadata"]["annotations"] = {"gpu-jobs/idle-since": marked, "gpu-jobs/keep-alive-until": huge}
    kube.put(pod)
    done, document = sweep(kube, tmp_path, prometheus.url, prometheus.now)
    assert done.code == 0, done.stderr
    shown = f'gpu-jobs/keep-alive-until="{"9" * 197}…" (20000 characters)'
    row = next(p for p in items(document, "pod") if p["pod"] == "idle-0")
    assert (row["state"], row["reason"]) == (
        "exempt",
        f"{shown} is not an RFC 3339 time with an offset: treated as exempt until it is fixed",
    )
    event = next(e for e in kube.list("Event", "ml") if e["involvedObject"]["name"] == "idle-0")
    assert (event["reason"], event["message"].startswith(shown)) == ("GpuIdleExempt", True)
    assert max(len(line) for line in done.stderr.splitlines()) < 1_000  # every log line, the value cut in each
    text = run_cli(
        [
            "sweep",
            "--part",
            "pods",
            "--policy",
            str(tmp_path / "policy.yaml"),
            "--dry-run",
            "--at",
            prometheus.now.isoformat(),
        ],
        {
            "KUBECONFIG": str(kube.kubeconfig),
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_PROMETHEUS_URL": prometheus.url,
        },
    )
    assert "9" * 201 not in text.stdout + text.stderr


def test_prometheus_down_fails_the_cluster_and_changes_nothing(
    world: tuple[KubeHandle, PrometheusServer], tmp_path: Path
) -> None:
    kube, prometheus = world
    # Refused connections are retried like any unavailable API: a short deadline keeps the test short.
    done, document = sweep(kube, tmp_path, "http://127.0.0.1:9", prometheus.now, env={"GPU_JOBS_RETRY_DEADLINE": "2"})
    assert done.code == 1, done.stderr
    assert document["scopes"][0]["state"] == "failed"
    assert items(document, "pod") == []
    assert kube.log.writes() == []
    assert done.summary["failed"] == 1
