"""EC2 capacity behind Auto Scaling launches: stockouts per instance type and zone, and the vCPU quotas.

moto launches every instance an Auto Scaling group asks for. Real EC2 refuses a launch when the zone has no
capacity for the type (``InsufficientInstanceCapacity``) or when the running On-Demand vCPUs of the type's quota
bucket would pass the Service Quotas value (``VcpuLimitExceeded``). Auto Scaling still accepts the desired
capacity, records the refusal as a scaling activity with ``StatusCode`` ``Failed`` and the EC2 message plus
"Launching EC2 instance failed.", and keeps trying. Messages follow those AWS returns (e.g. kubernetes/autoscaler
issues #1263, #3241; kops PR #15778).

Quotas are checked only where a test set them (``set_quota``): the fake's defaults are those of a fresh account
(0 GPU vCPUs), which would refuse every GPU group a test seeds.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from moto.ec2.models.instance_types import INSTANCE_TYPES

from tests.emulators.aws import moto_state
from tests.emulators.aws.service_quotas import ServiceQuotasFake

LAUNCH_FAILED = "Launching EC2 instance failed."
VCPU_LIMIT_URL = "http://aws.amazon.com/contact-us/ec2-request"


@dataclass(frozen=True)
class LaunchRefusal:
    code: str  # InsufficientInstanceCapacity, VcpuLimitExceeded
    message: str


@dataclass
class Activity:
    """One Auto Scaling scaling activity, in DescribeScalingActivities' shape."""

    group: str
    zone: str
    status: str  # Successful, Failed
    message: str = ""
    capacity: tuple[int, int] = (0, 0)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> dict[str, Any]:
        description = "Launching a new EC2 instance"
        body: dict[str, Any] = {
            "ActivityId": self.id,
            "AutoScalingGroupName": self.group,
            "Description": f"{description}.  Status Reason: {self.message}" if self.message else f"{description}.",
            "Cause": (
                f"At {self.at:%Y-%m-%dT%H:%M:%SZ} an instance was started in response to a difference between desired"
                f" and actual capacity, increasing the capacity from {self.capacity[0]} to {self.capacity[1]}."
            ),
            "StartTime": self.at,
            "EndTime": self.at,
            "StatusCode": self.status,
            "Progress": 100,
            "Details": json.dumps({"Availability Zone": self.zone}),
        }
        if self.message:
            body["StatusMessage"] = self.message
        return body


def vcpus(instance_type: str) -> int:
    return int(INSTANCE_TYPES[instance_type]["VCpuInfo"]["DefaultVCpus"])


def quota_code(instance_type: str) -> str:
    """The On-Demand vCPU quota an instance type counts against (G and VT, P, or Standard)."""
    family = instance_type.split(".", 1)[0]
    if family.startswith(("g", "vt")):
        return "L-DB2E81BA"
    if family.startswith("p"):
        return "L-417A185B"
    return "L-1216C47A"


