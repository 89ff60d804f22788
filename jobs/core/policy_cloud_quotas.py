"""The ``cloudQuotas:`` section of the policy: cloud GPU quotas the ``cloud-quotas`` job keeps at or above a target.

Each entry is one quota in one account scope (an AWS region, a GCP project, an Azure subscription). Fields that
belong to another cloud are refused with their own line (``foreign_fields``). The rules that span entries or the
node groups (a ``nodeGroups`` name not in the policy, a group of another cloud or scope, a target above ``max``,
two entries for the same quota and scope, a GCP increase without ``contactEmail``) are checked with the other
cross-section rules, in ``jobs.core.policy_checks``.

Its models share the policy's base and field types (``jobs.core.policy_fields``); the root model
(``jobs.core.policy``) imports this module, never the other way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from jobs.core.policy_fields import Model, Name, Percent

Problem = tuple[tuple[str | int, ...], str]
Cloud = Literal["aws", "gcp", "azure"]


_AWS_CODE = re.compile(r"^L-[0-9A-F]{8}$")


def _check_code(value: str) -> str:
    if not _AWS_CODE.fullmatch(value):
        raise ValueError(f'"{value}" is not a Service Quotas code (L- and 8 hex digits, e.g. L-7212CCBC)')
    return value


#: The EC2 vCPU quotas of GPU instances per (family, capacity), as Service Quotas codes them.
AWS_GPU_QUOTAS: dict[tuple[str, str], str] = {
    ("G", "on-demand"): "L-DB2E81BA",  # Running On-Demand G and VT instances
    ("P", "on-demand"): "L-417A185B",  # Running On-Demand P instances
    ("G", "spot"): "L-3819A6DF",  # All G and VT Spot Instance Requests
    ("P", "spot"): "L-7212CCBC",  # All P Spot Instance Requests
}
AWS_QUOTA_KINDS = {code: kind for kind, code in AWS_GPU_QUOTAS.items()}


class AwsQuotaKind(Model):
    """An EC2 GPU quota by instance family group and capacity type."""

    family: Literal["G", "P"]
    capacity: Literal["on-demand", "spot"]


def _check_quota(value: Any) -> Any:
    """One clean message whichever form is wrong (a plain union would report both forms' errors)."""
    if isinstance(value, str):
        return _check_code(value)
    if isinstance(value, dict):
        try:
            return AwsQuotaKind.model_validate(value)
        except ValidationError as exc:
            raise ValueError(
                "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            ) from None
    raise ValueError("a Service Quotas code (e.g. L-7212CCBC) or {family: G|P, capacity: on-demand|spot}")


AwsQuota = Annotated[
    AwsQuotaKind | str,
    BeforeValidator(_check_quota),
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "string", "pattern": _AWS_CODE.pattern},
                {
                    "type": "object",
                    "properties": {"family": {"enum": ["G", "P"]}, "capacity": {"enum": ["on-demand", "spot"]}},
                    "required": ["family", "capacity"],
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


class Headroom(Model):
    """Raise ahead of demand: once usage is above ``whenUsageAbove`` of the limit, ask for the limit plus
    ``raiseBy``."""

    when_usage_above: Percent
    raise_by: Percent


class InstancesTarget(Model):
    """Enough for ``instances`` of one shape, converted with the cloud's own data for that shape."""

    instances: StrictInt = Field(ge=1)
    instance_type: str | None = Field(default=None, description="AWS, e.g. p4d.24xlarge")
    machine_type: str | None = Field(default=None, description="GCP, e.g. a3-highgpu-8g")
    vm_size: str | None = Field(default=None, description="Azure, e.g. Standard_NC96ads_A100_v4")

    @model_validator(mode="after")
    def _one_shape(self) -> InstancesTarget:
        given = [s for s in (self.instance_type, self.machine_type, self.vm_size) if s is not None]
        if len(given) != 1:
            raise ValueError("needs exactly one of instanceType (AWS), machineType (GCP) or vmSize (Azure)")
        return self

    @property
    def shape(self) -> str:
        found = self.instance_type or self.machine_type or self.vm_size
        assert found is not None  # guaranteed by _one_shape
        return found


class NodeGroupsTarget(Model):
    """Enough for these node groups of the policy at their working maximum (``up.max``, else their live max size)."""

    node_groups: tuple[str, ...] = Field(min_length=1, max_length=50)


Target = Annotated[
    StrictInt | InstancesTarget | NodeGroupsTarget,
    Field(description="a number in the quota's unit, {instances: N, instanceType|machineType|vmSize}, or {nodeGroups}"),
]

#: The fields of each cloud (beside name, cloud, target, headroom, max).
_CLOUD_FIELDS: dict[str, frozenset[str]] = {
    "aws": frozenset({"region", "quota"}),
    "gcp": frozenset({"project", "region", "quota_id", "dimensions", "contact_email", "justification"}),
    "azure": frozenset({"subscription", "location", "family", "justification"}),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "aws": ("region", "quota"),
    "gcp": ("project", "quota_id"),
    "azure": ("subscription", "location", "family"),
}


class CloudQuota(Model):
    """One cloud quota in one scope, kept at or above ``target`` (never above ``max``)."""

    name: Name = Field(description="unique id for logs, outputs and records")
    cloud: Cloud
    region: str | None = Field(default=None, description="AWS region; GCP: the region dimension")
    project: str | None = Field(default=None, description="GCP project")
    subscription: str | None = Field(default=None, description="Azure subscription id")
    location: str | None = Field(default=None, description="Azure location, e.g. westeurope")
    quota: AwsQuota | None = Field(
        default=None, description="AWS: {family: G|P, capacity: on-demand|spot} or a Service Quotas code"
    )
    quota_id: str | None = Field(default=None, description="GCP quota id, e.g. GPUS-PER-GPU-FAMILY-per-project-region")
    dimensions: dict[str, str] = Field(default_factory=dict, description="GCP dimensions besides region")
    contact_email: str | None = Field(default=None, description="GCP: required for increases")
    family: str | None = Field(default=None, description="Azure VM family, or lowPriorityCores (spot)")
    justification: str | None = Field(default=None, max_length=500, description="GCP and Azure")
    target: Target
    headroom: Headroom | None = None
    max: StrictInt | None = Field(default=None, ge=1, description="never ask for more than this")

    @property
    def scope_name(self) -> str:
        """The account: AWS region, GCP project, Azure subscription (as in ``jobs.scopes``)."""
        found = {"aws": self.region, "gcp": self.project, "azure": self.subscription}[self.cloud]
        assert found is not None  # guaranteed by the checks (jobs.core.policy_checks)
        return found

    @property
    def where(self) -> str:
        """The scope as the report shows it: "eu-west-1", "ml-research/europe-west4", "<sub>/westeurope"."""
        if self.cloud == "aws":
            return str(self.region)
        if self.cloud == "gcp":
            return f"{self.project}/{self.region}" if self.region else str(self.project)
        return f"{self.subscription}/{self.location}"

    @property
    def aws_code(self) -> str | None:
        if isinstance(self.quota, AwsQuotaKind):
            return AWS_GPU_QUOTAS[(self.quota.family, self.quota.capacity)]
        return self.quota

    @property
    def aws_kind(self) -> tuple[str, str] | None:
        """(family, capacity) of an AWS quota, when known (a code outside the four GPU quotas is not)."""
        code = self.aws_code
        return AWS_QUOTA_KINDS.get(code) if code else None

    @property
    def gcp_dimensions(self) -> dict[str, str]:
        """The dimensions as the QuotaPreference carries them: ``region`` plus the others."""
        return {**({"region": self.region} if self.region else {}), **self.dimensions}

    @property
    def identity(self) -> tuple[str, ...]:
        """What makes two entries the same quota in the same scope."""
        if self.cloud == "aws":
            return ("aws", str(self.region), str(self.aws_code))
        if self.cloud == "gcp":
            dims = ",".join(f"{k}={v}" for k, v in sorted(self.gcp_dimensions.items()))
            return ("gcp", str(self.project), str(self.quota_id), dims)
        return ("azure", str(self.subscription).lower(), str(self.location).lower(), str(self.family).lower())


def foreign_fields(entry: CloudQuota, base: tuple[str | int, ...]) -> Iterator[Problem]:
    """A field of another cloud, or one this cloud requires missing, as (path, message) pairs."""
    own = _CLOUD_FIELDS[entry.cloud]
    for field in sorted(entry.model_fields_set - {"name", "cloud", "target", "headroom", "max"} - own):
        clouds = [c for c, fields in _CLOUD_FIELDS.items() if field in fields]
        yield (*base, to_camel(field)), f"not a field of cloud {entry.cloud} ({', '.join(clouds)} only)"
    for field in _REQUIRED[entry.cloud]:
        if getattr(entry, field) is None:
            yield (*base, to_camel(field)), f"required for cloud {entry.cloud}"
