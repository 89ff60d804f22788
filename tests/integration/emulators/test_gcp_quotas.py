"""Cloud Quotas (QuotaInfo, QuotaPreference) through the real cloudquotas_v1 REST client."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.cloud import cloudquotas_v1

from tests.emulators.gcp import GcpEmulator, clients
from tests.emulators.gcp.quotas import Traits

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
    client: cloudquotas_v1.CloudQuotasClient,
    pref_id: str,
    pref: cloudquotas_v1.QuotaPreference,
    ignore: tuple[int, ...] = (),  # QuotaSafetyCheck values
) -> cloudquotas_v1.QuotaPreference:
    return client.create_quota_preference(
        request={
            "parent": PARENT,
            "quota_preference_id": pref_id,
            "quota_preference": pref,
            "ignore_safety_checks": list(ignore),
        },
        retry=None,
    )


def _info(client: cloudquotas_v1.CloudQuotasClient, quota_id: str) -> cloudquotas_v1.QuotaInfo:
    return client.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{quota_id}")


def _info_value(client: cloudquotas_v1.CloudQuotasClient, quota_id: str, region: str) -> int:
    info = client.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{quota_id}")
    return next(d.details.value for d in info.dimensions_infos if d.dimensions.get("region") == region)


def test_quota_info_carries_per_region_values(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    info = quotas.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{A100}")
    everywhere = quotas.get_quota_info(name=f"{PARENT}/services/{SERVICE}/quotaInfos/{ALL_REGIONS}")
    listed = list(quotas.list_quota_infos(request={"parent": f"{PARENT}/services/{SERVICE}", "page_size": 2}))

    assert info.metric == "compute.googleapis.com/nvidia_a100_gpus"
    assert list(info.dimensions) == ["region"]
    assert sorted((dict(d.dimensions).get("region", ""), d.details.value) for d in info.dimensions_infos) == [
        ("", 0),  # the default, for every region not listed
        ("europe-west4", 0),
        ("us-central1", 8),
    ]
    assert [(dict(d.dimensions), d.details.value) for d in everywhere.dimensions_infos] == [({}, 12)]
    assert {A100, L4, SPOT_A100, ALL_REGIONS} <= {i.quota_id for i in listed}
    assert len(listed) == len({i.quota_id for i in listed})


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
    created = _create(quotas, "spot-a100-us", _pref(SPOT_A100, "us-central1", 15))  # 16 -> 15: within 10 %

    assert not created.reconciling
    assert created.quota_config.granted_value == 15
    assert created.quota_config.trace_id
    assert _info_value(quotas, SPOT_A100, "us-central1") == 15


def test_decreases_are_refused_by_the_safety_checks_unless_waived(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    gcp.set_quota_usage(PROJECT, SPOT_A100, "us-central1", 6)  # limit 16
    check = cloudquotas_v1.QuotaSafetyCheck

    with pytest.raises(exceptions.BadRequest) as too_much:
        _create(quotas, "a", _pref(SPOT_A100, "us-central1", 8))  # -50 %
    with pytest.raises(exceptions.BadRequest) as below_usage:
        _create(quotas, "b", _pref(SPOT_A100, "us-central1", 4), (check.QUOTA_DECREASE_PERCENTAGE_TOO_HIGH,))
    waived = _create(quotas, "c", _pref(SPOT_A100, "us-central1", 8), (check.QUOTA_DECREASE_PERCENTAGE_TOO_HIGH,))

    def reason(error: pytest.ExceptionInfo[exceptions.BadRequest]) -> tuple[str, str]:
        body = error.value.response.json()["error"]
        return body["status"], body["details"][0]["reason"]

    assert reason(too_much) == ("FAILED_PRECONDITION", "QUOTA_DECREASE_PERCENTAGE_TOO_HIGH")
    assert reason(below_usage) == ("FAILED_PRECONDITION", "QUOTA_DECREASE_BELOW_USAGE")
    assert waived.quota_config.granted_value == 8
    assert _info_value(quotas, SPOT_A100, "us-central1") == 8
    both = (check.QUOTA_DECREASE_BELOW_USAGE, check.QUOTA_DECREASE_PERCENTAGE_TOO_HIGH)
    upserted = quotas.update_quota_preference(
        request={
            "quota_preference": {**_pref_dict(SPOT_A100, "us-central1", 2), "name": waived.name, "etag": waived.etag},
            "ignore_safety_checks": list(both),
        },
        retry=None,
    )
    assert upserted.quota_config.granted_value == 2


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
        _create(quotas, "x", _pref("NVIDIA-B9000-GPUS-per-project-region", "us-central1", 1, "ops@example.com"))
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
    _create(quotas, "spot-us", _pref(SPOT_A100, "us-central1", 15))
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


H100 = "NVIDIA-H100-GPUS-per-project-region"


def test_every_quota_of_the_service_has_a_quota_info_seeded_or_not(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    h100 = _info(quotas, H100)  # nobody set it
    family = _info(quotas, "GPUS-PER-GPU-FAMILY-per-project-region")

    assert [(dict(d.dimensions), d.details.value) for d in h100.dimensions_infos] == [({}, 0)]
    assert list(h100.dimensions) == ["region"]
    assert not h100.is_fixed
    assert h100.quota_increase_eligibility.is_eligible
    assert sorted(family.dimensions) == ["gpu_family", "region"]
    with pytest.raises(exceptions.NotFound):
        _info(quotas, "NVIDIA-B9000-GPUS-per-project-region")  # not a quota the service has


def test_an_unseeded_quota_takes_a_preference_from_its_default(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    created = _create(quotas, "h100-eu", _pref(H100, "europe-west4", 16, "ops@example.com"))
    gcp.grant(created.name)

    assert created.quota_config.granted_value == 0  # the default, until decided
    assert _info_value(quotas, H100, "europe-west4") == 16


def test_fixed_and_ineligible_quotas_refuse_increases(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    gcp.quotas.set_traits(ALL_REGIONS, Traits(is_fixed=True))
    gcp.quotas.set_traits(L4, Traits(eligible=False, reason="NOT_ENOUGH_USAGE_HISTORY"))

    fixed, ineligible = _info(quotas, ALL_REGIONS), _info(quotas, L4)
    with pytest.raises(exceptions.BadRequest) as fixed_refusal:
        _create(quotas, "all", _pref(ALL_REGIONS, None, 64, "ops@example.com"))
    with pytest.raises(exceptions.BadRequest) as ineligible_refusal:
        _create(quotas, "l4", _pref(L4, "us-central1", 64, "ops@example.com"))

    reasons = cloudquotas_v1.QuotaIncreaseEligibility.IneligibilityReason
    assert fixed.is_fixed
    assert not ineligible.quota_increase_eligibility.is_eligible
    assert ineligible.quota_increase_eligibility.ineligibility_reason == reasons.NOT_ENOUGH_USAGE_HISTORY
    assert fixed_refusal.value.response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert ineligible_refusal.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert list(quotas.list_quota_preferences(parent=PARENT)) == []


def test_a_partial_grant_leaves_granted_below_preferred_with_a_state_detail(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    created = _create(quotas, "a100-us", _pref(A100, "us-central1", 32, "ops@example.com"))

    gcp.grant(created.name, 16)
    partial = quotas.get_quota_preference(name=created.name)

    assert not partial.reconciling
    assert (partial.quota_config.preferred_value, partial.quota_config.granted_value) == (32, 16)
    assert "16 of the 32" in partial.quota_config.state_detail
    assert _info_value(quotas, A100, "us-central1") == 16


def test_polls_never_decide_an_open_increase(quotas: cloudquotas_v1.CloudQuotasClient) -> None:
    created = _create(quotas, "a100-us", _pref(A100, "us-central1", 32, "ops@example.com"))

    seen = {quotas.get_quota_preference(name=created.name).reconciling for _ in range(10)}

    assert seen == {True}
    assert _info_value(quotas, A100, "us-central1") == 8


def test_a_grant_at_a_time_lands_with_no_one_looking(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    created = _create(quotas, "a100-us", _pref(A100, "us-central1", 32, "ops@example.com"))
    gcp.log.clear()

    gcp.grant(created.name, 24, after_s=0.2)
    before = gcp.quotas.entries[(PROJECT, SERVICE, A100)].value_for({"region": "us-central1"})
    time.sleep(0.4)  # no request reaches the emulator meanwhile
    after = gcp.quotas.entries[(PROJECT, SERVICE, A100)].value_for({"region": "us-central1"})

    assert (before, after) == (8, 24)
    assert gcp.log.all() == []
    assert not quotas.get_quota_preference(name=created.name).reconciling


def test_decisions_scripted_before_the_preferences_are_written(
    gcp: GcpEmulator, quotas: cloudquotas_v1.CloudQuotasClient
) -> None:
    gcp.decide_next_preference(False, quota_id=L4)
    gcp.decide_next_preference(True, value=12, after_s=0.1, quota_id=A100)

    l4 = _create(quotas, "l4-us", _pref(L4, "us-central1", 64, "ops@example.com"))
    a100 = _create(quotas, "a100-us", _pref(A100, "us-central1", 32, "ops@example.com"))
    time.sleep(0.25)
    l4_now = quotas.get_quota_preference(name=l4.name)
    a100_now = quotas.get_quota_preference(name=a100.name)

    assert not l4.reconciling  # decided at once: denied
    assert l4_now.quota_config.state_detail
    assert a100.reconciling
    assert (a100_now.reconciling, a100_now.quota_config.granted_value) == (False, 12)
    assert _info_value(quotas, L4, "us-central1") == 4
