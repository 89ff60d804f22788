"""Service Quotas for EC2 GPU families through the real boto3 client, shapes checked against botocore's model."""

from __future__ import annotations

import time
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError

from tests.emulators.aws import AwsEmulator
from tests.emulators.aws.service_quotas import QuotaSpec

pytestmark = pytest.mark.integration

REGION = "us-east-1"
G_ON_DEMAND = "L-DB2E81BA"
P_ON_DEMAND = "L-417A185B"
G_SPOT = "L-3819A6DF"
P_SPOT = "L-7212CCBC"
GPU_QUOTAS = {
    G_ON_DEMAND: "Running On-Demand G and VT instances",
    P_ON_DEMAND: "Running On-Demand P instances",
    G_SPOT: "All G and VT Spot Instance Requests",
    P_SPOT: "All P Spot Instance Requests",
}


@pytest.fixture
def quotas(aws: AwsEmulator) -> Any:
    return aws.client("service-quotas", REGION)


def _members(shape_name: str) -> set[str]:
    model = botocore.session.get_session().get_service_model("service-quotas")
    return set(model.shape_for(shape_name).members)


def _enum(shape_name: str) -> list[str]:
    model = botocore.session.get_session().get_service_model("service-quotas")
    return list(model.shape_for(shape_name).enum)


def _request(quotas: Any, code: str, value: float) -> dict[str, Any]:
    requested: dict[str, Any] = quotas.request_service_quota_increase(
        ServiceCode="ec2", QuotaCode=code, DesiredValue=value
    )["RequestedQuota"]
    return requested


def _refusal(error: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return error.value.response["Error"]["Code"], error.value.response["Error"]["Message"]


def test_gpu_quotas_are_seeded_with_the_real_shape(aws: AwsEmulator, quotas: Any) -> None:
    aws.set_quota(REGION, G_ON_DEMAND, 64)

    quota = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)["Quota"]
    default = quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)["Quota"]
    listed = quotas.list_service_quotas(ServiceCode="ec2")["Quotas"]

    assert quota["QuotaName"] == "Running On-Demand G and VT instances"
    assert quota["Value"] == 64.0
    assert quota["Unit"] == "None"
    assert quota["Adjustable"] is True
    assert quota["QuotaArn"] == f"arn:aws:servicequotas:{REGION}:123456789012:ec2/{G_ON_DEMAND}"
    assert quota["UsageMetric"]["MetricDimensions"]["Resource"] == "vCPU"
    assert set(quota) <= _members("ServiceQuota")
    assert default["Value"] == 0.0
    assert [q["QuotaCode"] for q in listed] == [G_ON_DEMAND]  # only quotas with an applied value are listed
    defaults = quotas.list_aws_default_service_quotas(ServiceCode="ec2")["Quotas"]
    assert {q["QuotaCode"]: q["QuotaName"] for q in defaults if q["QuotaCode"] in GPU_QUOTAS} == GPU_QUOTAS
    assert all(set(q) <= _members("ServiceQuota") for q in defaults)


def test_a_quota_without_an_applied_value_is_no_such_resource_but_has_a_default(quotas: Any) -> None:
    with pytest.raises(ClientError) as applied:
        quotas.get_service_quota(ServiceCode="ec2", QuotaCode=P_SPOT)
    default = quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=P_SPOT)["Quota"]

    assert _refusal(applied) == (
        "NoSuchResourceException",
        "The request failed because the specified quota does not exist.",
    )
    assert (default["QuotaCode"], default["QuotaName"], default["Value"]) == (P_SPOT, GPU_QUOTAS[P_SPOT], 0.0)
    assert quotas.list_service_quotas(ServiceCode="ec2", QuotaCode=P_SPOT)["Quotas"] == []


def test_quotas_are_per_region(aws: AwsEmulator) -> None:
    aws.set_quota("eu-west-1", P_ON_DEMAND, 192)
    aws.set_quota(REGION, P_ON_DEMAND, 8)

    here = aws.client("service-quotas", REGION).get_service_quota(ServiceCode="ec2", QuotaCode=P_ON_DEMAND)
    there = aws.client("service-quotas", "eu-west-1").get_service_quota(ServiceCode="ec2", QuotaCode=P_ON_DEMAND)

    assert (here["Quota"]["Value"], there["Quota"]["Value"]) == (8.0, 192.0)


def test_list_service_quotas_filters_and_pages(aws: AwsEmulator, quotas: Any) -> None:
    for code in GPU_QUOTAS:
        aws.set_quota(REGION, code, 32)
    one = quotas.list_service_quotas(ServiceCode="ec2", QuotaCode=P_SPOT)["Quotas"]
    paged = [
        q["QuotaCode"]
        for page in quotas.get_paginator("list_service_quotas").paginate(
            ServiceCode="ec2", PaginationConfig={"PageSize": 2}
        )
        for q in page["Quotas"]
    ]

    assert [q["QuotaCode"] for q in one] == [P_SPOT]
    assert set(GPU_QUOTAS) <= set(paged)
    assert len(paged) == len(set(paged))


