"""GCP headroom: the usage of a GPU quota is Compute's own (``regions.get`` ``quotas[]``), since a QuotaInfo carries
none; read only when the entry has ``headroom``, through the real Google auth transport against the GCP emulator."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobs.adapters.gcp.quotas import compute_metric
from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.cloud_quotas.world import Job

if TYPE_CHECKING:
    from tests.emulators.gcp.emulator import GcpEmulator

pytestmark = pytest.mark.integration

PROJECT, REGION = "ml-research-prod", "europe-west4"
QUOTA_ID = "GPUS-PER-GPU-FAMILY-per-project-region"
H100 = {"gpu_family": "NVIDIA_H100"}
POLICY = f"""\
cloudQuotas:
  - name: h100
    cloud: gcp
    project: {PROJECT}
    region: {REGION}
    quotaId: {QUOTA_ID}
    dimensions: {{gpu_family: NVIDIA_H100}}
    target: 16
    headroom: {{whenUsageAbove: 80%, raiseBy: 50%}}
    max: 64
    contactEmail: ml-platform@example.com
"""


@pytest.fixture
def job(
    kube: KubeHandle,
    gcp: GcpEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Job:
    job = Job(tmp_path, kube, monkeypatch, capsys)
    job.env(gcp.env())
    job.write(POLICY)
    return job


def test_usage_above_the_threshold_raises_the_target(job: Job, gcp: GcpEmulator) -> None:
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)  # enough for the target of 16
    gcp.set_quota_usage(PROJECT, QUOTA_ID, REGION, 28, dimensions=H100)  # 87.5% used: 32 + 50% = 48
    gcp.log.clear()

    ran = job.run()

    h100 = ran.quota("h100")
    assert (ran.code, h100["limit"], h100["usage"], h100["target"], h100["action"]) == (0, 32, 28, 48, "request")
    assert h100["request"]["value"] == 48
    # Once with each read of the limit (the plan's, and the look-again under the Lease before filing).
    assert gcp.log.count("regions.get") == gcp.log.count("quotaInfos.get") >= 1


def test_usage_below_the_threshold_changes_nothing(job: Job, gcp: GcpEmulator) -> None:
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)
    gcp.set_quota_usage(PROJECT, QUOTA_ID, REGION, 8, dimensions=H100)
    ran = job.run()
    assert (ran.code, ran.quota("h100")["usage"], ran.quota("h100")["target"]) == (0, 8, 16)
    assert (ran.quota("h100")["action"], gcp.quotas.preferences) == ("none", {})


def test_usage_is_not_read_without_headroom(job: Job, gcp: GcpEmulator) -> None:
    job.write(POLICY.replace("    headroom: {whenUsageAbove: 80%, raiseBy: 50%}\n", ""))
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)
    gcp.log.clear()
    ran = job.run()
    assert (ran.quota("h100")["usage"], gcp.log.count("regions.get")) == (None, 0)


@pytest.mark.parametrize("fault", ["throttle", "server_error"])
def test_a_passing_fault_on_regions_get_is_retried(job: Job, gcp: GcpEmulator, fault: str) -> None:
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)
    gcp.set_quota_usage(PROJECT, QUOTA_ID, REGION, 28, dimensions=H100)
    gcp.faults.inject("regions.get", fault)  # type: ignore[arg-type]
    ran = job.run()
    assert (ran.code, ran.quota("h100")["usage"], ran.quota("h100")["target"]) == (0, 28, 48)


def test_a_lasting_outage_of_regions_get_fails_that_quota_only(job: Job, gcp: GcpEmulator) -> None:
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)
    gcp.faults.inject("regions.get", "server_error", times=100)
    ran = job.run()
    assert (ran.code, ran.quota("h100")["action"]) == (1, "error")
    assert gcp.quotas.preferences == {}  # nothing filed on a guess


@pytest.mark.parametrize(
    ("quota_id", "dimensions", "metric"),
    [
        (QUOTA_ID, H100, "NVIDIA_H100_GPUS"),
        (QUOTA_ID, {"gpu_family": "NVIDIA_A100_80GB"}, "NVIDIA_A100_80GB_GPUS"),
        ("NVIDIA-L4-GPUS-per-project-region", {}, "NVIDIA_L4_GPUS"),
        ("PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region", {}, "PREEMPTIBLE_NVIDIA_H100_GPUS"),
        ("CPUS-per-project-region", {}, "CPUS"),
        ("GPUS-ALL-REGIONS-per-project", {}, None),
    ],
)
def test_each_quota_id_maps_to_the_compute_metric_regions_get_reports(
    gcp: GcpEmulator, quota_id: str, dimensions: dict[str, str], metric: str | None
) -> None:
    assert compute_metric(quota_id, dimensions) == metric
    if metric is not None:  # and the emulator reports that very metric for the region
        gcp.set_quota(PROJECT, quota_id, REGION, 4, dimensions=dimensions)
        assert gcp.quotas.region_quotas(PROJECT, REGION)[metric] == (4, 0)
