"""AWS node groups for the nodegroups job: EKS managed node groups and plain Auto Scaling groups.

One class serves both kinds (``kind`` tells them apart by locator). Sizes go through
``eks:UpdateNodegroupConfig`` (asynchronous, followed to completion with ``DescribeUpdate``) or
``autoscaling:UpdateAutoScalingGroup`` (synchronous). The Cluster Autoscaler is switched off and on by removing and
re-creating its discovery tags on the Auto Scaling group (for EKS: the group backing the node group).

Clients, calls and paging come from ``aws.session``, error codes from ``aws.errors``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobs.adapters.aws.session import AwsClients, call, paged
from jobs.adapters.permissions import Permissions
from jobs.adapters.polling import poll_until
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetPower, SetSize, Step
from jobs.core.policy import AwsLocator, NodeGroup
from jobs.core.providers import PROVIDERS, ProviderKind
from jobs.errors import CloudError, Invalid, NotDelivered, NotFound, Unavailable
from jobs.labels import CA_ENABLED_TAG, CA_TAG_PREFIX, EKS_NODEGROUP_LABEL

#: Every API action this module calls, for checking the shipped IAM policy against the code.
PERMISSIONS = Permissions(
    "aws",
    (
        "eks:DescribeNodegroup",
        "eks:UpdateNodegroupConfig",
        "eks:DescribeUpdate",
        "eks:ListNodegroups",
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:DescribeTags",
        "autoscaling:DescribeScalingActivities",
        "autoscaling:UpdateAutoScalingGroup",
        "autoscaling:CreateOrUpdateTags",
        "autoscaling:DeleteTags",
        "ec2:DescribeLaunchTemplateVersions",
    ),
)

ASG_RESOURCE_TYPE = "auto-scaling-group"

# EKS amiTypes with GPU drivers: AL2_x86_64_GPU, AL2023_x86_64_NVIDIA, BOTTLEROCKET_x86_64_NVIDIA...
_GPU_AMI = re.compile(r"GPU|NVIDIA", re.IGNORECASE)
# GPU instance families: g4dn, g5, g5g, g6e, gr6, p4d, p5... (inf/trn are accelerators, not GPUs).
_GPU_FAMILY = re.compile(r"^(g|gr|p)\d")

# EKS node group health issue codes that mean nodes could not be launched (API reference, ``Issue.code``).
LAUNCH_ISSUES = frozenset(
    {
        "AsgInstanceLaunchFailures",
        "InsufficientFreeAddresses",
        "Ec2InstanceTypeDoesNotExist",
        "Ec2LaunchTemplateNotFound",
        "Ec2LaunchTemplateVersionMismatch",
        "Ec2SubnetInvalidConfiguration",
        "Ec2SubnetNotFound",
        "Ec2SecurityGroupNotFound",
        "IamInstanceProfileNotFound",
        "InstanceLimitExceeded",
        "NodeCreationFailure",
        "AutoScalingGroupNotFound",
    }
)
# DescribeUpdate ``errors[].errorCode`` values of an update that could not bring nodes.
_UPDATE_DELIVERY_ERRORS = frozenset(
    {"NodeCreationFailure", "InsufficientFreeAddresses", "IpNotAvailable", "EniLimitReached", "SubnetNotFound"}
)
# DescribeUpdate statuses after which the update changes nothing more.
_UPDATE_ENDED = frozenset({"Successful", "Failed", "Cancelled"})
# A plain ASG's instances that count as launched (Pending ones are booting, not missing).
_LAUNCHED_STATES = ("Pending", "InService")

#: The instance type reported for a node group whose type cannot be found out (see ``discover``).
UNKNOWN_INSTANCE_TYPE = "unknown"
# DescribeAutoScalingGroups takes at most this many names per request.
_ASG_NAMES_PER_CALL = 50

_TemplateKey = tuple[str, str, str]  # (region, "id" or "name", value)


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


@dataclass(frozen=True)
class _Eks:
    region: str
    cluster: str
    nodegroup: str


@dataclass(frozen=True)
class _Asg:
    region: str
    name: str


class AwsNodeGroups:
    """``NodeGroupCloud`` for AWS. Thread-safe: clients are created once per (service, region) under a lock."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._clients = AwsClients(settings)
        self._lock = threading.Lock()
        # What describe learnt and apply/discover reuse, so they need no extra reads.
        self._backing_asg: dict[_Eks, str] = {}  # the ASG EKS created for a node group

    # --- NodeGroupCloud -------------------------------------------------------------------------------------

    def kind(self, group: NodeGroup) -> ProviderKind:
        return "eks" if isinstance(self._target(group), _Eks) else "asg"

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        # Both kinds report their live desired size on the group itself: live_size needs no extra read.
        target = self._target(group)
        if isinstance(target, _Eks):
            config = self._describe_eks(target)
            if live_size and config.desired:
                # EKS raises a health issue minutes after launches start failing; until then only the backing
                # ASG's instances tell that nodes are missing (one more read, only when the size matters).
                backing = self._asg_of(target)
                missing = max(0, config.desired - _launched(self._describe_auto_scaling_group(backing)))
                if missing and config.shortfall is None:
                    config = replace(config, shortfall=self._failed_launch(backing))
                config = replace(config, missing=missing)
            return config
        return self._describe_asg(target)

    def apply(self, group: NodeGroup, step: Step) -> None:
        target = self._target(group)
        if isinstance(step, SetPower):
            raise Invalid(
                f"{group.name}: power state is not a concept of EKS node groups or Auto Scaling groups",
                operation="SetPower",
                code="Unsupported",
            )
        if isinstance(step, SetSize):
            if isinstance(target, _Eks):
                self._resize_eks(target, step)
            else:
                self._resize_asg(target, step)
            return
        asg = self._asg_of(target)
        cluster = target.cluster if isinstance(target, _Eks) else None
        if step.enabled:
            self._create_tags(asg, step.tags, step.propagate, cluster)
        else:
            self._delete_discovery_tags(asg, cluster)

    def node_label(self, group: NodeGroup) -> tuple[str, str] | None:
        target = self._target(group)
        if isinstance(target, _Eks):
            return (EKS_NODEGROUP_LABEL, target.nodegroup)
        return None  # a plain ASG's nodes carry no provider label: the policy's nodeSelector (every key) picks them

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        clusters = sorted({(t.region, t.cluster) for t in map(self._target, groups) if isinstance(t, _Eks)})
        described: list[tuple[str, str, dict[str, Any]]] = []
        for region, cluster in clusters:
            eks = self._clients.client("eks", region)
            names = paged("ListNodegroups", eks.list_nodegroups, "nodegroups", "nextToken", clusterName=cluster)
            for name in names:
                nodegroup = call("DescribeNodegroup", eks.describe_nodegroup, clusterName=cluster, nodegroupName=name)
                described.append((region, cluster, nodegroup["nodegroup"]))
        types = self._instance_types(described)
        found: list[CloudGroup] = []
        for index, (region, cluster, facts) in enumerate(described):
            known = types[index]
            gpu_types = [t for t in known or [] if _GPU_FAMILY.match(t.split(".", 1)[0])]
            # A type that cannot be found out is reported: a GPU group left running all night costs more than
            # one line too many in the report.
            if known is None or gpu_types or _GPU_AMI.search(str(facts.get("amiType", ""))):
                found.append(
                    CloudGroup(
                        cloud="aws",
                        locator={"region": region, "cluster": cluster, "nodegroup": str(facts["nodegroupName"])},
                        instance_type=",".join(gpu_types or known or [UNKNOWN_INSTANCE_TYPE]),
                    )
                )
        return found

    def _instance_types(self, described: list[tuple[str, str, dict[str, Any]]]) -> list[list[str] | None]:
        """Each described node group's instance types, or None if they cannot be found out.

        EKS fills ``instanceTypes`` only for node groups without a launch template; the others take the type from
        their template version, read with one ``DescribeLaunchTemplateVersions`` per template (every version its
        node groups use at once). A template without ``InstanceType`` (e.g. one using instance requirements) or one
        since deleted leaves the live instances of the backing ASG (one batched read per region); a group with
        none running (scaled to zero) is unknown.
        """
        types: list[list[str] | None] = []
        wanted: dict[_TemplateKey, set[str]] = {}
        for region, _, facts in described:
            listed = [str(t) for t in facts.get("instanceTypes") or []]
            template = _template_of(region, facts)
            types.append(listed or None)
            if not listed and template is not None:
                wanted.setdefault(template[0], set()).add(template[1])
        from_templates = {key: self._template_types(key, versions) for key, versions in sorted(wanted.items())}
        for index, (region, _, facts) in enumerate(described):
            template = _template_of(region, facts)
            if types[index] is None and template is not None:
                instance_type = from_templates[template[0]].get(template[1])
                types[index] = [instance_type] if instance_type else None
        self._types_from_asgs(described, types)
        return types

    def _template_types(self, key: _TemplateKey, versions: set[str]) -> dict[str, str | None]:
        """Version ("$Latest", "$Default", "3") -> the InstanceType it launches, None if it sets none."""
        region, by, value = key
        ec2 = self._clients.client("ec2", region)
        selector = {"LaunchTemplateId": value} if by == "id" else {"LaunchTemplateName": value}
        try:
            found = paged(
                "DescribeLaunchTemplateVersions",
                ec2.describe_launch_template_versions,
                "LaunchTemplateVersions",
                "NextToken",
                Versions=sorted(versions),
                **selector,
            )
        except NotFound:
            return {}  # deleted template or version: its groups fall back to their instances
        data = {int(v["VersionNumber"]): v.get("LaunchTemplateData") or {} for v in found}
        default = next((int(v["VersionNumber"]) for v in found if v.get("DefaultVersion")), None)
        resolved: dict[str, str | None] = {}
        for version in versions:
            number: int | None
            if version.lower() == "$latest":
                number = max(data, default=None)  # asked for with the rest, so the highest number returned
            elif version.lower() == "$default":
                number = default
            else:
                number = int(version) if version.isdigit() else None
            instance_type = data.get(number, {}).get("InstanceType") if number is not None else None
            resolved[version] = str(instance_type) if instance_type else None
        return resolved

    def _types_from_asgs(self, described: list[tuple[str, str, dict[str, Any]]], types: list[list[str] | None]) -> None:
        """Fill the unknown entries of ``types`` from the instances of the groups' backing ASGs."""
        asgs: dict[str, dict[str, int]] = {}  # region -> ASG name -> index in described
        for index, (region, _, facts) in enumerate(described):
            names = (facts.get("resources") or {}).get("autoScalingGroups") or []
            if types[index] is None and names:
                asgs.setdefault(region, {})[str(names[0]["name"])] = index
        for region, wanted in sorted(asgs.items()):
            autoscaling = self._clients.client("autoscaling", region)
            names = sorted(wanted)
            for start in range(0, len(names), _ASG_NAMES_PER_CALL):
                found = paged(
                    "DescribeAutoScalingGroups",
                    autoscaling.describe_auto_scaling_groups,
                    "AutoScalingGroups",
                    "NextToken",
                    AutoScalingGroupNames=names[start : start + _ASG_NAMES_PER_CALL],
                )
                for asg in found:
                    running = sorted(
                        {str(i["InstanceType"]) for i in asg.get("Instances") or [] if i.get("InstanceType")}
                    )
                    owner = wanted.get(str(asg["AutoScalingGroupName"]))
                    if owner is not None and running:
                        types[owner] = running

    # --- EKS --------------------------------------------------------------------------------------------------

    def _describe_eks(self, target: _Eks) -> GroupConfig:
        eks = self._clients.client("eks", target.region)
        facts = call(
            "DescribeNodegroup", eks.describe_nodegroup, clusterName=target.cluster, nodegroupName=target.nodegroup
        )["nodegroup"]
        scaling = facts.get("scalingConfig") or {}
        asg = self._remember_backing_asg(target, facts)
        tags, propagated = self._discovery_tags(
            asg, target.cluster, keys=(CA_ENABLED_TAG, CA_TAG_PREFIX + target.cluster)
        )
        return GroupConfig(
            min=int(scaling.get("minSize", 0)),
            desired=int(scaling.get("desiredSize", 0)),
            max=int(scaling.get("maxSize", 0)),
            autoscaling=bool(tags),
            autoscaler_tags=tags,
            propagated_tags=propagated,
            busy=facts.get("status") == "UPDATING",
            shortfall=_launch_issues(facts),
        )

    def _remember_backing_asg(self, target: _Eks, facts: Mapping[str, Any]) -> _Asg:
        groups = (facts.get("resources") or {}).get("autoScalingGroups") or []
        if not groups:
            # EKS fills this in once the node group is created; without it there is nothing to tag.
            raise Unavailable(
                f"EKS node group {target.cluster}/{target.nodegroup} reports no backing Auto Scaling group yet",
                operation="DescribeNodegroup",
                code="NoAutoScalingGroup",
            )
        name = str(groups[0]["name"])
        with self._lock:
            self._backing_asg[target] = name
        return _Asg(target.region, name)

    def _resize_eks(self, target: _Eks, step: SetSize) -> None:
        # EKS refuses maxSize 0 (the node group floor is 1); refuse here too, so the request is never sent.
        _check_sizes(
            step, floor_max=PROVIDERS["eks"].min_max_size, where=f"EKS node group {target.cluster}/{target.nodegroup}"
        )
        eks = self._clients.client("eks", target.region)
        update = call(
            "UpdateNodegroupConfig",
            eks.update_nodegroup_config,
            clusterName=target.cluster,
            nodegroupName=target.nodegroup,
            scalingConfig={"minSize": step.min, "desiredSize": step.desired, "maxSize": step.max},
        )["update"]
        self._follow_update(target, update)

    def _follow_update(self, target: _Eks, update: Mapping[str, Any]) -> None:
        """Poll ``DescribeUpdate`` until the update is Successful; raise if it failed or took too long."""
        eks = self._clients.client("eks", target.region)
        update_id = str(update["id"])
        where = f"EKS update {update_id} of {target.cluster}/{target.nodegroup}"

        def timed_out(last: Mapping[str, Any]) -> CloudError:
            return Unavailable(
                f"{where} still {last.get('status') or 'pending'} after {self._settings.operation_timeout_s:g} s",
                operation="DescribeUpdate",
                code="OperationTimeout",
            )

        def poll() -> Mapping[str, Any]:
            found: Mapping[str, Any] = call(
                "DescribeUpdate",
                eks.describe_update,
                name=target.cluster,
                nodegroupName=target.nodegroup,
                updateId=update_id,
            )["update"]
            return found

        final = poll_until(
            update,
            lambda u: str(u.get("status", "")) in _UPDATE_ENDED,
            poll,
            interval_s=self._settings.poll_interval_s,
            timeout_s=self._settings.operation_timeout_s,
            timed_out=timed_out,
            deadline=self._settings.deadline,
            what=where,
        )
        status = str(final.get("status", ""))
        if status == "Successful":
            return
        errors = "; ".join(f"{e.get('errorCode', '?')}: {e.get('errorMessage', '')}" for e in final.get("errors") or [])
        codes = {str(e.get("errorCode", "")) for e in final.get("errors") or []}
        kind: type[CloudError] = NotDelivered if codes & _UPDATE_DELIVERY_ERRORS else Invalid
        raise kind(
            f"{where} {status.lower()}: {errors or 'no details'}", operation="DescribeUpdate", code=f"Update{status}"
        )

    # --- plain Auto Scaling groups ---------------------------------------------------------------------------

    def _describe_asg(self, target: _Asg) -> GroupConfig:
        asg = self._describe_auto_scaling_group(target)
        tags, propagated = _discovery(asg.get("Tags") or [], cluster=None)
        desired = int(asg["DesiredCapacity"])
        missing = max(0, desired - _launched(asg))
        return GroupConfig(
            min=int(asg["MinSize"]),
            desired=desired,
            max=int(asg["MaxSize"]),
            autoscaling=bool(tags),
            autoscaler_tags=tags,
            propagated_tags=propagated,
            # Why launches failed is only in the scaling activities: read them only when instances are missing.
            shortfall=self._failed_launch(target) if missing else None,
            missing=missing,
        )

    def _failed_launch(self, target: _Asg) -> str | None:
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

    def _describe_auto_scaling_group(self, target: _Asg) -> dict[str, Any]:
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

    def _resize_asg(self, target: _Asg, step: SetSize) -> None:
        _check_sizes(step, floor_max=0, where=f"Auto Scaling group {target.name}")  # a plain ASG may be 0/0/0
        autoscaling = self._clients.client("autoscaling", target.region)
        call(
            "UpdateAutoScalingGroup",
            autoscaling.update_auto_scaling_group,
            AutoScalingGroupName=target.name,
            MinSize=step.min,
            DesiredCapacity=step.desired,
            MaxSize=step.max,
        )

    # --- discovery tags (both kinds) -------------------------------------------------------------------------

    def _asg_of(self, target: _Eks | _Asg) -> _Asg:
        if isinstance(target, _Asg):
            return target
        with self._lock:
            name = self._backing_asg.get(target)
        if name is None:  # apply without a describe first (the job always describes; be safe anyway)
            eks = self._clients.client("eks", target.region)
            facts = call(
                "DescribeNodegroup", eks.describe_nodegroup, clusterName=target.cluster, nodegroupName=target.nodegroup
            )["nodegroup"]
            return self._remember_backing_asg(target, facts)
        return _Asg(target.region, name)

    def _discovery_tags(
        self, asg: _Asg, cluster: str | None, keys: Iterable[str] = ()
    ) -> tuple[dict[str, str], frozenset[str]]:
        """The ASG's discovery tags, through ``DescribeTags`` filtered by group (and by key when known)."""
        autoscaling = self._clients.client("autoscaling", asg.region)
        filters: list[dict[str, Any]] = [{"Name": ASG_RESOURCE_TYPE, "Values": [asg.name]}]
        if keys:
            filters.append({"Name": "key", "Values": list(keys)})
        tags = paged("DescribeTags", autoscaling.describe_tags, "Tags", "NextToken", Filters=filters)
        return _discovery(tags, cluster)

    def _create_tags(self, asg: _Asg, tags: Mapping[str, str], propagate: frozenset[str], cluster: str | None) -> None:
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

    def _delete_discovery_tags(self, asg: _Asg, cluster: str | None) -> None:
        # Read first: a plain ASG's cluster tag key is unknown, and deleting nothing should send nothing.
        present, _ = self._discovery_tags(asg, cluster)
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

    # --- plumbing ---------------------------------------------------------------------------------------------

    def _target(self, group: NodeGroup) -> _Eks | _Asg:
        locator = group.locator
        if not isinstance(locator, AwsLocator):
            raise Invalid(f"{group.name}: not an AWS node group (cloud {group.cloud})", code="WrongCloud")
        if locator.cluster and locator.nodegroup:
            return _Eks(locator.region, locator.cluster, locator.nodegroup)
        if locator.auto_scaling_group:
            return _Asg(locator.region, locator.auto_scaling_group)
        raise Invalid(f"{group.name}: needs cluster+nodegroup or autoScalingGroup", code="BadLocator")


