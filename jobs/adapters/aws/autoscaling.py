"""Auto Scaling groups, for both AWS node-group kinds: a plain ASG is one, and an EKS managed node group is backed
by one. Its reads (sizes, instances, why a launch failed) and the Cluster Autoscaler's discovery tags, which the
job removes at night and puts back in the morning (for EKS: on the group backing the node group).

Not an adapter itself: ``aws.eks`` and ``aws.asg`` are, and each declares the actions of this module it calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.adapters.aws.session import AwsClients, call, paged
from jobs.core.nodegroups import SetAutoscaling, SetSize
from jobs.errors import Invalid, NotFound
from jobs.labels import CA_ENABLED_TAG, CA_TAG_PREFIX

#: The reads and the tag writes of this module, for the PERMISSIONS of the adapters that use it.
READS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeTags",
    "autoscaling:DescribeScalingActivities",
)
TAG_WRITES = ("autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags")

ASG_RESOURCE_TYPE = "auto-scaling-group"
# A plain ASG's instances that count as launched (Pending ones are booting, not missing).
_LAUNCHED_STATES = ("Pending", "InService")


@dataclass(frozen=True)
class Asg:
    region: str
    name: str


def is_discovery_tag(key: str, cluster: str | None = None) -> bool:
    """The Cluster Autoscaler's auto-discovery tag keys: ``.../enabled`` and ``.../<cluster>``.

    ``k8s.io/cluster-autoscaler/node-template/...`` tags are not discovery tags (the autoscaler needs them to
    scale a group up from zero), so they are never touched.
    """
    if key == CA_ENABLED_TAG:
        return True
    if cluster is not None:
        return key == CA_TAG_PREFIX + cluster
    rest = key.removeprefix(CA_TAG_PREFIX)
    return key.startswith(CA_TAG_PREFIX) and rest != "" and "/" not in rest


class AutoScaling:
    """Auto Scaling calls through the adapter's clients (thread-safe, as they are)."""

    def __init__(self, clients: AwsClients) -> None:
        self._clients = clients

    def describe(self, target: Asg) -> dict[str, Any]:
        autoscaling = self._clients.client("autoscaling", target.region)
        found = call(
            "DescribeAutoScalingGroups",
            autoscaling.describe_auto_scaling_groups,
            AutoScalingGroupNames=[target.name],
        )["AutoScalingGroups"]
        if not found:
            raise NotFound(
                f"Auto Scaling group {target.name} not found in {target.region}",
                operation="DescribeAutoScalingGroups",
                code="NotFound",
            )
        group: dict[str, Any] = found[0]
        return group

    def failed_launch(self, target: Asg) -> str | None:
        """Why the group's latest launch failed (InsufficientInstanceCapacity, VcpuLimitExceeded, ...), in Auto
        Scaling's words; None when the latest launch succeeded or is still going (missing nodes may be booting)."""
        autoscaling = self._clients.client("autoscaling", target.region)
        activities = call(
            "DescribeScalingActivities",
            autoscaling.describe_scaling_activities,
            AutoScalingGroupName=target.name,
            MaxRecords=10,
        )["Activities"]
        for activity in activities:  # newest first
            if not str(activity.get("Description", "")).startswith("Launching"):
                continue
            if activity.get("StatusCode") in ("Failed", "Cancelled"):
                return str(activity.get("StatusMessage") or activity.get("Description"))
            return None
        return None

    def discovery_tags(
        self, asg: Asg, cluster: str | None, keys: Iterable[str] = ()
    ) -> tuple[dict[str, str], frozenset[str]]:
        """The ASG's discovery tags, through ``DescribeTags`` filtered by group (and by key when known)."""
        autoscaling = self._clients.client("autoscaling", asg.region)
        filters: list[dict[str, Any]] = [{"Name": ASG_RESOURCE_TYPE, "Values": [asg.name]}]
        if keys:
            filters.append({"Name": "key", "Values": list(keys)})
        tags = paged("DescribeTags", autoscaling.describe_tags, "Tags", "NextToken", Filters=filters)
        return discovery(tags, cluster)

    def set_autoscaling(self, asg: Asg, step: SetAutoscaling, cluster: str | None) -> None:
        """The Cluster Autoscaler on (its recorded discovery tags back) or off (its discovery tags removed)."""
        if step.enabled:
            self._create_tags(asg, step.tags, step.propagate, cluster)
        else:
            self._delete_discovery_tags(asg, cluster)

    def _create_tags(self, asg: Asg, tags: Mapping[str, str], propagate: frozenset[str], cluster: str | None) -> None:
        if not tags:
            raise Invalid(
                f"cannot re-enable the Cluster Autoscaler on {asg.name}: no discovery tags were recorded",
                operation="CreateOrUpdateTags",
                code="NoTags",
            )
        foreign = sorted(k for k in tags if not is_discovery_tag(k, cluster))
        if foreign:
            # Only the autoscaler's discovery tags are this job's business; anything else is a corrupt record.
            raise Invalid(
                f"refusing to set non-discovery tags {foreign} on {asg.name}",
                operation="CreateOrUpdateTags",
                code="NotDiscoveryTag",
            )
        autoscaling = self._clients.client("autoscaling", asg.region)
        call(
            "CreateOrUpdateTags",
            autoscaling.create_or_update_tags,
            Tags=[
                {
                    "ResourceId": asg.name,
                    "ResourceType": ASG_RESOURCE_TYPE,
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": key in propagate,
                }
                for key, value in sorted(tags.items())
            ],
        )

    def _delete_discovery_tags(self, asg: Asg, cluster: str | None) -> None:
        # Read first: a plain ASG's cluster tag key is unknown, and deleting nothing should send nothing.
        present, _ = self.discovery_tags(asg, cluster)
        if not present:
            return
        autoscaling = self._clients.client("autoscaling", asg.region)
        call(
            "DeleteTags",
            autoscaling.delete_tags,
            Tags=[
                {"ResourceId": asg.name, "ResourceType": ASG_RESOURCE_TYPE, "Key": key, "Value": value}
                for key, value in sorted(present.items())
            ],
        )


