"""A Karpenter GPU pool in one emulated EKS cluster, for the sandbox and ``make demo`` (issue 24's emulated world).

:func:`seed_gpu_pool` puts on a running kube emulator what an EKS cluster with Karpenter looks like in the evening:
the Karpenter controller (two replicas in ``kube-system``, on a system node outside the pool unless told
otherwise), a GPU NodePool with limits and the GPU taint, one claim whose node runs a GPU pod and one idle claim,
and the Karpenter model (:mod:`tests.emulators.kube.karpenter`) running on the emulator's clock (real time in the
sandbox, emulated time in tests that pass ``start``). Everything is seeded in-process, never through the API, so
the request logs show only what the job and kubectl did.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tests.emulators.kube import karpenter as model
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

Json = dict[str, Any]
#: The controller's labels in the official chart (charts/karpenter, app.kubernetes.io/name=karpenter).
CONTROLLER_LABELS = {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
SYSTEM_NODE = "ip-10-0-1-10.ec2.internal"


@dataclass(frozen=True)
class KarpenterWorld:
    karpenter: model.Karpenter
    pool: str
    busy_claim: str
    idle_claim: str
    busy_node: str
    idle_node: str
    #: The GPU pod running on the busy claim's node (namespace ``ml``).
    gpu_pod: str


def seed_gpu_pool(
    kube: KubeHandle,
    pool: str = "gpu-h100",
    *,
    limits: dict[str, Any] | None = None,
    controller_on_pool: bool = False,
    start: datetime | None = None,
    boot_s: float = 60.0,
) -> KarpenterWorld:
    """Seed the pool (limits ``cpu: 1000``, ``nvidia.com/gpu: 64`` by default) with a busy and an idle
    ``p5.48xlarge`` claim, and the Karpenter controller on a system node (or on the pool's idle node)."""
    karpenter = model.Karpenter(kube.cluster, boot_s=boot_s, start=start)
    kube.create(
        model.nodepool(
            pool,
            limits=limits or {"cpu": "1000", "nvidia.com/gpu": "64"},
            taints=[model.GPU_TAINT],
            termination_grace="24h",
        )
    )
    busy = karpenter.seed_claim(pool)
    idle = karpenter.seed_claim(pool)
    busy_node, idle_node = busy["status"]["nodeName"], idle["status"]["nodeName"]
    if kube.get("Namespace", "ml") is None:
        kube.create(seed.namespace("ml"))
    pod = seed.gpu_pod("train-llm-0", "ml", node=busy_node, gpus=8, labels={"app": "train-llm"}, grace_s=30)
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    kube.create(pod)
    controller_node = idle_node if controller_on_pool else SYSTEM_NODE
    if not controller_on_pool and kube.get("Node", SYSTEM_NODE) is None:
        kube.create(seed.gpu_node(SYSTEM_NODE, gpus=0, labels={"eks.amazonaws.com/nodegroup": "system"}))
    for index in range(2):
        controller = seed.gpu_pod(
            f"karpenter-7d4b9c8f6-{index}", "kube-system", node=controller_node, gpus=0, labels=dict(CONTROLLER_LABELS)
        )
        controller["spec"]["containers"][0]["image"] = "public.ecr.aws/karpenter/controller:1.14.1"
        if controller_on_pool:
            controller["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
        kube.create(controller)
    return KarpenterWorld(
        karpenter, pool, busy["metadata"]["name"], idle["metadata"]["name"], busy_node, idle_node, "train-llm-0"
    )


#: The sandbox pool's limits in the evening (what its morning must give back, exactly).
SANDBOX_LIMITS = {"cpu": "1000", "nvidia.com/gpu": "64"}


def adopt_nodes(
    kube: KubeHandle,
    pool: str,
    nodes: list[str],
    *,
    limits: dict[str, Any] | None = None,
    instance_type: str = "p5.48xlarge",
) -> model.Karpenter:
    """The sandbox's Karpenter pool: a NodePool whose NodeClaims are the group's nodes the sandbox already seeded
    (so they carry its labels, GPUs and DCGM series), each registered and Ready, with Karpenter's termination
    finalizer; then the Karpenter model on the cluster's real clock. Seeded in-process, never through the API."""
    karpenter = model.Karpenter(kube.cluster)
    kube.create(model.nodepool(pool, limits=dict(limits or SANDBOX_LIMITS), taints=[model.GPU_TAINT]))
    with kube.cluster.lock:
        stored = kube.cluster.get("nodepools", pool, api_version=model.API_VERSION)
        assert stored is not None
        it = next(t for t in karpenter.catalogue if t.name == instance_type)
        now = kube.cluster.now()
        for name in nodes:
            node = kube.get("Node", name)
            assert node is not None
            meta = node["metadata"]
            meta["finalizers"] = [model.TERMINATION_FINALIZER]
            meta["labels"] = {**meta["labels"], "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
            kube.put(node)
            karpenter._registered(karpenter._launch(stored, it, now), name, now)
    kube.cluster.settle()
    return karpenter
