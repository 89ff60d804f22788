"""GKE node pools behind the ``NodeGroupCloud`` port, through ``google-cloud-container`` over REST.

GKE facts this adapter is shaped by:
- ``setSize`` / ``setAutoscaling`` each return an Operation; the change lands only when it is DONE, so ``apply``
  polls ``operations.get`` until then. Node counts and autoscaling bounds are per zone.
- While any operation runs on the cluster, every write answers 400 FAILED_PRECONDITION with reason
  ``CLUSTER_ALREADY_HAS_OPERATION`` (``BadRequest`` over REST, not ``FailedPrecondition``): that is ``Busy``.
- A node pool reports no live node count; the per-zone size lives only in the ``targetSize`` of the pool's
  instance group managers (Compute API), read only when ``live_size`` is asked for.
- Proto3 JSON omits zero values, so ``node_count: 0`` goes out as ``{}`` and a zero reads back as 0.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any, assert_never

from google.cloud import container_v1

from jobs.adapters.gcp import operations
from jobs.adapters.gcp.errors import RESOURCE_EXHAUSTED, translated
from jobs.adapters.gcp.session import GcpSession
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import CloudGroup, SetAutoscaling, SetPower, SetSize, Step, cloud_step
from jobs.core.policy import GcpLocator, NodeGroup
from jobs.core.providers import PROVIDERS
from jobs.errors import Invalid, NotDelivered

#: Exactly the IAM permissions behind the calls below (nodePools.get/list are authorised by clusters.get).
PERMISSIONS = Permissions(
    "gcp",
    (
        "container.clusters.get",  # nodePools.get, nodePools.list
        "container.clusters.update",  # nodePools.setSize, nodePools.setAutoscaling
        "container.operations.get",  # operations.get
        "compute.instanceGroupManagers.get",  # instanceGroupManagers.get (live size)
    ),
)

MAX_NODES_PER_ZONE = PROVIDERS["gke"].node_limit  # per zone

_Status = container_v1.NodePool.Status
_BUSY_STATUSES = frozenset({_Status.PROVISIONING, _Status.RECONCILING, _Status.STOPPING})
# The Compute errors behind "Not all instances running in IGM": a stockout or a quota, not a bad request.
_DELIVERY_ERRORS = ("ZONE_RESOURCE_POOL_EXHAUSTED", "QUOTA_EXCEEDED", "Not all instances running in IGM")
_IGM_URL = re.compile(r"/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<name>[^/]+)$")


@dataclass(frozen=True)
class _PoolRef:
    project: str
    location: str
    cluster: str
    node_pool: str

    @classmethod
    def of(cls, group: NodeGroup) -> _PoolRef:
        locator = group.locator
        if not isinstance(locator, GcpLocator):
            raise Invalid(f"node group {group.name} is not a GKE node pool (cloud {group.cloud})", operation="locate")
        return cls(locator.project, locator.location, locator.cluster, locator.node_pool)

    @property
    def cluster_path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"

    @property
    def path(self) -> str:
        return f"{self.cluster_path}/nodePools/{self.node_pool}"

    def operation_path(self, operation: str) -> str:
        return f"projects/{self.project}/locations/{self.location}/operations/{operation}"


class GkeNodePools:
    """``NodeGroupCloud`` for GKE. One client per API for every project (the GKE endpoint is global), built on
    first use under a lock and shared by the job's threads; the SDK's own retries are off (the job retries)."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._session = GcpSession(settings)
        self._lock = threading.Lock()
        self._gke: container_v1.ClusterManagerClient | None = None

    # ----- NodeGroupCloud -----

    def describe(self, group: NodeGroup, *, live_size: bool = False) -> GroupConfig:
        ref = _PoolRef.of(group)
        with translated("nodePools.get", ref.path):
            pool = self._gke_client().get_node_pool(name=ref.path, **self._call_options())
        zones = len(pool.locations) or 1
        low, high = _bounds(pool.autoscaling, zones)
        desired, creating = self._live_size(ref, pool) if live_size else (None, 0)
        # RUNNING_WITH_ERROR: the pool's instance groups could not bring every node; statusMessage says why.
        with_error = pool.status == _Status.RUNNING_WITH_ERROR
        return GroupConfig(
            min=low,
            desired=desired,
            max=high,
            autoscaling=bool(pool.autoscaling.enabled),
            autoscaler_profile=_location_policy(pool.autoscaling),
            zones=zones,
            busy=pool.status in _BUSY_STATUSES,
            shortfall=(pool.status_message or "node pool RUNNING_WITH_ERROR") if with_error else None,
            missing=creating,
        )

    def apply(self, group: NodeGroup, step: Step) -> None:
        step = cloud_step(step)
        ref = _PoolRef.of(group)
        client = self._gke_client()
        if isinstance(step, SetSize):
            operation = "nodePools.setSize"
            _check_size(step.desired, ref)
            with translated(operation, ref.path):
                op = client.set_node_pool_size(
                    request={"name": ref.path, "node_count": step.desired}, **self._call_options()
                )
        elif isinstance(step, SetAutoscaling):
            operation = "nodePools.setAutoscaling"
            autoscaling: dict[str, Any] = {"enabled": False}
            if step.enabled:
                _check_bounds(step.min, step.max, ref)
                autoscaling = {"enabled": True, "min_node_count": step.min, "max_node_count": step.max}
                if step.profile:
                    autoscaling["location_policy"] = step.profile
            with translated(operation, ref.path):
                op = client.set_node_pool_autoscaling(
                    request={"name": ref.path, "autoscaling": autoscaling}, **self._call_options()
                )
        elif isinstance(step, SetPower):
            raise Invalid(
                f"{ref.path}: a GKE node pool has no power state; scale it to 0 instead",
                operation="apply",
                code="UNSUPPORTED_STEP",
            )
        else:
            assert_never(step)
        self._wait(ref, op, f"{operation} ({step.describe()})")

    def discover(self, groups: list[NodeGroup]) -> list[CloudGroup]:
        clusters = sorted({_PoolRef.of(g).cluster_path: _PoolRef.of(g) for g in groups if g.cloud == "gcp"}.items())
        found: list[CloudGroup] = []
        for path, ref in clusters:
            with translated("nodePools.list", path):
                listing = self._gke_client().list_node_pools(parent=path, **self._call_options())
            for pool in listing.node_pools:
                accelerators = list(pool.config.accelerators)
                if not accelerators:
                    continue
                locator = {"project": ref.project, "location": ref.location, "cluster": ref.cluster}
                found.append(
                    CloudGroup(
                        cloud="gcp",
                        locator={**locator, "nodePool": pool.name},
                        instance_type=pool.config.machine_type,
                        gpus_per_node=sum(a.accelerator_count for a in accelerators) or None,
                    )
                )
        return found

    # ----- internals -----

    def _call_options(self) -> dict[str, Any]:
        return self._session.call_options()

    def _gke_client(self) -> container_v1.ClusterManagerClient:
        with self._lock:
            if self._gke is None:
                with translated("client", "container.googleapis.com"):
                    self._gke = container_v1.ClusterManagerClient(transport="rest", **self._session.client_kwargs())
            return self._gke

    def _live_size(self, ref: _PoolRef, pool: container_v1.NodePool) -> tuple[int | None, int]:
        """The pool's per-zone size: its instance group managers' target size (the max if zones differ), and the
        instances they are still trying to create (``currentActions.creating``, all zones).

        One GET of Compute's instanceGroupManagers.get through google-auth's authorised session, not the
        compute_v1 SDK: importing that SDK costs ~150 MiB and ~6 s (every Compute service and type) for one field.
        """
        sizes: list[int] = []
        creating = 0
        for url in pool.instance_group_urls:
            match = _IGM_URL.search(url)
            if match is None:
                raise Invalid(f"{ref.path}: unexpected instance group URL {url}", operation="instanceGroupManagers.get")
            path = (
                f"/compute/v1/projects/{match['project']}/zones/{match['zone']}/instanceGroupManagers/{match['name']}"
            )
            igm = self._session.get_json("instanceGroupManagers.get", path, url)
            sizes.append(int(igm.get("targetSize", 0)))
            creating += int((igm.get("currentActions") or {}).get("creating", 0))
        return (max(sizes) if sizes else None), creating

    def _wait(self, ref: _PoolRef, op: container_v1.Operation, what: str) -> None:
        """Follow the operation until DONE, then raise if it failed."""
        name = ref.operation_path(op.name)

        def poll() -> container_v1.Operation:
            with translated("operations.get", name):
                return self._gke_client().get_operation(name=name, **self._call_options())

        done = operations.wait(op, poll, self._settings, f"{ref.path}: {what}", name)
        failed = operations.failure(done)
        if failed is None:
            return
        code, message = failed
        error = operations.error_for(code)
        if code == RESOURCE_EXHAUSTED or any(marker in message for marker in _DELIVERY_ERRORS):
            error = NotDelivered  # the size is set; the instance groups keep trying, resending changes nothing
        text = f"{ref.path}: {what} failed: {message or f'code {code}'}"
        raise error(text, operation="operations.get", code=str(code) if code else "OPERATION_FAILED")


