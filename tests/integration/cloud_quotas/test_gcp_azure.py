"""``gpu-jobs cloud-quotas`` on GCP (google-cloud-quotas over REST) and Azure (azure-mgmt-quota 3.x) against their
emulators, with the records in the Kubernetes API emulator. GCP targets are numbers in the quota's unit: the GCP
emulator serves no Compute machine types yet; Azure VM sizes are converted with its resource SKUs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.cloud_quotas.world import SUB, Job

if TYPE_CHECKING:
    from tests.emulators.azure import AzureEmulator
    from tests.emulators.gcp.emulator import GcpEmulator

pytestmark = pytest.mark.integration

PROJECT, REGION = "ml-research-prod", "europe-west4"
QUOTA_ID = "GPUS-PER-GPU-FAMILY-per-project-region"
H100 = {"gpu_family": "NVIDIA_H100"}
GCP_POLICY = f"""\
cloudQuotas:
  - name: h100
    cloud: gcp
    project: {PROJECT}
    region: {REGION}
    quotaId: {QUOTA_ID}
    dimensions: {{gpu_family: NVIDIA_H100}}
    target: TARGET
    contactEmail: ml-platform@example.com
    justification: "H100 training"
"""
LOCATION, FAMILY = "westeurope", "standardNCADSA100v4Family"
AZURE_POLICY = f"""\
cloudQuotas:
  - name: a100
    cloud: azure
    subscription: {SUB}
    location: {LOCATION}
    family: {FAMILY}
    target: TARGET
    headroom: {{whenUsageAbove: 80%, raiseBy: 50%}}
    max: 960
