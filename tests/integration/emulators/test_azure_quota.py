"""Microsoft.Quota through the real azure-mgmt-quota ``QuotaMgmtClient`` over HTTP against the emulator."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.quota.models import CurrentQuotaLimitBase, LimitObject, QuotaProperties, ResourceName

from tests.emulators.azure import AzureEmulator
from tests.emulators.azure.fixtures import SUBSCRIPTION
from tests.emulators.azure.sdk import AzureClients

pytestmark = pytest.mark.integration

LOCATION = "westeurope"
SCOPE = f"subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/{LOCATION}"
A100_FAMILY = "standardNCADSA100v4Family"


def seed(azure: AzureEmulator) -> None:
    azure.set_quota(SUBSCRIPTION, LOCATION, A100_FAMILY, limit=48, usage=24)
    azure.set_quota(SUBSCRIPTION, LOCATION, "standardNCASv3_T4Family", limit=16, usage=0)
    azure.set_quota(SUBSCRIPTION, LOCATION, "lowPriorityCores", limit=100, usage=8)
    azure.set_quota(SUBSCRIPTION, "eastus", A100_FAMILY, limit=0, usage=0)


def request_for(limit: int, family: str = A100_FAMILY) -> CurrentQuotaLimitBase:
    return CurrentQuotaLimitBase(
        properties=QuotaProperties(limit=LimitObject(value=limit), name=ResourceName(value=family))
    )


def test_get_and_list_quotas_and_usages(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    quota = azure_clients.quota.quota.get(A100_FAMILY, SCOPE)
    usage = azure_clients.quota.usages.get(A100_FAMILY, SCOPE)
    families = {q.name: q.properties.limit.value for q in azure_clients.quota.quota.list(SCOPE)}  # type: ignore[union-attr]
    usages = {u.name: u.properties.usages.value for u in azure_clients.quota.usages.list(SCOPE)}  # type: ignore[union-attr]
    spot = azure_clients.quota.quota.get("lowPriorityCores", SCOPE)

    assert quota.properties is not None
    assert isinstance(quota.properties.limit, LimitObject)
    assert (quota.properties.limit.value, quota.properties.unit) == (48, "Count")
    assert quota.properties.name is not None
    assert quota.properties.name.localized_value == "Standard NCADS_A100_v4 Family vCPUs"
    assert usage.properties is not None
    assert usage.properties.usages is not None
    assert usage.properties.usages.value == 24
    assert families == {A100_FAMILY: 48, "standardNCASv3_T4Family": 16, "lowPriorityCores": 100}
    assert usages == {A100_FAMILY: 24, "standardNCASv3_T4Family": 0, "lowPriorityCores": 8}
    assert spot.properties is not None
    assert spot.properties.resource_type == "lowPriority"


def test_quota_increase_is_a_long_running_request_that_raises_the_limit(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)

    result = azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96)).result()

    (request,) = azure.quota_requests()
    status = azure_clients.quota.quota_request_status.get(request.id, SCOPE)
    assert result.properties is not None
    assert isinstance(result.properties.limit, LimitObject)
    assert result.properties.limit.value == 96
    assert azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit == 96
    assert status.properties is not None
    assert status.properties.provisioning_state == "Succeeded"
    assert status.properties.value is not None
    assert status.properties.value[0].limit.value == 96  # type: ignore[union-attr]
    assert azure.quota(SUBSCRIPTION, "eastus", A100_FAMILY).limit == 0  # other regions untouched
    assert "quota.operationStatus" in azure.log.operations()


def test_pending_request_shows_in_progress_until_resolved(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.quota_request_polls = None  # support has not looked at it yet

    poller = azure_clients.quota.quota.begin_update(A100_FAMILY, SCOPE, request_for(64))
    (request,) = azure.quota_requests()
    pending = list(azure_clients.quota.quota_request_status.list(SCOPE))
    limit_meanwhile = azure_clients.quota.quota.get(A100_FAMILY, SCOPE).properties.limit.value  # type: ignore[union-attr]

    azure.resolve_quota_request(request.id, "Succeeded")
    result = poller.result()

    assert [(r.name, r.properties.provisioning_state) for r in pending] == [(request.id, "InProgress")]  # type: ignore[union-attr]
    assert limit_meanwhile == 48
    assert result.properties.limit.value == 64  # type: ignore[union-attr]
    assert azure.log.count("quota.update") == 1


def test_denied_request_fails_the_poller_and_keeps_the_limit(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.quota_request_polls = None
    poller = azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(4000))
    (request,) = azure.quota_requests()

    azure.resolve_quota_request(request.id, "Failed")

    with pytest.raises(HttpResponseError) as denied:
        poller.result()
    status = azure_clients.quota.quota_request_status.get(request.id, SCOPE)
    assert denied.value.error is not None
    assert denied.value.error.code == "ContactSupport"
    assert azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit == 48
    assert status.properties is not None
    assert status.properties.provisioning_state == "Failed"
    assert status.properties.error is not None
    assert status.properties.error.code == "ContactSupport"


def test_unknown_family_is_not_found(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    with pytest.raises(ResourceNotFoundError):
        azure_clients.quota.quota.get("standardNoSuchFamily", SCOPE)
    with pytest.raises(ResourceNotFoundError):
        azure_clients.quota.quota_request_status.get("11111111-2222-3333-4444-555555555555", SCOPE)


def test_mismatched_or_negative_request_is_rejected(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)

    with pytest.raises(HttpResponseError) as mismatched:
        azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96, "lowPriorityCores"))
    with pytest.raises(HttpResponseError) as negative:
        azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(-1))

    assert (mismatched.value.status_code, negative.value.status_code) == (400, 400)
    assert azure.quota_requests() == []
