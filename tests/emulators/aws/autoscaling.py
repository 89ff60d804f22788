"""The Auto Scaling rules moto does not model.

- Sizes: desired outside [min, max] is refused with ``ValidationError`` (400). A plain ASG may be 0/0/0; only
  EKS insists on a node group max of at least 1.
- Launches: a desired capacity is accepted even when EC2 cannot run the instances (:mod:`.capacity`); the
  refused launches show as ``Failed`` scaling activities (``DescribeScalingActivities``), the group stays short
  of its desired capacity, and Auto Scaling keeps trying (here: on every describe of the group).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.emulators.aws import moto_state
from tests.emulators.aws.capacity import Capacity, activities_xml
from tests.emulators.aws.wire import AwsCall, Reply, error_reply

Passthrough = Callable[[], Reply]
Handler = Callable[[AwsCall, Passthrough], Reply]


def _int(params: dict[str, list[str]], key: str) -> int | None:
    values = params.get(key)
    return int(values[0]) if values else None


def update_auto_scaling_group(call: AwsCall, passthrough: Passthrough) -> Reply:
    form = call.form()
    group = moto_state.find_asg(call.region, (form.get("AutoScalingGroupName") or [""])[0])
    if group is None:
        return passthrough()  # moto's own "not found" answer
    low = _int(form, "MinSize")
    high = _int(form, "MaxSize")
    want = _int(form, "DesiredCapacity")
    low = (group.min_size or 0) if low is None else low
    high = (group.max_size or 0) if high is None else high
    if high < low:
        return error_reply(
            call, 400, "ValidationError", f"Max bound, {high}, must be greater than or equal to min bound, {low}"
        )
    if want is not None and not low <= want <= high:
        message = f"Desired capacity:{want} must be between the specified min size:{low} and max size:{high}"
        return error_reply(call, 400, "ValidationError", message)
    return passthrough()


def set_desired_capacity(call: AwsCall, passthrough: Passthrough) -> Reply:
    form = call.form()
    group = moto_state.find_asg(call.region, (form.get("AutoScalingGroupName") or [""])[0])
    want = _int(form, "DesiredCapacity")
    if group is None or want is None:
        return passthrough()
    low, high = group.min_size or 0, group.max_size or 0
    if want > high:
        message = f"New SetDesiredCapacity value {want} is above max value {high} for the AutoScalingGroup."
        return error_reply(call, 400, "ValidationError", message)
    if want < low:
        message = f"New SetDesiredCapacity value {want} is below min value {low} for the AutoScalingGroup."
        return error_reply(call, 400, "ValidationError", message)
    return passthrough()


def _group_name(call: AwsCall) -> str:
    return (call.form().get("AutoScalingGroupName") or [""])[0]


def handlers(capacity: Capacity) -> dict[str, Handler]:
    """The handlers, bound to the emulator's EC2 capacity."""

    def launching(check: Handler) -> Handler:
        # moto sets desired and launches at once; EC2 then refuses what it cannot run.
        def handler(call: AwsCall, passthrough: Passthrough) -> Reply:
            group = moto_state.find_asg(call.region, _group_name(call))
            before = {s.instance.id for s in group.instance_states} if group is not None else set()
            reply = check(call, passthrough)
            if group is not None and reply.status == 200:
                capacity.settle(call.region, group, before)
            return reply

        return handler

    def describe_groups(call: AwsCall, passthrough: Passthrough) -> Reply:
        for group in list(moto_state.autoscaling(call.region).autoscaling_groups.values()):
            capacity.retry(call.region, group)
        return passthrough()

    def describe_activities(call: AwsCall, passthrough: Passthrough) -> Reply:
        name = _group_name(call)
        group = moto_state.find_asg(call.region, name)
        if group is not None:
            capacity.retry(call.region, group)
        limit = int((call.form().get("MaxRecords") or ["100"])[0])
        newest_first = list(reversed(capacity.activities(call.region, name)))[:limit]
        return Reply(200, [("Content-Type", "text/xml")], activities_xml(newest_first).encode())

    return {
        "UpdateAutoScalingGroup": launching(update_auto_scaling_group),
        "SetDesiredCapacity": launching(set_desired_capacity),
        "DescribeAutoScalingGroups": describe_groups,
        "DescribeScalingActivities": describe_activities,
    }
