"""The Auto Scaling size rules moto does not check (it accepts desired outside [min, max]).

Real Auto Scaling refuses such a request with ``ValidationError`` (400). A plain ASG may be 0/0/0; only EKS
insists on a node group max of at least 1.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.emulators.aws import moto_state
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


HANDLERS: dict[str, Handler] = {
    "UpdateAutoScalingGroup": update_auto_scaling_group,
    "SetDesiredCapacity": set_desired_capacity,
}
