"""What the sweep job needs from the outside, as Protocols: each cluster's Prometheus and GPU pods, each account's
GPU instances. Adapters raise ``jobs.errors.CloudError`` subclasses (Throttled, Unavailable, Invalid, Denied,
NotFound, Conflict, OutcomeUnknown), never SDK exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal, Protocol

from jobs.core.idle_pods import PodInfo, Sample
from jobs.core.untagged import GpuInstance


class Metrics(Protocol):
    """One cluster's Prometheus (or a shared Thanos): instant queries at ``at``."""

    def query(self, promql: str, at: datetime) -> list[Sample]:
        """The query's vector result. 5xx and unreachable: Unavailable; 429: Throttled; a bad query: Invalid."""
        ...


class Pods(Protocol):
    """One cluster's GPU pods, and the writes the sweep makes to them (``jobs.adapters.kube.pods``)."""

    def gpu_pods(self) -> list[PodInfo]:
        """Every pod that asks for GPUs and has not finished: one paginated list of the cluster's pods."""
        ...

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        """The pod now (None when gone): read again before an action."""
        ...

    def annotate(self, pod: PodInfo, changes: Mapping[str, str | None]) -> None:
        """Set (str) or remove (None) annotations; only if it is still the same pod (uid)."""
        ...

    def delete(self, pod: PodInfo) -> None:
        """Delete gracefully (the pod's own grace period), only if it is still the same pod (uid)."""
        ...

    def scale_owner(self, pod: PodInfo) -> str:
        """Scale the pod's Deployment (through its ReplicaSet) or StatefulSet to 0, keeping the replicas it had in
        the owner's ``gpu-jobs/scaled-from-replicas``; returns what was scaled ("Deployment ml/llm from 2"). An owner
        that cannot be scaled raises Invalid with the reason."""
        ...


class Instances(Protocol):
    """One cloud's GPU instances in one account scope."""

    def gpu_instances(self, account: str) -> list[GpuInstance]:
        """Every instance of the account whose type has GPUs (by the cloud's own type data), with its tags."""
        ...

    def set_tags(self, instance: GpuInstance, changes: Mapping[str, str | None]) -> None:
        """Set (str) or remove (None) tags (labels on GCP, with its fingerprint: a stale one raises Conflict)."""
        ...

    def act(self, instance: GpuInstance, action: Literal["stop", "terminate"]) -> None:
        """Stop (Azure: deallocate, so it stops billing) or terminate; returns once the cloud accepted it."""
        ...
