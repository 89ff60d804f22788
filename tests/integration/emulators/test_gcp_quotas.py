"""Cloud Quotas (QuotaInfo, QuotaPreference) through the real cloudquotas_v1 REST client."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import cloudquotas_v1

from tests.emulators.gcp import GcpEmulator, clients

pytestmark = pytest.mark.integration

PROJECT = "proj"
PARENT = f"projects/{PROJECT}/locations/global"
A100 = "NVIDIA-A100-GPUS-per-project-region"
L4 = "NVIDIA-L4-GPUS-per-project-region"
SPOT_A100 = "PREEMPTIBLE-NVIDIA-A100-GPUS-per-project-region"
ALL_REGIONS = "GPUS-ALL-REGIONS-per-project"
SERVICE = "compute.googleapis.com"


@pytest.fixture
def quotas(gcp: GcpEmulator) -> cloudquotas_v1.CloudQuotasClient:
    gcp.set_quota(PROJECT, A100, "us-central1", 8)
    gcp.set_quota(PROJECT, A100, "europe-west4", 0)
    gcp.set_quota(PROJECT, L4, "us-central1", 4)
    gcp.set_quota(PROJECT, SPOT_A100, "us-central1", 16)
    gcp.set_quota(PROJECT, ALL_REGIONS, None, 12)
    return clients.quotas(gcp.url)


def _pref(quota_id: str, region: str | None, value: int, email: str = "") -> cloudquotas_v1.QuotaPreference:
    return cloudquotas_v1.QuotaPreference(
        service=SERVICE,
        quota_id=quota_id,
        dimensions={"region": region} if region else {},
        quota_config=cloudquotas_v1.QuotaConfig(preferred_value=value),
        justification="nightly training needs more A100s",
        contact_email=email,
    )


def _create(
    client: cloudquotas_v1.CloudQuotasClient, pref_id: str, pref: cloudquotas_v1.QuotaPreference
) -> cloudquotas_v1.QuotaPreference:
    return client.create_quota_preference(
        request={"parent": PARENT, "quota_preference_id": pref_id, "quota_preference": pref}, retry=None
    )


def _info_value(client: cloudquotas_v1.CloudQuotasClient, quota_id: str, region: str) -> int:
    info = client.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{quota_id}")
    return next(d.details.value for d in info.dimensions_infos if d.dimensions.get("region") == region)


def test_quota_info_carries_per_region_values(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    info = quotas.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{A100}")
    everywhere = quotas.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{ALL_REGIONS}")
    listed = list(quotas.list_quota_infos(request={"parent": f"{PARENT}/services/{SERVICE}", "page_size": 2}))

    assert info.metric == "compute.googleapis.com/nvidia_a100_gpus"
    assert list(info.dimensions) == ["region"]
    assert sorted((dict(d.dimensions)["region"], d.details.value) for d in info.dimensions_infos) == [
        ("europe-west4", 0),
        ("us-central1", 8),
    ]
    assert [(dict(d.dimensions), d.details.value) for d in everywhere.dimensions_infos] == [({}, 12)]
    assert sorted(i.quota_id for i in listed) == sorted([A100, L4, SPOT_A100, ALL_REGIONS])


def test_increase_without_contact_email_is_refused(gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    with pytest.raises(exceptions.BadRequest) as refused:
        _create(quotas, "a100-us", _pref(A100, "us-central1", 16))

    assert refused.value.response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "contact_email" in refused.value.message
    assert not list(quotas.list_quota_preferences(parent=PARENT))


def test_increase_reconciles_until_granted(gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    created = _create(quotas, "a100-us", _pref(A100, "us-central1", 16, "ops@example.com"))

    assert created.name == f"{PARENT}/quotaPreferences/a100-us"
    assert created.reconciling
    assert (created.quota_config.preferred_value, created.quota_config.granted_value) == (16, 8)
    assert created.quota_config.trace_id
    assert created.etag
    assert created.justification == "nightly training needs more A100s"
    assert created.contact_email == ""  # input only: never echoed back
    assert quotas.get_quota_preference(name=created.name) == created
    assert _info_value(quotas, A100, "us-central1") == 8

    gcp.grant(created.name)

    granted = quotas.get_quota_preference(name=created.name)
    assert not granted.reconciling
    assert granted.quota_config.granted_value == 16
    assert granted.etag != created.etag
    assert _info_value(quotas, A100, "us-central1") == 16


def test_denied_increase_keeps_the_old_limit(gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    created = _create(quotas, "l4-us", _pref(L4, "us-central1", 64, "ops@example.com"))

    gcp.deny(created.name)

    denied = quotas.get_quota_preference(name=created.name)
    assert not denied.reconciling
    assert denied.quota_config.granted_value == 4
    assert denied.quota_config.state_detail
    assert gcp.quota_value(PROJECT, L4, "us-central1") == 4


def test_decrease_needs_no_email_and_applies_at_once(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    created = _create(quotas, "spot-a100-us", _pref(SPOT_A100, "us-central1", 2))

    assert not created.reconciling
    assert created.quota_config.granted_value == 2
    assert _info_value(quotas, SPOT_A100, "us-central1") == 2


def test_one_preference_per_quota_and_dimensions(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    _create(quotas, "a100-us", _pref(A100, "us-central1", 10, "ops@example.com"))

    with pytest.raises(exceptions.Conflict) as same_id:
        _create(quotas, "a100-us", _pref(A100, "europe-west4", 10, "ops@example.com"))
    with pytest.raises(exceptions.Conflict) as same_target:
        _create(quotas, "another-id", _pref(A100, "us-central1", 12, "ops@example.com"))

    assert same_id.value.response.json()["error"]["status"] == "ALREADY_EXISTS"
    assert same_target.value.response.json()["error"]["status"] == "ALREADY_EXISTS"
    _create(quotas, "a100-eu", _pref(A100, "europe-west4", 4, "ops@example.com"))  # other dimensions are fine


def test_unknown_quota_or_dimension_is_refused(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    with pytest.raises(exceptions.BadRequest):
        _create(quotas, "x", _pref("NVIDIA-H100-GPUS-per-project-region", "us-central1", 1, "ops@example.com"))
    bad_dims = _pref(A100, "us-central1", 1, "ops@example.com")
    bad_dims.dimensions["zone"] = "us-central1-a"
    with pytest.raises(exceptions.BadRequest):
        _create(quotas, "y", bad_dims)


def test_update_with_mask_allow_missing_and_etag(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    name = f"{PARENT}/quotaPreferences/a100-us"
    upserted = quotas.update_quota_preference(
        request={
            "quota_preference": {
                **_pref_dict(A100, "us-central1", 12),
                "name": name,
                "contact_email": "ops@example.com",
            },
            "allow_missing": True,
        },
        retry=None,
    )
    assert upserted.name == name
    assert upserted.reconciling

    raised = quotas.update_quota_preference(
        request={
            "quota_preference": {
                "name": name,
                "quota_config": {"preferred_value": 20},
                "contact_email": "ops@example.com",
                "etag": upserted.etag,
            },
            "update_mask": {"paths": ["quota_config.preferred_value"]},
        },
        retry=None,
    )
    assert raised.quota_config.preferred_value == 20
    assert raised.justification == upserted.justification  # outside the mask: kept
    assert raised.create_time == upserted.create_time

    with pytest.raises(exceptions.Conflict) as stale:
        quotas.update_quota_preference(
            request={
                "quota_preference": {"name": name, "quota_config": {"preferred_value": 24}, "etag": upserted.etag},
                "update_mask": {"paths": ["quota_config.preferred_value"]},
            },
            retry=None,
        )
    assert stale.value.response.json()["error"]["status"] == "ABORTED"
    with pytest.raises(exceptions.BadRequest):
        quotas.update_quota_preference(
            request={
                "quota_preference": {"name": name, "quota_id": L4},
                "update_mask": {"paths": ["quota_id"]},
            },
            retry=None,
        )
    with pytest.raises(exceptions.NotFound):
        quotas.update_quota_preference(
            request={
                "quota_preference": {**_pref_dict(A100, "europe-west4", 1), "name": f"{PARENT}/quotaPreferences/nope"}
            },
            retry=None,
        )


def test_list_filters_and_pages(gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    a100 = _create(quotas, "a100-us", _pref(A100, "us-central1", 16, "ops@example.com"))
    _create(quotas, "l4-us", _pref(L4, "us-central1", 8, "ops@example.com"))
    _create(quotas, "spot-us", _pref(SPOT_A100, "us-central1", 1))
    gcp.grant(a100.name)

    def names(filter_: str) -> list[str]:
        found = quotas.list_quota_preferences(request={"parent": PARENT, "filter": filter_, "page_size": 1})
        return sorted(p.name.rsplit("/", 1)[-1] for p in found)

    assert names("") == ["a100-us", "l4-us", "spot-us"]
    assert names(f"service={SERVICE}") == ["a100-us", "l4-us", "spot-us"]
    assert names(f"quotaId={A100}") == ["a100-us"]
    assert names(f'service="{SERVICE}" AND reconciling=true') == ["l4-us"]
    assert gcp.log.count("quotaPreferences.list") == 3 + 3 + 1 + 1  # one page per preference, page size 1
    with pytest.raises(exceptions.BadRequest):
        names("state=PENDING")


def _pref_dict(quota_id: str, region: str, value: int) -> dict[str, object]:
    return {
        "service": SERVICE,
        "quota_id": quota_id,
        "dimensions": {"region": region},
        "quota_config": {"preferred_value": value},
        "justification": "capacity plan",
    }