def test_request_increase_and_its_history(aws: AwsEmulator, quotas: Any) -> None:
    aws.set_quota(REGION, G_ON_DEMAND, 32)

    requested = _request(quotas, G_ON_DEMAND, 128)
    fetched = quotas.get_requested_service_quota_change(RequestId=requested["Id"])["RequestedQuota"]
    by_quota = quotas.list_requested_service_quota_change_history_by_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)
    history = quotas.list_requested_service_quota_change_history(ServiceCode="ec2", Status="PENDING")

    assert requested["Status"] == "PENDING"
    assert requested["DesiredValue"] == 128.0
    assert requested["QuotaName"] == "Running On-Demand G and VT instances"
    assert set(requested) <= _members("RequestedServiceQuotaChange")
    assert fetched == requested
    assert [r["Id"] for r in by_quota["RequestedQuotas"]] == [requested["Id"]]
    assert [r["Id"] for r in history["RequestedQuotas"]] == [requested["Id"]]
    assert quotas.get_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)["Quota"]["Value"] == 32.0
    assert requested["Status"] in _enum("RequestStatus")


def test_only_one_open_request_per_quota(aws: AwsEmulator, quotas: Any) -> None:
    first = _request(quotas, P_ON_DEMAND, 96)

    with pytest.raises(ClientError) as pending:
        _request(quotas, P_ON_DEMAND, 192)
    aws.decide_quota_request(first["Id"], "CASE_OPENED")
    with pytest.raises(ClientError) as case_opened:
        _request(quotas, P_ON_DEMAND, 192)
    other_quota = _request(quotas, P_SPOT, 96)  # a different quota is independent
    aws.decide_quota_request(first["Id"], "DENIED")
    after_denial = _request(quotas, P_ON_DEMAND, 192)

    refusal = ("ResourceAlreadyExistsException", "Only one open service quota increase request is allowed per quota.")
    assert _refusal(pending) == refusal
    assert _refusal(case_opened) == refusal
    assert other_quota["Status"] == after_denial["Status"] == "PENDING"


def test_desired_value_must_exceed_the_current_one(aws: AwsEmulator, quotas: Any) -> None:
    aws.set_quota(REGION, G_SPOT, 64)

    with pytest.raises(ClientError) as equal:
        _request(quotas, G_SPOT, 64)
    with pytest.raises(ClientError) as lower:
        _request(quotas, G_SPOT, 8)

    message = "You must provide a quota value greater than the current quota value"
    assert _refusal(equal) == _refusal(lower) == ("IllegalArgumentException", message)


def test_unknown_service_or_quota_is_no_such_resource(quotas: Any) -> None:
    with pytest.raises(ClientError) as quota:
        quotas.get_service_quota(ServiceCode="ec2", QuotaCode="L-00000000")
    with pytest.raises(ClientError) as request:
        quotas.get_requested_service_quota_change(RequestId="does-not-exist")

    assert _refusal(quota)[0] == _refusal(request)[0] == "NoSuchResourceException"


@pytest.mark.parametrize("final", ["APPROVED", "DENIED", "CASE_CLOSED", "NOT_APPROVED", "INVALID_REQUEST"])
def test_status_transitions(aws: AwsEmulator, quotas: Any, final: str) -> None:
    aws.set_quota(REGION, G_ON_DEMAND, 16)
    requested = _request(quotas, G_ON_DEMAND, 64)

    opened = aws.decide_quota_request(requested["Id"], "CASE_OPENED")
    aws.decide_quota_request(requested["Id"], final)
    seen = quotas.get_requested_service_quota_change(RequestId=requested["Id"])["RequestedQuota"]
    value = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)["Quota"]["Value"]
    by_status = quotas.list_requested_service_quota_change_history_by_quota(
        ServiceCode="ec2", QuotaCode=G_ON_DEMAND, Status=final
    )["RequestedQuotas"]

    assert seen["Status"] == final
    assert opened.case_id is not None
    assert opened.case_id.startswith("case-123456789012-")
    assert seen["CaseId"] == opened.case_id
    assert value == (64.0 if final == "APPROVED" else 16.0)
    assert [r["Id"] for r in by_status] == [requested["Id"]]


def test_unknown_status_is_a_test_bug(aws: AwsEmulator, quotas: Any) -> None:
    requested = _request(quotas, G_ON_DEMAND, 8)

    with pytest.raises(ValueError, match="unknown request status"):
        aws.decide_quota_request(requested["Id"], "APPROVED_ISH")
    with pytest.raises(ValueError, match="only an APPROVED decision grants a value"):
        aws.decide_quota_request(requested["Id"], "DENIED", value=4)


def test_iam_actions_of_quota_calls(aws: AwsEmulator, quotas: Any) -> None:
    quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)
    _request(quotas, G_ON_DEMAND, 8)

    assert aws.iam_actions() == {
        "servicequotas:GetAWSDefaultServiceQuota",
        "servicequotas:RequestServiceQuotaIncrease",
    }


