"""EC2 GPU quotas through Service Quotas (``service-quotas``), and the EC2 / EKS / Auto Scaling data that converts
instances and node groups into the quotas' unit (vCPUs).

Service Quotas facts this module is shaped by:
- ``GetServiceQuota`` answers ``NoSuchResourceException`` for a quota without an applied value: the default
  (``GetAWSDefaultServiceQuota``) is the limit then; unknown there too means the code does not exist.
- One open request per quota (``PENDING`` or ``CASE_OPENED``); a second is ``ResourceAlreadyExistsException``.
  ``ListRequestedServiceQuotaChangeHistoryByQuota`` takes one ``Status`` per call: one call for each open status.
- A request approved below its desired value leaves the quota below it: that is a partial grant.
- ``RequestServiceQuotaIncrease`` has no idempotency token: a lost answer is never resent, the caller looks again.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from jobs.adapters.aws.errors import translate
from jobs.adapters.aws.session import _new_client
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.cloud_quotas import Asked, CloudRequest, GroupSize, Outcome, QuotaFacts, Shape
from jobs.core.policy import AwsLocator, NodeGroup
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.errors import CloudError, Conflict

#: Every API action this module calls, for checking the shipped IAM policy against the code.
PERMISSIONS = Permissions(
    "aws",
    (
        "servicequotas:GetServiceQuota",
        "servicequotas:GetAWSDefaultServiceQuota",
        "servicequotas:ListRequestedServiceQuotaChangeHistoryByQuota",
        "servicequotas:GetRequestedServiceQuotaChange",
        "servicequotas:RequestServiceQuotaIncrease",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeInstances",
        "ec2:DescribeLaunchTemplateVersions",
        "eks:DescribeNodegroup",
        "autoscaling:DescribeAutoScalingGroups",
    ),
)

SERVICE = "ec2"
UNIT = "vCPU"
OPEN_STATUSES = ("PENDING", "CASE_OPENED")
_OUTCOMES: dict[str, Outcome] = {
    "PENDING": "open",
    "CASE_OPENED": "open",
    "APPROVED": "approved",
    "DENIED": "denied",
    "NOT_APPROVED": "denied",
    "INVALID_REQUEST": "denied",
    "CASE_CLOSED": "denied",  # closed by support without an approval
}
# EC2's GPU quota groups by instance family: "G and VT" (g4dn, g5, g6e, gr6, vt1) and "P" (p3, p4d, p5).
_FAMILY = re.compile(r"^(?P<letters>[a-z]+)\d")
_GPU_GROUPS = {"g": "G", "gr": "G", "vt": "G", "p": "P"}
_NO_SUCH = "NoSuchResourceException"
_ALREADY = "ResourceAlreadyExistsException"
_INVALID_TYPE = "InvalidInstanceType"
_TYPES_PER_CALL = 100
T = TypeVar("T")


def family_of(instance_type: str) -> str | None:
    """The EC2 GPU quota group of an instance type (G or P), from its family as EC2 names it."""
    matched = _FAMILY.match(instance_type)
    return _GPU_GROUPS.get(matched["letters"]) if matched else None


class AwsQuotas:
    """``QuotaCloud`` for AWS. Thread-safe: clients are created once per (service, region) under a lock."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._config = Config(
            retries={"total_max_attempts": 1},  # the job retries
            connect_timeout=settings.request_timeout_s,
            read_timeout=settings.request_timeout_s,
        )
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str], Any] = {}

    # --- QuotaCloud ---------------------------------------------------------------------------------------------

    def read(self, entry: CloudQuota, remembered: Asked | None) -> QuotaFacts:
        region, code = str(entry.region), str(entry.aws_code)
        sq = self._client("service-quotas", region)
        try:
            quota = self._call("GetServiceQuota", sq.get_service_quota, ServiceCode=SERVICE, QuotaCode=code)
        except CloudError as exc:
            if exc.code != _NO_SUCH:
                raise
            try:  # no applied value: the account has the default
                quota = self._call(
                    "GetAWSDefaultServiceQuota", sq.get_aws_default_service_quota, ServiceCode=SERVICE, QuotaCode=code
                )
            except CloudError as again:
                if again.code != _NO_SUCH:
                    raise
                return QuotaFacts(UNIT, None, error=f"{code}: no such EC2 quota in {region} ({again})")
        facts = quota["Quota"]
        limit = int(facts["Value"])
        open_requests = self._open(region, code, limit)
        followed = None
        if remembered is not None and remembered.request_id:
            followed = next((r for r in open_requests if r.id == remembered.request_id), None) or self._request(
                region, remembered.request_id, limit
            )
        return QuotaFacts(
            UNIT,
            limit,
            usage=self._usage(region, entry) if entry.headroom is not None else None,
            fixed=None if facts.get("Adjustable", True) else f"{code} is not Adjustable",
            open_request=open_requests[0] if open_requests else None,
            followed=followed,
        )

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> dict[str, Shape | str]:
        return dict(self._shapes(str(entry.region), names))

    def group(self, group: NodeGroup) -> GroupSize | str:
        locator = group.locator
        if not isinstance(locator, AwsLocator):
            return f"node group {group.name} is not an AWS node group"
        if locator.cluster and locator.nodegroup:
            eks = self._client("eks", locator.region)
            found = self._call(
                "DescribeNodegroup",
                eks.describe_nodegroup,
                clusterName=locator.cluster,
                nodegroupName=locator.nodegroup,
            )["nodegroup"]
            types = [str(t) for t in found.get("instanceTypes") or []]
            template = found.get("launchTemplate") or {}
            if not types and template:
                types = self._template_types(locator.region, template)
            capacity = "spot" if found.get("capacityType") == "SPOT" else "on-demand"
            max_size = int((found.get("scalingConfig") or {}).get("maxSize", 0))
        else:
            autoscaling = self._client("autoscaling", locator.region)
            groups = self._call(
                "DescribeAutoScalingGroups",
                autoscaling.describe_auto_scaling_groups,
                AutoScalingGroupNames=[locator.auto_scaling_group],
            )["AutoScalingGroups"]
            if not groups:
                return f"node group {group.name}: Auto Scaling group {locator.auto_scaling_group} not found"
            asg = groups[0]
            types, capacity = self._asg_types(locator.region, asg)
            max_size = int(asg.get("MaxSize", 0))
        if not types:
            return f"node group {group.name}: its instance type cannot be found out"
        # Several types (an EKS group may list a few): the largest counts, so the quota covers any mix.
        shapes = self._shapes(locator.region, types)
        known = [(s.per_instance, s.name) for s in shapes.values() if isinstance(s, Shape)]
        shape = max(known)[1] if known else types[0]
        return GroupSize(group.name, shape, max_size, capacity)

    def file(self, entry: CloudQuota, value: int) -> CloudRequest:
        region, code = str(entry.region), str(entry.aws_code)
        sq = self._client("service-quotas", region)
        try:
            answer = self._call(
                "RequestServiceQuotaIncrease",
                sq.request_service_quota_increase,
                ServiceCode=SERVICE,
                QuotaCode=code,
                DesiredValue=float(value),
            )
        except CloudError as exc:
            if exc.code == _ALREADY:  # one is open already (filed since it was observed): never a second
                raise Conflict(str(exc), operation=exc.operation, code=exc.code) from exc
            raise
        return _request(answer["RequestedQuota"], None)

    # --- internals ----------------------------------------------------------------------------------------------

    def _open(self, region: str, code: str, limit: int) -> list[CloudRequest]:
        sq = self._client("service-quotas", region)
        found: list[CloudRequest] = []
        for status in OPEN_STATUSES:
            found += [
                _request(r, limit)
                for r in self._paged(
                    "ListRequestedServiceQuotaChangeHistoryByQuota",
                    sq.list_requested_service_quota_change_history_by_quota,
                    "RequestedQuotas",
                    ServiceCode=SERVICE,
                    QuotaCode=code,
                    Status=status,
                )
            ]
        return found

    def _request(self, region: str, request_id: str, limit: int) -> CloudRequest | None:
        sq = self._client("service-quotas", region)
        try:
            answer = self._call(
                "GetRequestedServiceQuotaChange", sq.get_requested_service_quota_change, RequestId=request_id
            )
        except CloudError as exc:
            if exc.code == _NO_SUCH:
                return None  # forgotten by the service: the record's outcome stands
            raise
        return _request(answer["RequestedQuota"], limit)

    def _usage(self, region: str, entry: CloudQuota) -> int | None:
        """vCPUs of the running instances that count against the quota (family, and spot or on-demand)."""
        kind = entry.aws_kind
        if kind is None:
            return None  # a quota outside the GPU groups: usage unknown, no headroom
        family, capacity = kind
        ec2 = self._client("ec2", region)
        reservations = self._paged(
            "DescribeInstances",
            ec2.describe_instances,
            "Reservations",
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
        )
        counted: dict[str, int] = {}
        for reservation in reservations:
            for instance in reservation.get("Instances") or []:
                spot = instance.get("InstanceLifecycle") == "spot"
                kind_type = str(instance["InstanceType"])
                if family_of(kind_type) == family and spot == (capacity == "spot"):
                    counted[kind_type] = counted.get(kind_type, 0) + 1
        shapes = self._shapes(region, sorted(counted))
        return sum(n * s.per_instance for t, n in counted.items() if isinstance(s := shapes[t], Shape))

    def _shapes(self, region: str, names: Iterable[str]) -> Mapping[str, Shape | str]:
        ec2 = self._client("ec2", region)
        wanted = sorted(set(names))
        out: dict[str, Shape | str] = {}
        for start in range(0, len(wanted), _TYPES_PER_CALL):
            chunk = wanted[start : start + _TYPES_PER_CALL]
            try:
                found = self._paged(
                    "DescribeInstanceTypes", ec2.describe_instance_types, "InstanceTypes", InstanceTypes=chunk
                )
            except CloudError as exc:
                if not exc.code.startswith(_INVALID_TYPE) or len(chunk) == 1:
                    if exc.code.startswith(_INVALID_TYPE):
                        out[chunk[0]] = f"{chunk[0]}: not an EC2 instance type in {region}"
                        continue
                    raise
                out.update(self._shapes(region, chunk[: len(chunk) // 2]))  # find the unknown one
                out.update(self._shapes(region, chunk[len(chunk) // 2 :]))
                continue
            for item in found:
                name = str(item["InstanceType"])
                vcpus = int(item["VCpuInfo"]["DefaultVCpus"])
                out[name] = Shape(name, vcpus, UNIT, family=family_of(name))
            for name in chunk:
                out.setdefault(name, f"{name}: not an EC2 instance type in {region}")
        return out

    def _template_types(self, region: str, template: Mapping[str, Any]) -> list[str]:
        ec2 = self._client("ec2", region)
        selector = (
            {"LaunchTemplateId": template["id"]} if template.get("id") else {"LaunchTemplateName": template.get("name")}
        )
        versions = self._paged(
            "DescribeLaunchTemplateVersions",
            ec2.describe_launch_template_versions,
            "LaunchTemplateVersions",
            Versions=[str(template.get("version") or "$Default")],
            **selector,
        )
        return [
            str(v["LaunchTemplateData"]["InstanceType"])
            for v in versions
            if (v.get("LaunchTemplateData") or {}).get("InstanceType")
        ]

    def _asg_types(self, region: str, asg: Mapping[str, Any]) -> tuple[list[str], str]:
        mixed = asg.get("MixedInstancesPolicy")
        if mixed:
            overrides = (mixed.get("LaunchTemplate") or {}).get("Overrides") or []
            types = [str(o["InstanceType"]) for o in overrides if o.get("InstanceType")]
            distribution = mixed.get("InstancesDistribution") or {}
            on_demand = int(distribution.get("OnDemandPercentageAboveBaseCapacity", 100))
            base = int(distribution.get("OnDemandBaseCapacity", 0))
            spec = (mixed.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification") or {}
            if not types and spec:
                types = self._template_types(
                    region,
                    {
                        "id": spec.get("LaunchTemplateId"),
                        "name": spec.get("LaunchTemplateName"),
                        "version": spec.get("Version"),
                    },
                )
            return types, "spot" if on_demand == 0 and base == 0 else "on-demand"
        spec = asg.get("LaunchTemplate") or {}
        if spec:
            template = {
                "id": spec.get("LaunchTemplateId"),
                "name": spec.get("LaunchTemplateName"),
                "version": spec.get("Version"),
            }
            return self._template_types(region, template), "on-demand"
        return [], "on-demand"

    def _client(self, service: str, region: str) -> Any:
        with self._lock:
            client = self._clients.get((service, region))
            if client is None:
                client = self._clients[(service, region)] = _new_client(service, region, self._config)
            return client

    @staticmethod
    def _call(operation: str, method: Callable[..., T], **kwargs: Any) -> T:
        try:
            return method(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, operation) from error

    def _paged(self, operation: str, method: Callable[..., Any], items: str, **kwargs: Any) -> list[Any]:
        results: list[Any] = []
        token: dict[str, str] = {}
        while True:
            page = self._call(operation, method, **kwargs, **token)
            results.extend(page.get(items) or [])
            if not page.get("NextToken"):
                return results
            token = {"NextToken": str(page["NextToken"])}


def _request(body: Mapping[str, Any], limit: int | None) -> CloudRequest:
    """A RequestedServiceQuotaChange; approved below its desired value (the quota short of it) is partial."""
    status = str(body.get("Status", ""))
    desired = int(float(body.get("DesiredValue", 0)))
    outcome = _OUTCOMES.get(status, "open")
    granted = None
    if outcome == "approved" and limit is not None:
        granted = min(limit, desired)
        if limit < desired:
            outcome = "partial"
    ids = {"case": str(body["CaseId"])} if body.get("CaseId") else {}
    return CloudRequest(str(body["Id"]), status, outcome, desired, granted, ids)
