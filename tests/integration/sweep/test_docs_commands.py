"""The shell blocks of docs/sweep.md, run as a user types them (bash, the real kubectl) against the Kubernetes
emulator: a person's answer to a warning, and restoring a Deployment the sweep scaled to zero (scaled by the job's own
adapter, so the record is the one the job writes)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.adapters.kube.pods import KubePods
from jobs.core.idle_pods import snooze
from jobs.labels import KEEP_ALIVE_ANNOTATION, KEEP_ALIVE_UNTIL_ANNOTATION, SCALED_FROM_ANNOTATION
from tests.docs import shell_block
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_pod, namespace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"


def bash(kube: KubeHandle, script: str, home: Path) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": f"{KUBECTL.parent}:/usr/bin:/bin", "KUBECONFIG": str(kube.kubeconfig), "HOME": str(home)}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_answering_a_warning_without_a_pull_request(kube: KubeHandle, tmp_path: Path) -> None:
    kube.create(namespace("ml"))
    kube.create(gpu_pod("train-0", "ml", node="gpu-1"))
    done = bash(kube, shell_block("docs/sweep.md", "**Answering a warning without a pull request**"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["pod/train-0 annotated", "pod/train-0 annotated"]
    (pod,) = KubePods(kube.api_client()).gpu_pods()
    assert pod.annotations[KEEP_ALIVE_ANNOTATION] == "true"
    asleep, unparseable = snooze(pod, datetime(2026, 12, 2, tzinfo=UTC), timedelta(days=7))
    assert asleep is not None
    assert (asleep.until, asleep.capped, unparseable) == (
        datetime(2026, 12, 4, 17, tzinfo=UTC),
        None,
        None,
    )  # the job reads it as typed
    assert pod.annotations[KEEP_ALIVE_UNTIL_ANNOTATION] == "2026-12-04T18:00:00+01:00"


def test_restoring_a_deployment_the_sweep_scaled_to_zero(kube: KubeHandle, tmp_path: Path) -> None:
    kube.create(namespace("ml"))
    kube.seed_deployment("llm", "ml", nodes=("gpu-1", "gpu-2"), grace_s=0)
    pods = KubePods(kube.api_client())
    assert pods.scale_owner(pods.gpu_pods()[0]) == "Deployment ml/llm from 2"
    assert kube.get("Deployment", "llm", "ml", "apps/v1")["spec"]["replicas"] == 0  # type: ignore[index]

    done = bash(
        kube,
        shell_block("docs/sweep.md", "**Restoring a Deployment (or StatefulSet) the sweep scaled to zero**"),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["deployment.apps/llm scaled", "deployment.apps/llm annotated"]
    deployment = kube.get("Deployment", "llm", "ml", "apps/v1")
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 2
    assert SCALED_FROM_ANNOTATION not in (deployment["metadata"].get("annotations") or {})
