"""The nodegroups job's observe step on one cluster: each group in its cloud (concurrently), its nodes, GPU pods and
record in the cluster, and, once per run, the GPU node groups and records the policy does not name."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from jobs.core.group_identity import GroupIdentity, RecordError
from jobs.core.group_record import Record
from jobs.core.nodegroup_plan import GpuPod, NodeInfo, ObservedGroup
from jobs.core.nodegroups import CloudGroup
from jobs.core.orphan_records import OrphanRecord
from jobs.core.policy import NodeGroup, Policy
from jobs.core.resolved import view_of
from jobs.core.wake import NodeShape, PendingPod
from jobs.errors import CloudError
from jobs.nodegroups.ports import Cluster
from jobs.nodegroups.settings import NodeGroupsSettings, Ports
from jobs.retry import Backoff


@dataclass(frozen=True)
class Observation:
    groups: tuple[ObservedGroup, ...]
    unmanaged: tuple[CloudGroup, ...]
    orphans: tuple[OrphanRecord, ...] = ()
    pending: tuple[PendingPod, ...] = ()  # Pending GPU pods with no node (read only where a group has wake)
    told: frozenset[str] = frozenset()  # the wake Events those pods already carry


def identities(policy: Policy, cluster: str | None) -> dict[str, GroupIdentity]:
    """What each node group of ``cluster`` (every cluster: None) is in its cloud, for the records it keeps."""
    return {g.name: view_of(policy).group(g.name).identity for g in _groups_of(policy, cluster)}


def _groups_of(policy: Policy, cluster: str | None) -> tuple[NodeGroup, ...]:
    return policy.groups_in(cluster) if cluster else policy.node_groups


def selected_groups(policy: Policy, settings: NodeGroupsSettings) -> list[NodeGroup]:
    return [g for g in _groups_of(policy, settings.cluster) if settings.only in (None, g.name)]


def observe(
    policy: Policy, ports: Ports, settings: NodeGroupsSettings, log: Any, *, discover: bool = True
) -> Observation:
    groups = selected_groups(policy, settings)
    # Kubernetes reads are retried like cloud reads: one 500 must not fail a whole cluster.
    records = settings.backoff.call(ports.records.load)
    nodes = settings.backoff.call(ports.cluster.nodes)
    pods_by_node: dict[str, list[GpuPod]] = {}
    placed, pending = settings.backoff.call(ports.cluster.gpu_and_pending_pods)
    for pod in placed:
        pods_by_node.setdefault(pod.node, []).append(pod)
    if not any(g.wake is not None and g.wake.on_pending_pods for g in groups):
        pending = []
    cluster = settings.cluster or ""
    cordoned_by_job = {n.name for n in nodes if n.cordoned_by_job}

    def one(group: NodeGroup) -> ObservedGroup:
        resolved = view_of(policy).group(group.name)  # its kind and node label follow from its locator, at load
        kind = resolved.kind
        cloud = ports.clouds[kind]
        stored = records.get(group.name)
        if isinstance(stored, RecordError):
            # Its sizes to restore are unknown: leave the group as it is and say so (this group only).
            return ObservedGroup(group, kind, None, None, error=str(stored), cluster=cluster, record_error=str(stored))
        record = stored
        selector = resolved.node_selector
        mine = tuple(n.name for n in nodes if selector.items() <= n.labels.items()) if selector else ()
        # Where the provider reports no live size (GKE), read it (one more call) when it matters: before judging
        # "no nodes", and when the job believes the group down while nodes are in sight (resized by hand at
        # night): level-triggered means the real size, not the size this job last set.
        live = not mine or (record is not None and record.phase != "up")
        try:
            config = settings.backoff.call(lambda: cloud.describe(group, live_size=live))
        except CloudError as exc:
            return ObservedGroup(group, kind, None, record, error=str(exc), cluster=cluster)
        except Exception as exc:  # a bug or an untranslated SDK error: this group only, not the run
            log.error("nodegroup.describe_crashed", node_group=group.name, error=repr(exc), exc_info=True)
            return ObservedGroup(group, kind, None, record, error=f"unexpected error: {exc!r}", cluster=cluster)
        if selector is None:
            reason = "no node label for this group: its nodes and GPU pods cannot be seen (set nodeSelector)"
            return ObservedGroup(group, kind, config, record, cluster=cluster, nodes_error=reason)
        pods = tuple(p for n in mine for p in pods_by_node.get(n, []))
        cordoned = tuple(name for name in mine if name in cordoned_by_job)
        budgets = _budgets(ports.cluster, record, settings.backoff)
        observed = ObservedGroup(group, kind, config, record, pods, mine, cluster=cluster, cordoned=cordoned)
        return replace(observed, budgets=budgets, shape=_shape([n for n in nodes if n.name in mine]))

    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        observed = _with_warnings(policy, ports, settings, tuple(pool.map(one, groups)), log)
        unmanaged = _unmanaged(policy, ports, groups, pool, log) if discover and settings.only is None else ()
    orphans = _orphans(policy, ports, settings) if discover and settings.only is None else ()
    return Observation(observed, unmanaged, orphans, tuple(pending), _told(ports, settings, pending, log))


def _shape(nodes: list[NodeInfo]) -> NodeShape | None:
    """What every one of a group's nodes has: the labels and taints they share, the GPU resources any offers."""
    if not nodes:
        return None
    labels = dict(nodes[0].shape.labels)
    taints = set(nodes[0].shape.taints)
    for node in nodes[1:]:
        labels = {k: v for k, v in labels.items() if node.shape.labels.get(k) == v}
        taints &= set(node.shape.taints)
    resources = sorted({r for n in nodes for r in n.shape.resources})
    return NodeShape(labels, tuple(sorted(taints, key=lambda t: (t.key, t.effect))), tuple(resources))


