"""What converts a cloud quota's node-group target into the quota's unit, read from the cloud (read-only).

``gpu-jobs diff --cloud-quotas`` asks each cloud for the node groups a changed target counts (their shape, zones and
capacity type) and for those shapes in the quota's unit, as the cloud-quotas job does before it files a request; the
pure diff then counts both policies' working maxima with it (``jobs.core.policy_diff.quota_target_changes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from jobs import errors
from jobs.core.cloud_quotas import GroupSize, Shape
from jobs.core.policy import NodeGroup, Policy
from jobs.core.policy_cloud_quotas import CloudQuota
from jobs.core.policy_diff import Conversion, QuotaTargetChange


class ShapeReader(Protocol):
    """The read half of a cloud's quota adapter (``jobs.cloud_quotas.ports.QuotaCloud`` has it)."""

    def group(self, group: NodeGroup) -> GroupSize | str: ...

    def shapes(self, entry: CloudQuota, names: Sequence[str]) -> Mapping[str, Shape | str]: ...


def read_conversions(
    before: Policy, after: Policy, changes: Sequence[QuotaTargetChange], cloud: Callable[[str], ShapeReader], log: Any
) -> tuple[dict[str, Conversion], int]:
    """Per changed entry, its groups and their shapes as the cloud reports them; and how many entries could not be
    read (each then shows why, and the others are still converted)."""
    entries = {e.name: e for e in (*before.cloud_quotas, *after.cloud_quotas)}  # the change's entry wins
    groups = {g.name: g for g in (*before.node_groups, *after.node_groups)}
    read: dict[str, Conversion] = {}
    failed = 0
    for change in changes:
        entry = entries[change.name]
        names = list(dict.fromkeys(n for side in (change.before, change.after) if side for n, _ in side.nodes))
        try:
            reader = cloud(entry.cloud)
            live = {n: reader.group(groups[n]) if n in groups else f"node group {n}: not in the policy" for n in names}
            counted = {side.instances[0] for side in (change.before, change.after) if side and side.instances}
            wanted = {g.shape for g in live.values() if isinstance(g, GroupSize)} | counted
            shapes = reader.shapes(entry, sorted(wanted))
        except errors.CloudError as exc:
            failed += 1
            log.error("diff.cloud_quota_unreadable", quota=entry.name, error=str(exc))
            read[entry.name] = ({n: f"node group {n}: cannot be read: {exc}" for n in names}, {})
            continue
        read[entry.name] = (live, shapes)
    return read, failed
