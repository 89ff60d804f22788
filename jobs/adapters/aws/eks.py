"""EKS managed node groups for the nodegroups job (provider kind ``eks``). Sizes go through
``eks:UpdateNodegroupConfig`` (asynchronous, followed to completion with ``DescribeUpdate``). The Cluster
Autoscaler is switched off and on by removing and re-creating its discovery tags on the Auto Scaling group EKS
created for the node group (``aws.autoscaling``).

Clients, calls and paging come from ``aws.session``, error codes from ``aws.errors``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobs.adapters.aws.autoscaling import READS, TAG_WRITES, Asg, AutoScaling, check_sizes, launched, no_power_state
from jobs.adapters.aws.session import AwsClients, call, paged
from jobs.adapters.permissions import Permissions
from jobs.adapters.polling import poll_until
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetPower, SetSize, Step, cloud_step
from jobs.core.policy import AwsLocator, NodeGroup
from jobs.core.providers import PROVIDERS
from jobs.errors import CloudError, Invalid, NotDelivered, NotFound, Unavailable
from jobs.labels import CA_ENABLED_TAG, CA_TAG_PREFIX

#: Every API action this module calls, for checking the shipped IAM policy against the code.
PERMISSIONS = Permissions(
    "aws",
    (
        "eks:DescribeNodegroup",
        "eks:UpdateNodegroupConfig",
        "eks:DescribeUpdate",
        "eks:ListNodegroups",
        "ec2:DescribeLaunchTemplateVersions",
        *READS,
        *TAG_WRITES,
    ),
)

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

#: The instance type reported for a node group whose type cannot be found out (see ``discover``).
UNKNOWN_INSTANCE_TYPE = "unknown"
# DescribeAutoScalingGroups takes at most this many names per request.
_ASG_NAMES_PER_CALL = 50

_TemplateKey = tuple[str, str, str]  # (region, "id" or "name", value)


@dataclass(frozen=True)
class _Eks:
    region: str
    cluster: str
    nodegroup: str


class EksNodeGroups:
    """``NodeGroupCloud`` for EKS managed node groups. Thread-safe: clients are created once per (service, region)
    under a lock."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._clients = AwsClients(settings)
        self._asgs = AutoScaling(self._clients)
        self._lock = threading.Lock()
        # What describe learnt and apply/discover reuse, so they need no extra reads.
        self._backing_asg: dict[_Eks, str] = {}  # the ASG EKS created for a node group

    # --- NodeGroupCloud -------------------------------------------------------------------------------------

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        # The node group reports its live desired size itself: live_size reads only what is missing.
        target = _target(group)
        config = self._describe_eks(target)
        if live_size and config.desired:
            # EKS raises a health issue minutes after launches start failing; until then only the backing
            # ASG's instances tell that nodes are missing (one more read, only when the size matters).
            backing = self._asg_of(target)
            missing = max(0, config.desired - launched(self._asgs.describe(backing)))
            if missing and config.shortfall is None:
                config = replace(config, shortfall=self._asgs.failed_launch(backing))
            config = replace(config, missing=missing)
        return config

    def apply(self, group: NodeGroup, step: Step) -> None:
        step = cloud_step(step)
        target = _target(group)
        if isinstance(step, SetPower):
            raise no_power_state(group.name, "EKS node groups")
        if isinstance(step, SetSize):
            self._resize_eks(target, step)
            return
        self._asgs.set_autoscaling(self._asg_of(target), step, target.cluster)

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        clusters = sorted({(t.region, t.cluster) for t in map(_target, groups)})
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
        tags, propagated = self._asgs.discovery_tags(
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

    def _remember_backing_asg(self, target: _Eks, facts: Mapping[str, Any]) -> Asg:
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
        return Asg(target.region, name)

    def _resize_eks(self, target: _Eks, step: SetSize) -> None:
        # EKS refuses maxSize 0 (the node group floor is 1); refuse here too, so the request is never sent.
        check_sizes(
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

    # --- the backing Auto Scaling group ---------------------------------------------------------------------

    def _asg_of(self, target: _Eks) -> Asg:
        with self._lock:
            name = self._backing_asg.get(target)
        if name is None:  # apply without a describe first (the job always describes; be safe anyway)
            eks = self._clients.client("eks", target.region)
            facts = call(
                "DescribeNodegroup", eks.describe_nodegroup, clusterName=target.cluster, nodegroupName=target.nodegroup
            )["nodegroup"]
            return self._remember_backing_asg(target, facts)
        return Asg(target.region, name)


def _target(group: NodeGroup) -> _Eks:
    locator = group.locator
    if not isinstance(locator, AwsLocator) or not (locator.cluster and locator.nodegroup):
        raise Invalid(f"{group.name}: not an EKS node group (needs aws.cluster and aws.nodegroup)", code="BadLocator")
    return _Eks(locator.region, locator.cluster, locator.nodegroup)


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
