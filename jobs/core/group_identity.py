"""Which group a record describes (the cloud's group in its cluster, not the policy's name for it), and the error of
a record that cannot be used. A leaf of the core: the resolved view names each group's identity without the record
format (``group_record``) and what it holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class RecordError(ValueError):
    """A stored record that cannot be used: malformed, of another schema, or describing another group."""


@dataclass(frozen=True)
class GroupIdentity:
    """What a record describes: the cloud's group in its cluster, not the policy's name for it. A record is applied
    only to the group it was taken from: a renamed group keeps its record, a name pointed elsewhere does not."""

    cluster: str
    cloud: str
    locator: tuple[tuple[str, str], ...]  # sorted (key, value) pairs, e.g. (("nodePool", "h100"), ...)

    @classmethod
    def of(cls, cluster: str, cloud: str, locator: Mapping[str, Any]) -> GroupIdentity:
        return cls(cluster, cloud, tuple(sorted((k, str(v)) for k, v in locator.items() if v is not None)))

    def describe(self) -> str:
        order = ("region", "project", "subscription", "location", "resourceGroup", "cluster")
        values = sorted(self.locator, key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
        return f"{self.cloud} {'/'.join(v for _, v in values)} in cluster {self.cluster}"

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "cloud": self.cloud, "locator": dict(self.locator)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupIdentity:
        locator = data["locator"]
        if not isinstance(locator, Mapping):
            raise RecordError("describes.locator is not a mapping")
        return cls.of(str(data["cluster"]), str(data["cloud"]), locator)