"""


@pytest.fixture
def job(kube: KubeHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Job:
    return Job(tmp_path, kube, monkeypatch, capsys)


# --- GCP --------------------------------------------------------------------------------------------------------


@pytest.fixture
def gcp_job(job: Job, gcp: GcpEmulator) -> Job:
    job.env(gcp.env())
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 8, dimensions=H100)
    job.write(GCP_POLICY.replace("TARGET", "16"))
    return job


def test_gcp_one_preference_is_upserted_with_the_contact_and_followed_to_its_grant(
    gcp_job: Job, gcp: GcpEmulator, kube: KubeHandle
) -> None:
    ran = gcp_job.run()
    h100 = ran.quota("h100")
    assert (ran.code, h100["unit"], h100["limit"], h100["target"], h100["action"]) == (0, "GPU", 8, 16, "request")
    name = f"projects/{PROJECT}/locations/global/quotaPreferences/gpu-jobs-h100"
    assert h100["request"]["id"] == name
    assert h100["request"]["status"] == "reconciling"
    assert h100["request"]["traceId"]
    assert (gcp_job.record("h100") or {})["requestId"] == name

    gcp.log.clear()
    kube.log.clear()
    pending = gcp_job.run()
    assert pending.quota("h100")["action"] == "pending"
    assert [r for r in gcp.log.all() if r.method != "GET"] == []  # nothing to do: no write anywhere
    assert kube.log.writes() == []

    gcp.grant(name)
    granted = gcp_job.run()
    assert (granted.code, granted.quota("h100")["action"], granted.quota("h100")["limit"]) == (0, "none", 16)
    assert (gcp_job.record("h100") or {})["outcome"] == "approved"


def test_gcp_partial_grant_is_not_asked_again_until_the_target_changes(gcp_job: Job, gcp: GcpEmulator) -> None:
    first = gcp_job.run()
    gcp.grant(first.quota("h100")["request"]["id"], 12)
    partial = gcp_job.run()
    assert (partial.code, partial.quota("h100")["action"], partial.quota("h100")["limit"]) == (1, "partial", 12)
    assert (gcp_job.run().quota("h100")["action"]) == "partial"

    gcp_job.write(GCP_POLICY.replace("TARGET", "24"))
    again = gcp_job.run()
    assert (again.code, again.quota("h100")["action"]) == (0, "request")
    assert again.quota("h100")["request"]["id"] == first.quota("h100")["request"]["id"]  # the same preference


def test_gcp_denial_fails_the_run(gcp_job: Job, gcp: GcpEmulator) -> None:
    first = gcp_job.run()
    gcp.deny(first.quota("h100")["request"]["id"])
    denied = gcp_job.run()
    assert (denied.code, denied.quota("h100")["action"]) == (1, "denied")


def test_gcp_lost_answer_on_the_upsert_finds_the_one_preference(gcp_job: Job, gcp: GcpEmulator) -> None:
    gcp.faults.inject("quotaPreferences.patch", "lost")
    ran = gcp_job.run()
    assert (ran.code, ran.quota("h100")["action"]) == (0, "request")
    assert len(gcp.quotas.preferences) == 1


def test_gcp_limit_enough_means_no_write(gcp_job: Job, gcp: GcpEmulator) -> None:
    gcp.set_quota(PROJECT, QUOTA_ID, REGION, 32, dimensions=H100)
    gcp.log.clear()
    ran = gcp_job.run()
    assert (ran.code, ran.quota("h100")["action"], gcp.quotas.preferences) == (0, "none", {})


# --- Azure ------------------------------------------------------------------------------------------------------


@pytest.fixture
def azure_job(job: Job, azure: AzureEmulator) -> Job:
    job.env(azure.env())
    azure.quota_request_seconds = None  # support decides, not the passing of time
    azure.set_quota(SUB, LOCATION, FAMILY, limit=48, usage=24)
    job.write(AZURE_POLICY.replace("TARGET", "192"))
    return job


def test_azure_request_is_filed_followed_by_id_and_contact_support_fails_the_run(
    azure_job: Job, azure: AzureEmulator
) -> None:
    ran = azure_job.run()
    a100 = ran.quota("a100")
    assert (ran.code, a100["limit"], a100["usage"], a100["target"], a100["action"]) == (0, 48, 24, 192, "request")
    (request,) = azure.quota_requests()
    assert (a100["request"]["id"], request.requested_limit) == (request.id, 192)

    assert (azure_job.run().quota("a100")["action"], len(azure.quota_requests())) == ("pending", 1)

    azure.decide_quota_request(request.id, "Failed")
    failed = azure_job.run()
    assert (failed.code, failed.quota("a100")["action"]) == (1, "denied")
    assert failed.quota("a100")["request"]["status"] == "Failed: ContactSupport"
    assert len(azure.quota_requests()) == 1  # not filed again


def test_azure_headroom_raises_ahead_of_demand_capped_at_max(azure_job: Job, azure: AzureEmulator) -> None:
    azure.set_quota(SUB, LOCATION, FAMILY, limit=800, usage=700)  # above 80%: 800 + 50% = 1200, capped at 960
    ran = azure_job.run("--dry-run")
    assert (ran.quota("a100")["target"], ran.quota("a100")["action"]) == (960, "request")


def test_azure_approval_raises_the_limit(azure_job: Job, azure: AzureEmulator) -> None:
    azure_job.run()
    (request,) = azure.quota_requests()
    azure.decide_quota_request(request.id, "Succeeded")
    done = azure_job.run()
    assert (done.code, done.quota("a100")["action"], done.quota("a100")["limit"]) == (0, "none", 192)


def test_an_unknown_azure_family_is_a_plan_error(azure_job: Job) -> None:
    azure_job.write(AZURE_POLICY.replace("TARGET", "8").replace(FAMILY, "standardNoSuchFamily"))
    ran = azure_job.run()
    assert (ran.code, ran.quota("a100")["action"]) == (1, "error")
    assert "standardNoSuchFamily: no such VM family" in ran.quota("a100")["reason"]


@pytest.mark.parametrize(
    ("traits", "why"),
    [
        pytest.param({"is_fixed": True}, "is fixed (isFixed)", id="fixed"),
        pytest.param(
            {"eligible": False, "reason": "NO_VALID_BILLING_ACCOUNT"},
            "cannot be raised (quotaIncreaseEligibility: NO_VALID_BILLING_ACCOUNT)",
            id="not eligible",
        ),
    ],
)
def test_gcp_a_quota_that_cannot_be_raised_is_a_plan_error(
    gcp_job: Job, gcp: GcpEmulator, traits: dict[str, object], why: str
) -> None:
    from tests.emulators.gcp.quotas import Traits

    gcp.quotas.set_traits(QUOTA_ID, Traits(**traits))  # type: ignore[arg-type]
    ran = gcp_job.run()
    assert (ran.code, ran.quota("h100")["action"], gcp.quotas.preferences) == (1, "error", {})
    assert ran.quota("h100")["reason"] == f"limit 8 is below target 16, and {QUOTA_ID} {why}"


def test_azure_instances_are_converted_with_the_resource_skus(azure_job: Job, azure: AzureEmulator) -> None:
    azure_job.write(AZURE_POLICY.replace("TARGET", "{instances: 2, vmSize: Standard_NC96ads_A100_v4}"))
    ran = azure_job.run("--dry-run")
    a100 = ran.quota("a100")
    assert (a100["target"], a100["demand"]) == (192, "instances: 2 x Standard_NC96ads_A100_v4 x 96 vCPU = 192")
    assert a100["action"] == "request"
