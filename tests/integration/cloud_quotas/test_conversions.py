"""``target: {nodeGroups: [...]}`` for the node groups other than an EKS managed group (tests/integration/cloud_quotas/
test_aws.py has that one): a plain Auto Scaling group, an AKS agent pool and a GKE node pool, each converted into the
quota's unit with the cloud's own data (EC2 instance types, Azure resource SKUs, Compute machine types), the
conversion shown as "group: N x type x K unit = total", and a pull request raising ``up.max`` raising the target."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.cloud_quotas.world import SUB, Job

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator
    from tests.emulators.azure import AzureEmulator
    from tests.emulators.gcp.emulator import GcpEmulator

pytestmark = pytest.mark.integration


@pytest.fixture
def job(kube: KubeHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Job:
    return Job(tmp_path, kube, monkeypatch, capsys)


# --- a plain Auto Scaling group (self-managed nodes) -------------------------------------------------------------

ASG_POLICY = """\
nodeGroups:
  - name: batch-nightly-g5
    cloud: aws
    aws: {region: us-east-1, autoScalingGroup: batch-g5-nightly}
    up: {min: 0, desired: 6, max: UP_MAX}
cloudQuotas:
  - name: g-ondemand-us-east-1
    cloud: aws
    region: us-east-1
    quota: {family: G, capacity: on-demand}
    target: {nodeGroups: [batch-nightly-g5]}
"""


def test_a_plain_asg_is_converted_with_the_instance_types_vcpus(job: Job, aws: AwsEmulator) -> None:
    job.env(aws.env("us-east-1"))
    aws.add_asg("us-east-1", "batch-g5-nightly", 0, 0, 10, "g5.12xlarge")
    aws.quotas.set_quota("us-east-1", "L-DB2E81BA", 64)
    job.write(ASG_POLICY.replace("UP_MAX", "10"))

    ran = job.run("--dry-run")
    g = ran.quota("g-ondemand-us-east-1")
    assert (ran.code, g["unit"], g["limit"], g["target"], g["action"]) == (0, "vCPU", 64, 480, "request")
    assert g["demand"] == "batch-nightly-g5: 10 x g5.12xlarge x 48 vCPU = 480"

    job.write(ASG_POLICY.replace("UP_MAX", "16"))  # the pull request that raises up.max
    raised = job.run()
    assert (raised.quota("g-ondemand-us-east-1")["target"], raised.quota("g-ondemand-us-east-1")["action"]) == (
        768,
        "request",
    )
    assert [(r.code, r.desired) for r in aws.quotas.requests()] == [("L-DB2E81BA", 768)]


def test_a_plain_asg_against_a_spot_quota_is_a_plan_error_naming_both(job: Job, aws: AwsEmulator) -> None:
    job.env(aws.env("us-east-1"))
    aws.add_asg("us-east-1", "batch-g5-nightly", 0, 0, 10, "g5.12xlarge")
    job.write(ASG_POLICY.replace("UP_MAX", "10").replace("capacity: on-demand", "capacity: spot"))
    ran = job.run("--dry-run")
    g = ran.quota("g-ondemand-us-east-1")
    assert (ran.code, g["action"]) == (1, "error")
    assert "node group batch-nightly-g5 (g5.12xlarge: family G, on-demand) does not count" in g["reason"]


# --- an AKS agent pool ---------------------------------------------------------------------------------------------

AKS_POLICY = f"""\
nodeGroups:
  - name: finetune-a100
    cloud: azure
    azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml, agentPool: a100}}
    up: {{min: 0, desired: 2, max: UP_MAX}}
cloudQuotas:
  - name: a100-westeurope
    cloud: azure
    subscription: {SUB}
    location: westeurope
    family: FAMILY
    target: {{nodeGroups: [finetune-a100]}}
