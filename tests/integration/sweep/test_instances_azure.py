"""``AzureInstances`` through the real azure-mgmt-compute SDK against the Azure emulator: GPU VMs found by their
size's resource SKU, tags read / set / removed with ARM's replace-the-set PATCH, deallocate and delete accepted,
scale set and AKS members as groups, faults translated, and the calls made are exactly its PERMISSIONS."""

from __future__ import annotations

import time

import pytest

from jobs.adapters.azure.instances import PERMISSIONS, AzureInstances
from jobs.adapters.settings import AdapterSettings
from jobs.core.untagged import GpuInstance
from jobs.errors import Busy, CloudError, Throttled, Unavailable
from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.base import FaultKind

pytestmark = pytest.mark.integration
FLEX = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/ml-rg/providers/Microsoft.Compute/virtualMachineScaleSets/flex"
#: The emulator's operation name -> the ARM action it needs.
ACTIONS = {
    "virtualMachines.listAll": "Microsoft.Compute/virtualMachines/read",
    "virtualMachines.get": "Microsoft.Compute/virtualMachines/read",
    "virtualMachines.update": "Microsoft.Compute/virtualMachines/write",
    "virtualMachines.deallocate": "Microsoft.Compute/virtualMachines/deallocate/action",
    "virtualMachines.delete": "Microsoft.Compute/virtualMachines/delete",
    "resourceSkus.list": "Microsoft.Compute/skus/read",
}


def adapter(azure: AzureEmulator, request_timeout_s: float = 30.0) -> AzureInstances:
    return AzureInstances(
        AdapterSettings(
            azure_endpoint=azure.url,
            emulator_credentials=True,
            poll_interval_s=0.05,
            request_timeout_s=request_timeout_s,
        )
    )


def seed(azure: AzureEmulator) -> None:
    azure.add_vm(SUBSCRIPTION, "ml-rg", "a100", "Standard_NC24ads_A100_v4", "westeurope", {"owner": "ml"})
    azure.add_vm(SUBSCRIPTION, "ml-rg", "a100x4", "Standard_NC96ads_A100_v4", "eastus")
    azure.add_vm(SUBSCRIPTION, "ml-rg", "nd", "Standard_ND96asr_v4", "westeurope", deallocated=True)
    azure.add_vm(SUBSCRIPTION, "ml-rg", "t4", "Standard_NC4as_T4_v3", "westeurope")
    azure.add_vm(SUBSCRIPTION, "web-rg", "cpu", "Standard_D4s_v5", "westeurope")
    azure.add_vm(SUBSCRIPTION, "ml-rg", "flex_1", "Standard_NC4as_T4_v3", "westeurope", scale_set=FLEX)
    azure.add_vm(
        SUBSCRIPTION, "mc-rg", "aks-gpu-1", "Standard_NC4as_T4_v3", "westeurope", {"aks-managed-poolName": "gpu"}
    )
    azure.add_vm("another-subscription", "rg", "elsewhere", "Standard_NC4as_T4_v3")


def by_name(instances: list[GpuInstance]) -> dict[str, GpuInstance]:
    return {i.name: i for i in instances}


def test_gpu_vms_by_sku_with_state_tags_and_groups(azure: AzureEmulator) -> None:
    seed(azure)
    azure.page_size = 2  # list_all is paged: every page is read

    found = by_name(adapter(azure).gpu_instances(SUBSCRIPTION))

    assert {n: (i.type, i.gpus, i.state, i.zone, i.group) for n, i in found.items()} == {
        "a100": ("Standard_NC24ads_A100_v4", 1, "running", "westeurope", None),
        "a100x4": ("Standard_NC96ads_A100_v4", 4, "running", "eastus", None),
        "nd": ("Standard_ND96asr_v4", 8, "stopped", "westeurope", None),
        "t4": ("Standard_NC4as_T4_v3", 1, "running", "westeurope", None),
        "flex_1": ("Standard_NC4as_T4_v3", 1, "running", "westeurope", "scale set flex"),
        "aks-gpu-1": ("Standard_NC4as_T4_v3", 1, "running", "westeurope", "AKS node pool gpu"),
    }
    assert found["a100"].tags == {"owner": "ml"}
    assert (found["a100"].cloud, found["a100"].account) == ("azure", SUBSCRIPTION)
    assert found["a100"].id.endswith("/providers/Microsoft.Compute/virtualMachines/a100")
    # One SKU list per location seen; no instance view per VM.
    assert azure.log.count("resourceSkus.list") == 2
    assert azure.log.count("virtualMachines.instanceView") == 0


def test_sku_lists_are_cached_for_the_run(azure: AzureEmulator) -> None:
    seed(azure)
    instances = adapter(azure)

    instances.gpu_instances(SUBSCRIPTION)
    instances.gpu_instances(SUBSCRIPTION)

    assert azure.log.count("resourceSkus.list") == 2
    assert azure.log.count("virtualMachines.listAll") == 2


