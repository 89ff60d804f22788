"""Injected faults, latency and the request log, as botocore sees them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from tests.emulators.aws import AwsEmulator
from tests.emulators.aws.wire import FAULTS
from tests.emulators.base import FaultKind

pytestmark = pytest.mark.integration

REGION = "us-east-1"


def _call_eks(aws: AwsEmulator, **config: Any) -> None:
    aws.client("eks", REGION, **config).describe_nodegroup(clusterName="ml", nodegroupName="gpu")


def _call_autoscaling(aws: AwsEmulator, **config: Any) -> None:
    aws.client("autoscaling", REGION, **config).describe_auto_scaling_groups()


def _call_ec2(aws: AwsEmulator, **config: Any) -> None:
    aws.client("ec2", REGION, **config).describe_instances()


def _call_quotas(aws: AwsEmulator, **config: Any) -> None:
    aws.set_quota(REGION, "L-DB2E81BA", 8)  # an applied value: GetServiceQuota answers only those
    aws.client("service-quotas", REGION, **config).get_service_quota(ServiceCode="ec2", QuotaCode="L-DB2E81BA")


CALLS = {
    "eks": ("DescribeNodegroup", _call_eks),
    "autoscaling": ("DescribeAutoScalingGroups", _call_autoscaling),
    "ec2": ("DescribeInstances", _call_ec2),
    "servicequotas": ("GetServiceQuota", _call_quotas),
}
KINDS: list[FaultKind] = ["throttle", "server_error", "busy", "conflict"]


@pytest.mark.parametrize("service", sorted(CALLS))
@pytest.mark.parametrize("kind", KINDS)
def test_fault_renders_as_the_service_error_code(aws: AwsEmulator, service: str, kind: FaultKind) -> None:
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 0, 1)
    operation, call = CALLS[service]
    aws.inject(operation, kind)

    with pytest.raises(ClientError) as failed:
        call(aws)

    status, code, _ = FAULTS[service][kind]
    assert failed.value.response["Error"]["Code"] == code
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    call(aws)  # armed once: the next call succeeds
    assert aws.log.count(operation) == 2


def test_the_documented_fault_codes() -> None:
    """The table product code (and its error translation) is written against."""
    codes = {service: {kind: FAULTS[service][kind][1] for kind in KINDS} for service in sorted(FAULTS)}

    assert codes == {
        "autoscaling": {
            "throttle": "Throttling",
            "server_error": "InternalFailure",
            "busy": "ScalingActivityInProgress",
            "conflict": "ResourceContention",
        },
        "ec2": {
            "throttle": "RequestLimitExceeded",
            "server_error": "InternalError",
            "busy": "IncorrectInstanceState",
            "conflict": "IncorrectInstanceState",
        },
        "eks": {
            "throttle": "ThrottlingException",
            "server_error": "ServerException",
            "busy": "ResourceInUseException",
            "conflict": "ResourceInUseException",
        },
        "servicequotas": {
            "throttle": "TooManyRequestsException",
            "server_error": "ServiceException",
            "busy": "ResourceAlreadyExistsException",
            "conflict": "ResourceAlreadyExistsException",
        },
    }


@pytest.mark.parametrize("service", sorted(CALLS))
def test_timeout_answers_504_after_holding(aws: AwsEmulator, service: str) -> None:
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 0, 1)
    aws.timeout_hold_s = 0.1
    operation, call = CALLS[service]
    aws.inject(operation, "timeout")

    with pytest.raises(ClientError) as failed:
        call(aws)

    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 504
    assert failed.value.response["Error"]["Code"] == "504"


def test_timeout_outlasts_a_client_read_timeout(aws: AwsEmulator) -> None:
    aws.timeout_hold_s = 1.0
    aws.inject("DescribeInstances", "timeout")

    with pytest.raises(ReadTimeoutError):
        _call_ec2(aws, read_timeout=0.2)


def test_retries_would_hide_a_fault_but_the_log_counts_them(aws: AwsEmulator) -> None:
    aws.inject("DescribeAutoScalingGroups", "throttle", times=2)

    aws.client("autoscaling", REGION, attempts=3).describe_auto_scaling_groups()

    assert aws.log.count("DescribeAutoScalingGroups") == 3


def test_wildcard_fault_hits_any_operation(aws: AwsEmulator) -> None:
    aws.inject("*", "server_error")

    with pytest.raises(ClientError) as failed:
        _call_quotas(aws)

    assert failed.value.response["Error"]["Code"] == "ServiceException"


def test_latency_is_injected(aws: AwsEmulator) -> None:
    aws.latency_s = 0.15
    started = time.monotonic()

    _call_ec2(aws)

    assert time.monotonic() - started >= 0.15


def test_log_names_aws_operations_and_iam_actions(aws: AwsEmulator) -> None:
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 1, 2)
    eks = aws.client("eks", REGION)

    eks.list_nodegroups(clusterName="ml")
    eks.update_nodegroup_config(clusterName="ml", nodegroupName="gpu", scalingConfig={"desiredSize": 0})
    _call_quotas(aws)
    aws.log.clear()
    _call_autoscaling(aws)

    assert aws.log.operations() == ["DescribeAutoScalingGroups"]
    assert aws.iam_actions() == {
        "eks:ListNodegroups",
        "eks:UpdateNodegroupConfig",
        "servicequotas:GetServiceQuota",
        "autoscaling:DescribeAutoScalingGroups",
    }


def test_a_subprocess_reaches_the_emulator_through_env(aws: AwsEmulator) -> None:
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 1, 2)
    script = (
        "import boto3, json;"
        "eks = boto3.client('eks');"
        "print(json.dumps(eks.list_nodegroups(clusterName='ml')['nodegroups']))"
    )
    env = {"PATH": os.environ.get("PATH", ""), **aws.env()}

    done = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["gpu"]
    assert aws.log.operations() == ["ListNodegroups"]
