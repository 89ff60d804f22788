"""The sample fleet the sandbox seeds: pure data, derived from the policy, no I/O.

Every node group of the policy gets hardware from :data:`HARDWARE` (by name; a cloud default for groups this
table does not know, so an edited policy still seeds a consistent world) and a realistic working size: the
policy's ``up`` where given, otherwise the table's. Around them: one unmanaged GPU group per cloud (in a cluster
the policy uses, so discovery reports it), an AKS System pool, GPU pods in ~20 namespaces and untagged GPU
instances for the future sweep job.

The pods tell the evening story the demo shows: most groups are idle after work and really go down;
``research-h100`` still runs a training job, so its shutdown is postponed (onBusy ``wait``); serving pods on the
always-on group and on the unmanaged groups carry keep-alive / safe-to-evict annotations.

They also tell the sweep's story (``gpu-jobs sweep``): each pod has an owner (a StatefulSet, a Deployment, or none,
as JupyterHub runs notebooks) and a DCGM profile per GPU, and the clusters that stay up overnight hold every case
the sweep judges: idle, busy, young, a MIG slice, leaked memory, an exempt namespace and annotation, a snooze, a
multi-GPU pod with one GPU busy, a time-sliced GPU shared by two pods. Every GPU no pod holds is unallocated (its
DCGM series carry no pod). Stand-alone GPU instances on each cloud: untagged, tagged, protected, and CPU ones the
sweep must ignore; the node groups' own instances are the groups' members.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Literal

from jobs.core.policy import NodeGroup, Policy
from jobs.labels import KEEP_ALIVE_ANNOTATION, SAFE_TO_EVICT_ANNOTATION

Cloud = Literal["aws", "gcp", "azure"]
#: What a GPU does over the DCGM window: ``leaked``: next to no activity with ~95 % of its memory held (a crash).
Profile = Literal["busy", "idle", "leaked"]
Owner = Literal["none", "deployment", "statefulset"]

JOB_NAMESPACE = "gpu-jobs"


@dataclass(frozen=True)
class Hardware:
    """What one node of a group is. ``machine``: EC2 instance type, GCE machine type or Azure VM size."""

    machine: str
    gpus: int
    model: str  # DCGM modelName
    accelerator: str = ""  # GKE accelerator type
    zones: tuple[str, ...] = ()  # GKE: the pool's zones (node counts are per zone)
    autoscaling: tuple[int, int] | None = None  # GKE (per zone) / AKS autoscaler bounds
    spot: bool = False
    size: int = 2  # working size when the policy gives no `up` (per zone for GKE)
    #: A MIG-partitioned pool (AKS ``gpuInstanceProfile``): each GPU is ``slices`` instances of ``mig`` (e.g.
    #: ``1g.10gb``), advertised as ``nvidia.com/mig-<mig>`` (the device plugin's mixed strategy), not nvidia.com/gpu.
    mig: str = ""
    slices: int = 0
    #: Time-slicing on the group's last node (the device plugin's per-node config): each GPU is advertised this
    #: many times; 1: none.
    shared_last: int = 1


A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
L4 = "NVIDIA L4"
T4 = "Tesla T4"
A10G = "NVIDIA A10G"

#: Hardware of the policy's groups, by name. Sizes here apply only where the policy has no `up`.
HARDWARE: dict[str, Hardware] = {
    "training-a100": Hardware("p4d.24xlarge", 8, A100, spot=True),
    # Its last node's L4 is time-sliced in two (the NVIDIA device plugin's per-node config).
    "inference-l4": Hardware("g6.xlarge", 1, L4, size=10, shared_last=2),
    # A Karpenter NodePool: two NodeClaims in the evening, one running a training job, one idle.
    "train-h100": Hardware("p5.48xlarge", 8, H100),
    "batch-nightly-g5": Hardware("g5.12xlarge", 4, A10G),
    "research-h100": Hardware(
        "a3-highgpu-8g",
        8,
        H100,
        accelerator="nvidia-h100-80gb",
        zones=("europe-west4-a", "europe-west4-b"),
        autoscaling=(1, 3),
        size=1,
    ),
    "notebooks-t4": Hardware(
        "n1-standard-8", 1, T4, accelerator="nvidia-tesla-t4", zones=("europe-west4-a",), autoscaling=(1, 6), size=3
    ),
    "finetune-a100": Hardware("Standard_NC24ads_A100_v4", 1, A100, autoscaling=(0, 6)),
    "vision-t4": Hardware("Standard_NC4as_T4_v3", 1, T4, size=3),
}
DEFAULT_HARDWARE: dict[Cloud, Hardware] = {
    "aws": Hardware("g5.2xlarge", 1, A10G),
    "gcp": Hardware("g2-standard-8", 1, L4, accelerator="nvidia-l4", zones=("{location}-a",)),
    "azure": Hardware("Standard_NC4as_T4_v3", 1, T4),
}


@dataclass(frozen=True)
class Group:
    """One node group of the seeded world (policy-managed or not), with everything needed to seed it."""

    name: str  # policy name, or a descriptive one for unmanaged groups
    cloud: Cloud
    kind: Literal["eks", "asg", "gke", "aks", "karpenter"]
    locator: dict[str, str]
    hardware: Hardware
    min: int
    desired: int  # nodes (GKE: per zone)
    max: int
    managed: bool = True
    system: bool = False  # AKS System pool (not GPU)
    node_labels: dict[str, str] = field(default_factory=dict)  # the provider labels its nodes carry
    cluster: str = ""  # the policy cluster whose Kubernetes API has its nodes

    @property
    def nodes(self) -> int:
        """Nodes at the working size (GKE counts are per zone)."""
        return self.desired * max(1, len(self.hardware.zones)) if self.kind == "gke" else self.desired


#: Pods the sweep judges started this long before the sandbox's start (as long as its DCGM data goes back).
JUDGED_AGE = timedelta(hours=3)


@dataclass(frozen=True)
class Pod:
    """A GPU pod (or, for a Deployment, its ``replicas`` pods): where it runs and what its GPUs do.

    ``name`` is the pod's name for a bare pod and a StatefulSet's pod (``<set>-0``), the Deployment's name for a
    Deployment (its pods are ``<deployment>-<hash>-<5 characters>``). ``profiles``: one per GPU (default: all
    ``profile``). ``shared``: the pod's GPU is a time-sliced copy (the group's last node); ``mig``: it holds a MIG
    slice. ``age``: how long before the sandbox started it started (``JUDGED_AGE``: older than the sweep's window).
    """

    namespace: str
    name: str
    group: str  # Group.name whose nodes run it
    gpus: int
    profile: Profile
    annotations: dict[str, str] = field(default_factory=dict)
    owner: Owner = "statefulset"
    replicas: int = 1
    profiles: tuple[Profile, ...] = ()
    shared: bool = False
    mig: bool = False
    age: timedelta = JUDGED_AGE
    grace_s: int = 30  # terminationGracePeriodSeconds: how long a deleted pod stays Terminating

    def gpu_profiles(self) -> tuple[Profile, ...]:
        return self.profiles or (self.profile,) * self.gpus


@dataclass(frozen=True)
class Instance:
    """A stand-alone instance (not in any node group), for the sweep job: GPU ones, and CPU ones it must ignore."""

    cloud: Cloud
    name: str
    machine: str
    where: str  # AWS region, GCE zone, Azure location
    tags: dict[str, str] = field(default_factory=dict)
    accelerators: tuple[tuple[str, int], ...] = ()  # GCP: attached GPUs (none for types with built-in GPUs)
    scale_set: str = ""  # Azure: the VMSS Flex it belongs to (its name; the VM is listed among the VMs)


@dataclass(frozen=True)
class CloudQuota:
    """One cloud GPU quota as the sandbox's accounts hold it before ``cloud-quotas`` runs. ``limit=None``: no applied
    value, the quota answers with its default only (AWS ``NoSuchResourceException`` to ``GetServiceQuota``)."""

    cloud: Cloud
    scope: str  # AWS region, GCP project, Azure subscription
    where: str  # AWS region, GCP region, Azure location
    quota: str  # AWS quota code, GCP quotaId, Azure family
    limit: int | None
    usage: int = 0  # Azure usage (vCPUs); the GCP usage comes from the Compute region quotas
    dimensions: tuple[tuple[str, str], ...] = ()  # GCP dimensions besides the region


GCP_GPU_QUOTA = "GPUS-PER-GPU-FAMILY-per-project-region"
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"
#: Some below the example policy's targets (gitops/policy.yaml cloudQuotas), so ``make demo`` files a request on
#: each cloud: AWS P spot 96 < 768 (training-a100: 8 x p4d.24xlarge x 96), GCP H100 8 < 16, Azure A100 96 < 192.
#: Azure's 96 is what the fleet's morning needs (the emulator refuses an AKS scale-up past the family's limit,
#: QuotaExceeded): with 48 the demo's morning restore of finetune-a100 would fail before any request is decided.
CLOUD_QUOTAS: tuple[CloudQuota, ...] = (
    CloudQuota("aws", "eu-west-1", "eu-west-1", "L-7212CCBC", 96),  # All P Spot Instance Requests
    CloudQuota("aws", "eu-west-1", "eu-west-1", "L-DB2E81BA", None),  # Running On-Demand G and VT: default only
    CloudQuota(
        "gcp", "ml-research-prod", "europe-west4", GCP_GPU_QUOTA, 8, dimensions=(("gpu_family", "NVIDIA_H100"),)
    ),
    CloudQuota("gcp", "ml-research-prod", "europe-west4", GCP_GPU_QUOTA, 16, dimensions=(("gpu_family", "NVIDIA_L4"),)),
    CloudQuota("azure", AZURE_SUBSCRIPTION, "westeurope", "standardNCADSA100v4Family", 96),
)


@dataclass(frozen=True)
class Fleet:
    groups: tuple[Group, ...]
    pods: tuple[Pod, ...]
    instances: tuple[Instance, ...]
    namespaces: tuple[str, ...]

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    @property
    def clusters(self) -> tuple[str, ...]:
        """The clusters that hold groups, in policy order."""
        return tuple(dict.fromkeys(g.cluster for g in self.groups))

    def pods_in(self, cluster: str) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if self.group(p.group).cluster == cluster)


def _hardware(group: NodeGroup) -> Hardware:
    hw = HARDWARE.get(group.name) or DEFAULT_HARDWARE[group.cloud]
    if group.gcp is not None:
        hw = replace(hw, zones=tuple(z.format(location=group.gcp.location) for z in hw.zones))
        if not hw.zones:  # a zonal cluster's pool lives in that zone; a regional one in its -a zone
            zone = group.gcp.location if group.gcp.location.count("-") == 2 else f"{group.gcp.location}-a"
            hw = replace(hw, zones=(zone,))
    if group.gpus_per_node and group.gpus_per_node != hw.gpus:
        hw = replace(hw, gpus=group.gpus_per_node)
    return hw


def _policy_group(group: NodeGroup, policy: Policy) -> Group:
    hw = _hardware(group)
    if group.up is not None:
        low, want, high = group.up.min, group.up.desired, group.up.max
    elif hw.autoscaling is not None:
        low, want, high = hw.autoscaling[0], hw.size, hw.autoscaling[1]
    else:
        low, want, high = hw.size, hw.size, max(hw.size, 2 * hw.size)
    if group.karpenter is not None:
        # Its nodes are NodeClaims' (tests/sandbox/karpenter_world.py seeds the NodePool and its model); the region
        # is its cluster's, where its instances run.
        cluster = policy.cluster_of(group)
        pool = group.karpenter.node_pool
        region = cluster.aws.region if cluster.aws is not None else ""
        locator = {"region": region, "cluster": group.karpenter.cluster, "nodePool": pool}
        labels = {"karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": "on-demand"}
        return Group(group.name, "aws", "karpenter", locator, hw, 0, hw.size, hw.size, node_labels=labels)
    if group.aws is not None:
        if group.aws.nodegroup and group.aws.cluster:
            locator = {"region": group.aws.region, "cluster": group.aws.cluster, "nodegroup": group.aws.nodegroup}
            labels = {"eks.amazonaws.com/nodegroup": group.aws.nodegroup}
            labels["eks.amazonaws.com/capacityType"] = "SPOT" if hw.spot else "ON_DEMAND"
            return Group(group.name, "aws", "eks", locator, hw, low, want, high, node_labels=labels)
        asg = group.aws.auto_scaling_group or group.name
        locator = {"region": group.aws.region, "autoScalingGroup": asg}
        # A plain ASG has no provider node label; a policy nodeSelector says how its nodes are found.
        return Group(
            group.name, "aws", "asg", locator, hw, low, want, high, node_labels=dict(group.node_selector or {})
        )
    if group.gcp is not None:
        g = group.gcp
        locator = {"project": g.project, "location": g.location, "cluster": g.cluster, "nodePool": g.node_pool}
        labels = {"cloud.google.com/gke-nodepool": g.node_pool, "cloud.google.com/gke-accelerator": hw.accelerator}
        if hw.spot:
            labels["cloud.google.com/gke-spot"] = "true"
        return Group(group.name, "gcp", "gke", locator, hw, low, want, high, node_labels=labels)
    assert group.azure is not None  # the policy model requires the locator of the group's cloud
    a = group.azure
    locator = {"subscription": a.subscription, "resourceGroup": a.resource_group, "cluster": a.cluster}
    locator["agentPool"] = a.agent_pool
    labels = {"kubernetes.azure.com/agentpool": a.agent_pool}
    labels["kubernetes.azure.com/scalesetpriority"] = "spot" if hw.spot else "regular"
    return Group(group.name, "azure", "aks", locator, hw, low, want, high, node_labels=labels)


def _extra_groups(managed: list[Group]) -> list[Group]:
    """One unmanaged GPU group per cloud, in a cluster the policy uses (discovery lists those), plus AKS System.
    Each joins the cluster of the managed group it sits next to."""
    extra: list[Group] = []
    eks = next((g for g in managed if g.kind == "eks"), None)
    if eks:
        loc = {"region": eks.locator["region"], "cluster": eks.locator["cluster"], "nodegroup": "gpu-experiments"}
        labels = {"eks.amazonaws.com/nodegroup": "gpu-experiments", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
        extra.append(
            Group(
                "eks/gpu-experiments",
                "aws",
                "eks",
                loc,
                HARDWARE_EXTRA["aws"],
                0,
                1,
                2,
                False,
                False,
                labels,
                eks.cluster,
            )
        )
    gke = next((g for g in managed if g.kind == "gke"), None)
    if gke:
        loc = {**gke.locator, "nodePool": "l4-adhoc"}
        hw = replace(HARDWARE_EXTRA["gcp"], zones=gke.hardware.zones[:1])
        labels = {"cloud.google.com/gke-nodepool": "l4-adhoc", "cloud.google.com/gke-accelerator": hw.accelerator}
        extra.append(Group("gke/l4-adhoc", "gcp", "gke", loc, hw, 1, 1, 1, False, False, labels, gke.cluster))
    aks = next((g for g in managed if g.kind == "aks"), None)
    if aks:
        for pool, hw, system in (("gpuspare", HARDWARE_EXTRA["azure"], False), ("system", SYSTEM_POOL, True)):
            loc = {**aks.locator, "agentPool": pool}
            labels = {
                "kubernetes.azure.com/agentpool": pool,
                "kubernetes.azure.com/mode": "system" if system else "user",
            }
            size = 3 if system else 1
            extra.append(
                Group(f"aks/{pool}", "azure", "aks", loc, hw, size, size, size, False, system, labels, aks.cluster)
            )
    return extra


HARDWARE_EXTRA: dict[Cloud, Hardware] = {
    "aws": Hardware("g5.12xlarge", 4, A10G),
    "gcp": Hardware("g2-standard-48", 4, L4, accelerator="nvidia-l4"),
    # A MIG pool (AKS --gpu-instance-profile MIG1g): the A100 is seven 1g.10gb slices.
    "azure": Hardware("Standard_NC24ads_A100_v4", 1, A100, mig="1g.10gb", slices=7),
}
SYSTEM_POOL = Hardware("Standard_D4s_v5", 0, "")

#: (namespace, pod, group, gpus, profile, annotations, ...). Groups missing from an edited policy lose their pods.
_KEEP = {KEEP_ALIVE_ANNOTATION: "true"}
_NO_EVICT = {SAFE_TO_EVICT_ANNOTATION: "false"}
#: A person's answer to the sweep's warning: ``gpu-jobs/keep-alive-until`` (set relative to the sandbox's start).
SNOOZE = "snooze"
PODS: tuple[Pod, ...] = (
    # Production serving on the always-on L4 group: busy, and marked as never to be evicted. serving-search is
    # exempt from the sweep (sweep.idlePods.exempt): its idle reranker is reported exempt, never touched.
    Pod("serving-search", "embedder-0", "inference-l4", 1, "busy", _NO_EVICT),
    Pod("serving-search", "reranker-0", "inference-l4", 1, "idle", _NO_EVICT),
    Pod("serving-chat", "llm-gateway-0", "inference-l4", 1, "busy", _KEEP),
    Pod("serving-ads", "ctr-model-0", "inference-l4", 1, "busy"),
    Pod("serving-recs", "two-tower-0", "inference-l4", 1, "busy"),
    Pod("fraud", "scorer-0", "inference-l4", 1, "busy", _NO_EVICT),
    Pod("speech", "asr-streaming-0", "inference-l4", 1, "idle"),
    # Someone answered the sweep's warning: snoozed until next week.
    Pod("ads-ml", "feature-embed-0", "inference-l4", 1, "idle", {SNOOZE: "7d"}),
    # Two replicas time-sliced on one L4 (the group's last node): idle, since the device is. A stateless server
    # that stops in 5 s: its namespace's GPU quota charges Terminating pods, so their replacements wait for that.
    Pod("ranking", "ranker-canary", "inference-l4", 1, "idle", owner="deployment", replicas=2, shared=True, grace_s=5),
    # A long training run that did not finish by the evening: research-h100 is postponed, not killed.
    Pod("ml-research", "train-llm-7b-0", "research-h100", 8, "busy", owner="none"),
    # On the Karpenter pool's first claim (its second is idle): its night keeps this node only. In `default`, which
    # the namespace quotas leave alone (exclude), so the quotas' story stays as it is.
    Pod("default", "pretrain-70b-0", "train-h100", 8, "busy", owner="none"),
    Pod("ml-research", "train-llm-7b-1", "research-h100", 4, "busy", owner="none"),
    Pod("nlp", "eval-harness-0", "research-h100", 1, "busy"),
    Pod("genai", "diffusion-sweep-0", "research-h100", 2, "idle"),
    # Started 45 minutes before the sandbox: too young to judge over a 2 h window.
    Pod("genai", "sdxl-finetune", "research-h100", 1, "idle", owner="deployment", age=timedelta(minutes=45)),
    # Unmanaged groups: nobody scheduled them, the job reports them; some pods there are forgotten (idle).
    # Two GPUs, one busy: not idle (a multi-GPU pod is idle only when all its GPUs are).
    Pod("robotics", "sim-rollouts-0", "eks/gpu-experiments", 2, "busy", profiles=("busy", "idle")),
    Pod("notebooks-alice", "jupyter-alice", "eks/gpu-experiments", 1, "idle", owner="none"),
    Pod("notebooks-bob", "jupyter-bob", "eks/gpu-experiments", 1, "idle", _KEEP, owner="none"),
    Pod("vision", "detector-train-0", "gke/l4-adhoc", 2, "busy"),
    Pod("data-science", "jupyter-carol", "gke/l4-adhoc", 1, "idle", owner="none"),
    # Crashed, its VRAM still allocated: leaked memory, its own reason.
    Pod("forecasting", "prophet-gpu-0", "gke/l4-adhoc", 1, "leaked"),
    Pod("biotech", "fold-0", "aks/gpuspare", 1, "busy", _NO_EVICT, mig=True),
    # A MIG slice: no DCGM_FI_DEV_GPU_UTIL there, judged idle by DCGM_FI_PROF_GR_ENGINE_ACTIVE.
    Pod("biotech", "fold-eval", "aks/gpuspare", 1, "idle", owner="deployment", mig=True),
    Pod("mlops", "gpu-smoke-test", "vision-t4", 1, "idle", owner="none"),
    Pod("platform-eval", "bench-a100-0", "finetune-a100", 1, "idle", owner="none"),
)
#: Namespaces without GPU pods right now (their teams work by day); they exist all the same.
QUIET_NAMESPACES = ("batch", "finetune", "research-notebooks")

#: Finished pods on the evening's groups would not block a shutdown; `PODS` leaves those groups empty, except
#: the two below, which the seeding moves to `Succeeded` so they show how finished work is ignored.
FINISHED = {("platform-eval", "bench-a100-0"), ("mlops", "gpu-smoke-test")}


#: What the sweep's ``requiredTags`` ask for (gitops/policy.yaml), and its ``protectTag``: tagged instances carry both.
OWNED = {"owner": "vision-team", "project": "detection"}
PROTECT = {"gpu-jobs/protect": "true"}
PROTECT_LABEL = {"gpu-jobs_protect": "true"}  # GCP labels allow no "/": the sweep looks up gpu-jobs_protect


def _instances(managed: list[Group], extra_regions: tuple[str, ...] = ()) -> list[Instance]:
    """Stand-alone instances per cloud used: untagged GPU ones (sweep candidates), one tagged, one protected, one CPU
    instance (never a GPU instance: ignored); on AWS and Azure one with ``owner`` but no ``project``; on Azure a VMSS
    Flex's VMs (members). AWS ones also in the policy's other AWS regions and the sweep's extra scopes, so every
    account scope has something to say."""
    found: list[Instance] = []
    # Each cloud's last group says where (us-east-1 and europe-west4-a in the example policy); AWS ones also in the
    # sweep's other regions (eu-west-1, us-west-2).
    clouds = {g.cloud: g for g in managed if g.kind != "karpenter"}  # a NodePool's instances are Karpenter's
    if aws := clouds.get("aws"):
        region = aws.locator["region"]
        found += [
            Instance("aws", "forgotten-g6", "g6.xlarge", region),
            Instance("aws", "hackathon-g4dn", "g4dn.xlarge", region, {"Name": "hackathon"}),
            Instance("aws", "owned-g5", "g5.xlarge", region, {**OWNED, "Name": "owned-g5"}),
        ]
        others = list(dict.fromkeys((*(g.locator["region"] for g in managed if g.cloud == "aws"), *extra_regions)))
        others = [r for r in others if r != region]
        for other in others[:1]:
            found += [
                Instance("aws", "pinned-benchmark", "g5.xlarge", other, {**PROTECT, "Name": "pinned-benchmark"}),
                Instance("aws", "bastion", "m5.large", other, {"Name": "bastion"}),
            ]
        for other in others[1:2]:
            found.append(Instance("aws", "demo-g5", "g5.2xlarge", other, {"owner": "sales-eng", "Name": "demo-g5"}))
    if gcp := clouds.get("gcp"):
        zone = gcp.hardware.zones[0]
        found += [
            Instance("gcp", "forgotten-gpu-box", "g2-standard-8", zone),
            Instance("gcp", "old-t4-debug", "n1-standard-4", zone, accelerators=(("nvidia-tesla-t4", 1),)),
            Instance("gcp", "owned-l4", "g2-standard-8", zone, {"owner": "research", "project": "llm"}),
            Instance("gcp", "golden-image-builder", "g2-standard-8", zone, PROTECT_LABEL),
            Instance("gcp", "ci-runner", "n2-standard-4", zone),
        ]
    if clouds.get("azure"):
        found += [
            Instance("azure", "vm-gpu-scratch1", "Standard_NC4as_T4_v3", "westeurope"),
            Instance("azure", "vm-gpu-scratch2", "Standard_NC8as_T4_v3", "westeurope", {"owner": "ml-platform"}),
            Instance(
                "azure",
                "vm-gpu-owned",
                "Standard_NC4as_T4_v3",
                "westeurope",
                {"owner": "ml-platform", "project": "ocr"},
            ),
            Instance("azure", "vm-gpu-golden", "Standard_NC4as_T4_v3", "westeurope", PROTECT),
            Instance("azure", "vm-build-agent", "Standard_D4s_v5", "westeurope"),
            # A render farm's scale set (VMSS Flex): its VMs are members, reported and never stopped one by one.
            Instance("azure", "render-flex_0f3c", "Standard_NC4as_T4_v3", "westeurope", scale_set="render-flex"),
            Instance("azure", "render-flex_7a21", "Standard_NC4as_T4_v3", "westeurope", scale_set="render-flex"),
        ]
    return found


def build_fleet(policy: Policy) -> Fleet:
    """The whole sample fleet for ``policy``: its groups at working size, extras, pods, instances."""
    managed = [replace(_policy_group(g, policy), cluster=policy.cluster_of(g).name) for g in policy.node_groups]
    groups = (*managed, *_extra_groups(managed))
    names = {g.name for g in groups}
    pods = tuple(p for p in PODS if p.group in names)
    namespaces = tuple(sorted({p.namespace for p in PODS} | set(QUIET_NAMESPACES) | {JOB_NAMESPACE}))
    untagged = policy.sweep.untagged_instances if policy.sweep is not None else None
    extra = tuple(r for s in (untagged.scopes if untagged else ()) if s.cloud == "aws" for r in s.accounts)
    return Fleet(groups, pods, tuple(_instances(managed, extra)), namespaces)
