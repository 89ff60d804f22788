"""The AWS emulator reads EC2's filter wildcards in DescribeInstances attribute filters, through the real boto3:
``*`` any run of characters, ``?`` exactly one, a backslash for a literal; values without them stay exact."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "eu-west-1"


def found(aws: AwsEmulator, name: str, *values: str) -> list[str]:
    reply = aws.client("ec2", REGION).describe_instances(Filters=[{"Name": name, "Values": list(values)}])
    return sorted(i["InstanceType"] for r in reply["Reservations"] for i in r["Instances"])


@pytest.mark.parametrize(
    ("values", "types"),
    [
        (("p4d.*",), ["p4d.24xlarge"]),
        (("g?.xlarge",), ["g5.xlarge"]),  # exactly one character: not g5g.xlarge
        (("g*.xlarge",), ["g5.xlarge", "g5g.xlarge"]),
        (("*",), ["g5.xlarge", "g5g.xlarge", "m5.large", "p4d.24xlarge"]),
        (("m5.large", "p4d*"), ["m5.large", "p4d.24xlarge"]),  # values are OR-ed
        (("g5.xlarge",), ["g5.xlarge"]),  # no wildcard: exact, as before
        (("g5",), []),
        (("g5\\*",), []),  # an escaped star is a star
    ],
)
def test_instance_type_filters_read_wildcards(aws: AwsEmulator, values: tuple[str, ...], types: list[str]) -> None:
    for kind in ("p4d.24xlarge", "g5.xlarge", "g5g.xlarge", "m5.large"):
        aws.add_instance(REGION, kind)

    assert found(aws, "instance-type", *values) == types


def test_state_and_zone_filters_read_wildcards(aws: AwsEmulator) -> None:
    running = aws.add_instance(REGION, "g5.xlarge")
    stopped = aws.add_instance(REGION, "g5.xlarge")
    aws.client("ec2", REGION).stop_instances(InstanceIds=[stopped])

    assert found(aws, "instance-state-name", "stop*") == ["g5.xlarge"]
    assert found(aws, "instance-state-name", "run?ing") == ["g5.xlarge"]
    assert found(aws, "availability-zone", f"{REGION}?") == ["g5.xlarge", "g5.xlarge"]
    reply = aws.client("ec2", REGION).describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
    )
    assert [i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]] == [running]
