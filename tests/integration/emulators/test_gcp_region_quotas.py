"""The GCP emulator's Compute ``regions.get`` (region quotas) and ``machineTypes.aggregatedList``, proven through the
real compute_v1 REST clients (the same wire the cloud-quotas adapter reads as plain JSON)."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from tests.emulators.gcp import GcpEmulator

pytestmark = pytest.mark.integration

PROJECT, REGION = "ml-research-prod", "europe-west4"


def _opts(gcp: GcpEmulator) -> dict[str, object]:
    return {"credentials": AnonymousCredentials(), "client_options": {"api_endpoint": gcp.url}}  # type: ignore[no-untyped-call]


def test_regions_get_reports_the_cloud_quotas_limits_and_usage_under_computes_metric_names(gcp: GcpEmulator) -> None:
    gcp.set_quota(PROJECT, "NVIDIA-L4-GPUS-per-project-region", REGION, 16)
    gcp.set_quota_usage(PROJECT, "NVIDIA-L4-GPUS-per-project-region", REGION, 6)
    gcp.set_quota(PROJECT, "CPUS-per-project-region", REGION, 512)

    region = compute_v1.RegionsClient(transport="rest", **_opts(gcp)).get(project=PROJECT, region=REGION)  # type: ignore[arg-type]

    quotas = {q.metric: (q.limit, q.usage) for q in region.quotas}
    assert quotas["NVIDIA_L4_GPUS"] == (16.0, 6.0)
    assert quotas["CPUS"] == (512.0, 0.0)
    assert quotas["NVIDIA_T4_GPUS"] == (0.0, 0.0)  # a fresh project's GPU quotas are 0
    assert region.name == REGION
    assert region.status == "UP"


def test_the_family_quota_shows_as_its_familys_metric(gcp: GcpEmulator) -> None:
    family = {"gpu_family": "NVIDIA_H100"}
    gcp.set_quota(PROJECT, "GPUS-PER-GPU-FAMILY-per-project-region", REGION, 8, dimensions=family)
    gcp.set_quota_usage(PROJECT, "GPUS-PER-GPU-FAMILY-per-project-region", REGION, 5, dimensions=family)
    region = compute_v1.RegionsClient(transport="rest", **_opts(gcp)).get(project=PROJECT, region=REGION)  # type: ignore[arg-type]
    # metric is a plain string in compute_v1 (its Quota.Metric enum lacks NVIDIA_H100_GPUS; the service has it).
    assert {q.metric: (q.limit, q.usage) for q in region.quotas}["NVIDIA_H100_GPUS"] == (8.0, 5.0)
    assert gcp.quotas.region_quotas(PROJECT, "us-central1")["NVIDIA_H100_GPUS"] == (0, 0)  # another region


def test_an_unknown_region_is_404(gcp: GcpEmulator) -> None:
    with pytest.raises(exceptions.NotFound):
        compute_v1.RegionsClient(transport="rest", **_opts(gcp)).get(project=PROJECT, region="europe-west99")  # type: ignore[arg-type]


def test_machine_types_aggregated_list_filters_by_name_with_built_in_gpus(gcp: GcpEmulator) -> None:
    client = compute_v1.MachineTypesClient(transport="rest", **_opts(gcp))  # type: ignore[arg-type]
    pages = client.aggregated_list(request={"project": PROJECT, "filter": "name = a3-highgpu-8g"})
    found = [(zone, m) for zone, scoped in pages for m in scoped.machine_types]
    assert found
    assert {m.name for _, m in found} == {"a3-highgpu-8g"}
    machine = next(m for zone, m in found if zone == "zones/europe-west4-a")
    assert machine.guest_cpus == 208
    assert [(a.guest_accelerator_type, a.guest_accelerator_count) for a in machine.accelerators] == [
        ("nvidia-h100-80gb", 8)
    ]


def test_machine_types_refuses_a_filter_it_does_not_implement(gcp: GcpEmulator) -> None:
    client = compute_v1.MachineTypesClient(transport="rest", **_opts(gcp))  # type: ignore[arg-type]
    with pytest.raises(exceptions.BadRequest):
        list(client.aggregated_list(request={"project": PROJECT, "filter": "guestCpus > 8"}))