class Capacity:
    """Stockouts and quota checks for Auto Scaling launches; thread-safe. Callers pass moto ASG objects."""

    def __init__(self, quotas: ServiceQuotasFake) -> None:
        self._quotas = quotas
        self._lock = threading.RLock()
        self._stockouts: set[tuple[str, str]] = set()  # (zone, instance type)
        self._activities: dict[tuple[str, str], list[Activity]] = {}  # (region, group) -> newest last

    def reset(self) -> None:
        with self._lock:
            self._stockouts.clear()
            self._activities.clear()

    # --- test hooks ------------------------------------------------------------------------------------------

    def stock_out(self, instance_type: str, zones: list[str]) -> None:
        with self._lock:
            self._stockouts.update((zone, instance_type) for zone in zones)

    def restock(self, instance_type: str | None = None) -> None:
        with self._lock:
            self._stockouts = {s for s in self._stockouts if instance_type not in (None, s[1])}

    def activities(self, region: str, group: str) -> list[Activity]:
        with self._lock:
            return list(self._activities.get((region, group), []))

    # --- what Auto Scaling does --------------------------------------------------------------------------------

    def refusal(self, region: str, state: Any, zones: list[str]) -> LaunchRefusal | None:
        """Why EC2 would not run the instance of ``state`` (a moto ASG instance just launched), after trying each of
        the group's zones as Auto Scaling does; moves it to a zone with capacity when there is one."""
        instance = state.instance
        instance_type = str(instance.instance_type)
        code = quota_code(instance_type)
        limit = self._quotas.explicit_value(region, code)
        if limit is not None:
            used = sum(
                vcpus(str(i.instance_type))
                for i in moto_state.ec2(region).all_instances()
                if i.id != instance.id and i.state == "running" and quota_code(str(i.instance_type)) == code
            )
            if used + vcpus(instance_type) > limit:
                return LaunchRefusal(
                    "VcpuLimitExceeded",
                    f"You have requested more vCPU capacity than your current vCPU limit of {limit:g} allows for the"
                    f" instance bucket that the specified instance type belongs to. Please visit {VCPU_LIMIT_URL} to"
                    " request an adjustment to this limit.",
                )
        zone = str(instance.placement.zone)
        if (zone, instance_type) not in self._stockouts:
            return None
        open_zones = [z for z in zones if (z, instance_type) not in self._stockouts]
        if open_zones:
            instance.placement.zone = state.availability_zone = open_zones[0]  # Auto Scaling tries the next zone
            return None
        return LaunchRefusal(
            "InsufficientInstanceCapacity",
            f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested"
            f" ({zone}). Our system will be working on provisioning additional capacity.",
        )

    def launch(self, region: str, asg: Any, desired: int | None = None) -> list[LaunchRefusal]:
        """Set (or re-assert) the group's desired capacity as moto does, then undo what EC2 would have refused."""
        with self._lock:
            before = {state.instance.id for state in asg.instance_states}
            asg.set_desired_capacity(asg.desired_capacity if desired is None else desired)
            return self.settle(region, asg, before)

    def settle(self, region: str, asg: Any, before: set[str]) -> list[LaunchRefusal]:
        """Judge the instances moto launched since ``before`` (instance ids): terminate those EC2 would have
        refused, and record every launch as a scaling activity. Returns the refusals."""
        with self._lock:
            count = len(before)
            refusals: list[LaunchRefusal] = []
            for state in list(asg.instance_states):
                instance = state.instance
                if instance.id in before:
                    continue
                refusal = self.refusal(region, state, list(asg.availability_zones))
                zone = str(instance.placement.zone)
                if refusal is None:
                    count += 1
                    self._record(region, Activity(asg.name, zone, "Successful", capacity=(count - 1, count)))
                    continue
                asg.instance_states.remove(state)
                moto_state.ec2(region).terminate_instances([instance.id])
                message = f"{refusal.message} {LAUNCH_FAILED}"
                self._record(region, Activity(asg.name, zone, "Failed", message, capacity=(count, count + 1)))
                refusals.append(refusal)
            return refusals

    def retry(self, region: str, asg: Any) -> list[LaunchRefusal] | None:
        """Auto Scaling keeps launching toward desired: None if the group is full, else what was refused now."""
        if len(asg.active_instances()) >= (asg.desired_capacity or 0):
            return None
        return self.launch(region, asg)

    def _record(self, region: str, activity: Activity) -> None:
        self._activities.setdefault((region, activity.group), []).append(activity)


def activities_xml(activities: list[Activity]) -> str:
    """A DescribeScalingActivities answer in the Auto Scaling query protocol's XML."""
    members = []
    for activity in activities:
        fields = "".join(
            f"<{key}>{escape(value.strftime('%Y-%m-%dT%H:%M:%S.000Z') if isinstance(value, datetime) else str(value))}"
            f"</{key}>"
            for key, value in activity.to_json().items()
        )
        members.append(f"<member>{fields}</member>")
    return (
        '<DescribeScalingActivitiesResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">'
        f"<DescribeScalingActivitiesResult><Activities>{''.join(members)}</Activities>"
        "</DescribeScalingActivitiesResult>"
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        "</DescribeScalingActivitiesResponse>"
    )