def test_statuses_are_the_model_s(aws: AwsEmulator) -> None:
    assert sorted(_enum("RequestStatus")) == sorted(
        ["PENDING", "CASE_OPENED", "APPROVED", "DENIED", "CASE_CLOSED", "NOT_APPROVED", "INVALID_REQUEST"]
    )


def test_partial_approval_applies_less_than_desired(aws: AwsEmulator, quotas: Any) -> None:
    aws.set_quota(REGION, P_ON_DEMAND, 96)
    requested = _request(quotas, P_ON_DEMAND, 768)

    aws.decide_quota_request(requested["Id"], "CASE_OPENED")
    aws.decide_quota_request(requested["Id"], "APPROVED", value=384)
    seen = quotas.get_requested_service_quota_change(RequestId=requested["Id"])["RequestedQuota"]
    quota = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=P_ON_DEMAND)["Quota"]

    assert (seen["Status"], seen["DesiredValue"]) == ("APPROVED", 768.0)
    assert seen["CaseId"].startswith("case-")
    assert quota["Value"] == 384.0  # approved below the desired value
    assert _request(quotas, P_ON_DEMAND, 768)["Status"] == "PENDING"  # no longer open: a new one is allowed


@pytest.mark.parametrize("operation", ["history", "by_quota"])
def test_an_invalid_status_filter_is_a_validation_error(aws: AwsEmulator, quotas: Any, operation: str) -> None:
    _request(quotas, G_ON_DEMAND, 8)

    calls = {
        "history": lambda: quotas.list_requested_service_quota_change_history(ServiceCode="ec2", Status="OPEN"),
        "by_quota": lambda: quotas.list_requested_service_quota_change_history_by_quota(
            ServiceCode="ec2", QuotaCode=G_ON_DEMAND, Status="pending"
        ),
    }

    with pytest.raises(ClientError) as invalid:
        calls[operation]()

    code, message = _refusal(invalid)
    assert code == "ValidationException"
    assert "failed to satisfy constraint: Member must satisfy enum value set" in message
    assert invalid.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_quota_that_is_not_adjustable(aws: AwsEmulator, quotas: Any) -> None:
    aws.quotas.define_quota(QuotaSpec("L-34B43A08", "All Standard Spot Instance Requests", "Standard/Spot", 5.0, False))
    aws.set_quota(REGION, "L-34B43A08", 5)

    quota = quotas.get_service_quota(ServiceCode="ec2", QuotaCode="L-34B43A08")["Quota"]
    with pytest.raises(ClientError) as refused:
        _request(quotas, "L-34B43A08", 64)

    assert quota["Adjustable"] is False
    assert _refusal(refused)[0] == "IllegalArgumentException"
    assert quotas.list_requested_service_quota_change_history(ServiceCode="ec2")["RequestedQuotas"] == []


def test_polls_never_decide_a_request(aws: AwsEmulator, quotas: Any) -> None:
    requested = _request(quotas, G_SPOT, 64)

    statuses = {
        quotas.get_requested_service_quota_change(RequestId=requested["Id"])["RequestedQuota"]["Status"]
        for _ in range(10)
    }

    assert statuses == {"PENDING"}


def test_a_decision_at_a_time_lands_with_no_one_looking(aws: AwsEmulator, quotas: Any) -> None:
    requested = _request(quotas, G_ON_DEMAND, 64)

    aws.decide_quota_request(requested["Id"], "APPROVED", after_s=0.2)
    before = aws.quotas.explicit_value(REGION, G_ON_DEMAND)
    time.sleep(0.4)  # no request reaches the emulator meanwhile
    after = aws.quotas.explicit_value(REGION, G_ON_DEMAND)

    assert (before, after) == (None, 64.0)
    assert quotas.get_service_quota(ServiceCode="ec2", QuotaCode=G_ON_DEMAND)["Quota"]["Value"] == 64.0


def test_decisions_scripted_before_the_requests_are_filed(aws: AwsEmulator, quotas: Any) -> None:
    aws.quotas.decide_next("CASE_OPENED", code=P_ON_DEMAND)
    aws.quotas.decide_next("NOT_APPROVED", after_s=0.1, code=G_SPOT)

    p = _request(quotas, P_ON_DEMAND, 96)
    g = _request(quotas, G_SPOT, 96)
    unscripted = _request(quotas, G_ON_DEMAND, 96)
    time.sleep(0.25)
    seen = {
        r["QuotaCode"]: r["Status"]
        for r in quotas.list_requested_service_quota_change_history(ServiceCode="ec2")["RequestedQuotas"]
    }

    assert (p["Status"], g["Status"], unscripted["Status"]) == ("CASE_OPENED", "PENDING", "PENDING")
    assert p["CaseId"].startswith("case-")
    assert seen == {P_ON_DEMAND: "CASE_OPENED", G_SPOT: "NOT_APPROVED", G_ON_DEMAND: "PENDING"}
