"""The boundaries of the nodegroups job: what it needs from a cloud and from the cluster.

Adapters implement these Protocols (``jobs/adapters``); tests fake them at this boundary or run the adapters
against the local emulators over HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import RecordError
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, NodeInfo
from jobs.core.nodegroups import CloudGroup, Step
from jobs.core.orphan_records import OrphanRecord
from jobs.core.policy import NodeGroup
from jobs.core.wake import PendingPod
from jobs.events import ObjectRef


class NodeGroupCloud(Protocol):
    """One provider kind's node groups (``jobs.core.providers``: EKS, ASG, GKE, AKS); which groups it gets, their
    provider rules and node label are the resolved policy's. Every method may raise the exceptions of
    ``jobs.errors``; none retries Busy/Throttled/Unavailable itself (the job does, with backoff and a deadline).
    Implementations are called from several threads at once and must be thread-safe."""

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        """The group's configuration: one read in the common case. ``live_size=True`` may make extra reads to
        fill ``desired`` where the provider does not report it on the group itself (GKE: instance group
        managers' target size); it is asked for only before taking a record."""
        ...

    def apply(self, group: NodeGroup, step: Step) -> None:
        """Make one change and block until the provider reports it complete (EKS update Successful, GKE
        operation DONE, AKS LRO Succeeded); raise if it failed or did not complete in time."""
        ...

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        """GPU node groups in the same clusters (EKS/GKE/AKS) as ``groups``, listed or not."""
        ...


class Cluster(Protocol):
    """The Kubernetes side: nodes and GPU pods (reads), cordon and evict (writes)."""

    def nodes(self) -> list[NodeInfo]: ...

    def gpu_pods(self) -> list[GpuPod]:
        """Pods that request GPUs and are not finished (Pending with a node, or Running)."""
        ...

    def gpu_and_pending_pods(self) -> tuple[list[GpuPod], list[PendingPod]]:
        """``gpu_pods``, and the Pending pods that ask for GPUs and have no node yet (wake on demand): one list."""
        ...

    def wake_notices(self) -> frozenset[str]:
        """``namespace/name`` of each wake Event (waking, not woken) this job put on a pod."""
        ...

    def shutdown_warnings(self) -> frozenset[str]:
        """``namespace/name`` of each shutdown warning Event this job put on a pod and the cluster still keeps."""
        ...

    def cordon(self, node: str) -> None:
        """Mark the node unschedulable, and mark it as the job's cordon (durable: a crash does not forget it)."""
        ...

    def uncordon(self, node: str) -> None:
        """Undo the job's own cordon (and its mark); a node a person cordoned is never passed here."""
        ...

    def evict(self, pod: GpuPod) -> bool:
        """Through the Eviction API, so PodDisruptionBudgets hold, with the pod's uid as a precondition (never its
        same-named replacement); raises ``BudgetRefused`` (a ``Busy``) naming the budget when one refuses. False
        when the pod was already gone or replaced."""
        ...

    def disruptions_allowed(self, budget: str) -> int | None:
        """``status.disruptionsAllowed`` of the PodDisruptionBudget ``namespace/name``; None when it is gone."""
        ...

    def pod_exists(self, pod: GpuPod) -> bool:
        """Whether this pod (its uid) is still there: an evicted pod terminates within its grace period, and a pod
        of the same name with another uid is a replacement, not this one."""
        ...


class RecordStore(Protocol):
    """Durable pre-shutdown records, one per node group, written with optimistic concurrency. Each record says
    which group it describes (a ``GroupIdentity``); the store saves it with that identity."""

    def load(self) -> Mapping[str, Record | RecordError]:
        """The record of each group that has one, or why it cannot be used (malformed, another group's)."""
        ...

    def save(self, group: str, record: Record) -> None: ...

    def orphans(self) -> tuple[OrphanRecord, ...]:
        """Records in the store that no group of the policy claims, as stored (the job reports them)."""
        ...

    def ref(self, group: str) -> ObjectRef:
        """The group's record ConfigMap, for an Event on it: with the uid the store read or wrote (never a read)."""
        ...
