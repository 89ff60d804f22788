"""Plain EC2 Auto Scaling groups for the nodegroups job (provider kind ``asg``). Sizes go through
``autoscaling:UpdateAutoScalingGroup`` (synchronous); the Cluster Autoscaler is switched off and on by removing and
re-creating its discovery tags on the group (``aws.autoscaling``). A plain ASG's nodes carry no provider label: the
policy's nodeSelector picks them."""

from __future__ import annotations

from jobs.adapters.aws.autoscaling import (
    READS,
    TAG_WRITES,
    Asg,
    AutoScaling,
    check_sizes,
    discovery,
    launched,
    no_power_state,
)
from jobs.adapters.aws.session import AwsClients, call
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetPower, SetSize, Step, cloud_step
from jobs.core.policy import AwsLocator, NodeGroup
from jobs.core.providers import PROVIDERS
from jobs.errors import Invalid

#: Every API action this module calls, for checking the shipped IAM policy against the code.
PERMISSIONS = Permissions("aws", (*READS, "autoscaling:UpdateAutoScalingGroup", *TAG_WRITES))


class AsgNodeGroups:
    """``NodeGroupCloud`` for plain Auto Scaling groups. Thread-safe, as boto3's clients are."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._clients = AwsClients(settings)
        self._asgs = AutoScaling(self._clients)

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        # The group reports its live desired size itself: live_size needs no extra read.
        target = _target(group)
        asg = self._asgs.describe(target)
        tags, propagated = discovery(asg.get("Tags") or [], cluster=None)
        desired = int(asg["DesiredCapacity"])
        missing = max(0, desired - launched(asg))
        return GroupConfig(
            min=int(asg["MinSize"]),
            desired=desired,
            max=int(asg["MaxSize"]),
            autoscaling=bool(tags),
            autoscaler_tags=tags,
            propagated_tags=propagated,
            # Why launches failed is only in the scaling activities: read them only when instances are missing.
            shortfall=self._asgs.failed_launch(target) if missing else None,
            missing=missing,
        )

    def apply(self, group: NodeGroup, step: Step) -> None:
        step = cloud_step(step)
        target = _target(group)
        if isinstance(step, SetPower):
            raise no_power_state(group.name, "Auto Scaling groups")
        if isinstance(step, SetSize):
            self._resize(target, step)
            return
        self._asgs.set_autoscaling(target, step, cluster=None)  # a plain ASG's cluster tag key is not known

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        return []  # a plain ASG belongs to no cluster the cloud can list groups of

    def _resize(self, target: Asg, step: SetSize) -> None:
        floor = PROVIDERS["asg"].min_max_size  # a plain ASG may be 0/0/0
        check_sizes(step, floor_max=floor, where=f"Auto Scaling group {target.name}")
        client = self._clients.client("autoscaling", target.region)
        call(
            "UpdateAutoScalingGroup",
            client.update_auto_scaling_group,
            AutoScalingGroupName=target.name,
            MinSize=step.min,
            DesiredCapacity=step.desired,
            MaxSize=step.max,
        )


def _target(group: NodeGroup) -> Asg:
    locator = group.locator
    if not isinstance(locator, AwsLocator) or not locator.auto_scaling_group:
        raise Invalid(f"{group.name}: not an Auto Scaling group (needs aws.autoScalingGroup)", code="BadLocator")
    return Asg(locator.region, locator.auto_scaling_group)
