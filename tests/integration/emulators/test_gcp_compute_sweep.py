"""What the sweep needs from the Compute emulator, through the real compute_v1 REST clients: aggregated list
filters, machine types with built-in GPUs, metadata items, requestId on writes, operations that finish with time,
and rate limits shaped as Compute sends them."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from tests.emulators.gcp import GcpEmulator, clients
from tests.emulators.gcp.compute import rate_limit_403

pytestmark = pytest.mark.integration

PROJECT = "proj"
ZONE_A, ZONE_B = "us-central1-a", "europe-west4-b"
EMPTY = "42WmSpB8rSM="


@pytest.fixture
def fleet(gcp: GcpEmulator) -> GcpEmulator:
    gcp.add_instance(PROJECT, ZONE_A, "a2", machine_type="a2-highgpu-1g", accelerators=[], labels={"owner": "vision"})
    gcp.add_instance(PROJECT, ZONE_A, "stopped", machine_type="g2-standard-4", accelerators=[], status="TERMINATED")
    gcp.add_instance(PROJECT, ZONE_B, "staging", status="STAGING", labels={"team": "ml"})
    gcp.add_instance(
        PROJECT,
        ZONE_B,
        "mig-1",
        metadata={"created-by": "projects/123/zones/europe-west4-b/instanceGroupManagers/batch"},
    )
    return gcp


def _machine_types(gcp: GcpEmulator) -> compute_v1.MachineTypesClient:
    return compute_v1.MachineTypesClient(
        transport="rest",
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=gcp.client_options(),
    )


def _names(gcp: GcpEmulator, filter_: str) -> list[str]:
    pager = clients.instances(gcp.url).aggregated_list(
        request={"project": PROJECT, "filter": filter_, "max_results": 500}, retry=None
    )
    return sorted(i.name for _, scoped in pager for i in scoped.instances)


@pytest.mark.parametrize(
    ("filter_", "names"),
    [
        ("status = RUNNING", ["a2", "mig-1"]),
        ("(status = RUNNING) OR (status = TERMINATED)", ["a2", "mig-1", "stopped"]),
        ("status = RUNNING OR status = TERMINATED OR status = SUSPENDED", ["a2", "mig-1", "stopped"]),
        ("status != RUNNING", ["staging", "stopped"]),
        ("labels.owner:*", ["a2"]),
        ("(status = RUNNING) (labels.owner = vision)", ["a2"]),
        ("status = RUNNING AND name = mig-*", ["mig-1"]),
        ('name = "a2"', ["a2"]),
        ("labels.team = ml", ["staging"]),
        ("status = SUSPENDED", []),
    ],
)
def test_aggregated_list_filters(fleet: GcpEmulator, filter_: str, names: list[str]) -> None:
    assert _names(fleet, filter_) == names
    assert f"filter={filter_}" in fleet.log.all()[-1].query  # sent as the SDK sends it, and read back


def test_a_zone_left_without_a_match_carries_the_no_results_warning(fleet: GcpEmulator) -> None:
    pager = clients.instances(fleet.url).aggregated_list(
        request={"project": PROJECT, "filter": "labels.owner:*"}, retry=None
    )
    scopes = dict(pager)

    assert [i.name for i in scopes[f"zones/{ZONE_A}"].instances] == ["a2"]
    assert scopes[f"zones/{ZONE_B}"].warning.code == "NO_RESULTS_ON_PAGE"


@pytest.mark.parametrize(
    "filter_",
    ["name eq 'a.*'", "(status = RUNNING", "status = RUNNING OR name = a AND name = b", "status RUNNING", "status ="],
)
def test_unsupported_or_malformed_filters_are_refused(fleet: GcpEmulator, filter_: str) -> None:
    with pytest.raises(exceptions.BadRequest) as refused:
        _names(fleet, filter_)

    assert refused.value.errors[0]["reason"] == "invalid"


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        ("a2-highgpu-1g", [("nvidia-tesla-a100", 1)]),
        ("a3-highgpu-8g", [("nvidia-h100-80gb", 8)]),
        ("g2-standard-4", [("nvidia-l4", 1)]),
        ("n1-standard-8", []),
    ],
)
def test_machine_types_list_their_built_in_gpus(gcp: GcpEmulator, name: str, gpus: list[tuple[str, int]]) -> None:
    machine = _machine_types(gcp).get(project=PROJECT, zone=ZONE_A, machine_type=name, retry=None)

    assert machine.name == name
    assert [(a.guest_accelerator_type, a.guest_accelerator_count) for a in machine.accelerators] == gpus
    assert machine.guest_cpus > 0
    assert machine.self_link.endswith(f"/zones/{ZONE_A}/machineTypes/{name}")
    assert gcp.log.operations() == ["machineTypes.get"]


def test_an_unknown_or_custom_machine_type_is_not_found(gcp: GcpEmulator) -> None:
    with pytest.raises(exceptions.NotFound):
        _machine_types(gcp).get(project=PROJECT, zone=ZONE_A, machine_type="custom-4-5120", retry=None)


def test_metadata_items_are_listed(fleet: GcpEmulator) -> None:
    instance = clients.instances(fleet.url).get(project=PROJECT, zone=ZONE_B, instance="mig-1")

    assert {i.key: i.value for i in instance.metadata.items} == {
        "created-by": "projects/123/zones/europe-west4-b/instanceGroupManagers/batch"
    }
    assert instance.metadata.fingerprint


def test_a_repeated_request_id_answers_the_first_operation_and_does_nothing_again(fleet: GcpEmulator) -> None:
    instances = clients.instances(fleet.url)
    request = compute_v1.SetLabelsInstanceRequest(
        project=PROJECT,
        zone=ZONE_A,
        instance="stopped",
        instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
            labels={"gpu-jobs-sweep": "stop-after-20261203t1400z"}, label_fingerprint=EMPTY
        ),
        request_id="9b2f9d6e-3c1a-4e8e-8f55-1c1a3e0d6a01",
    )

    first = instances.set_labels_unary(request=request, retry=None)
    time.sleep((fleet.operation_seconds or 0) + 0.05)
    again = instances.set_labels_unary(request=request, retry=None)  # the fingerprint is stale by now

    assert again.name == first.name
    assert len(fleet.compute.operations) == 1
    other = compute_v1.SetLabelsInstanceRequest(request, request_id="9b2f9d6e-3c1a-4e8e-8f55-1c1a3e0d6a02")
    with pytest.raises(exceptions.PreconditionFailed):  # a new request with the old fingerprint is stale
        instances.set_labels_unary(request=other, retry=None)


def test_operations_finish_with_time_unpolled(fleet: GcpEmulator) -> None:
    fleet.operation_seconds = 0.2
    instances = clients.instances(fleet.url)

    instances.stop_unary(project=PROJECT, zone=ZONE_A, instance="a2", retry=None)
    instances.delete_unary(project=PROJECT, zone=ZONE_B, instance="mig-1", retry=None)
    assert instances.get(project=PROJECT, zone=ZONE_A, instance="a2").status == "STOPPING"
    time.sleep(0.3)  # nobody polls the operations

    assert fleet.log.count("zoneOperations.get") == 0
    assert instances.get(project=PROJECT, zone=ZONE_A, instance="a2").status == "TERMINATED"
    with pytest.raises(exceptions.NotFound):
        instances.get(project=PROJECT, zone=ZONE_B, instance="mig-1")


def test_a_rate_limit_is_a_403_naming_the_quota_metric(fleet: GcpEmulator) -> None:
    fleet.inject_error("instances.aggregatedList", rate_limit_403())

    with pytest.raises(exceptions.Forbidden) as limited:
        _names(fleet, "status = RUNNING")

    assert limited.value.code == 403
    assert limited.value.errors[0]["reason"] == "rateLimitExceeded"
    assert limited.value.errors[0]["domain"] == "usageLimits"
    assert "Quota exceeded for quota metric 'Read requests'" in limited.value.message
    assert "per minute" in limited.value.message
    assert _names(fleet, "status = RUNNING") == ["a2", "mig-1"]  # once only
