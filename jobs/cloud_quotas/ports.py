"""What the cloud-quotas job needs from each cloud and from the install's cluster, as Protocols."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from jobs.core.cloud_quotas import Asked, CloudRequest, GroupSize, QuotaFacts, Shape, Unreadable
from jobs.core.policy import NodeGroup
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.events import ObjectRef


class QuotaCloud(Protocol):
    """One cloud's quota API and the data that converts instances into the quota's unit."""

    def read(self, entry: CloudQuota, remembered: Asked | None) -> QuotaFacts:
        """The quota now: limit, usage (with headroom), whether it can be raised, the open request, and the
        remembered request as the cloud reports it. An unknown quota is ``QuotaFacts.error``, not an exception."""
        ...

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> Mapping[str, Shape | str]:
        """Each instance/machine type or VM size in the quota's unit, or why it is unknown."""
        ...

    def group(self, group: NodeGroup) -> GroupSize | str:
        """A node group's shape, live max size and capacity type, or why it cannot be read."""
        ...

    def file(self, entry: CloudQuota, value: int) -> CloudRequest:
        """Ask for ``value``. Raises ``Conflict`` when one is open already; a lost answer is ``Unavailable``."""
        ...


class RequestStore(Protocol):
    """What was asked, per entry, durably in the install's cluster (``ConfigMapState``)."""

    def load(self) -> dict[str, Asked | Unreadable]: ...

    def save(self, key: str, value: Asked | Unreadable) -> None: ...

    def ref(self, key: str) -> ObjectRef:
        """The entry's ConfigMap, for an Event on it (the account's work has no Kubernetes object of its own), with
        the uid the store read or wrote (never a read)."""
        ...
