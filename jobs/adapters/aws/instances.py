"""EC2 GPU instances for the sweep job: one region's instances whose type has GPUs, their tags, and the mark, stop
and terminate writes.

EC2 facts this module is shaped by:
- Whether a type has GPUs is EC2's own type data: ``DescribeInstanceTypes`` ``GpuInfo.Gpus[].Count`` (summed); a
  type without ``GpuInfo`` has none (Inferentia and Trainium are accelerators, not GPUs). Never a name prefix.
  Type data does not change: read once per type and region per process.
- ``DescribeInstances`` is filtered by exact state names only. EC2 accepts ``*`` and ``?`` wildcards in filter
  values and moto (the emulator) does not for attribute filters, so the module relies on none.
- An instance launched by an Auto Scaling group (EKS managed node groups included), an EC2 Fleet, a Spot Fleet or
  Karpenter carries its launcher's ``aws:``/``karpenter.sh/`` tag: stopping it alone would only make the group
  launch a replacement, so it is reported as a member.
- ``CreateTags``/``DeleteTags`` are idempotent, and so are ``StopInstances`` (a stopped instance stays stopped) and
  ``TerminateInstances``: a lost answer is safely resent. ``IncorrectInstanceState`` (pending, a transition under
  way) is Busy: resent with backoff.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from jobs.adapters.aws.session import AwsClients, call, paged
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.untagged import GpuInstance, InstanceState
from jobs.errors import Busy, CloudError, NotFound

#: Every API action this module calls, for checking the shipped IAM policy against the code.
PERMISSIONS = Permissions(
    "aws",
    (
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceTypes",
        "ec2:CreateTags",
        "ec2:DeleteTags",
        "ec2:StopInstances",
        "ec2:TerminateInstances",
    ),
)

#: The states of an instance that costs (or is about to cost) money; shutting-down and terminated ones do not.
LISTED_STATES = ("pending", "running", "stopping", "stopped")
# A pending instance is judged as running: it is billed within seconds, may be marked at once, and a stop of it is
# refused with IncorrectInstanceState until it runs (Busy: resent with backoff). Stopping and the rest: "other".
_STATES: dict[str, InstanceState] = {"pending": "running", "running": "running", "stopped": "stopped"}
# Launchers that replace an instance stopped behind their back, by the tag they put on it (first match names it).
_GROUP_TAGS = (
    ("eks:nodegroup-name", "EKS node group"),
    ("aws:autoscaling:groupName", "Auto Scaling group"),
    ("aws:ec2spot:fleet-request-id", "Spot Fleet request"),
    ("aws:ec2:fleet-id", "EC2 Fleet"),
    ("karpenter.sh/nodepool", "Karpenter node pool"),
    ("karpenter.sh/provisioner-name", "Karpenter provisioner"),
)
_TYPES_PER_CALL = 100  # DescribeInstanceTypes takes at most 100 names
_PAGE = 1000  # DescribeInstances' largest page
_NOT_FOUND = "InvalidInstanceID.NotFound"
_WRONG_STATE = "IncorrectInstanceState"


class AwsInstances:
    """``Instances`` for AWS: one account scope is one region. Thread-safe."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._clients = AwsClients(settings)
        self._lock = threading.Lock()
        self._gpus: dict[tuple[str, str], int] = {}  # (region, type) -> GPUs per instance

    # --- Instances ----------------------------------------------------------------------------------------------

    def gpu_instances(self, account: str) -> list[GpuInstance]:
        region = account
        ec2 = self._clients.client("ec2", region)
        reservations = paged(
            "DescribeInstances",
            ec2.describe_instances,
            "Reservations",
            "NextToken",
            Filters=[{"Name": "instance-state-name", "Values": list(LISTED_STATES)}],
            MaxResults=_PAGE,
        )
        listed = [i for r in reservations for i in r.get("Instances") or []]
        gpus = self._gpus_of(region, {str(i["InstanceType"]) for i in listed})
        return [
            _instance(region, item, gpus[str(item["InstanceType"])])
            for item in listed
            if gpus.get(str(item["InstanceType"]), 0) > 0
        ]

    def set_tags(self, instance: GpuInstance, changes: Mapping[str, str | None]) -> None:
        ec2 = self._clients.client("ec2", instance.account)
        sets = [{"Key": k, "Value": v} for k, v in changes.items() if v is not None]
        removes = [{"Key": k} for k, v in changes.items() if v is None]
        if sets:
            self._write("CreateTags", ec2.create_tags, Resources=[instance.id], Tags=sets)
        if removes:
            self._write("DeleteTags", ec2.delete_tags, Resources=[instance.id], Tags=removes)

    def act(self, instance: GpuInstance, action: Literal["stop", "terminate"]) -> None:
        ec2 = self._clients.client("ec2", instance.account)
        if action == "stop":
            self._write("StopInstances", ec2.stop_instances, InstanceIds=[instance.id])
        else:
            self._write("TerminateInstances", ec2.terminate_instances, InstanceIds=[instance.id])

    # --- internals ----------------------------------------------------------------------------------------------

    def _gpus_of(self, region: str, types: Iterable[str]) -> dict[str, int]:
        with self._lock:
            known = {t: self._gpus[(region, t)] for t in types if (region, t) in self._gpus}
        wanted = sorted(set(types) - known.keys())
        ec2 = self._clients.client("ec2", region)
        for start in range(0, len(wanted), _TYPES_PER_CALL):
            chunk = wanted[start : start + _TYPES_PER_CALL]
            found = paged(
                "DescribeInstanceTypes", ec2.describe_instance_types, "InstanceTypes", "NextToken", InstanceTypes=chunk
            )
            for item in found:
                gpus = sum(int(g.get("Count") or 0) for g in (item.get("GpuInfo") or {}).get("Gpus") or [])
                known[str(item["InstanceType"])] = gpus
        with self._lock:
            self._gpus.update({(region, t): n for t, n in known.items()})
        return known

    @staticmethod
    def _write(operation: str, method: Any, **kwargs: Any) -> None:
        try:
            call(operation, method, **kwargs)
        except CloudError as exc:
            if exc.code == _NOT_FOUND:
                raise NotFound(str(exc), operation=operation, code=exc.code, status=exc.status) from exc
            if exc.code == _WRONG_STATE:
                raise Busy(str(exc), operation=operation, code=exc.code, status=exc.status) from exc
            raise


def _instance(region: str, item: Mapping[str, Any], gpus: int) -> GpuInstance:
    tags = {str(t["Key"]): str(t.get("Value") or "") for t in item.get("Tags") or []}
    return GpuInstance(
        cloud="aws",
        account=region,
        id=str(item["InstanceId"]),
        name=tags.get("Name") or str(item["InstanceId"]),
        zone=str((item.get("Placement") or {}).get("AvailabilityZone") or ""),
        type=str(item["InstanceType"]),
        gpus=gpus,
        state=_STATES.get(str((item.get("State") or {}).get("Name")), "other"),
        tags=tags,
        group=_group(tags),
    )


def _group(tags: Mapping[str, str]) -> str | None:
    for key, kind in _GROUP_TAGS:
        if tags.get(key):
            if key == "eks:nodegroup-name" and tags.get("eks:cluster-name"):
                return f"{kind} {tags['eks:cluster-name']}/{tags[key]}"
            return f"{kind} {tags[key]}"
    return None
