"""Plain Auto Scaling groups and GPU EC2 instances through the real boto3 clients."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.emulators.aws import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "us-west-2"


def _asg(autoscaling: Any, name: str) -> dict[str, Any]:
    group: dict[str, Any] = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][
        0
    ]
    return group


def test_plain_asg_scales_to_zero_and_back(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "gpu-batch", 1, 2, 4, instance_type="g6.12xlarge", tags={"team": "nlp"})
    autoscaling = aws.client("autoscaling", REGION)

    autoscaling.update_auto_scaling_group(AutoScalingGroupName="gpu-batch", MinSize=0, MaxSize=0, DesiredCapacity=0)
    down = _asg(autoscaling, "gpu-batch")
    autoscaling.update_auto_scaling_group(AutoScalingGroupName="gpu-batch", MinSize=1, MaxSize=4, DesiredCapacity=2)
    up = _asg(autoscaling, "gpu-batch")

    assert (down["MinSize"], down["DesiredCapacity"], down["MaxSize"]) == (0, 0, 0)  # a plain ASG may be 0/0/0
    assert down["Instances"] == []
    assert (up["MinSize"], up["DesiredCapacity"], up["MaxSize"]) == (1, 2, 4)
    assert len(up["Instances"]) == 2
    assert aws.log.operations() == [
        "UpdateAutoScalingGroup",
        "DescribeAutoScalingGroups",
        "UpdateAutoScalingGroup",
        "DescribeAutoScalingGroups",
    ]
    # The query protocol sends every call as a POST; the log still tells reads from writes by operation.
    assert [r.method for r in aws.log.all()] == ["POST"] * 4
    assert [r.is_write for r in aws.log.all()] == [True, False, True, False]


def test_asg_size_rules_are_enforced(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "gpu-batch", 0, 1, 2)
    autoscaling = aws.client("autoscaling", REGION)

    with pytest.raises(ClientError) as outside:
        autoscaling.update_auto_scaling_group(AutoScalingGroupName="gpu-batch", DesiredCapacity=3)
    with pytest.raises(ClientError) as inverted:
        autoscaling.update_auto_scaling_group(AutoScalingGroupName="gpu-batch", MinSize=2, MaxSize=1)
    with pytest.raises(ClientError) as above_max:
        autoscaling.set_desired_capacity(AutoScalingGroupName="gpu-batch", DesiredCapacity=5)

    assert outside.value.response["Error"] == {
        "Code": "ValidationError",
        "Message": "Desired capacity:3 must be between the specified min size:0 and max size:2",
        "Type": "Sender",
    }
    assert inverted.value.response["Error"]["Message"] == "Max bound, 1, must be greater than or equal to min bound, 2"
    assert above_max.value.response["Error"]["Code"] == "ValidationError"
    assert _asg(autoscaling, "gpu-batch")["DesiredCapacity"] == 1


def test_describe_asgs_by_name_and_by_tag(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "gpu-a", 0, 0, 2, tags={"gpu-jobs/managed": "true", "team": "a"})
    aws.add_asg(REGION, "gpu-b", 0, 0, 2, tags={"gpu-jobs/managed": "true", "team": "b"})
    aws.add_asg(REGION, "web", 1, 1, 1, instance_type="m5.large")
    autoscaling = aws.client("autoscaling", REGION)

    by_name = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-b", "web"])["AutoScalingGroups"]
    by_key = autoscaling.describe_auto_scaling_groups(Filters=[{"Name": "tag-key", "Values": ["gpu-jobs/managed"]}])
    by_pair = autoscaling.describe_auto_scaling_groups(Filters=[{"Name": "tag:team", "Values": ["a"]}])
    paginated = [
        g["AutoScalingGroupName"]
        for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate(PaginationConfig={"PageSize": 1})
        for g in page["AutoScalingGroups"]
    ]

    assert sorted(g["AutoScalingGroupName"] for g in by_name) == ["gpu-b", "web"]
    assert sorted(g["AutoScalingGroupName"] for g in by_key["AutoScalingGroups"]) == ["gpu-a", "gpu-b"]
    assert [g["AutoScalingGroupName"] for g in by_pair["AutoScalingGroups"]] == ["gpu-a"]
    assert sorted(paginated) == ["gpu-a", "gpu-b", "web"]


def test_asg_in_another_region_is_invisible(aws: AwsEmulator) -> None:
    aws.add_asg("eu-west-1", "gpu-eu", 0, 0, 1)

    assert aws.client("autoscaling", REGION).describe_auto_scaling_groups()["AutoScalingGroups"] == []
    assert len(aws.client("autoscaling", "eu-west-1").describe_auto_scaling_groups()["AutoScalingGroups"]) == 1


def test_gpu_instances_with_tags(aws: AwsEmulator) -> None:
    tagged = aws.add_instance(REGION, "p4d.24xlarge", tags={"owner": "alice", "cost-center": "ml"})
    untagged = aws.add_instance(REGION, "g5.xlarge")
    ec2 = aws.client("ec2", REGION)

    reservations = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    instances = {i["InstanceId"]: i for r in reservations["Reservations"] for i in r["Instances"]}
    owned = ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": ["owner"]}])["Reservations"]

    assert set(instances) == {tagged, untagged}
    assert instances[tagged]["InstanceType"] == "p4d.24xlarge"
    assert {t["Key"]: t["Value"] for t in instances[tagged]["Tags"]} == {"owner": "alice", "cost-center": "ml"}
    assert "Tags" not in instances[untagged] or instances[untagged]["Tags"] == []
    assert [i["InstanceId"] for r in owned for i in r["Instances"]] == [tagged]


def test_instance_types_report_gpu_info(aws: AwsEmulator) -> None:
    ec2 = aws.client("ec2", REGION)

    types = ec2.describe_instance_types(InstanceTypes=["g5.xlarge", "p4d.24xlarge", "g6.12xlarge", "m5.large"])
    gpus = {t["InstanceType"]: t.get("GpuInfo", {}).get("Gpus", []) for t in types["InstanceTypes"]}
    vcpus = {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in types["InstanceTypes"]}

    assert [(g["Manufacturer"], g["Name"], g["Count"]) for g in gpus["g5.xlarge"]] == [("NVIDIA", "A10G", 1)]
    assert [(g["Name"], g["Count"]) for g in gpus["p4d.24xlarge"]] == [("A100", 8)]
    assert [(g["Name"], g["Count"]) for g in gpus["g6.12xlarge"]] == [("L4", 4)]
    assert gpus["m5.large"] == []
    assert vcpus == {"g5.xlarge": 4, "p4d.24xlarge": 96, "g6.12xlarge": 48, "m5.large": 2}


def test_tag_stop_and_terminate_instances(aws: AwsEmulator) -> None:
    instance = aws.add_instance(REGION, "g5.2xlarge")
    ec2 = aws.client("ec2", REGION)

    ec2.create_tags(Resources=[instance], Tags=[{"Key": "gpu-jobs/idle-since", "Value": "2026-03-02T10:00:00Z"}])
    stopped = ec2.stop_instances(InstanceIds=[instance])["StoppingInstances"][0]
    after_stop = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    terminated = ec2.terminate_instances(InstanceIds=[instance])["TerminatingInstances"][0]

    assert {t["Key"]: t["Value"] for t in after_stop["Tags"]} == {"gpu-jobs/idle-since": "2026-03-02T10:00:00Z"}
    assert stopped["CurrentState"]["Name"] == "stopping"
    assert after_stop["State"]["Name"] == "stopped"
    assert terminated["CurrentState"]["Name"] in {"shutting-down", "terminated"}
    assert aws.iam_actions() == {
        "ec2:CreateTags",
        "ec2:StopInstances",
        "ec2:DescribeInstances",
        "ec2:TerminateInstances",
    }


def test_unknown_instance_type_is_refused_when_seeding(aws: AwsEmulator) -> None:
    with pytest.raises(ValueError, match="unknown EC2 instance type"):
        aws.add_instance(REGION, "g5.gigantic")