def _launched(asg: Mapping[str, Any]) -> int:
    """An ASG's instances that exist or are booting (not those terminating)."""
    return sum(1 for i in asg.get("Instances") or [] if str(i.get("LifecycleState", "")).startswith(_LAUNCHED_STATES))


def _launch_issues(facts: Mapping[str, Any]) -> str | None:
    """The node group's health issues that mean nodes could not be launched, as EKS words them."""
    issues = [i for i in (facts.get("health") or {}).get("issues") or [] if i.get("code") in LAUNCH_ISSUES]
    if not issues:
        return None
    return "; ".join(f"{i['code']}: {i.get('message', '')}".strip() for i in issues)


def _template_of(region: str, facts: Mapping[str, Any]) -> tuple[_TemplateKey, str] | None:
    """(template, version) of a node group built from a launch template; EKS reports both id and name."""
    spec = facts.get("launchTemplate") or {}
    version = str(spec.get("version") or "$Default")  # EKS uses the default version when none was given
    if spec.get("id"):
        return (region, "id", str(spec["id"])), version
    if spec.get("name"):
        return (region, "name", str(spec["name"])), version
    return None


def _check_sizes(step: SetSize, *, floor_max: int, where: str) -> None:
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


def _discovery(tags: Iterable[Mapping[str, Any]], cluster: str | None) -> tuple[dict[str, str], frozenset[str]]:
    """The Cluster Autoscaler discovery tags among ``tags``, and which of them propagate at launch."""
    found = {str(t["Key"]): str(t.get("Value", "")) for t in tags if is_discovery_tag(str(t["Key"]), cluster)}
    propagated = frozenset(str(t["Key"]) for t in tags if str(t["Key"]) in found and t.get("PropagateAtLaunch"))
    return found, propagated
