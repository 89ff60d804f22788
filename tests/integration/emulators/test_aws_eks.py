"""EKS managed node groups through the real boto3 client: scaling rules, async updates, backing ASG, tags."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from tests.emulators.aws import AwsEmulator, UpdateTiming, moto_state

pytestmark = pytest.mark.integration

REGION = "eu-central-1"


@pytest.fixture
def eks(aws: AwsEmulator) -> Any:
    return aws.client("eks", REGION)


@pytest.fixture
def unvalidated_eks(aws: AwsEmulator) -> Any:
    """A client that sends what it is given, like an SDK without client-side checks: reaches the server rules."""
    return aws.client("eks", REGION, parameter_validation=False)


def _gpu_group(aws: AwsEmulator, **kw: Any) -> Any:
    sizes = {"min_size": 0, "desired_size": 2, "max_size": 4, **kw}
    return aws.add_eks_nodegroup(
        REGION,
        "ml",
        "gpu-a10g",
        instance_types=["g5.xlarge"],
        capacity_type="ON_DEMAND",
        labels={"nvidia.com/gpu.present": "true"},
        tags={"team": "vision"},
        **sizes,
    )


def _scale(eks: Any, minimum: int, desired: int, maximum: int) -> dict[str, Any]:
    update: dict[str, Any] = eks.update_nodegroup_config(
        clusterName="ml",
        nodegroupName="gpu-a10g",
        scalingConfig={"minSize": minimum, "desiredSize": desired, "maxSize": maximum},
    )["update"]
    return update


def _describe(eks: Any) -> dict[str, Any]:
    group: dict[str, Any] = eks.describe_nodegroup(clusterName="ml", nodegroupName="gpu-a10g")["nodegroup"]
    return group


def test_seeded_nodegroup_is_active_with_its_config(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)

    group = _describe(eks)

    assert eks.list_clusters()["clusters"] == ["ml"]
    assert eks.list_nodegroups(clusterName="ml")["nodegroups"] == ["gpu-a10g"]
    assert group["status"] == "ACTIVE"
    assert group["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 4}
    assert group["instanceTypes"] == ["g5.xlarge"]
    assert group["capacityType"] == "ON_DEMAND"
    assert group["labels"] == {"nvidia.com/gpu.present": "true"}
    assert group["tags"] == {"team": "vision"}


def test_max_size_zero_is_refused_by_botocore_and_by_the_server(
    aws: AwsEmulator, eks: Any, unvalidated_eks: Any
) -> None:
    _gpu_group(aws)

    # boto3 knows the model's "min: 1" on maxSize and refuses locally...
    with pytest.raises(ParamValidationError, match="maxSize"):
        _scale(eks, 0, 0, 0)
    # ...and the service refuses it too, for clients that do not validate.
    with pytest.raises(ClientError) as refused:
        _scale(unvalidated_eks, 0, 0, 0)

    error = refused.value.response
    assert error["Error"]["Code"] == "InvalidParameterException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "can't be less than 1" in error["Error"]["Message"]
    assert _describe(eks)["status"] == "ACTIVE"
    assert aws.log.count("UpdateNodegroupConfig") == 1  # only the unvalidated call reached the server


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((3, 2, 4), "Minimum capacity 3 can't be greater than desired size 2"),
        ((0, 5, 4), "Desired capacity 5 can't be greater than max size 4"),
        ((2, 2, 1), "Desired capacity 2 can't be greater than max size 1"),
    ],
)
def test_inconsistent_scaling_config_is_invalid_parameter(
    aws: AwsEmulator, eks: Any, sizes: tuple[int, int, int], message: str
) -> None:
    _gpu_group(aws)

    with pytest.raises(ClientError) as refused:
        _scale(eks, *sizes)

    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"
    assert message in refused.value.response["Error"]["Message"]
    assert _describe(eks)["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 4}


def test_partial_scaling_config_is_checked_against_the_current_one(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)  # 0 / 2 / 4

    with pytest.raises(ClientError) as refused:
        eks.update_nodegroup_config(clusterName="ml", nodegroupName="gpu-a10g", scalingConfig={"maxSize": 1})

    assert refused.value.response["Error"]["Message"] == "Desired capacity 2 can't be greater than max size 1"


def test_update_is_asynchronous_then_applied(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    aws.update_timing = UpdateTiming(seconds=0.3)

    update = _scale(eks, 0, 0, 1)

    assert update["status"] == "InProgress"
    assert update["type"] == "ConfigUpdate"
    assert {p["type"]: p["value"] for p in update["params"]} == {"MinSize": "0", "DesiredSize": "0", "MaxSize": "1"}
    # Describing does not hurry it: any number of polls inside the duration still sees it running.
    for _ in range(5):
        assert _describe(eks)["status"] == "UPDATING"
    assert _describe(eks)["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 4}
    time.sleep(0.35)
    done = _describe(eks)
    assert done["status"] == "ACTIVE"
    assert done["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 1}
    described = eks.describe_update(name="ml", updateId=update["id"], nodegroupName="gpu-a10g")["update"]
    assert described["status"] == "Successful"
    assert eks.list_updates(name="ml", nodegroupName="gpu-a10g")["updateIds"] == [update["id"]]


def test_an_update_nobody_polls_reaches_the_asg_after_its_duration(aws: AwsEmulator, eks: Any) -> None:
    """A person runs update_nodegroup_config and walks away: EKS still applies it, with time."""
    seeded = _gpu_group(aws)  # 0 / 2 / 4
    aws.update_timing = UpdateTiming(seconds=0.2)

    _scale(eks, 1, 3, 5)
    before = moto_state.find_asg(REGION, seeded.asg_name)
    assert before is not None
    sizes_meanwhile = (before.min_size, before.desired_capacity, before.max_size)
    time.sleep(0.4)  # no request of any kind reaches the emulator meanwhile
    asg = moto_state.find_asg(REGION, seeded.asg_name)

    assert sizes_meanwhile == (0, 2, 4)
    assert asg is not None
    assert (asg.min_size, asg.desired_capacity, asg.max_size) == (1, 3, 5)
    assert len(asg.instance_states) == 3
    assert aws.log.operations() == ["UpdateNodegroupConfig"]  # not one describe in between
    assert _describe(eks)["status"] == "ACTIVE"


def test_describe_update_polls_count_only_when_a_test_asks(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    aws.update_timing = UpdateTiming(polls=1, seconds=None)  # test-only shortcut: done on the second poll
    update = _scale(eks, 1, 1, 2)

    first = eks.describe_update(name="ml", updateId=update["id"], nodegroupName="gpu-a10g")["update"]
    second = eks.describe_update(name="ml", updateId=update["id"], nodegroupName="gpu-a10g")["update"]

    assert (first["status"], second["status"]) == ("InProgress", "Successful")
    assert _describe(eks)["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 2}


def test_a_held_update_finishes_only_when_the_test_says(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    aws.update_timing = UpdateTiming(seconds=None)
    _scale(eks, 0, 1, 2)

    time.sleep(0.1)
    held = _describe(eks)["status"]
    aws.eks.finish_now()

    assert held == "UPDATING"
    assert _describe(eks)["status"] == "ACTIVE"


def test_second_update_while_updating_is_resource_in_use(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    _scale(eks, 0, 0, 1)

    with pytest.raises(ClientError) as busy:
        _scale(eks, 0, 1, 1)

    assert busy.value.response["Error"]["Code"] == "ResourceInUseException"
    assert busy.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    aws.eks.finish_now()
    assert _describe(eks)["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 1}
    assert _scale(eks, 0, 1, 1)["status"] == "InProgress"  # accepted again once ACTIVE


def test_same_client_request_token_returns_the_same_update(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    request = {
        "clusterName": "ml",
        "nodegroupName": "gpu-a10g",
        "scalingConfig": {"minSize": 0, "desiredSize": 0, "maxSize": 1},
        "clientRequestToken": "run-42",
    }

    first = eks.update_nodegroup_config(**request)["update"]
    retried = eks.update_nodegroup_config(**request)["update"]

    assert retried["id"] == first["id"]


def test_unknown_nodegroup_and_update_are_not_found(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)

    with pytest.raises(ClientError) as missing_group:
        eks.update_nodegroup_config(clusterName="ml", nodegroupName="nope", scalingConfig={"maxSize": 2})
    with pytest.raises(ClientError) as missing_update:
        eks.describe_update(name="ml", updateId="0000", nodegroupName="gpu-a10g")

    assert missing_group.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert missing_update.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_backing_asg_has_discovery_tags_and_follows_the_nodegroup(aws: AwsEmulator, eks: Any) -> None:
    seeded = _gpu_group(aws)
    autoscaling = aws.client("autoscaling", REGION)
    ec2 = aws.client("ec2", REGION)

    asg_name = _describe(eks)["resources"]["autoScalingGroups"][0]["name"]
    asg = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    tags = {t["Key"]: t["Value"] for t in asg["Tags"]}

    assert asg_name == seeded.asg_name
    assert asg_name.startswith("eks-gpu-a10g-")
    assert seeded.arn.endswith(asg_name.removeprefix("eks-gpu-a10g-"))  # same uuid as the node group ARN
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/ml"] == "owned"
    assert tags["eks:cluster-name"] == "ml"
    assert tags["eks:nodegroup-name"] == "gpu-a10g"
    assert (asg["MinSize"], asg["DesiredCapacity"], asg["MaxSize"]) == (0, 2, 4)
    assert len(asg["Instances"]) == 2
    running = ec2.describe_instances(Filters=[{"Name": "tag:eks:nodegroup-name", "Values": ["gpu-a10g"]}])
    types = [i["InstanceType"] for r in running["Reservations"] for i in r["Instances"]]
    assert types == ["g5.xlarge", "g5.xlarge"]

    _scale(eks, 0, 0, 1)
    unchanged = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    assert unchanged["DesiredCapacity"] == 2  # not before the update completes
    aws.eks.finish_now()
    asg = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"][0]
    assert (asg["MinSize"], asg["DesiredCapacity"], asg["MaxSize"]) == (0, 0, 1)
    assert asg["Instances"] == []


def test_discovery_tags_can_be_removed_and_restored(aws: AwsEmulator) -> None:
    seeded = _gpu_group(aws)
    autoscaling = aws.client("autoscaling", REGION)
    discovery = [
        {"ResourceId": seeded.asg_name, "ResourceType": "auto-scaling-group", "Key": key}
        for key in ("k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/ml")
    ]

    autoscaling.delete_tags(Tags=discovery)
    filters = [{"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/enabled"]}]
    hidden = autoscaling.describe_auto_scaling_groups(Filters=filters)["AutoScalingGroups"]
    autoscaling.create_or_update_tags(
        Tags=[
            {**discovery[0], "Value": "true", "PropagateAtLaunch": True},
            {**discovery[1], "Value": "owned", "PropagateAtLaunch": True},
        ]
    )
    found = autoscaling.describe_auto_scaling_groups(Filters=filters)["AutoScalingGroups"]

    assert hidden == []
    assert [g["AutoScalingGroupName"] for g in found] == [seeded.asg_name]
    assert aws.iam_actions() >= {"autoscaling:DeleteTags", "autoscaling:CreateOrUpdateTags"}


def test_nodegroup_reports_desired_changed_by_the_cluster_autoscaler(aws: AwsEmulator, eks: Any) -> None:
    seeded = _gpu_group(aws, min_size=0, desired_size=0, max_size=3)
    autoscaling = aws.client("autoscaling", REGION)

    autoscaling.set_desired_capacity(AutoScalingGroupName=seeded.asg_name, DesiredCapacity=2)

    assert _describe(eks)["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 3}


def test_nodegroup_tags(aws: AwsEmulator, eks: Any) -> None:
    seeded = _gpu_group(aws)

    eks.tag_resource(resourceArn=seeded.arn, tags={"gpu-jobs/original-size": "0-2-4", "owner": "ml"})
    eks.untag_resource(resourceArn=seeded.arn, tagKeys=["team"])
    listed = eks.list_tags_for_resource(resourceArn=seeded.arn)["tags"]

    assert listed == {"gpu-jobs/original-size": "0-2-4", "owner": "ml"}
    assert _describe(eks)["tags"] == listed
    missing = seeded.arn.replace("gpu-a10g", "gone")
    with pytest.raises(ClientError) as not_found:
        eks.list_tags_for_resource(resourceArn=missing)
    assert not_found.value.response["Error"]["Code"] == "NotFoundException"


def test_cluster_tags_are_still_moto_s(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    cluster_arn = eks.describe_cluster(name="ml")["cluster"]["arn"]

    eks.tag_resource(resourceArn=cluster_arn, tags={"env": "prod"})

    assert eks.list_tags_for_resource(resourceArn=cluster_arn)["tags"] == {"env": "prod"}


def test_nodegroup_created_through_the_api_gets_a_backing_asg(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)

    eks.create_nodegroup(
        clusterName="ml",
        nodegroupName="p4d",
        nodeRole="arn:aws:iam::123456789012:role/eks-node-role",
        subnets=["subnet-1"],
        scalingConfig={"minSize": 0, "desiredSize": 1, "maxSize": 2},
        instanceTypes=["p4d.24xlarge"],
    )

    asg_name = eks.describe_nodegroup(clusterName="ml", nodegroupName="p4d")["nodegroup"]["resources"][
        "autoScalingGroups"
    ][0]["name"]
    asg = aws.client("autoscaling", REGION).describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    assert asg["AutoScalingGroups"][0]["DesiredCapacity"] == 1


def test_seeding_an_invalid_nodegroup_fails_loudly(aws: AwsEmulator) -> None:
    with pytest.raises(ValueError, match="can't be less than 1"):
        aws.add_eks_nodegroup(REGION, "ml", "bad", 0, 0, 0)
    with pytest.raises(ValueError, match="unknown EC2 instance type"):
        aws.add_eks_nodegroup(REGION, "ml", "bad", 0, 0, 1, instance_types=["g5.huge"])


def test_deleting_a_nodegroup_removes_its_asg_and_instances(aws: AwsEmulator, eks: Any) -> None:
    seeded = _gpu_group(aws)
    autoscaling = aws.client("autoscaling", REGION)
    ec2 = aws.client("ec2", REGION)

    eks.delete_nodegroup(clusterName="ml", nodegroupName="gpu-a10g")

    assert autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[seeded.asg_name])["AutoScalingGroups"] == []
    running = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    assert running["Reservations"] == []


# --- node groups from a launch template ----------------------------------------------------------------------

CUSTOM_AMI = "ami-0123456789abcdef0"


def _asg_instance_types(aws: AwsEmulator, asg_name: str) -> list[str]:
    found = aws.client("autoscaling", REGION).describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
    return [i["InstanceType"] for i in found["AutoScalingGroups"][0]["Instances"]]


def test_seeded_launch_template_nodegroup_is_described_as_eks_does(aws: AwsEmulator, eks: Any) -> None:
    seeded = aws.add_eks_nodegroup(
        REGION, "ml", "gpu-a10g", 0, 2, 4, launch_template={"InstanceType": "p4d.24xlarge", "ImageId": CUSTOM_AMI}
    )

    group = _describe(eks)

    # moto alone would say t3.medium, AL2_x86_64 and 20 GiB.
    assert group.get("instanceTypes") is None
    assert group["amiType"] == "CUSTOM"
    assert group.get("diskSize") is None
    assert group["launchTemplate"]["id"] == seeded.launch_template_id
    assert group["launchTemplate"]["version"] == "1"  # EKS pins the default version when none is given
    assert _asg_instance_types(aws, seeded.asg_name) == ["p4d.24xlarge", "p4d.24xlarge"]


def test_created_launch_template_nodegroup_is_described_as_eks_does(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)  # the cluster
    ec2 = aws.client("ec2", REGION)
    template = ec2.create_launch_template(LaunchTemplateName="gpu", LaunchTemplateData={"InstanceType": "g5.xlarge"})
    ec2.create_launch_template_version(
        LaunchTemplateName="gpu", LaunchTemplateData={"InstanceType": "g6.xlarge", "ImageId": CUSTOM_AMI}
    )

    created = eks.create_nodegroup(
        clusterName="ml",
        nodegroupName="lt",
        nodeRole="arn:aws:iam::123456789012:role/eks-node-role",
        subnets=["subnet-1"],
        scalingConfig={"minSize": 0, "desiredSize": 1, "maxSize": 2},
        launchTemplate={"name": "gpu", "version": "$Latest"},
    )["nodegroup"]
    described = eks.describe_nodegroup(clusterName="ml", nodegroupName="lt")["nodegroup"]

    for group in (created, described):
        assert group.get("instanceTypes") is None
        assert group["amiType"] == "CUSTOM"  # version 2 sets an ImageId
        assert group.get("diskSize") is None
        assert group["launchTemplate"] == {
            "name": "gpu",
            "id": template["LaunchTemplate"]["LaunchTemplateId"],
            "version": "$Latest",
        }
    assert _asg_instance_types(aws, described["resources"]["autoScalingGroups"][0]["name"]) == ["g6.xlarge"]


def test_launch_template_without_instance_type_takes_the_request_s(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    aws.add_launch_template(REGION, "plain", {"KeyName": "ops"})

    eks.create_nodegroup(
        clusterName="ml",
        nodegroupName="lt",
        nodeRole="arn:aws:iam::123456789012:role/eks-node-role",
        subnets=["subnet-1"],
        scalingConfig={"minSize": 0, "desiredSize": 1, "maxSize": 2},
        instanceTypes=["g5.2xlarge"],
        amiType="AL2_x86_64_GPU",
        launchTemplate={"name": "plain"},
    )
    group = eks.describe_nodegroup(clusterName="ml", nodegroupName="lt")["nodegroup"]

    assert group["instanceTypes"] == ["g5.2xlarge"]
    assert group["amiType"] == "AL2_x86_64_GPU"  # no ImageId in the template: EKS's AMI
    assert group.get("diskSize") is None
    assert _asg_instance_types(aws, group["resources"]["autoScalingGroups"][0]["name"]) == ["g5.2xlarge"]


def test_instance_type_in_both_template_and_request_is_refused(aws: AwsEmulator, eks: Any) -> None:
    _gpu_group(aws)
    aws.add_launch_template(REGION, "gpu", {"InstanceType": "g5.xlarge"})

    with pytest.raises(ClientError) as refused:
        eks.create_nodegroup(
            clusterName="ml",
            nodegroupName="lt",
            nodeRole="arn:aws:iam::123456789012:role/eks-node-role",
            subnets=["subnet-1"],
            instanceTypes=["g5.xlarge"],
            launchTemplate={"name": "gpu"},
        )

    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"
    assert eks.list_nodegroups(clusterName="ml")["nodegroups"] == ["gpu-a10g"]
    with pytest.raises(ValueError, match="both the launch template and the nodegroup request"):
        aws.add_eks_nodegroup(REGION, "ml", "bad", 0, 0, 1, instance_types=["g5.xlarge"], launch_template="gpu")


def test_nodegroups_can_share_a_seeded_launch_template(aws: AwsEmulator, eks: Any) -> None:
    first = aws.add_eks_nodegroup(REGION, "ml", "a", 0, 1, 2, launch_template={"InstanceType": "g5.xlarge"})
    second = aws.add_eks_nodegroup(REGION, "ml", "b", 0, 1, 2, launch_template=first.launch_template_id)

    group = eks.describe_nodegroup(clusterName="ml", nodegroupName="b")["nodegroup"]

    assert second.launch_template_id == first.launch_template_id
    assert group["launchTemplate"]["id"] == first.launch_template_id
    assert group["amiType"] != "CUSTOM"  # the template sets no ImageId
    assert _asg_instance_types(aws, second.asg_name) == ["g5.xlarge"]
