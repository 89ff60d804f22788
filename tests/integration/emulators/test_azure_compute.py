"""Compute VMs through the real azure-mgmt-compute ``ComputeManagementClient`` over HTTP against the emulator."""

from __future__ import annotations

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.mgmt.compute.models import VirtualMachine, VirtualMachineUpdate

from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients

pytestmark = pytest.mark.integration


def seed(azure: AzureEmulator) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "train-1", "Standard_NC24ads_A100_v4", "westeurope", {"owner": "ml"})
    azure.add_vm(SUBSCRIPTION, "ml-rg", "untagged-gpu", "Standard_NC4as_T4_v3", "westeurope")
    azure.add_vm(SUBSCRIPTION, "web-rg", "web-1", "Standard_D2s_v5", "eastus", {"owner": "web"})
    azure.add_vm(SUBSCRIPTION, "ml-rg", "spot-1", "Standard_NC4as_T4_v3", "westeurope", spot=True, deallocated=True)
    azure.add_vm("another-subscription", "rg", "elsewhere", "Standard_NC4as_T4_v3", "westeurope")


def power_state(vm: VirtualMachine) -> str | None:
    statuses = (vm.instance_view.statuses if vm.instance_view else None) or []
    return next((s.code for s in statuses if s.code and s.code.startswith("PowerState/")), None)


def test_list_all_and_by_resource_group_show_sizes_tags_and_power(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)

    everything = list(azure_clients.compute.virtual_machines.list_all(status_only="true"))
    in_rg = list(azure_clients.compute.virtual_machines.list("ml-rg"))

    summary = {
        vm.name: (vm.hardware_profile.vm_size if vm.hardware_profile else None, vm.location, vm.tags, power_state(vm))
        for vm in everything
    }
    assert summary == {
        "train-1": ("Standard_NC24ads_A100_v4", "westeurope", {"owner": "ml"}, "PowerState/running"),
        "untagged-gpu": ("Standard_NC4as_T4_v3", "westeurope", {}, "PowerState/running"),
        "web-1": ("Standard_D2s_v5", "eastus", {"owner": "web"}, "PowerState/running"),
        "spot-1": ("Standard_NC4as_T4_v3", "westeurope", {}, "PowerState/deallocated"),
    }
    assert sorted(str(vm.name) for vm in in_rg) == ["spot-1", "train-1", "untagged-gpu"]
    assert {vm.name: vm.priority for vm in in_rg}["spot-1"] == "Spot"


def test_deallocate_is_a_long_running_operation(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.operation_seconds = None

    poller = azure_clients.compute.virtual_machines.begin_deallocate("ml-rg", "untagged-gpu")
    during = azure_clients.compute.virtual_machines.instance_view("ml-rg", "untagged-gpu")
    azure.finish_operations()
    poller.result()
    after = azure_clients.compute.virtual_machines.get("ml-rg", "untagged-gpu", expand="instanceView")

    assert [s.code for s in during.statuses or []][-1] == "PowerState/deallocating"
    assert power_state(after) == "PowerState/deallocated"
    vm = azure.vm(SUBSCRIPTION, "ml-rg", "untagged-gpu")
    assert vm is not None
    assert vm.power_state == "deallocated"


def test_start_brings_a_deallocated_vm_back(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    azure_clients.compute.virtual_machines.begin_start("ml-rg", "spot-1").result()

    vm = azure.vm(SUBSCRIPTION, "ml-rg", "spot-1")
    assert vm is not None
    assert vm.power_state == "running"


def test_delete_removes_the_vm_when_the_operation_succeeds(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    azure_clients.compute.virtual_machines.begin_delete("ml-rg", "untagged-gpu").result()

    with pytest.raises(ResourceNotFoundError):
        azure_clients.compute.virtual_machines.get("ml-rg", "untagged-gpu")
    assert sorted(str(vm.name) for vm in azure_clients.compute.virtual_machines.list("ml-rg")) == ["spot-1", "train-1"]


def test_operations_on_a_vm_being_deleted_are_refused(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.operation_seconds = None
    poller = azure_clients.compute.virtual_machines.begin_delete("ml-rg", "untagged-gpu")

    with pytest.raises(ResourceExistsError) as refused:
        azure_clients.compute.virtual_machines.begin_deallocate("ml-rg", "untagged-gpu")

    azure.finish_operations()
    poller.result()
    assert refused.value.error is not None
    assert refused.value.error.code == "OperationNotAllowed"
    assert "marked for deletion" in str(refused.value.error.message)


def test_tags_update_replaces_the_tags(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    updated = azure_clients.compute.virtual_machines.begin_update(
        "ml-rg", "untagged-gpu", VirtualMachineUpdate(tags={"owner": "unknown", "gpu-jobs/warned": "2026-03-02"})
    ).result()

    assert updated.tags == {"owner": "unknown", "gpu-jobs/warned": "2026-03-02"}
    assert azure_clients.compute.virtual_machines.get("ml-rg", "untagged-gpu").tags == updated.tags


def test_list_all_follows_next_links(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.page_size = 3

    names = [vm.name for vm in azure_clients.compute.virtual_machines.list_all()]

    assert len(names) == 4
    assert azure.log.count("virtualMachines.listAll") == 2
