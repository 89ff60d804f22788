"""Microsoft.Quota through the real azure-mgmt-quota ``QuotaMgmtClient`` over HTTP against the emulator."""

from __future__ import annotations

import time

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
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


def test_pending_request_shows_in_progress_until_decided(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.quota_request_seconds = None  # support has not looked at it yet

    poller = azure_clients.quota.quota.begin_update(A100_FAMILY, SCOPE, request_for(64))
    (request,) = azure.quota_requests()
    pending = list(azure_clients.quota.quota_request_status.list(SCOPE))
    limit_meanwhile = azure_clients.quota.quota.get(A100_FAMILY, SCOPE).properties.limit.value  # type: ignore[union-attr]

    azure.decide_quota_request(request.id, "Succeeded")
    result = poller.result()

    assert [(r.name, r.properties.provisioning_state) for r in pending] == [(request.id, "InProgress")]  # type: ignore[union-attr]
    assert limit_meanwhile == 48
    assert result.properties.limit.value == 64  # type: ignore[union-attr]
    assert azure.log.count("quota.update") == 1


def test_denied_request_fails_the_poller_and_keeps_the_limit(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.quota_request_seconds = None
    poller = azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(4000))
    (request,) = azure.quota_requests()

    azure.decide_quota_request(request.id, "Failed")

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


def test_polls_never_decide_a_request(azure: AzureEmulator, azure_clients: AzureClients) -> None:
    seed(azure)
    azure.quota_request_seconds = None
    azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96), polling=False)
    (request,) = azure.quota_requests()

    states = {
        azure_clients.quota.quota_request_status.get(request.id, SCOPE).properties.provisioning_state  # type: ignore[union-attr]
        for _ in range(10)
    }

    assert states == {"InProgress"}
    assert azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit == 48


def test_an_undecided_request_is_approved_with_time_with_no_one_polling(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.quota_request_seconds = 0.2
    azure.log.clear()

    azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96), polling=False)
    meanwhile = azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit
    time.sleep(0.4)  # no request reaches the emulator meanwhile

    assert (meanwhile, azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit) == (48, 96)
    assert azure.log.operations() == ["quota.createOrUpdate"]
    (request,) = azure.quota_requests()
    assert request.state == "Succeeded"


def test_a_decision_scripted_before_the_request_lands_at_its_time(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.decide_next_quota_request("Failed", after_s=0.2, family=A100_FAMILY)

    azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96), polling=False)
    (request,) = azure.quota_requests()
    before = request.state
    time.sleep(0.4)
    status = azure_clients.quota.quota_request_status.get(request.id, SCOPE)

    assert before == "InProgress"
    assert status.properties is not None
    assert status.properties.provisioning_state == "Failed"
    assert status.properties.error is not None
    assert status.properties.error.code == "ContactSupport"
    assert azure.quota(SUBSCRIPTION, LOCATION, A100_FAMILY).limit == 48


def test_an_escalated_request_stays_open_until_support_decides(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    poller = azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(960))
    (request,) = azure.quota_requests()

    azure.decide_quota_request(request.id, "Escalated")
    time.sleep(0.7)  # past the time an undecided request would be approved on its own
    escalated = azure_clients.quota.quota_request_status.get(request.id, SCOPE)
    still_running = not poller.done()
    azure.decide_quota_request(request.id, "Succeeded")
    result = poller.result()

    assert escalated.properties is not None
    assert escalated.properties.provisioning_state == "Escalated"
    assert still_running
    assert result.properties.limit.value == 960  # type: ignore[union-attr]


def test_a_second_request_for_a_family_in_progress_is_refused(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    seed(azure)
    azure.quota_request_seconds = None
    azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(96), polling=False)

    with pytest.raises(ResourceExistsError) as refused:
        azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(192), polling=False)
    azure_clients.quota.quota.begin_create_or_update(
        "standardNCASv3_T4Family", SCOPE, request_for(32, "standardNCASv3_T4Family"), polling=False
    )
    (first, _) = azure.quota_requests()
    azure.decide_quota_request(first.id, "Failed")
    azure_clients.quota.quota.begin_create_or_update(A100_FAMILY, SCOPE, request_for(192), polling=False)

    assert refused.value.status_code == 409
    assert refused.value.error is not None
    assert refused.value.error.code == "Conflict"
    assert first.id in str(refused.value.error.message)
    assert [r.entry.family for r in azure.quota_requests()] == [A100_FAMILY, "standardNCASv3_T4Family", A100_FAMILY]


def test_resource_skus_give_each_vm_size_its_vcpus_and_family(
    azure: AzureEmulator, azure_clients: AzureClients
) -> None:
    skus = list(azure_clients.compute.resource_skus.list(filter=f"location eq '{LOCATION}'"))
    a100 = next(s for s in skus if s.name == "Standard_NC96ads_A100_v4")
    capabilities = {c.name: c.value for c in a100.capabilities or []}

    assert a100.resource_type == "virtualMachines"
    assert a100.family == A100_FAMILY
    assert a100.locations == [LOCATION]
    assert (capabilities["vCPUs"], capabilities["GPUs"]) == ("96", "4")
    assert {s.locations[0] for s in skus} == {LOCATION}  # type: ignore[index]
    assert "resourceSkus.list" in azure.log.operations()


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