def test_a_powered_off_vm_is_still_running_for_billing(azure: AzureEmulator) -> None:
    vm = azure.add_vm(SUBSCRIPTION, "ml-rg", "off", "Standard_NC4as_T4_v3")
    vm.power_state = "stopped"  # powerOff: allocated, billed

    assert [i.state for i in adapter(azure).gpu_instances(SUBSCRIPTION)] == ["running"]


def test_set_and_remove_tags_keep_the_others(azure: AzureEmulator) -> None:
    seed(azure)
    instances = adapter(azure)
    a100 = by_name(instances.gpu_instances(SUBSCRIPTION))["a100"]
    vm = azure.vm(SUBSCRIPTION, "ml-rg", "a100")
    assert vm is not None
    vm.tags["project"] = "llm"  # added by a person after the list

    instances.set_tags(a100, {"gpu-jobs-sweep": "stop-after-20261203t1200z"})
    assert vm.tags == {"owner": "ml", "project": "llm", "gpu-jobs-sweep": "stop-after-20261203t1200z"}
    instances.set_tags(a100, {"gpu-jobs-sweep": None})
    assert vm.tags == {"owner": "ml", "project": "llm"}
    instances.set_tags(a100, {"owner": None, "project": None, "absent": None})
    assert vm.tags == {}


def test_stop_deallocates_and_returns_once_accepted(azure: AzureEmulator) -> None:
    seed(azure)
    azure.operation_seconds = 0.3
    instances = adapter(azure)
    t4 = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"]
    vm = azure.vm(SUBSCRIPTION, "ml-rg", "t4")
    assert vm is not None

    instances.act(t4, "stop")
    accepted = vm.power_state
    during = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"].state
    time.sleep(0.5)
    after = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"].state

    assert accepted == "deallocating"  # returned before the operation finished
    assert (during, after) == ("other", "stopped")
    assert vm.power_state == "deallocated"
    assert azure.log.count("compute.operationStatus") == 0  # nothing polled the operation


def test_terminate_deletes(azure: AzureEmulator) -> None:
    seed(azure)
    azure.operation_seconds = 0.3
    instances = adapter(azure)
    t4 = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"]

    instances.act(t4, "terminate")
    during = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"]
    time.sleep(0.5)

    assert during.state == "other"  # Deleting: never acted on again
    assert "t4" not in by_name(instances.gpu_instances(SUBSCRIPTION))
    assert azure.vm(SUBSCRIPTION, "ml-rg", "t4") is None


def test_an_operation_in_progress_is_busy(azure: AzureEmulator) -> None:
    seed(azure)
    azure.operation_seconds = None  # held until finished by hand
    instances = adapter(azure)
    t4 = by_name(instances.gpu_instances(SUBSCRIPTION))["t4"]
    instances.act(t4, "stop")

    with pytest.raises(Busy) as raised:
        instances.act(t4, "terminate")
    assert raised.value.code == "OperationNotAllowed"
    azure.finish_operations()


@pytest.mark.parametrize(
    ("operation", "kind", "error"),
    [
        ("virtualMachines.listAll", "throttle", Throttled),
        ("resourceSkus.list", "server_error", Unavailable),
        ("virtualMachines.update", "busy", Busy),
        ("virtualMachines.deallocate", "throttle", Throttled),
        ("virtualMachines.delete", "server_error", Unavailable),
        ("virtualMachines.get", "timeout", Unavailable),
    ],
)
def test_faults_are_translated(azure: AzureEmulator, operation: str, kind: FaultKind, error: type[CloudError]) -> None:
    seed(azure)
    azure.retry_after_s = 7
    azure.timeout_hold_s = 1.0
    instances = adapter(azure, request_timeout_s=0.3)
    listing = operation in ("virtualMachines.listAll", "resourceSkus.list")
    t4 = None if listing else by_name(instances.gpu_instances(SUBSCRIPTION))["t4"]
    azure.faults.inject(operation, kind)

    def attempt() -> None:
        if t4 is None:
            instances.gpu_instances(SUBSCRIPTION)
        elif operation == "virtualMachines.deallocate":
            instances.act(t4, "stop")
        elif operation == "virtualMachines.delete":
            instances.act(t4, "terminate")
        else:
            instances.set_tags(t4, {"owner": "x"})

    with pytest.raises(error) as raised:
        attempt()

    if error is Throttled:
        assert raised.value.retry_after_s == 7
    vm = azure.vm(SUBSCRIPTION, "ml-rg", "t4")
    assert vm is not None
    assert (vm.power_state, vm.tags) == ("running", {})  # nothing happened


def test_the_calls_made_are_exactly_the_permissions(azure: AzureEmulator) -> None:
    seed(azure)
    instances = adapter(azure)
    found = by_name(instances.gpu_instances(SUBSCRIPTION))
    instances.set_tags(found["t4"], {"owner": "x"})
    instances.act(found["t4"], "stop")
    instances.act(found["a100"], "terminate")

    called = {ACTIONS[op] for op in azure.log.operations()}

    assert called == set(PERMISSIONS.actions)
