"""The AKS agent-pool rules the emulator enforces on every PUT, as pure functions over two pool states.

Error codes and messages are the real ones where public sources show them (``InvalidParameter`` count/min/max
messages, ``PropertyChangeNotAllowed``, ``OperationNotAllowed`` busy, "Cannot manually scale and enable cluster
autoscaler in the same update operation"). Where AKS's exact wording is not public (a manual count change
while the autoscaler stays on, stopping a System pool) the code is ``BadRequest`` with
a message that says what AKS refuses; product code must key on the HTTP status and not on these texts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from tests.emulators.azure.arm import ArmError

Mode = Literal["System", "User"]
PowerCode = Literal["Running", "Stopped"]
Priority = Literal["Regular", "Spot"]

MAX_COUNT = 1000  # AKS's per-pool node limit (VMSS pools)


@dataclass(frozen=True)
class AgentPoolState:
    """One agent pool as AKS stores it. Frozen: every change produces a new state."""

    subscription: str
    resource_group: str
    cluster: str
    name: str
    vm_size: str
    count: int
    mode: Mode = "User"
    enable_auto_scaling: bool = False
    min_count: int | None = None
    max_count: int | None = None
    power_state: PowerCode = "Running"
    scale_set_priority: Priority = "Regular"
    node_labels: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    provisioning_state: str = "Succeeded"
    orchestrator_version: str = "1.30.6"
    #: Changes whenever an update succeeds; PUT honours If-Match / If-None-Match against it.
    etag: str = field(default_factory=lambda: str(uuid.uuid4()))


def _invalid(parameter: str, message: str | None = None) -> ArmError:
    return ArmError(
        400,
        "InvalidParameter",
        message
        or f"The value of parameter agentPoolProfile.{parameter} is invalid. "
        "Please see https://aka.ms/aks-naming-rules for more details.",
        target=f"agentPoolProfile.{parameter}",
    )


def _required(parameter: str) -> ArmError:
    return ArmError(
        400,
        "InvalidParameter",
        f"Required parameter properties.{parameter} is missing (null).",
        target=f"properties.{parameter}",
    )


def _optional_int(props: Mapping[str, Any], key: str) -> int | None:
    value = props.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(key)
    return value


def _choice(value: Any, allowed: tuple[str, ...], parameter: str) -> str:
    # ARM enums are case-insensitive on input; store the canonical spelling.
    for option in allowed:
        if isinstance(value, str) and value.lower() == option.lower():
            return option
    raise _invalid(parameter)


def _string_map(value: Any, parameter: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _invalid(parameter)
    return {str(k): v for k, v in value.items()}


def parse_put(
    body: Mapping[str, Any],
    old: AgentPoolState | None,
    *,
    subscription: str,
    resource_group: str,
    cluster: str,
    name: str,
) -> AgentPoolState:
    """The pool a PUT asks for. PUT replaces the resource as in ARM: omitted ``tags``/``nodeLabels`` are
    cleared and an omitted ``enableAutoScaling`` means false; omitted immutable or state fields (``vmSize``,
    ``scaleSetPriority``, ``mode``, ``powerState``) keep their current value."""
    props = body.get("properties")
    if not isinstance(props, dict):
        raise _required("properties")
    count = _optional_int(props, "count")
    if count is None:
        raise _required("count")
    vm_size = props.get("vmSize") or (old.vm_size if old else None)
    if not isinstance(vm_size, str):
        raise _required("vmSize")
    if old and vm_size.lower() != old.vm_size.lower():
        raise ArmError(400, "PropertyChangeNotAllowed", "Changing property 'vmSize' is not allowed.", target="vmSize")
    priority = _choice(
        props.get("scaleSetPriority") or (old.scale_set_priority if old else "Regular"),
        ("Regular", "Spot"),
        "scaleSetPriority",
    )
    if old and priority != old.scale_set_priority:
        raise ArmError(
            400,
            "PropertyChangeNotAllowed",
            "Changing property 'scaleSetPriority' is not allowed.",
            target="scaleSetPriority",
        )
    power = props.get("powerState") or {}
    power_code = _choice(
        power.get("code") or (old.power_state if old else "Running"), ("Running", "Stopped"), "powerState.code"
    )
    autoscaling = props.get("enableAutoScaling")
    if autoscaling is not None and not isinstance(autoscaling, bool):
        raise _invalid("enableAutoScaling")
    return AgentPoolState(
        subscription=subscription,
        resource_group=resource_group,
        cluster=cluster,
        name=name,
        vm_size=vm_size,
        count=count,
        mode=cast(Mode, _choice(props.get("mode") or (old.mode if old else "User"), ("System", "User"), "mode")),
        enable_auto_scaling=bool(autoscaling),
        min_count=_optional_int(props, "minCount"),
        max_count=_optional_int(props, "maxCount"),
        power_state=cast(PowerCode, power_code),
        scale_set_priority=cast(Priority, priority),
        node_labels=_string_map(props.get("nodeLabels"), "nodeLabels"),
        tags=_string_map(props.get("tags"), "tags"),
        orchestrator_version=old.orchestrator_version if old else "1.30.6",
    )


def check_preconditions(old: AgentPoolState | None, if_match: str | None, if_none_match: str | None) -> None:
    """Optimistic concurrency: a PUT carrying the eTag it read is refused if the pool changed since."""
    stale = (if_match is not None and (old is None or if_match.strip('"') not in ("*", old.etag))) or (
        if_none_match is not None and old is not None and if_none_match.strip('"') in ("*", old.etag)
    )
    if stale:
        raise ArmError(
            412,
            "PreconditionFailed",
            "Operation is not allowed because the eTag in the request does not match the agent pool's "
            f"current eTag{f' {old.etag}' if old else ''}.",
        )


def busy_error(pool_name: str, state: str) -> ArmError:
    return ArmError(
        409,
        "OperationNotAllowed",
        f"Operation is not allowed: Another agentpool operation ({pool_name} - {state}) is in progress, "
        "please wait for it to finish before starting a new operation. "
        "See https://aka.ms/aks-pending-operation for more details",
    )


def validate(old: AgentPoolState | None, new: AgentPoolState) -> None:
    """Refuse what AKS refuses. ``old`` is None when the PUT creates the pool."""
    if not 0 <= new.count <= MAX_COUNT:
        raise _invalid("count")
    if new.mode == "System" and new.count < 1:
        raise _invalid(
            "count",
            f"agentPoolProfile.count was {new.count}. It must be greater or equal to minCount:1 and less than "
            f"or equal to maxCount:{MAX_COUNT}. If allowedMinCount was expected to be 0 but is 1: "
            "1) The nodepool is a VMAS pool. 2) api Version is less than 2020-03-01. 3) The node is a system pool.",
        )
    if new.enable_auto_scaling:
        _validate_autoscaler(new)
    if old is not None and new.count != old.count:
        if new.enable_auto_scaling and not old.enable_auto_scaling:
            raise ArmError(
                400,
                "BadRequest",
                "Cannot manually scale and enable cluster autoscaler in the same update operation "
                f"on VMSS Agentpool '{new.name}'.",
            )
        if new.enable_auto_scaling and old.enable_auto_scaling:
            raise ArmError(
                400,
                "BadRequest",
                f"Cannot manually scale agent pool '{new.name}' while the cluster autoscaler is enabled on it: "
                "disable the cluster autoscaler first, or change minCount/maxCount instead.",
            )
    # An autoscaled pool may be stopped: AKS stops its cluster autoscaler with it and restarts it on start
    # (learn.microsoft.com/azure/aks/start-stop-nodepools), so enableAutoScaling/minCount/maxCount stay.
    if new.power_state == "Stopped" and new.mode == "System":
        raise ArmError(
            400,
            "BadRequest",
            f"Cannot stop agent pool '{new.name}': System mode agent pools cannot be stopped, "
            "only User mode agent pools can.",
        )


def _validate_autoscaler(pool: AgentPoolState) -> None:
    if pool.min_count is None:
        raise _required("minCount")
    if pool.max_count is None:
        raise _required("maxCount")
    allowed_min = 1 if pool.mode == "System" else 0
    if not allowed_min <= pool.min_count <= MAX_COUNT:
        raise _invalid("minCount")
    if not pool.min_count <= pool.max_count <= MAX_COUNT:
        raise _invalid("maxCount")
    if not pool.min_count <= pool.count <= pool.max_count:
        raise _invalid(
            "count",
            f"agentPoolProfile.count was {pool.count}. It must be greater or equal to minCount:{pool.min_count} "
            f"and less than or equal to maxCount:{pool.max_count}.",
        )
