"""AKS scale-ups Azure cannot serve, through the real azure-mgmt-containerservice client: the PUT is accepted and
its long-running operation ends Failed with the allocation or quota error code; the pool keeps its old count."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError

from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients

pytestmark = pytest.mark.integration

RG, CLUSTER = "ml-rg", "ml-aks"
A100 = "Standard_NC24ads_A100_v4"  # 24 vCPUs, standardNCADSA100v4Family


def scale(azure: AzureEmulator, clients: AzureClients, count: int) -> None:
    pool = clients.containerservice.agent_pools.get(RG, CLUSTER, "a100")
    pool.count = count
    clients.containerservice.agent_pools.begin_create_or_update(RG, CLUSTER, "a100", pool).result()


@pytest.mark.parametrize(
    ("code", "start"),
    [
        ("AllocationFailed", "Allocation failed. We do not have sufficient capacity for the requested VM size"),
        ("OverconstrainedAllocationRequest", "Allocation failed. VM(s) with the following constraints"),
        ("ZonalAllocationFailed", "Allocation failed. We do not have sufficient capacity"),
    ],
)
def test_an_allocation_failure_ends_the_operation_failed_with_its_code(
    azure: AzureEmulator, azure_clients: AzureClients, code: str, start: str
) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100", A100, 0)
    azure.fail_allocations(A100, code)

    with pytest.raises(HttpResponseError) as caught:
        scale(azure, azure_clients, 2)
    pool = azure_clients.containerservice.agent_pools.get(RG, CLUSTER, "a100")

    assert caught.value.error is not None
    assert caught.value.error.code == code
    assert str(caught.value.error.message).startswith(start)
    assert (pool.count, pool.provisioning_state) == (0, "Failed")


def test_the_vm_family_quota_is_counted_in_vcpus(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100", A100, 1)
    azure.set_quota(SUBSCRIPTION, "westeurope", "standardNCADSA100v4Family", 48, usage=0)

    with pytest.raises(HttpResponseError) as caught:
        scale(azure, azure_clients, 3)  # 24 running + 48 more > 48
    scale(azure, azure_clients, 2)  # 48: fits

    assert caught.value.error is not None
    assert caught.value.error.code == "QuotaExceeded"
    assert (
        "exceeding approved standardNCADSA100v4Family Cores quota. Additional details - Deployment Model: Resource"
        " Manager, Location: westeurope, Current Limit: 48, Current Usage: 24, Additional Required: 48"
    ) in str(caught.value.error.message)
    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100").count == 2


def test_scaling_succeeds_once_capacity_is_back(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100", A100, 0)
    azure.fail_allocations(A100)
    with pytest.raises(HttpResponseError):
        scale(azure, azure_clients, 2)

    azure.restock()
    scale(azure, azure_clients, 2)

    pool = azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100")
    assert (pool.count, pool.provisioning_state) == (2, "Succeeded")


def test_scaling_down_is_never_refused(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    azure.add_agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100", A100, 2)
    azure.fail_allocations(A100)

    scale(azure, azure_clients, 0)

    assert azure.agent_pool(SUBSCRIPTION, RG, CLUSTER, "a100").count == 0
