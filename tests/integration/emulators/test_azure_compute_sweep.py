"""What the sweep needs from the Compute emulator, through the real azure-mgmt-compute SDK: GPU capabilities of
resource SKUs, VMSS Flex membership, ARM's replace-the-whole-object tag PATCH, and powerOff / deallocate as
long-running operations that finish with time (not after a number of polls)."""

from __future__ import annotations

import time

import pytest
from azure.mgmt.compute.models import VirtualMachine, VirtualMachineUpdate

from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients

pytestmark = pytest.mark.integration
FLEX = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/ml-rg/providers/Microsoft.Compute/virtualMachineScaleSets/flex-1"


def power_state(vm: VirtualMachine) -> str | None:
    statuses = (vm.instance_view.statuses if vm.instance_view else None) or []
    return next((s.code for s in statuses if s.code and s.code.startswith("PowerState/")), None)


def test_skus_carry_gpus_only_for_gpu_sizes(azure_clients: AzureClients) -> None:
    skus = list(azure_clients.compute.resource_skus.list(filter="location eq 'westeurope'"))
    caps = {str(s.name): {c.name: c.value for c in s.capabilities or []} for s in skus}

    assert {
        name: (caps[name].get("GPUs"), caps[name]["vCPUs"])
        for name in (
            "Standard_NC24ads_A100_v4",
            "Standard_NC96ads_A100_v4",
            "Standard_ND96asr_v4",
            "Standard_NC4as_T4_v3",
            "Standard_D4s_v5",
        )
    } == {
        "Standard_NC24ads_A100_v4": ("1", "24"),
        "Standard_NC96ads_A100_v4": ("4", "96"),
        "Standard_ND96asr_v4": ("8", "96"),
        "Standard_NC4as_T4_v3": ("1", "4"),
        "Standard_D4s_v5": (None, "4"),  # a CPU size has no GPUs capability
    }
    assert {s.resource_type for s in skus} == {"virtualMachines"}


def test_flex_member_carries_its_scale_set(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "flex-1_abc", "Standard_NC4as_T4_v3", scale_set=FLEX)
    azure.add_vm(SUBSCRIPTION, "ml-rg", "alone", "Standard_NC4as_T4_v3")

    vms = {str(vm.name): vm for vm in azure_clients.compute.virtual_machines.list_all(status_only="true")}

    assert vms["flex-1_abc"].virtual_machine_scale_set is not None
    assert vms["flex-1_abc"].virtual_machine_scale_set.id == FLEX
    assert vms["alone"].virtual_machine_scale_set is None
    assert power_state(vms["alone"]) == "PowerState/running"


def test_tag_patch_replaces_the_whole_tag_set(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "vm", "Standard_NC4as_T4_v3", tags={"owner": "ml", "project": "x"})

    azure_clients.compute.virtual_machines.begin_update("ml-rg", "vm", VirtualMachineUpdate(tags={"a": "1"})).result()
    first = azure.vm(SUBSCRIPTION, "ml-rg", "vm")
    assert first is not None
    assert first.tags == {"a": "1"}  # owner and project are gone: PATCH does not merge tags
    azure_clients.compute.virtual_machines.begin_update("ml-rg", "vm", VirtualMachineUpdate(tags={})).result()
    assert first.tags == {}


def test_power_off_keeps_the_vm_allocated_and_finishes_with_time(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "vm", "Standard_NC4as_T4_v3")
    azure.operation_seconds = 0.3

    azure_clients.compute.virtual_machines.begin_power_off("ml-rg", "vm", polling=False)  # nobody polls
    during = azure_clients.compute.virtual_machines.instance_view("ml-rg", "vm")
    time.sleep(0.5)
    after = azure_clients.compute.virtual_machines.instance_view("ml-rg", "vm")

    assert [s.code for s in during.statuses or []][-1] == "PowerState/stopping"
    assert [s.code for s in after.statuses or []][-1] == "PowerState/stopped"  # not deallocated: still billed


def test_deallocate_finishes_with_time_without_polls(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "vm", "Standard_NC4as_T4_v3")
    azure.operation_seconds = 0.3

    azure_clients.compute.virtual_machines.begin_deallocate("ml-rg", "vm", polling=False)
    vm = azure.vm(SUBSCRIPTION, "ml-rg", "vm")
    assert vm is not None
    time.sleep(0.5)
    azure_clients.compute.virtual_machines.instance_view("ml-rg", "vm")  # the emulator settles on any request

    assert vm.power_state == "deallocated"
    assert azure.log.count("compute.operationStatus") == 0