def _told(ports: Ports, settings: NodeGroupsSettings, pending: list[PendingPod], log: Any) -> frozenset[str]:
    """The wake Events already on pods (one list, only when GPU pods are Pending where a group wakes). Unreadable is
    not fatal: each is named per pod, so one sent again meets its first (AlreadyExists) and adds nothing."""
    if not pending:
        return frozenset()
    try:
        return settings.backoff.call(ports.cluster.wake_notices)
    except CloudError as exc:
        log.warning("nodegroup.wake_events_unreadable", error=str(exc))
        return frozenset()


def _with_warnings(
    policy: Policy, ports: Ports, settings: NodeGroupsSettings, observed: tuple[ObservedGroup, ...], log: Any
) -> tuple[ObservedGroup, ...]:
    """Each group with the shutdown warnings its pods already carry: read (one list) only where a group that warns
    has GPU pods running. Unreadable is not fatal: the Events are named per pod and shutdown, so a warning sent
    again meets its first one (AlreadyExists) and adds nothing."""
    if not any(og.pods and view_of(policy).group(og.group.name).settings.warn_before for og in observed):
        return observed
    try:
        found = settings.backoff.call(ports.cluster.shutdown_warnings)
    except CloudError as exc:
        log.warning("nodegroup.warnings_unreadable", error=str(exc))
        return observed

    def mine(og: ObservedGroup) -> frozenset[str]:
        prefixes = tuple(f"{p.namespace}/{p.name[:200]}" for p in og.pods)
        return frozenset(name for name in found if name.startswith(prefixes))

    return tuple(replace(og, warned=mine(og)) if og.pods else og for og in observed)


def _orphans(policy: Policy, ports: Ports, settings: NodeGroupsSettings) -> tuple[OrphanRecord, ...]:
    """Records in this cluster's store that no group of the policy claims. Where one API serves several clusters
    of the policy, each cluster's run reports its own; a record of a cluster the policy no longer has is reported
    by every run that sees it (no other run would)."""
    found = settings.backoff.call(ports.records.orphans)
    if settings.cluster is None:
        return found
    names = {c.name for c in policy.clusters}
    context = next((c.kube_context for c in policy.clusters if c.name == settings.cluster), None)

    def ours(orphan: OrphanRecord) -> bool:
        identity = orphan.identity
        return identity is None or identity.cluster == settings.cluster or identity.cluster not in names

    return tuple(replace(o, context=context) for o in found if ours(o))


def _budgets(cluster: Cluster, record: Record | None, backoff: Backoff) -> tuple[tuple[str, int | None], ...]:
    """The budgets that blocked the group's last drain, as they are now (read only after a drain gave up). One that
    cannot be read counts as changed (-1): the drain is tried again rather than held back on an unknown."""
    block = record.drain_blocked if record is not None else None
    if block is None:
        return ()
    found: list[tuple[str, int | None]] = []
    for name, _ in block.budgets:
        try:
            found.append((name, backoff.call(partial(cluster.disruptions_allowed, name))))
        except CloudError:
            found.append((name, -1))
    return tuple(found)


def cluster_key(group: NodeGroup) -> tuple[str, ...]:
    loc = group.locator.model_dump(exclude_none=True)
    return (group.cloud, *(str(loc[k]) for k in ("region", "project", "subscription", "cluster") if k in loc))


def _unmanaged(
    policy: Policy, ports: Ports, groups: list[NodeGroup], pool: ThreadPoolExecutor, log: Any
) -> tuple[CloudGroup, ...]:
    """GPU node groups in the same clusters as the policy's, that the policy does not list (one list per cluster,
    clusters concurrently)."""
    listed = {
        (g.cloud, tuple(sorted((k, str(v)) for k, v in g.locator.model_dump(by_alias=True, exclude_none=True).items())))
        for g in policy.node_groups
    }
    clusters: dict[tuple[str, ...], list[NodeGroup]] = {}
    for group in groups:
        clusters.setdefault(cluster_key(group), []).append(group)

    def one(members: list[NodeGroup]) -> list[CloudGroup]:
        try:  # a cluster's groups are of one kind (the locator fields that key it are the kind's)
            return ports.clouds[view_of(policy).group(members[0].name).kind].discover(members)
        except CloudError as exc:
            log.warning("nodegroup.discover_failed", cloud=members[0].cloud, error=str(exc))
            return []

    found = [c for batch in pool.map(one, clusters.values()) for c in batch]
    unique = {(c.cloud, tuple(sorted(c.locator.items()))): c for c in found}
    return tuple(c for key, c in unique.items() if key not in listed)