def no_power_state(group: str, what: str) -> Invalid:
    """The refusal of a power-state step (AKS ``strategy: stop``) on a kind that has none."""
    return Invalid(f"{group}: power state is not a concept of {what}", operation="SetPower", code="Unsupported")


def launched(asg: Mapping[str, Any]) -> int:
    """An ASG's instances that exist or are booting (not those terminating)."""
    return sum(1 for i in asg.get("Instances") or [] if str(i.get("LifecycleState", "")).startswith(_LAUNCHED_STATES))


def check_sizes(step: SetSize, *, floor_max: int, where: str) -> None:
    """The provider's size rules, checked before any request is sent."""
    if step.max < floor_max:
        raise Invalid(
            f"{where}: maxSize {step.max} is below the provider's floor of {floor_max}",
            operation="SetSize",
            code="MaxBelowFloor",
        )
    if not 0 <= step.min <= step.desired <= step.max:
        raise Invalid(
            f"{where}: needs 0 <= min <= desired <= max, got {step.min}/{step.desired}/{step.max}",
            operation="SetSize",
            code="SizesOutOfOrder",
        )


def discovery(tags: Iterable[Mapping[str, Any]], cluster: str | None) -> tuple[dict[str, str], frozenset[str]]:
    """The Cluster Autoscaler discovery tags among ``tags``, and which of them propagate at launch."""
    found = {str(t["Key"]): str(t.get("Value", "")) for t in tags if is_discovery_tag(str(t["Key"]), cluster)}
    propagated = frozenset(str(t["Key"]) for t in tags if str(t["Key"]) in found and t.get("PropagateAtLaunch"))
    return found, propagated
