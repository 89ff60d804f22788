"""Injected faults, latency, and the client wiring (http opt-out, bearer token, api-version) of the Azure emulator."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.mgmt.containerservice import ContainerServiceClient

from tests.emulators.azure import AzureEmulator, start_azure_emulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients, StaticTokenCredential
from tests.emulators.base import FaultKind

pytestmark = pytest.mark.integration

SCOPE = f"subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/westeurope"
Call = Callable[[AzureClients], Any]


def seed(azure: AzureEmulator) -> None:
    azure.add_agent_pool(SUBSCRIPTION, "rg", "aks", "gpu", "Standard_NC24ads_A100_v4", 2, "User")
    azure.set_quota(SUBSCRIPTION, "westeurope", "standardNCADSA100v4Family", 48, 0)
    azure.add_vm(SUBSCRIPTION, "rg", "vm-1", "Standard_NC4as_T4_v3", "westeurope")


def scale_gpu_pool(clients: AzureClients) -> Any:
    pool = clients.containerservice.agent_pools.get("rg", "aks", "gpu")
    pool.count = 1
    return clients.containerservice.agent_pools.begin_create_or_update("rg", "aks", "gpu", pool).result()


CALLS: dict[str, Call] = {
    "agentPools.get": lambda c: c.containerservice.agent_pools.get("rg", "aks", "gpu"),
    "agentPools.createOrUpdate": scale_gpu_pool,
    "quota.get": lambda c: c.quota.quota.get("standardNCADSA100v4Family", SCOPE),
    "virtualMachines.listAll": lambda c: list(c.compute.virtual_machines.list_all()),
}


@pytest.mark.parametrize("operation", sorted(CALLS))
@pytest.mark.parametrize(
    ("kind", "status", "code", "exception"),
    [
        ("throttle", 429, "TooManyRequests", HttpResponseError),
        ("server_error", 500, "InternalServerError", HttpResponseError),
        ("busy", 409, "OperationNotAllowed", ResourceExistsError),
        ("conflict", 409, "Conflict", ResourceExistsError),
    ],
)
def test_fault_kinds_raise_the_azure_core_exception(
    azure: AzureEmulator,
    azure_clients: AzureClients,
    operation: str,
    kind: FaultKind,
    status: int,
    code: str,
    exception: type[HttpResponseError],
) -> None:
    seed(azure)
    azure.faults.inject(operation, kind)

    with pytest.raises(exception) as raised:
        CALLS[operation](azure_clients)

    assert type(raised.value) is exception
    assert raised.value.status_code == status
    assert raised.value.error is not None
    assert raised.value.error.code == code
    assert azure.log.count(operation) == 1


def test_timeout_fault_is_a_client_read_timeout(azure: AzureEmulator) -> None:
    seed(azure)
    azure.timeout_hold_s = 1.0
    azure.faults.inject("agentPools.get", "timeout")
    clients = AzureClients.connect(azure.url, SUBSCRIPTION, retry_total=0, read_timeout=0.2)

    with pytest.raises(ServiceResponseError):
        clients.containerservice.agent_pools.get("rg", "aks", "gpu")
    clients.close()


def test_azure_core_retries_a_throttle_after_the_announced_delay(azure: AzureEmulator) -> None:
    seed(azure)
    azure.faults.inject("quota.get", "throttle", times=2)
    clients = AzureClients.connect(azure.url, SUBSCRIPTION)  # azure-core's default retry policy

    started = time.monotonic()
    quota = clients.quota.quota.get("standardNCADSA100v4Family", SCOPE)
    elapsed = time.monotonic() - started
    clients.close()

    assert quota.name == "standardNCADSA100v4Family"
    assert azure.log.count("quota.get") == 3
    assert elapsed < 2  # retry-after-ms honoured, not azure-core's exponential default


def test_fault_while_polling_fails_the_poller(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.faults.inject("containerService.operationStatus", "server_error")

    with pytest.raises(HttpResponseError) as raised:
        scale_gpu_pool(azure_clients)

    assert raised.value.status_code == 500


def test_latency_delays_every_request(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.latency_s = 0.15

    started = time.monotonic()
    azure_clients.containerservice.agent_pools.get("rg", "aks", "gpu")

    assert time.monotonic() - started >= 0.15


def test_without_the_http_opt_out_the_sdk_refuses_to_send_a_token(azure: AzureEmulator) -> None:
    seed(azure)
    client = ContainerServiceClient(StaticTokenCredential(), SUBSCRIPTION, base_url=azure.url, retry_total=0)

    with pytest.raises(ServiceRequestError, match="non-TLS"):
        client.agent_pools.get("rg", "aks", "gpu")
    client.close()
    assert azure.log.all() == []


def _raw_get(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_arm_requires_a_bearer_token_and_an_api_version(azure: AzureEmulator) -> None:
    seed(azure)
    path = f"{azure.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/agentPools/gpu"
    bearer = {"Authorization": "Bearer anything"}

    assert _raw_get(f"{path}?api-version=2024-09-01", {})[0] == 401
    assert _raw_get(path, bearer) == (
        400,
        {
            "error": {
                "code": "MissingApiVersionParameter",
                "message": "The api-version query parameter (?api-version=) is required for all requests.",
            }
        },
    )
    status, body = _raw_get(f"{path}?api-version=2024-09-01", bearer)
    assert (status, body["properties"]["count"]) == (200, 2)
    assert _raw_get(f"{azure.url}/subscriptions/{SUBSCRIPTION}/nothing?api-version=1", bearer)[0] == 404


def test_env_points_a_subprocess_at_the_emulator(azure: AzureEmulator) -> None:
    assert azure.env() == {"GPU_JOBS_AZURE_ENDPOINT": azure.url, "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true"}
    assert azure.url.startswith("http://127.0.0.1:")


def test_standalone_emulator_starts_and_stops() -> None:
    emulator = start_azure_emulator(retry_after_s=0.01)
    emulator.add_agent_pool("sub", "rg", "aks", "gpu", "Standard_NC24ads_A100_v4", 1, "User")
    clients = emulator.clients("sub", retry_total=0)
    try:
        assert clients.containerservice.agent_pools.get("rg", "aks", "gpu").count == 1
    finally:
        clients.close()
        emulator.stop()


def test_retry_after_is_whole_seconds_like_arm_or_milliseconds_below_a_second() -> None:
    from tests.emulators.azure.arm import retry_after_headers

    # Retry-After: 0 would make azure-core fall back to its 30 s polling interval, so it is never sent.
    assert retry_after_headers(1) == {"Retry-After": "1"}
    assert retry_after_headers(0.01) == {"retry-after-ms": "10"}
    assert retry_after_headers(0) == {"retry-after-ms": "1"}