def _location_policy(autoscaling: container_v1.NodePoolAutoscaling) -> str | None:
    """BALANCED or ANY while the autoscaler is on; None otherwise (or when GKE reports none)."""
    policy = autoscaling.location_policy
    if not autoscaling.enabled or not policy:
        return None
    return str(container_v1.NodePoolAutoscaling.LocationPolicy(policy).name)


def _bounds(autoscaling: container_v1.NodePoolAutoscaling, zones: int) -> tuple[int, int]:
    """Per-zone autoscaler bounds; (0, 0) while the autoscaler is off (its bounds then mean nothing)."""
    if not autoscaling.enabled:
        return 0, 0
    if autoscaling.max_node_count:  # per-zone limits (max >= 1 whenever they are used)
        return autoscaling.min_node_count, autoscaling.max_node_count
    # Total limits: the per-zone bounds that keep the pool inside them; restoring sets per-zone limits.
    low = math.ceil(autoscaling.total_min_node_count / zones)
    return low, max(low, autoscaling.total_max_node_count // zones, 1)


def _check_size(count: int, ref: _PoolRef) -> None:
    if not 0 <= count <= MAX_NODES_PER_ZONE:
        raise Invalid(
            f"{ref.path}: node count per zone must be in [0, {MAX_NODES_PER_ZONE}], got {count}",
            operation="nodePools.setSize",
            code="INVALID_ARGUMENT",
        )


def _check_bounds(low: int, high: int, ref: _PoolRef) -> None:
    if high < 1 or not 0 <= low <= high or high > MAX_NODES_PER_ZONE:
        raise Invalid(
            f"{ref.path}: autoscaling needs 0 <= min <= max, 1 <= max <= {MAX_NODES_PER_ZONE}; got {low}..{high}",
            operation="nodePools.setAutoscaling",
            code="INVALID_ARGUMENT",
        )