"""


@pytest.fixture
def aks(job: Job, azure: AzureEmulator) -> Job:
    job.env(azure.env())
    azure.quota_request_seconds = None
    azure.add_agent_pool(SUB, "rg-ml", "aks-ml", "a100", "Standard_NC24ads_A100_v4", 2, autoscaling=(0, 6))
    azure.set_quota(SUB, "westeurope", "standardNCADSA100v4Family", limit=48)
    job.write(AKS_POLICY.replace("UP_MAX", "6").replace("FAMILY", "standardNCADSA100v4Family"))
    return job


def test_an_aks_pool_is_converted_with_the_resource_skus(aks: Job, azure: AzureEmulator) -> None:
    ran = aks.run()
    a100 = ran.quota("a100-westeurope")
    assert (ran.code, a100["unit"], a100["limit"], a100["target"], a100["action"]) == (0, "vCPU", 48, 144, "request")
    assert a100["demand"] == "finetune-a100: 6 x Standard_NC24ads_A100_v4 x 24 vCPU = 144"
    assert [r.requested_limit for r in azure.quota_requests()] == [144]


def test_an_aks_pool_of_another_family_is_a_plan_error_naming_both(aks: Job, azure: AzureEmulator) -> None:
    azure.set_quota(SUB, "westeurope", "standardNCASv3_T4Family", limit=8)
    aks.write(AKS_POLICY.replace("UP_MAX", "6").replace("FAMILY", "standardNCASv3_T4Family"))
    ran = aks.run("--dry-run")
    a100 = ran.quota("a100-westeurope")
    assert (ran.code, a100["action"]) == (1, "error")
    assert "node group finetune-a100 (Standard_NC24ads_A100_v4: family standardNCADSA100v4Family" in a100["reason"]
    assert azure.quota_requests() == []


# --- a GKE node pool -----------------------------------------------------------------------------------------------

GKE_POLICY = """\
nodeGroups:
  - name: research-h100
    cloud: gcp
    gcp: {project: ml-research-prod, location: europe-west4, cluster: research, nodePool: h100-pool}
UP
cloudQuotas:
  - name: h100-europe-west4
    cloud: gcp
    project: ml-research-prod
    region: europe-west4
    quotaId: GPUS-PER-GPU-FAMILY-per-project-region
    dimensions: {gpu_family: NVIDIA_H100}
    target: {nodeGroups: [research-h100]}
    contactEmail: ml-platform@example.com
"""


@pytest.fixture
def gke(job: Job, gcp: GcpEmulator) -> Job:
    job.env(gcp.env())
    gcp.add_node_pool(
        "ml-research-prod",
        "europe-west4",
        "research",
        "h100-pool",
        zones=("europe-west4-a", "europe-west4-b"),
        per_zone_count=1,
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        accelerator_count=8,
        autoscaling=(1, 3),
    )
    gcp.set_quota(
        "ml-research-prod",
        "GPUS-PER-GPU-FAMILY-per-project-region",
        "europe-west4",
        8,
        dimensions={"gpu_family": "NVIDIA_H100"},
    )
    job.write(GKE_POLICY.replace("UP\n", ""))
    return job


def test_a_gke_pool_is_converted_with_the_machine_types_gpus_across_its_zones(gke: Job, gcp: GcpEmulator) -> None:
    """No ``up`` in the policy: the live maximum, the autoscaler's 3 nodes per zone in 2 zones."""
    ran = gke.run("--dry-run")
    h100 = ran.quota("h100-europe-west4")
    assert (ran.code, h100["unit"], h100["limit"], h100["target"], h100["action"]) == (0, "GPU", 8, 48, "request")
    assert h100["demand"] == "research-h100: 6 x a3-highgpu-8g+8xnvidia-h100-80gb x 8 GPU = 48"
    assert gcp.log.count("machineTypes.aggregatedList") >= 1
    assert gcp.quotas.preferences == {}


def test_a_gke_pools_up_max_counts_per_zone(gke: Job, gcp: GcpEmulator) -> None:
    """GKE sizes are per zone (as the nodegroups job sets them): up.max 4 in 2 zones is 8 nodes."""
    gke.write(GKE_POLICY.replace("UP", "    up: {min: 0, desired: 1, max: 4}"))
    ran = gke.run()
    h100 = ran.quota("h100-europe-west4")
    assert (ran.code, h100["target"], h100["action"]) == (0, 64, "request")
    assert h100["demand"] == "research-h100: 8 x a3-highgpu-8g+8xnvidia-h100-80gb x 8 GPU = 64"
    (preference,) = gcp.quotas.preferences.values()
    assert preference.quota_config.preferred_value == 64


