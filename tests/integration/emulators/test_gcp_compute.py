"""Compute Engine instances and zonal operations through the real compute_v1 REST clients."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.cloud import compute_v1

from tests.emulators.gcp import GcpEmulator, clients

pytestmark = pytest.mark.integration

PROJECT = "proj"
ZONE_A, ZONE_B = "us-central1-a", "europe-west4-b"


@pytest.fixture
def fleet(gcp: GcpEmulator) -> GcpEmulator:
    gcp.add_instance(
        PROJECT,
        ZONE_A,
        "trainer-1",
        machine_type="a2-highgpu-2g",
        accelerators=[("nvidia-tesla-a100", 2)],
        labels={"owner": "vision", "cost-center": "ml"},
    )
    gcp.add_instance(PROJECT, ZONE_A, "orphan", labels={})
    gcp.add_instance(PROJECT, ZONE_B, "cpu-box", machine_type="n2-standard-4", accelerators=[], status="TERMINATED")
    gcp.add_instance("other-project", ZONE_A, "not-mine")
    return gcp


def _scopes(gcp: GcpEmulator, **request: object) -> dict[str, compute_v1.InstancesScopedList]:
    pager = clients.instances(gcp.url).aggregated_list(request={"project": PROJECT, **request}, retry=None)
    return dict(pager)


def _wait(gcp: GcpEmulator, op: compute_v1.Operation) -> compute_v1.Operation:
    return clients.zone_operations(gcp.url).wait(project=PROJECT, zone=op.zone.rsplit("/", 1)[-1], operation=op.name)


def test_aggregated_list_shows_labels_accelerators_and_machine_types(fleet: GcpEmulator) -> None:
    scopes = _scopes(fleet)

    assert sorted(scopes) == [f"zones/{ZONE_B}", f"zones/{ZONE_A}"]
    orphan, trainer = scopes[f"zones/{ZONE_A}"].instances
    assert (orphan.name, trainer.name) == ("orphan", "trainer-1")
    assert dict(trainer.labels) == {"owner": "vision", "cost-center": "ml"}
    assert trainer.machine_type.endswith(f"/projects/{PROJECT}/zones/{ZONE_A}/machineTypes/a2-highgpu-2g")
    assert [(a.accelerator_type.rsplit("/", 1)[-1], a.accelerator_count) for a in trainer.guest_accelerators] == [
        ("nvidia-tesla-a100", 2)
    ]
    assert trainer.guest_accelerators[0].accelerator_type.startswith("https://www.googleapis.com/compute/v1/")
    assert trainer.status == "RUNNING"
    assert trainer.label_fingerprint
    assert trainer.creation_timestamp
    assert dict(orphan.labels) == {}
    assert orphan.label_fingerprint == "42WmSpB8rSM="
    (cpu_box,) = scopes[f"zones/{ZONE_B}"].instances
    assert (cpu_box.status, list(cpu_box.guest_accelerators)) == ("TERMINATED", [])


def test_aggregated_list_pages_and_reports_emptied_zones(fleet: GcpEmulator) -> None:
    fleet.operation_polls = 0
    clients.instances(fleet.url).delete_unary(project=PROJECT, zone=ZONE_B, instance="cpu-box")

    scopes = _scopes(fleet, max_results=1)

    assert [i.name for i in scopes[f"zones/{ZONE_A}"].instances] == ["trainer-1"]  # the last page's scope wins
    assert scopes[f"zones/{ZONE_B}"].warning.code == "NO_RESULTS_ON_PAGE"  # type: ignore[attr-defined]
    assert fleet.log.count("instances.aggregatedList") == 2


def test_stop_goes_through_stopping_to_terminated(fleet: GcpEmulator) -> None:
    instances = clients.instances(fleet.url)
    operations = clients.zone_operations(fleet.url)

    op = instances.stop_unary(project=PROJECT, zone=ZONE_A, instance="trainer-1")

    assert (op.operation_type, op.status) == ("stop", compute_v1.Operation.Status.PENDING)
    assert op.target_link.endswith(f"/zones/{ZONE_A}/instances/trainer-1")
    assert instances.get(project=PROJECT, zone=ZONE_A, instance="trainer-1").status == "STOPPING"
    polled = operations.get(project=PROJECT, zone=ZONE_A, operation=op.name)
    assert polled.status == compute_v1.Operation.Status.RUNNING
    time.sleep(fleet.operation_seconds or 0)
    polled = operations.get(project=PROJECT, zone=ZONE_A, operation=op.name)
    assert polled.status == compute_v1.Operation.Status.DONE
    assert instances.get(project=PROJECT, zone=ZONE_A, instance="trainer-1").status == "TERMINATED"


def test_delete_removes_the_instance_when_done(fleet: GcpEmulator) -> None:
    instances = clients.instances(fleet.url)

    op = instances.delete_unary(project=PROJECT, zone=ZONE_A, instance="orphan")
    assert instances.get(project=PROJECT, zone=ZONE_A, instance="orphan")  # still there until DONE
    assert _wait(fleet, op).status == compute_v1.Operation.Status.DONE

    with pytest.raises(exceptions.NotFound) as gone:
        instances.get(project=PROJECT, zone=ZONE_A, instance="orphan")
    assert gone.value.errors[0]["reason"] == "notFound"


def test_set_labels_needs_the_current_fingerprint(fleet: GcpEmulator) -> None:
    instances = clients.instances(fleet.url)
    current = instances.get(project=PROJECT, zone=ZONE_A, instance="orphan")

    with pytest.raises(exceptions.PreconditionFailed) as stale:
        instances.set_labels_unary(
            project=PROJECT,
            zone=ZONE_A,
            instance="orphan",
            instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
                labels={"owner": "sweep"}, label_fingerprint="c3RhbGU="
            ),
        )
    assert stale.value.errors[0]["reason"] == "conditionNotMet"

    op = instances.set_labels_unary(
        project=PROJECT,
        zone=ZONE_A,
        instance="orphan",
        instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
            labels={"gpu-jobs-warned": "2026-03-02"}, label_fingerprint=current.label_fingerprint
        ),
    )
    _wait(fleet, op)

    after = instances.get(project=PROJECT, zone=ZONE_A, instance="orphan")
    assert dict(after.labels) == {"gpu-jobs-warned": "2026-03-02"}
    assert after.label_fingerprint != current.label_fingerprint


def test_invalid_label_is_refused(fleet: GcpEmulator) -> None:
    current = fleet.instance(PROJECT, ZONE_A, "orphan")
    assert current is not None

    with pytest.raises(exceptions.BadRequest):
        clients.instances(fleet.url).set_labels_unary(
            project=PROJECT,
            zone=ZONE_A,
            instance="orphan",
            instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
                labels={"Owner": "Sweep Job"}, label_fingerprint="42WmSpB8rSM="
            ),
        )


def test_extended_operation_result_when_the_answer_is_already_done(fleet: GcpEmulator) -> None:
    # The ExtendedOperation polls through an SDK-built ZoneOperationsClient that ignores client_options, so only
    # an operation that is DONE in the first answer can be awaited with .result() against the emulator.
    fleet.operation_polls = 0

    clients.instances(fleet.url).stop(project=PROJECT, zone=ZONE_A, instance="trainer-1").result(timeout=5)  # type: ignore[no-untyped-call]

    assert fleet.log.operations() == ["instances.stop"]
    trainer = fleet.instance(PROJECT, ZONE_A, "trainer-1")
    assert trainer is not None
    assert trainer.status == "TERMINATED"


def test_unknown_operation_and_unemulated_filter_are_refused(fleet: GcpEmulator) -> None:
    with pytest.raises(exceptions.NotFound):
        clients.zone_operations(fleet.url).get(project=PROJECT, zone=ZONE_A, operation="operation-1-x")
    with pytest.raises(exceptions.BadRequest):
        _scopes(fleet, filter="name eq 'trainer-.*'")  # the legacy regular-expression syntax
