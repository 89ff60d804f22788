"""What the nodegroups job on one cluster is given: its settings beyond the run's, and its ports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobs.core.providers import ProviderKind
from jobs.deadline import Deadline
from jobs.events import OnceEvents
from jobs.lease import RunLock
from jobs.nodegroups.ports import Cluster, NodeGroupCloud, RecordStore
from jobs.retry import Backoff
from jobs.runner import RunSettings, Witness


@dataclass(frozen=True)
class NodeGroupsSettings:
    """The run's settings (``RunSettings``: dry run, limit, workers, Lease, deadline) and the nodegroups job's own."""

    run: RunSettings = field(default_factory=lambda: RunSettings(workers=16))
    only: str | None = None
    cluster: str | None = None  # act on this cluster's groups (None: every group of the policy, one API for all)
    backoff: Backoff = field(default_factory=Backoff)
    drain_poll_s: float = 5.0
    settle_timeout_s: float = 1200.0  # how long an update in flight may take before its outcome is judged

    @property
    def workers(self) -> int:
        """Groups read and worked on at once."""
        return self.run.workers

    @property
    def deadline(self) -> Deadline:
        """The run's: bounds the drain and the settling."""
        return self.run.deadline


@dataclass(frozen=True)
class Ports:
    clouds: Mapping[ProviderKind, NodeGroupCloud]  # the adapter of each provider kind the policy uses
    cluster: Cluster
    records: RecordStore
    lock: RunLock
    events: OnceEvents  # on the group's record; shutdown warnings on pods, once each
    witness: Witness | None = None  # which cluster ``cluster`` reaches (jobs.runner)