@pytest.mark.parametrize("fault", ["throttle", "server_error", "timeout"])
def test_a_passing_fault_on_the_machine_types_is_retried(gke: Job, gcp: GcpEmulator, fault: str) -> None:
    gcp.faults.inject("machineTypes.aggregatedList", fault)  # type: ignore[arg-type]
    ran = gke.run("--dry-run")
    assert (ran.code, ran.quota("h100-europe-west4")["target"]) == (0, 48)


def test_an_n1_pools_attached_gpus_are_counted(job: Job, gcp: GcpEmulator) -> None:
    """N1 machine types have no GPUs of their own: a T4 pool's GPUs are the ones GKE attaches to each node."""
    job.env(gcp.env())
    gcp.add_node_pool(
        "ml-research-prod",
        "europe-west4-a",
        "notebooks",
        "t4-pool",
        zones=("europe-west4-a",),
        per_zone_count=3,
        machine_type="n1-standard-8",
        accelerator_type="nvidia-tesla-t4",
        accelerator_count=1,
        autoscaling=(1, 6),
    )
    job.write(
        GKE_POLICY.replace("research-h100", "notebooks-t4")
        .replace(
            "location: europe-west4, cluster: research, nodePool: h100-pool",
            "location: europe-west4-a, cluster: notebooks, nodePool: t4-pool",
        )
        .replace("UP\n", "")
        .replace("NVIDIA_H100", "NVIDIA_T4")
    )
    ran = job.run("--dry-run")
    t4 = ran.quota("h100-europe-west4")
    assert (ran.code, t4["target"], t4["action"]) == (0, 6, "request")
    assert t4["demand"] == "notebooks-t4: 6 x n1-standard-8+1xnvidia-tesla-t4 x 1 GPU = 6"


def test_a_gke_pool_of_another_gpu_family_is_a_plan_error_naming_both(gke: Job, gcp: GcpEmulator) -> None:
    """H100 nodes do not count against the L4 quota: the family is the pool's GPUs', as Compute names them."""
    gcp.set_quota(
        "ml-research-prod",
        "GPUS-PER-GPU-FAMILY-per-project-region",
        "europe-west4",
        16,
        dimensions={"gpu_family": "NVIDIA_L4"},
    )
    gke.write(GKE_POLICY.replace("UP\n", "").replace("gpu_family: NVIDIA_H100", "gpu_family: NVIDIA_L4"))
    ran = gke.run("--dry-run")
    quota = ran.quota("h100-europe-west4")
    assert (ran.code, quota["action"]) == (1, "error")
    assert (
        "node group research-h100 (a3-highgpu-8g+8xnvidia-h100-80gb: family NVIDIA_H100, on-demand)" in quota["reason"]
    )
    assert "(NVIDIA_L4)" in quota["reason"]
    assert gcp.quotas.preferences == {}


def test_a_spot_gke_pool_counts_against_the_preemptible_quota_only(job: Job, gcp: GcpEmulator) -> None:
    job.env(gcp.env())
    gcp.add_node_pool(
        "ml-research-prod",
        "europe-west4",
        "research",
        "h100-pool",
        zones=("europe-west4-a",),
        per_zone_count=1,
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        accelerator_count=8,
        autoscaling=(0, 2),
        spot=True,
    )
    job.write(GKE_POLICY.replace("UP\n", ""))
    ran = job.run("--dry-run")
    quota = ran.quota("h100-europe-west4")
    assert (ran.code, quota["action"]) == (1, "error")
    assert "family NVIDIA_H100, spot) does not count against quota h100-europe-west4 (NVIDIA_H100)" in quota["reason"]
    job.write(
        GKE_POLICY.replace("UP\n", "").replace(
            "quotaId: GPUS-PER-GPU-FAMILY-per-project-region\n    dimensions: {gpu_family: NVIDIA_H100}",
            "quotaId: PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region",
        )
    )
    gcp.set_quota("ml-research-prod", "PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region", "europe-west4", 8)
    ran = job.run("--dry-run")
    quota = ran.quota("h100-europe-west4")
    assert (ran.code, quota["action"], quota["target"]) == (0, "request", 16)
