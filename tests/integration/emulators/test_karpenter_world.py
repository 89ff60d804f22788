"""The sandbox's Karpenter world (:mod:`tests.sandbox.karpenter_world`), driven only through kubectl: what the
community scripts of issue 24 do by hand, and what they get wrong, as the product's adapter will meet it."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.kube import karpenter as model
from tests.emulators.kube.fixtures import KubeHandle
from tests.sandbox.karpenter_world import CONTROLLER_LABELS, SYSTEM_NODE, seed_gpu_pool

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"
EVENING = datetime(2026, 3, 2, 20, 0, tzinfo=UTC)


def _kubectl(kube: KubeHandle, *args: str) -> str:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _json(kube: KubeHandle, *args: str) -> Any:
    return json.loads(_kubectl(kube, *args, "-o", "json"))


def test_the_evening_by_hand_limit_zero_then_the_idle_claim_goes_and_the_busy_one_waits(kube: KubeHandle) -> None:
    world = seed_gpu_pool(kube, start=EVENING)
    pool = _json(kube, "get", "nodepool", world.pool)
    assert pool["spec"]["limits"] == {"cpu": "1000", "nvidia.com/gpu": "64"}
    assert pool["status"]["nodes"] == 2

    _kubectl(kube, "patch", "nodepool", world.pool, "--type", "merge", "-p", '{"spec":{"limits":{"cpu":"0"}}}')
    _kubectl(kube, "delete", "nodeclaim", world.idle_claim, "--wait=false")
    # A pod that arrives after the limit gets no node.
    kube.create(model.pending_gpu_pod("late", gpus=8, namespace="ml"))
    world.karpenter.advance(30)  # the idle node had nothing to drain: its instance stops in 30 s
    claims = _json(kube, "get", "nodeclaims", "-l", f"karpenter.sh/nodepool={world.pool}")["items"]
    assert [c["metadata"]["name"] for c in claims] == [world.busy_claim]
    late = kube.get("pods", "late", "ml")
    assert late is not None
    assert late["spec"].get("nodeName") is None

    # The busy claim, deleted: its GPU pod is evicted (no budget, no do-not-disrupt), has 30 s to stop, then the
    # instance 30 s more. The job ran on: deleting a busy claim is onBusy "drain", not "wait".
    _kubectl(kube, "delete", "nodeclaim", world.busy_claim, "--wait=false")
    world.karpenter.advance(59)
    assert kube.get("pods", world.gpu_pod, "ml") is None
    assert kube.get("nodeclaims", world.busy_claim, api_version=model.API_VERSION) is not None
    world.karpenter.advance(1)
    assert kube.get("nodeclaims", world.busy_claim, api_version=model.API_VERSION) is None
    assert json.loads(_kubectl(kube, "get", "nodepool", world.pool, "-o", "jsonpath={.status.nodes}")) == 0


def test_where_the_karpenter_controller_runs_is_visible_from_its_pods(kube: KubeHandle) -> None:
    away = seed_gpu_pool(kube, start=EVENING)
    selector = ",".join(f"{k}={v}" for k, v in CONTROLLER_LABELS.items())
    pods = _json(kube, "get", "pods", "-n", "kube-system", "-l", selector)["items"]
    assert {p["spec"]["nodeName"] for p in pods} == {SYSTEM_NODE}
    assert away.idle_node != SYSTEM_NODE
    kube.reset()
    on_pool = seed_gpu_pool(kube, start=EVENING, controller_on_pool=True)
    pods = _json(kube, "get", "pods", "-n", "kube-system", "-l", selector)["items"]
    nodes = {p["spec"]["nodeName"] for p in pods}
    assert nodes == {on_pool.idle_node}
    node = _json(kube, "get", "node", on_pool.idle_node)
    assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == on_pool.pool
