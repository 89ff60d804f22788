"""The AKS adapter reads a pool's power state whether the SDK gives it as its model or, while another thread first
builds the model classes, as the raw JSON mapping (the intermittent ``'dict' object has no attribute 'code'``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.mgmt.containerservice.models import AgentPool

from jobs.adapters.azure.nodegroups import _power_code


@dataclass
class PoolAsLeftRaw:
    """The SDK's pool as a racing thread can see it: ``power_state`` still the JSON object."""

    power_state: Any


def test_the_power_state_is_read_from_the_model_and_from_the_raw_mapping() -> None:
    pool = AgentPool({"properties": {"powerState": {"code": "Stopped"}, "count": 3}})
    assert _power_code(pool) == "Stopped"
    assert _power_code(PoolAsLeftRaw({"code": "Stopped"})) == "Stopped"  # type: ignore[arg-type]
    assert _power_code(PoolAsLeftRaw(None)) == ""  # type: ignore[arg-type]
