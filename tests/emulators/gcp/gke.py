"""GKE (container v1) over REST: clusters, node pools, setSize / setAutoscaling and their operations.

Provider rules enforced here:
- ``nodeCount`` is per zone; a pool in N zones runs ``nodeCount x N`` nodes.
- A node pool reports no live node count: ``initialNodeCount`` stays the creation value. The live per-zone
  size is visible only where the real API shows it: the ``targetSize`` of the pool's per-zone instance group
  managers (``instanceGroupUrls``), served by the Compute part of this emulator.
- Writes return an Operation (PENDING, RUNNING, then DONE once ``operation_seconds`` have passed, polled or not,
  as real operations run on their own; ``operation_polls`` is a test-only shortcut, off by default); the change
  lands at DONE, in the emulator even if no request comes (a deadline wakes it).
- GKE runs "one cluster-level operation at a time, or one operation per node pool" (GKE docs, Troubleshoot
  concurrent operations): a node pool write while that pool, or the cluster itself, has an operation not DONE
  answers 400 FAILED_PRECONDITION with ErrorInfo reason ``CLUSTER_ALREADY_HAS_OPERATION`` (the REST client raises
  ``google.api_core.exceptions.BadRequest``); writes to other node pools of the cluster go ahead. A cluster-level
  operation (``start_cluster_operation``, e.g. a control plane upgrade GKE starts itself) blocks every write,
  and is refused while any operation runs. At most ``MAX_CONCURRENT_OPERATIONS`` per cluster: past that, 429
  RESOURCE_EXHAUSTED "hits the concurrent operations quota".
- setSize is accepted while autoscaling is enabled: the autoscaler never drags a pool into [min, max] by itself
  (it only acts for pending pods or idle nodes), and this emulator runs no autoscaler.
- setAutoscaling validates limits the way GKE does (max >= 1, min <= max, per-zone and total limits exclusive).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from google.cloud import container_v1

from tests.emulators.base import FaultKind
from tests.emulators.gcp.capacity import QuotaLookup, ZoneCapacity, deploy_error
from tests.emulators.gcp.ops import StagedOperation
from tests.emulators.gcp.wire import (
    SEG,
    ApiError,
    Call,
    GoogleError,
    Reply,
    Route,
    google_fault,
    operation_id,
    proto_reply,
    route,
)

CONTAINER = "https://container.googleapis.com/v1"
COMPUTE = "https://www.googleapis.com/compute/v1"
GKE_VERSION = "1.30.5-gke.1014001"
#: GKE taints every GPU node pool so that only pods asking for GPUs land there.
GPU_TAINT = container_v1.NodeTaint(
    key="nvidia.com/gpu", value="present", effect=container_v1.NodeTaint.Effect.NO_SCHEDULE
)
MAX_NODES_PER_ZONE = 1000
#: GKE's per-cluster cap on operations running at once ("hits the concurrent operations quota 5").
MAX_CONCURRENT_OPERATIONS = 5

Op = container_v1.Operation
RESOURCE_EXHAUSTED = 8  # google.rpc.Code of an operation whose instances could not all be created


@dataclass
class Autoscaling:
    enabled: bool = True
    min_node_count: int = 0
    max_node_count: int = 0
    total_min_node_count: int = 0
    total_max_node_count: int = 0
    location_policy: str = "BALANCED"

    def to_proto(self) -> container_v1.NodePoolAutoscaling:
        return container_v1.NodePoolAutoscaling(
            enabled=self.enabled,
            min_node_count=self.min_node_count,
            max_node_count=self.max_node_count,
            total_min_node_count=self.total_min_node_count,
            total_max_node_count=self.total_max_node_count,
            location_policy=container_v1.NodePoolAutoscaling.LocationPolicy.__members__[self.location_policy],
        )


@dataclass
class Pool:
    project: str
    location: str
    cluster: str
    name: str
    zones: tuple[str, ...]
    size: int  # live per-zone size: never rendered on the node pool itself
    initial_node_count: int
    machine_type: str
    accelerator_type: str
    accelerator_count: int
    labels: dict[str, str]
    spot: bool
    autoscaling: Autoscaling | None
    igm_suffix: str = field(default_factory=lambda: secrets.token_hex(4))
    #: Instances actually running per zone (the size is each zone's target); filled at seeding.
    running: dict[str, int] = field(default_factory=dict)
    #: Per zone, why its instance group is short of the target (GKE's statusMessage part), while it is.
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def status_message(self) -> str:
        return "; ".join(self.errors[zone] for zone in sorted(self.errors))

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}/nodePools/{self.name}"

    def igm_name(self) -> str:
        return f"gke-{self.cluster}-{self.name}-{self.igm_suffix}-grp"[:63]

    def igm_url(self, zone: str) -> str:
        return f"{COMPUTE}/projects/{self.project}/zones/{zone}/instanceGroupManagers/{self.igm_name()}"

    def to_proto(self, reconciling: bool) -> container_v1.NodePool:
        accelerators = []
        if self.accelerator_type and self.accelerator_count:
            accelerators.append(
                container_v1.AcceleratorConfig(
                    accelerator_count=self.accelerator_count, accelerator_type=self.accelerator_type
                )
            )
        config = container_v1.NodeConfig(
            machine_type=self.machine_type,
            disk_size_gb=100,
            image_type="COS_CONTAINERD",
            labels=self.labels,
            accelerators=accelerators,
            taints=[GPU_TAINT] if accelerators else [],
            spot=self.spot,
        )
        status = container_v1.NodePool.Status.RECONCILING if reconciling else container_v1.NodePool.Status.RUNNING
        if not reconciling and self.errors:
            status = container_v1.NodePool.Status.RUNNING_WITH_ERROR
        return container_v1.NodePool(
            name=self.name,
            config=config,
            initial_node_count=self.initial_node_count,
            locations=list(self.zones),
            self_link=f"{CONTAINER}/{self.path}",
            version=GKE_VERSION,
            instance_group_urls=[self.igm_url(zone) for zone in self.zones],
            status=status,
            status_message=self.status_message if status == container_v1.NodePool.Status.RUNNING_WITH_ERROR else "",
            autoscaling=self.autoscaling.to_proto() if self.autoscaling else None,
            management=container_v1.NodeManagement(auto_upgrade=True, auto_repair=True),
        )


@dataclass
class Cluster:
    project: str
    location: str
    name: str
    pools: dict[str, Pool] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.name}"


@dataclass
class GkeOperation:
    project: str
    location: str
    cluster: str
    pool: str | None  # None: a cluster-level operation
    op_type: str
    staged: StagedOperation
    #: Set when the operation ends in error: GKE reports it DONE with ``error`` (google.rpc.Status) and
    #: ``statusMessage``.
    error: tuple[int, str] | None = None

    def to_proto(self) -> container_v1.Operation:
        self.staged.refresh()
        base = f"{CONTAINER}/projects/{self.project}/locations/{self.location}"
        failure: dict[str, object] = {}
        if self.error is not None and self.staged.status == "DONE":
            failure = {"error": {"code": self.error[0], "message": self.error[1]}, "status_message": self.error[1]}
        return container_v1.Operation(
            **failure,  # type: ignore[arg-type]
            name=self.staged.name,
            zone=self.location,
            location=self.location,
            operation_type=Op.Type.__members__[self.op_type],
            status=Op.Status.__members__[self.staged.status],
            self_link=f"{base}/operations/{self.staged.name}",
            target_link=f"{base}/clusters/{self.cluster}" + (f"/nodePools/{self.pool}" if self.pool else ""),
            start_time=self.staged.started_at,
            end_time=self.staged.ended_at,
        )


_LOC = f"/v1/projects/(?P<project>{SEG})/locations/(?P<location>{SEG})"
_CLUSTER = f"{_LOC}/clusters/(?P<cluster>{SEG})"
_POOL = f"{_CLUSTER}/nodePools/(?P<pool>{SEG})"


class Gke:
    """State and REST handlers of the GKE part. ``lock`` is the emulator's, shared by all services."""

    def __init__(
        self,
        lock: threading.RLock,
        operation_polls: Callable[[], int | None],
        operation_seconds: Callable[[], float | None] = lambda: None,
        quota: QuotaLookup = lambda project, quota_id, region: None,
        wake_at: Callable[[float], None] = lambda deadline: None,
    ) -> None:
        self._lock = lock
        self._wake_at = wake_at
        self.capacity = ZoneCapacity(quota)
        self._polls = operation_polls
        self._seconds = operation_seconds
        self.clusters: dict[tuple[str, str, str], Cluster] = {}
        self.operations: dict[tuple[str, str, str], GkeOperation] = {}

    def routes(self) -> list[Route]:
        return [
            route("GET", f"{_LOC}/clusters", "clusters.list", self._list_clusters),
            route("GET", _CLUSTER, "clusters.get", self._get_cluster),
            route("GET", f"{_CLUSTER}/nodePools", "nodePools.list", self._list_pools),
            route("GET", _POOL, "nodePools.get", self._get_pool),
            route("POST", f"{_POOL}:setSize", "nodePools.setSize", self._set_size),
            route("POST", f"{_POOL}:setAutoscaling", "nodePools.setAutoscaling", self._set_autoscaling),
            route("GET", f"{_LOC}/operations", "operations.list", self._list_operations),
            route("GET", f"{_LOC}/operations/(?P<op>{SEG})", "operations.get", self._get_operation),
        ]

    def fault(self, kind: FaultKind, operation: str, match: re.Match[str]) -> ApiError:
        groups = match.groupdict()
        return google_fault(kind, operation, lambda: self._busy_error(groups.get("cluster") or "", None))

    # ----- seeding and inspection (test side) -----

    def add_pool(self, pool: Pool) -> None:
        with self._lock:
            key = (pool.project, pool.location, pool.cluster)
            cluster = self.clusters.setdefault(key, Cluster(pool.project, pool.location, pool.cluster))
            pool.running = pool.running or dict.fromkeys(pool.zones, pool.size)
            cluster.pools[pool.name] = pool

    def find_pool(self, project: str, location: str, cluster: str, name: str) -> Pool | None:
        found = self.clusters.get((project, location, cluster))
        return found.pools.get(name) if found else None

    def find_pool_by_igm(self, project: str, zone: str, igm: str) -> Pool | None:
        for cluster in self.clusters.values():
            for pool in cluster.pools.values():
                if pool.project == project and zone in pool.zones and pool.igm_name() == igm:
                    return pool
        return None

    def refresh(self) -> None:
        """Finish every operation whose time is up, so that what it changes shows on the next read; instance groups
        short of their target try again."""
        with self._lock:
            for op in self.operations.values():
                op.staged.refresh()
            for cluster in self.clusters.values():
                for pool in cluster.pools.values():
                    if pool.errors:
                        self.deliver(pool)

    def deliver(self, pool: Pool) -> str:
        """Bring each zone's running instances to the target as far as Compute allows; returns GKE's error text
        (empty when every zone is full)."""
        region = pool.location if pool.location.count("-") == 1 else pool.location.rsplit("-", 1)[0]
        for zone in pool.zones:
            have = min(pool.running.get(zone, 0), pool.size)
            pool.errors.pop(zone, None)
            while have < pool.size:
                gpus = (pool.accelerator_type, pool.accelerator_count, pool.spot)
                reason = self.capacity.refusal(
                    pool.project, zone, pool.machine_type, gpus, self._gpus_used(pool, region)
                )
                if reason is not None:
                    pool.errors[zone] = deploy_error(zone, pool.size, reason)
                    break
                have += 1
                pool.running[zone] = have
            pool.running[zone] = have
        return pool.status_message

    def _gpus_used(self, like: Pool, region: str) -> int:
        return sum(
            n * pool.accelerator_count
            for cluster in self.clusters.values()
            for pool in cluster.pools.values()
            if pool.project == like.project and (pool.accelerator_type, pool.spot) == (like.accelerator_type, like.spot)
            for zone, n in pool.running.items()
            if zone.startswith(region + "-")
        )

    def running_nodes(self, pool: Pool) -> int:
        """The pool's instances that exist, all zones: what registers as Kubernetes nodes."""
        return sum(pool.running.get(zone, 0) for zone in pool.zones)

    def finish_all(self) -> None:
        with self._lock:
            for op in self.operations.values():
                op.staged.finish()

    # ----- rules -----

    def _running_ops(self, project: str, location: str, cluster: str) -> list[GkeOperation]:
        return [
            op
            for op in self.operations.values()
            if (op.project, op.location, op.cluster) == (project, location, cluster) and not op.staged.done
        ]

    def _blocking_op(self, project: str, location: str, cluster: str, pool: str | None) -> GkeOperation | None:
        """The running operation a new one on ``pool`` (``None``: the cluster itself) must wait for, if any."""
        for op in self._running_ops(project, location, cluster):
            if pool is None or op.pool is None or op.pool == pool:
                return op
        return None

    def _busy_error(self, cluster: str, running: GkeOperation | None) -> GoogleError:
        op_name = running.staged.name if running else operation_id()
        return GoogleError(
            400,
            "FAILED_PRECONDITION",
            f"Cluster is running incompatible operation {op_name}. Operation {op_name} is currently "
            f"operating on cluster {cluster}. Please wait and try again once it is done.",
            reason="CLUSTER_ALREADY_HAS_OPERATION",
            domain="container.googleapis.com",
            metadata={"cluster": cluster, "operation": op_name},
        )

    def _cluster(self, m: re.Match[str]) -> Cluster:
        key = (m["project"], m["location"], m["cluster"])
        cluster = self.clusters.get(key)
        if cluster is None:
            raise GoogleError(404, "NOT_FOUND", f"Not found: projects/{key[0]}/locations/{key[1]}/clusters/{key[2]}.")
        return cluster

    def _pool(self, m: re.Match[str]) -> Pool:
        cluster = self._cluster(m)
        pool = cluster.pools.get(m["pool"])
        if pool is None:
            raise GoogleError(404, "NOT_FOUND", f"Not found: {cluster.path}/nodePools/{m['pool']}.")
        return pool

    def pool_is_stable(self, pool: Pool) -> bool:
        return not self._reconciling(pool)

    def _reconciling(self, pool: Pool) -> bool:
        return any(op.pool == pool.name for op in self._running_ops(pool.project, pool.location, pool.cluster))

    def _cluster_proto(self, cluster: Cluster) -> container_v1.Cluster:
        zones = sorted({zone for pool in cluster.pools.values() for zone in pool.zones})
        return container_v1.Cluster(
            name=cluster.name,
            location=cluster.location,
            zone=cluster.location,
            locations=zones,
            self_link=f"{CONTAINER}/{cluster.path}",
            status=container_v1.Cluster.Status.RUNNING,
            current_master_version=GKE_VERSION,
            node_pools=[p.to_proto(self._reconciling(p)) for p in cluster.pools.values()],
        )

    def _start(
        self, key: tuple[str, str, str], pool: str | None, op_type: str, apply: Callable[[], None]
    ) -> GkeOperation:
        project, location, cluster = key
        blocking = self._blocking_op(project, location, cluster, pool)
        if blocking is not None:
            raise self._busy_error(cluster, blocking)
        if len(self._running_ops(project, location, cluster)) >= MAX_CONCURRENT_OPERATIONS:
            raise GoogleError(
                429,
                "RESOURCE_EXHAUSTED",
                f'Too many operations: cluster "{cluster}" hits the concurrent operations quota '
                f"{MAX_CONCURRENT_OPERATIONS}, please try again later.",
            )
        staged = StagedOperation(operation_id(), self._polls(), apply, self._seconds())
        if staged.deadline is not None and staged.status != "DONE":
            self._wake_at(staged.deadline)
        op = GkeOperation(project, location, cluster, pool, op_type, staged)
        self.operations[(project, location, staged.name)] = op
        return op

    def start_cluster_operation(
        self, project: str, location: str, cluster: str, op_type: str = "UPGRADE_MASTER"
    ) -> GkeOperation:
        """A cluster-level operation (as GKE starts for control plane upgrades or repairs): a test hook."""
        with self._lock:
            if (project, location, cluster) not in self.clusters:
                raise KeyError(f"no cluster {project}/{location}/{cluster}")
            return self._start((project, location, cluster), None, op_type, lambda: None)

    # ----- handlers -----

    def _list_clusters(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            found = [
                self._cluster_proto(c)
                for (project, location, _), c in sorted(self.clusters.items())
                if project == m["project"] and m["location"] in ("-", location)
            ]
        return proto_reply(container_v1.ListClustersResponse(clusters=found), call)

    def _get_cluster(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            return proto_reply(self._cluster_proto(self._cluster(m)), call)

    def retry(self, pool: Pool) -> None:
        """An instance group short of its target keeps creating instances: any read of the pool sees the result."""
        if pool.errors and not self._reconciling(pool):
            self.deliver(pool)

    def _list_pools(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            for pool in self._cluster(m).pools.values():
                self.retry(pool)
            pools = [p.to_proto(self._reconciling(p)) for p in self._cluster(m).pools.values()]
        return proto_reply(container_v1.ListNodePoolsResponse(node_pools=pools), call)

    def _get_pool(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            pool = self._pool(m)
            self.retry(pool)
            return proto_reply(pool.to_proto(self._reconciling(pool)), call)

    def _set_size(self, call: Call, m: re.Match[str]) -> Reply:
        request = call.parse(container_v1.SetNodePoolSizeRequest)
        count = request.node_count
        if not 0 <= count <= MAX_NODES_PER_ZONE:
            raise GoogleError(400, "INVALID_ARGUMENT", f"Node count must be in [0, {MAX_NODES_PER_ZONE}], got {count}.")
        with self._lock:
            pool = self._pool(m)

            def apply() -> None:
                pool.size = count
                error = self.deliver(pool)
                if error:
                    op.error = (RESOURCE_EXHAUSTED, error)

            op = self._start((pool.project, pool.location, pool.cluster), pool.name, "SET_NODE_POOL_SIZE", apply)
            return proto_reply(op.to_proto(), call)

    def _set_autoscaling(self, call: Call, m: re.Match[str]) -> Reply:
        request = call.parse(container_v1.SetNodePoolAutoscalingRequest)
        with self._lock:
            pool = self._pool(m)
            wanted = _validated_autoscaling(request.autoscaling, pool.spot)

            def apply() -> None:
                pool.autoscaling = wanted

            # GKE has no dedicated operation type for autoscaling changes; it reports them as cluster updates, but
            # the operation targets (and holds) the node pool only.
            op = self._start((pool.project, pool.location, pool.cluster), pool.name, "UPDATE_CLUSTER", apply)
            return proto_reply(op.to_proto(), call)

    def _list_operations(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            ops = [
                op.to_proto()
                for op in self.operations.values()
                if op.project == m["project"] and m["location"] in ("-", op.location)
            ]
        return proto_reply(container_v1.ListOperationsResponse(operations=ops), call)

    def _get_operation(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            op = self.operations.get((m["project"], m["location"], m["op"]))
            if op is None:
                raise GoogleError(
                    404,
                    "NOT_FOUND",
                    f"Not found: projects/{m['project']}/locations/{m['location']}/operations/{m['op']}.",
                )
            op.staged.poll()
            return proto_reply(op.to_proto(), call)


def _validated_autoscaling(wanted: container_v1.NodePoolAutoscaling, spot: bool) -> Autoscaling | None:
    if not wanted.enabled:
        return None
    per_zone = wanted.min_node_count or wanted.max_node_count
    total = wanted.total_min_node_count or wanted.total_max_node_count
    if per_zone and total:
        raise GoogleError(
            400,
            "INVALID_ARGUMENT",
            "Autoscaling limits must be either per zone (min/max node count) or total "
            "(total min/max node count), not both.",
        )
    low, high = (
        (wanted.total_min_node_count, wanted.total_max_node_count)
        if total
        else (wanted.min_node_count, wanted.max_node_count)
    )
    if high < 1:
        raise GoogleError(400, "INVALID_ARGUMENT", "Autoscaling max node count must be at least 1.")
    if low < 0 or low > high:
        raise GoogleError(
            400, "INVALID_ARGUMENT", f"Autoscaling min node count {low} must be in [0, max node count {high}]."
        )
    policy = container_v1.NodePoolAutoscaling.LocationPolicy(wanted.location_policy).name
    if policy == "LOCATION_POLICY_UNSPECIFIED":
        # GKE's default: spread evenly, except Spot capacity which goes wherever it is available.
        policy = "ANY" if spot else "BALANCED"
    return Autoscaling(
        enabled=True,
        min_node_count=wanted.min_node_count,
        max_node_count=wanted.max_node_count,
        total_min_node_count=wanted.total_min_node_count,
        total_max_node_count=wanted.total_max_node_count,
        location_policy=policy,
    )
