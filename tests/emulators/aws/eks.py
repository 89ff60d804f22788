"""EKS managed node groups as the real service behaves, on top of moto's EKS backend.

moto stores clusters and node groups and renders them; it applies ``UpdateNodegroupConfig`` at once, without
validating the scaling config, never reports ``UPDATING``, has no ``DescribeUpdate``, cannot tag node groups, and
backs a node group with no Auto Scaling group. This module adds exactly that:

- scaling-config rules (maxSize >= 1, minSize >= 0, desiredSize >= 0, min <= desired <= max), else
  ``InvalidParameterException`` (400);
- asynchronous updates: an ``update`` object (``InProgress``) the client polls with ``DescribeUpdate``; the node
  group reports ``UPDATING`` until :class:`UpdateTiming` ``seconds`` have passed on the emulator's clock, then
  ``ACTIVE`` with the new config, described or not (the backing ASG follows at that moment, as on EKS, where an
  update runs on its own); a second update meanwhile is ``ResourceInUseException`` (409);
- a real moto Auto Scaling group per node group (``eks-<nodegroup>-<uuid>``) carrying the Cluster Autoscaler
  discovery tags, whose min/max/desired follow the node group when an update completes, and whose desired
  capacity (which the Cluster Autoscaler changes) shows up as the node group's ``desiredSize``, as on EKS;
- ``TagResource``/``UntagResource``/``ListTagsForResource`` on node group ARNs;
- node groups from a launch template described as EKS does: ``instanceTypes`` null unless the request gave
  them, ``amiType`` ``CUSTOM`` when the template sets an ``ImageId``, ``diskSize`` null (moto would report
  ``t3.medium``/``AL2_x86_64``/20), and a backing ASG that launches the template's ``InstanceType``.

Everything else (clusters, ``DescribeNodegroup`` rendering, ``ListNodegroups``...) is moto's.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.eks.models import CLUSTER_NOT_FOUND_MSG, NODEGROUP_NOT_FOUND_MSG, Nodegroup

from tests.emulators.aws import moto_state
from tests.emulators.aws.capacity import Capacity, LaunchRefusal
from tests.emulators.aws.wire import AwsCall, Reply, error_reply, json_reply

Passthrough = Callable[[], Reply]
Handler = Callable[[AwsCall, Passthrough], Reply]

CA_ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
CA_CLUSTER_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
NODE_ROLE_ARN = f"arn:aws:iam::{moto_state.ACCOUNT_ID}:role/eks-node-role"
CLUSTER_ROLE_ARN = f"arn:aws:iam::{moto_state.ACCOUNT_ID}:role/eks-cluster-role"
NOT_ACTIVE_MSG = "Nodegroup cannot be updated as it is currently not in Active State"
#: Node group states that take updates: a DEGRADED group can still be resized (that is how it is repaired).
UPDATABLE = ("ACTIVE", "DEGRADED")
#: What EKS launches when neither the launch template nor the request names an instance type.
EKS_DEFAULT_INSTANCE_TYPE = "t3.medium"
# DescribeUpdate error messages (the API reference words of ErrorDetail.errorCode).
_UPDATE_ERRORS = {
    "NodeCreationFailure": "Instances failed to join the kubernetes cluster",
    "InsufficientFreeAddresses": "One or more of the subnets associated with your cluster does not have enough"
    " available IP addresses for Amazon EKS to perform cluster management operations.",
}
LT_AND_TYPES_MSG = "Instance type is specified in both the launch template and the nodegroup request"


#: How long an update runs by default: real EKS takes minutes; a tenth of a second keeps the sandbox and tests quick
#: while every "still UPDATING" moment stays observable.
DEFAULT_UPDATE_SECONDS = 0.1


@dataclass(frozen=True)
class UpdateTiming:
    """How long a node group stays ``UPDATING``: ``seconds`` after the update started, on the emulator's clock,
    whether or not anyone describes it (``None``: until :meth:`EksExtension.finish_now`, for tests that hold an
    update). ``polls`` is a test-only shortcut, off by default: the update is also done once that many describes
    (DescribeNodegroup/DescribeUpdate) have seen it running."""

    polls: int | None = None
    seconds: float | None = DEFAULT_UPDATE_SECONDS


@dataclass
class NodegroupUpdate:
    id: str
    region: str
    cluster: str
    nodegroup: str
    token: str
    request: dict[str, Any]
    params: list[dict[str, str]]
    created_at: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)
    status: str = "InProgress"
    polls: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "type": "ConfigUpdate",
            "params": self.params,
            "createdAt": self.created_at,
            "errors": self.errors,
        }


def scaling_error(scaling: dict[str, int]) -> str | None:
    """The message EKS answers an invalid scaling config with, or None if it is valid."""
    low, want, high = scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]
    if high < 1:
        return f"Maximum capacity {high} can't be less than 1"
    if low < 0:
        return f"Minimum capacity {low} can't be less than 0"
    if want < 0:
        return f"Desired capacity {want} can't be less than 0"
    if low > want:
        return f"Minimum capacity {low} can't be greater than desired size {want}"
    if want > high:
        return f"Desired capacity {want} can't be greater than max size {high}"
    return None


def _update_params(request: dict[str, Any]) -> list[dict[str, str]]:
    """The ``update.params`` EKS reports for an UpdateNodegroupConfig request (values are strings)."""
    params: list[dict[str, str]] = []
    scaling = request.get("scalingConfig") or {}
    for key, kind in (("minSize", "MinSize"), ("maxSize", "MaxSize"), ("desiredSize", "DesiredSize")):
        if key in scaling:
            params.append({"type": kind, "value": str(scaling[key])})
    labels = request.get("labels") or {}
    taints = request.get("taints") or {}
    for source, key, kind in (
        (labels, "addOrUpdateLabels", "LabelsToAdd"),
        (labels, "removeLabels", "LabelsToRemove"),
        (taints, "addOrUpdateTaints", "TaintsToAdd"),
        (taints, "removeTaints", "TaintsToRemove"),
    ):
        if source.get(key):
            params.append({"type": kind, "value": json.dumps(source[key])})
    update_config = request.get("updateConfig") or {}
    for key, kind in (("maxUnavailable", "MaxUnavailable"), ("maxUnavailablePercentage", "MaxUnavailablePercentage")):
        if key in update_config:
            params.append({"type": kind, "value": str(update_config[key])})
    return params


class EksExtension:
    """What moto's EKS lacks; thread-safe (the server is threaded)."""

    def __init__(
        self,
        timing: UpdateTiming | None = None,
        *,
        capacity: Capacity,
        clock: Callable[[], float] = time.monotonic,
        wake_at: Callable[[float], None] = lambda deadline: None,
    ) -> None:
        self.timing = timing or UpdateTiming()
        self._capacity = capacity
        self._clock = clock
        self._wake_at = wake_at
        self._lock = threading.RLock()
        self._updates: dict[str, NodegroupUpdate] = {}
        self._open: dict[tuple[str, str, str], str] = {}  # (region, cluster, nodegroup) -> open update id
        self._failures: list[tuple[str, str]] = []  # (errorCode, errorMessage) for the next updates to end with

    def reset(self) -> None:
        with self._lock:
            self._updates.clear()
            self._open.clear()
            self._failures.clear()
            self.timing = UpdateTiming()

    def fail_next_update(self, code: str = "NodeCreationFailure", message: str = "") -> None:
        """The next update to complete ends ``Failed`` with ``errors[0].errorCode`` ``code`` (DescribeUpdate's
        ``ErrorDetail``; e.g. NodeCreationFailure, InsufficientFreeAddresses) and changes nothing."""
        with self._lock:
            self._failures.append((code, message or _UPDATE_ERRORS.get(code, code)))

    def handlers(self) -> dict[str, Handler]:
        return {
            "CreateNodegroup": self._create_nodegroup,
            "DeleteNodegroup": self._delete_nodegroup,
            "DescribeNodegroup": self._describe_nodegroup,
            "UpdateNodegroupConfig": self._update_nodegroup_config,
            "DescribeUpdate": self._describe_update,
            "ListUpdates": self._list_updates,
            "TagResource": self._tag_resource,
            "UntagResource": self._untag_resource,
            "ListTagsForResource": self._list_tags,
        }

    # --- seeding ---------------------------------------------------------------------------------------------

    def add_nodegroup(
        self,
        region: str,
        cluster: str,
        nodegroup: str,
        *,
        min_size: int,
        desired_size: int,
        max_size: int,
        instance_types: list[str],
        capacity_type: str,
        labels: dict[str, str],
        tags: dict[str, str],
        launch_template: dict[str, str] | None = None,
    ) -> Nodegroup:
        """``launch_template`` is EKS's ``{"id" or "name", "version"}`` of an existing EC2 launch template."""
        scaling = {"minSize": min_size, "desiredSize": desired_size, "maxSize": max_size}
        problem = scaling_error(scaling)
        if problem:
            raise ValueError(f"EKS would refuse this node group: {problem}")
        backend = moto_state.eks(region)
        subnets = [s.id for s in moto_state.ec2(region).describe_subnets()][:2]
        if launch_template is not None:
            data = launch_template_data(region, launch_template)
            if data is None:
                raise ValueError(f"no such launch template (version): {launch_template}")
            if instance_types and data.get("InstanceType"):
                raise ValueError(f"EKS would refuse this node group: {LT_AND_TYPES_MSG}")
        if cluster not in backend.clusters:
            backend.create_cluster(name=cluster, role_arn=CLUSTER_ROLE_ARN, resources_vpc_config={"subnetIds": subnets})
        group: Nodegroup = backend.create_nodegroup(
            cluster_name=cluster,
            node_role=NODE_ROLE_ARN,
            nodegroup_name=nodegroup,
            subnets=subnets,
            scaling_config=scaling,
            instance_types=list(instance_types) or None,
            capacity_type=capacity_type,
            labels=dict(labels),
            tags=dict(tags),
            launch_template=dict(launch_template) if launch_template else None,
        )
        self._attach_asg(region, group, self._as_eks_reports(region, group, list(instance_types), None))
        return group

    def finish_now(self) -> None:
        """Complete every update in progress now (a test hook)."""
        with self._lock:
            for update_id in list(self._open.values()):
                self._complete(self._updates[update_id])

    def tick(self) -> None:
        """Complete the updates whose time is up (the emulator runs this on every request and at each deadline)."""
        with self._lock:
            for update_id in list(self._open.values()):
                update = self._updates[update_id]
                if self._due(update):
                    self._complete(update)

    def _due(self, update: NodegroupUpdate) -> bool:
        timing = self.timing
        done_by_polls = timing.polls is not None and update.polls > timing.polls
        done_by_time = timing.seconds is not None and self._clock() - update.started >= timing.seconds
        return done_by_polls or done_by_time

    @staticmethod
    def _as_eks_reports(
        region: str, group: Nodegroup, requested_types: list[str], requested_ami: str | None
    ) -> list[str]:
        """Make a node group read as EKS describes it; return the instance types its ASG launches.

        Without a launch template moto's rendering is already right. With one, EKS fills ``instanceTypes`` only
        from the request, says ``CUSTOM`` for a template's own AMI and has no ``diskSize`` (the template's block
        devices decide), while moto stores its defaults (t3.medium, AL2_x86_64, 20) as if they had been asked for.
        """
        spec: dict[str, str] | None = group.launch_template
        if not spec:
            return list(group.instance_types)
        data = launch_template_data(region, spec) or {}
        if not spec.get("version"):
            spec["version"] = str(_template(region, spec).default_version_number)  # EKS pins the default
        group.instance_types = list(requested_types) or None
        group.ami_type = "CUSTOM" if data.get("ImageId") else (requested_ami or group.ami_type)
        group.disk_size = None
        if data.get("InstanceType"):
            return [str(data["InstanceType"])]
        return list(requested_types) or [EKS_DEFAULT_INSTANCE_TYPE]

    def _attach_asg(self, region: str, group: Nodegroup, instance_types: list[str]) -> None:
        """Back a node group with a real moto ASG launching ``instance_types``, named and tagged as EKS does."""
        group.scaling_config = dict(group.scaling_config)  # moto shares one default dict between node groups
        name = f"eks-{group.nodegroup_name}-{group.uuid}"
        ec2 = moto_state.ec2(region)
        # EKS launches from its own copy of the node group's template, with its AMI unless the template has one
        # (only the fields that matter here are copied).
        data = (launch_template_data(region, group.launch_template) if group.launch_template else None) or {}
        template = ec2.create_launch_template(
            name=f"eks-{group.uuid}",
            description=f"EKS managed node group {group.nodegroup_name}",
            template_data={"ImageId": data.get("ImageId") or moto_state.IMAGE_ID, "InstanceType": instance_types[0]},
            tag_spec={},
        )
        template_spec = {"LaunchTemplateId": template.id, "Version": "1"}
        mixed: dict[str, Any] | None = None
        if len(instance_types) > 1:
            # Several instance types: EKS uses a MixedInstancesPolicy with one override per type.
            mixed = {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": template_spec,
                    "Overrides": [{"InstanceType": t} for t in instance_types],
                }
            }
        owner_tags = {
            "eks:cluster-name": group.cluster_name,
            "eks:nodegroup-name": group.nodegroup_name,
            f"kubernetes.io/cluster/{group.cluster_name}": "owned",
            CA_ENABLED_TAG: "true",
            f"{CA_CLUSTER_TAG_PREFIX}{group.cluster_name}": "owned",
        }
        scaling = group.scaling_config
        moto_state.create_asg(
            region,
            name,
            (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]),
            owner_tags,
            launch_template=None if mixed else template_spec,
            mixed_instances_policy=mixed,
        )
        group.resources = {**group.resources, "autoScalingGroups": [{"name": name}]}

    # --- state machine ---------------------------------------------------------------------------------------

    def _advance(self, region: str, cluster: str, name: str, *, poll: bool) -> None:
        """Move an update along on a poll (or when its time is up); reflect the ASG's desired when ACTIVE."""
        with self._lock:
            update_id = self._open.get((region, cluster, name))
            if update_id:
                update = self._updates[update_id]
                if poll:
                    update.polls += 1
                if self._due(update):
                    self._complete(update)
                return
            group = moto_state.find_nodegroup(region, cluster, name)
            asg_name = _asg_name(group) if group else None
            asg = moto_state.find_asg(region, asg_name) if asg_name else None
            if group is not None and asg is not None and group.status in UPDATABLE:
                # EKS reports the ASG's current desired capacity, e.g. after the Cluster Autoscaler changed it.
                group.scaling_config["desiredSize"] = asg.desired_capacity or 0
                # The ASG keeps launching toward desired; the node group's health follows its launches.
                refused = self._capacity.retry(region, asg)
                if refused is not None or group.status == "DEGRADED":
                    _set_health(group, asg.name, refused or [])

    def _complete(self, update: NodegroupUpdate) -> None:
        group = moto_state.find_nodegroup(update.region, update.cluster, update.nodegroup)
        self._open.pop((update.region, update.cluster, update.nodegroup), None)
        if self._failures:
            code, message = self._failures.pop(0)
            update.status = "Failed"
            resources = [_asg_name(group) or ""] if group is not None else []
            update.errors = [{"errorCode": code, "errorMessage": message, "resourceIds": resources}]
            if group is not None:
                group.status = "ACTIVE"
            return
        update.status = "Successful"
        if group is None:  # deleted meanwhile
            return
        request = update.request
        moto_state.eks(update.region).update_nodegroup_config(
            cluster_name=update.cluster,
            nodegroup_name=update.nodegroup,
            labels=request.get("labels"),
            taints=request.get("taints"),
            scaling_config=request.get("scalingConfig"),
            update_config=request.get("updateConfig"),
            node_repair_config=request.get("nodeRepairConfig"),
        )
        group.status = "ACTIVE"
        asg_name = _asg_name(group)
        asg = moto_state.find_asg(update.region, asg_name) if asg_name else None
        if asg is not None:
            scaling = group.scaling_config
            asg.min_size = scaling["minSize"]
            asg.max_size = scaling["maxSize"]
            # The update itself succeeds; launches EC2 refuses leave the node group DEGRADED, as on EKS.
            _set_health(group, asg.name, self._capacity.launch(update.region, asg, scaling["desiredSize"]))

    # --- handlers --------------------------------------------------------------------------------------------

    def _lookup(self, call: AwsCall) -> tuple[Nodegroup | None, Reply | None]:
        cluster = call.path_params.get("name", "")
        name = call.path_params.get("nodegroupName") or _first(call, "nodegroupName")
        if moto_state.find_cluster(call.region, cluster) is None:
            message = CLUSTER_NOT_FOUND_MSG.format(clusterName=cluster)
            return None, error_reply(call, 404, "ResourceNotFoundException", message, clusterName=cluster)
        group = moto_state.find_nodegroup(call.region, cluster, name)
        if group is None:
            message = NODEGROUP_NOT_FOUND_MSG.format(nodegroupName=name)
            return None, error_reply(
                call, 404, "ResourceNotFoundException", message, clusterName=cluster, nodegroupName=name
            )
        return group, None

    def _create_nodegroup(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        request = call.json_body()
        requested_types = [str(t) for t in request.get("instanceTypes") or []]
        spec = request.get("launchTemplate")
        if spec and requested_types and (launch_template_data(call.region, spec) or {}).get("InstanceType"):
            return error_reply(call, 400, "InvalidParameterException", LT_AND_TYPES_MSG)
        reply = passthrough()
        if reply.status != 200:
            return reply
        group = moto_state.find_nodegroup(call.region, call.path_params["name"], request.get("nodegroupName", ""))
        if group is None:
            return reply
        types = self._as_eks_reports(call.region, group, requested_types, request.get("amiType"))
        self._attach_asg(call.region, group, types)
        # moto rendered its answer before the fix-up: answer with what DescribeNodegroup will say from now on.
        body = json.loads(reply.body)
        body["nodegroup"].update(
            instanceTypes=group.instance_types,
            amiType=group.ami_type,
            diskSize=group.disk_size,
            launchTemplate=group.launch_template,
            resources=group.resources,
        )
        return Reply(reply.status, reply.headers, json.dumps(body, default=str).encode())

    def _delete_nodegroup(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        group = moto_state.find_nodegroup(call.region, call.path_params["name"], call.path_params["nodegroupName"])
        asg_name = _asg_name(group) if group else None
        reply = passthrough()
        if reply.status == 200 and group is not None:
            with self._lock:
                self._open.pop((call.region, group.cluster_name, group.nodegroup_name), None)
            asg = moto_state.find_asg(call.region, asg_name) if asg_name else None
            if asg is not None:  # EKS removes the node group's ASG, and with it the instances
                asg.set_desired_capacity(0)
                moto_state.autoscaling(call.region).delete_auto_scaling_group(asg.name)
        return reply

    def _describe_nodegroup(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        self._advance(call.region, call.path_params["name"], call.path_params["nodegroupName"], poll=True)
        return passthrough()

    def _update_nodegroup_config(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        group, failure = self._lookup(call)
        if failure or group is None:
            return failure or passthrough()
        cluster, name = group.cluster_name, group.nodegroup_name
        request = call.json_body()
        token = request.get("clientRequestToken") or ""
        with self._lock:
            self._advance(call.region, cluster, name, poll=False)
            for previous in self._updates.values():
                if token and previous.token == token and (previous.cluster, previous.nodegroup) == (cluster, name):
                    return json_reply({"update": previous.to_json()}, call.protocol)  # idempotent retry
            if (call.region, cluster, name) in self._open or group.status not in UPDATABLE:
                return error_reply(
                    call, 409, "ResourceInUseException", NOT_ACTIVE_MSG, clusterName=cluster, nodegroupName=name
                )
            requested = request.get("scalingConfig") or {}
            merged = {**group.scaling_config, **requested}
            problem = scaling_error(merged) if requested else None
            params = _update_params(request)
            if problem or not params:
                return error_reply(
                    call,
                    400,
                    "InvalidParameterException",
                    problem or "No changes needed",
                    clusterName=cluster,
                    nodegroupName=name,
                )
            update = NodegroupUpdate(str(uuid.uuid4()), call.region, cluster, name, token, request, params)
            update.started = self._clock()
            if self.timing.seconds is not None:
                self._wake_at(update.started + self.timing.seconds)
            self._updates[update.id] = update
            self._open[(call.region, cluster, name)] = update.id
            group.status = "UPDATING"
            group.modified_at = datetime.now(UTC)
            return json_reply({"update": update.to_json()}, call.protocol)

    def _describe_update(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        update_id = call.path_params.get("updateId", "")
        with self._lock:
            update = self._updates.get(update_id)
            nodegroup = _first(call, "nodegroupName")
            if (
                update is None
                or update.region != call.region
                or update.cluster != call.path_params.get("name")
                or update.nodegroup != nodegroup
            ):
                return error_reply(call, 404, "ResourceNotFoundException", f"No update found for ID: {update_id}")
            self._advance(update.region, update.cluster, update.nodegroup, poll=True)
            return json_reply({"update": update.to_json()}, call.protocol)

    def _list_updates(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        cluster, nodegroup = call.path_params.get("name", ""), _first(call, "nodegroupName")
        with self._lock:
            ids = [
                u.id
                for u in self._updates.values()
                if (u.region, u.cluster, u.nodegroup) == (call.region, cluster, nodegroup)
            ]
        return json_reply({"updateIds": ids}, call.protocol)

    def _nodegroup_by_arn(self, call: AwsCall) -> tuple[Nodegroup | None, bool]:
        """(node group, is a node group ARN) for a /tags/{resourceArn} call."""
        arn = call.path_params.get("resourceArn", "")
        if ":nodegroup/" not in arn:
            return None, False
        for cluster in moto_state.eks(call.region).clusters.values():
            for group in cluster.nodegroups.values():
                if group.arn == arn:
                    return group, True
        return None, True

    def _tag_call(self, call: AwsCall, passthrough: Passthrough, apply: Callable[[Nodegroup], Reply]) -> Reply:
        group, is_nodegroup = self._nodegroup_by_arn(call)
        if not is_nodegroup:
            return passthrough()  # cluster ARNs: moto's own tagging
        if group is None:
            return error_reply(call, 404, "NotFoundException", "Resource was not found")
        with self._lock:
            return apply(group)

    def _tag_resource(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        def apply(group: Nodegroup) -> Reply:
            group.tags.update(call.json_body().get("tags") or {})
            return json_reply({}, call.protocol)

        return self._tag_call(call, passthrough, apply)

    def _untag_resource(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        def apply(group: Nodegroup) -> Reply:
            for key in call.query_params().get("tagKeys", []):
                group.tags.pop(key, None)
            return json_reply({}, call.protocol)

        return self._tag_call(call, passthrough, apply)

    def _list_tags(self, call: AwsCall, passthrough: Passthrough) -> Reply:
        return self._tag_call(call, passthrough, lambda group: json_reply({"tags": group.tags}, call.protocol))


def _template(region: str, spec: dict[str, str]) -> Any:
    """The moto launch template an EKS ``launchTemplate`` (``id`` or ``name``) names; raises if there is none."""
    ec2 = moto_state.ec2(region)
    if spec.get("id"):
        return ec2.get_launch_template(spec["id"])
    return ec2.get_launch_template_by_name(spec.get("name", ""))


def launch_template_data(region: str, spec: dict[str, str]) -> dict[str, Any] | None:
    """The ``LaunchTemplateData`` of the version an EKS ``launchTemplate`` names, or None if it does not exist."""
    try:
        template = _template(region, spec)
        data: dict[str, Any] = template.get_version(spec.get("version") or "$Default").data
    except Exception:  # moto's not-found errors differ per lookup; all mean "no such template (version)"
        return None
    return data


def _set_health(group: Nodegroup, asg_name: str, refused: list[LaunchRefusal]) -> None:
    """DEGRADED with an ``AsgInstanceLaunchFailures`` issue while launches fail (the message EKS builds from the
    EC2 error), ACTIVE with no issues once they do not."""
    if not refused:
        group.status, group.health = "ACTIVE", {"issues": []}
        return
    purchase = "Spot" if group.capacity_type == "SPOT" else "On-Demand"
    first = refused[0]
    message = f"Could not launch {purchase} Instances. {first.code} - {first.message} Launching EC2 instance failed."
    issue = {"code": "AsgInstanceLaunchFailures", "message": message, "resourceIds": [asg_name]}
    group.status, group.health = "DEGRADED", {"issues": [issue]}


def _asg_name(group: Nodegroup) -> str | None:
    resources: dict[str, Any] = group.resources
    groups = resources.get("autoScalingGroups") or []
    return str(groups[0]["name"]) if groups else None


def _first(call: AwsCall, key: str) -> str:
    values = call.query_params().get(key) or [""]
    return values[0]
