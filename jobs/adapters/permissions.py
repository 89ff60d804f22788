"""What each cloud adapter module calls, as its cloud's permissions, declared in one shape next to the code
(``PERMISSIONS``), so the documents operators attach to the job's cloud identity (kustomize/iam/) can be checked
against the code: exactly the union of the modules a command is wired with, no permission more, none less
(tests/unit/test_permissions.py, tests/integration/test_deploy.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Cloud = Literal["aws", "gcp", "azure"]


@dataclass(frozen=True)
class Permissions:
    """One module's permissions in its cloud's own terms: IAM actions (``eks:DescribeNodegroup``), GCP IAM
    permissions (``container.clusters.get``) or Azure RBAC actions (``Microsoft.ContainerService/.../read``)."""

    cloud: Cloud
    actions: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.actions)) != len(self.actions):
            raise ValueError(f"{self.cloud} permissions listed twice: {sorted(self.actions)}")


def union(declared: Iterable[Permissions]) -> dict[Cloud, frozenset[str]]:
    """Cloud -> every permission the given modules declare, as one document per cloud grants them."""
    merged: dict[Cloud, frozenset[str]] = {}
    for permissions in declared:
        merged[permissions.cloud] = merged.get(permissions.cloud, frozenset()) | frozenset(permissions.actions)
    return merged
