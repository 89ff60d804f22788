"""Scale-ups EC2 cannot serve, through the real boto3 clients: stockouts and vCPU quotas behind Auto Scaling and EKS.

Auto Scaling accepts the desired capacity and records a Failed scaling activity; an EKS update still ends
Successful while its node group goes DEGRADED with an ``AsgInstanceLaunchFailures`` health issue.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.emulators.aws import AwsEmulator

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
ZONES = ["eu-west-1a", "eu-west-1b"]
G_QUOTA = "L-DB2E81BA"  # Running On-Demand G and VT instances, vCPUs


def _asg(autoscaling: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][
        0
    ]
    return found


def test_a_stockout_accepts_the_desired_capacity_and_fails_the_launches(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "batch", 0, 0, 4, instance_type="g6.12xlarge")
    aws.stock_out("g6.12xlarge", ZONES)
    autoscaling = aws.client("autoscaling", REGION)

    autoscaling.update_auto_scaling_group(AutoScalingGroupName="batch", DesiredCapacity=2)
    group = _asg(autoscaling, "batch")
    activities = autoscaling.describe_scaling_activities(AutoScalingGroupName="batch")["Activities"]

    assert (group["DesiredCapacity"], group["Instances"]) == (2, [])
    assert activities[0]["StatusCode"] == "Failed"
    assert activities[0]["StatusMessage"].startswith(
        "We currently do not have sufficient g6.12xlarge capacity in the Availability Zone you requested (eu-west-1"
    )
    assert activities[0]["StatusMessage"].endswith("Launching EC2 instance failed.")
    assert activities[0]["Description"].startswith("Launching a new EC2 instance.  Status Reason: We currently")


def test_one_zone_out_of_stock_launches_in_the_other(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "batch", 0, 0, 4, instance_type="g6.12xlarge")
    aws.stock_out("g6.12xlarge", ZONES[:1])
    autoscaling = aws.client("autoscaling", REGION)

    autoscaling.update_auto_scaling_group(AutoScalingGroupName="batch", DesiredCapacity=2)
    group = _asg(autoscaling, "batch")

    assert {i["AvailabilityZone"] for i in group["Instances"]} == {"eu-west-1b"}
    assert len(group["Instances"]) == 2


def test_auto_scaling_keeps_trying_and_delivers_once_capacity_is_back(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "batch", 0, 0, 4, instance_type="g6.12xlarge")
    aws.stock_out("g6.12xlarge", ZONES)
    autoscaling = aws.client("autoscaling", REGION)
    autoscaling.update_auto_scaling_group(AutoScalingGroupName="batch", DesiredCapacity=2)

    aws.restock()
    group = _asg(autoscaling, "batch")
    activities = autoscaling.describe_scaling_activities(AutoScalingGroupName="batch", MaxRecords=2)["Activities"]

    assert len(group["Instances"]) == 2
    assert [a["StatusCode"] for a in activities] == ["Successful", "Successful"]


def test_the_g_vcpu_quota_refuses_launches_past_it(aws: AwsEmulator) -> None:
    aws.add_asg(REGION, "batch", 0, 0, 4, instance_type="g6.12xlarge")  # 48 vCPUs each
    aws.set_quota(REGION, G_QUOTA, 48)
    autoscaling = aws.client("autoscaling", REGION)

    autoscaling.update_auto_scaling_group(AutoScalingGroupName="batch", DesiredCapacity=2)
    group = _asg(autoscaling, "batch")
    failed = [
        a
        for a in autoscaling.describe_scaling_activities(AutoScalingGroupName="batch")["Activities"]
        if a["StatusCode"] == "Failed"
    ]

    assert len(group["Instances"]) == 1
    assert failed[0]["StatusMessage"].startswith(
        "You have requested more vCPU capacity than your current vCPU limit of 48 allows for the instance bucket"
    )


def test_an_eks_update_succeeds_while_its_node_group_goes_degraded(aws: AwsEmulator) -> None:
    seeded = aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 0, 4, instance_types=("g6.12xlarge",))
    aws.set_quota(REGION, G_QUOTA, 0)
    eks = aws.client("eks", REGION)

    update = eks.update_nodegroup_config(
        clusterName="ml", nodegroupName="gpu", scalingConfig={"minSize": 2, "desiredSize": 2, "maxSize": 4}
    )["update"]
    aws.eks.finish_now()
    status = eks.describe_update(name="ml", nodegroupName="gpu", updateId=update["id"])["update"]["status"]
    group = eks.describe_nodegroup(clusterName="ml", nodegroupName="gpu")["nodegroup"]

    assert status == "Successful"
    assert group["status"] == "DEGRADED"
    assert group["scalingConfig"]["desiredSize"] == 2
    [issue] = group["health"]["issues"]
    assert issue["code"] == "AsgInstanceLaunchFailures"
    assert issue["message"].startswith("Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested")
    assert issue["resourceIds"] == [seeded.asg_name]
    assert _asg(aws.client("autoscaling", REGION), seeded.asg_name)["Instances"] == []


def test_a_degraded_node_group_recovers_when_capacity_comes_back(aws: AwsEmulator) -> None:
    aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 0, 4, instance_types=("g6.12xlarge",))
    aws.stock_out("g6.12xlarge", ZONES)
    eks = aws.client("eks", REGION)
    eks.update_nodegroup_config(
        clusterName="ml", nodegroupName="gpu", scalingConfig={"minSize": 1, "desiredSize": 1, "maxSize": 4}
    )
    aws.eks.finish_now()
    degraded = eks.describe_nodegroup(clusterName="ml", nodegroupName="gpu")["nodegroup"]

    aws.restock()
    healthy = eks.describe_nodegroup(clusterName="ml", nodegroupName="gpu")["nodegroup"]

    assert degraded["status"] == "DEGRADED"
    assert (
        "InsufficientInstanceCapacity - We currently do not have sufficient g6.12xlarge capacity"
        in (degraded["health"]["issues"][0]["message"])
    )
    assert (healthy["status"], healthy["health"]["issues"]) == ("ACTIVE", [])


def test_an_eks_update_can_end_failed_with_errors(aws: AwsEmulator) -> None:
    seeded = aws.add_eks_nodegroup(REGION, "ml", "gpu", 0, 0, 4, instance_types=("g6.12xlarge",))
    aws.eks.fail_next_update("InsufficientFreeAddresses")
    eks = aws.client("eks", REGION)

    update = eks.update_nodegroup_config(
        clusterName="ml", nodegroupName="gpu", scalingConfig={"minSize": 1, "desiredSize": 1, "maxSize": 4}
    )["update"]
    aws.eks.finish_now()
    done = eks.describe_update(name="ml", nodegroupName="gpu", updateId=update["id"])["update"]
    group = eks.describe_nodegroup(clusterName="ml", nodegroupName="gpu")["nodegroup"]

    assert done["status"] == "Failed"
    assert done["errors"][0]["errorCode"] == "InsufficientFreeAddresses"
    assert done["errors"][0]["errorMessage"].startswith("One or more of the subnets associated with your cluster")
    assert done["errors"][0]["resourceIds"] == [seeded.asg_name]
    assert (group["status"], group["scalingConfig"]["desiredSize"]) == ("ACTIVE", 0)
