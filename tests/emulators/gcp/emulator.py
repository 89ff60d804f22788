"""One HTTP server for GKE, Cloud Quotas and Compute, routed by path like the real hosts would be.

Point the real SDKs at it with one base URL (also exported as ``GPU_JOBS_GCP_ENDPOINT``)::

    opts = {"api_endpoint": gcp.url}            # "http://127.0.0.1:PORT": the REST transports keep the scheme
    container_v1.ClusterManagerClient(transport="rest", credentials=AnonymousCredentials(), client_options=opts)
    cloudquotas_v1.CloudQuotasClient(transport="rest", credentials=AnonymousCredentials(), client_options=opts)
    compute_v1.InstancesClient(transport="rest", credentials=AnonymousCredentials(), client_options=opts)
    compute_v1.ZoneOperationsClient(transport="rest", credentials=AnonymousCredentials(), client_options=opts)

Compute caveat: the ExtendedOperation returned by ``InstancesClient.stop/delete/set_labels`` polls through a
ZoneOperationsClient the SDK builds *without* the client options (compute_v1 ``transports/base.py``,
``_zone_operations_client``), i.e. against compute.googleapis.com. Use the ``*_unary`` methods and poll with
your own ``ZoneOperationsClient`` (``get`` or ``wait``) built with the same options.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.emulators.base import Emulator, FaultKind, RunningServer, start
from tests.emulators.gcp.compute import Compute, Instance
from tests.emulators.gcp.gke import Autoscaling, Gke, Pool
from tests.emulators.gcp.machine_types import MachineTypes
from tests.emulators.gcp.quotas import COMPUTE_SERVICE, Quotas
from tests.emulators.gcp.regions import Regions
from tests.emulators.gcp.wire import ApiError, Call, GoogleError, Route, permission_403, rate_limit_403

ENV_VAR = "GPU_JOBS_GCP_ENDPOINT"
#: Operations finish with time, not polls: counting polls is a test-only shortcut (``operation_polls=N``).
DEFAULT_OPERATION_POLLS: int | None = None
#: Real operations take minutes and finish whether polled or not; a tenth of a second keeps the sandbox and tests quick
#: while every "still RUNNING" moment stays observable.
DEFAULT_OPERATION_SECONDS = 0.1

_FaultRenderer = Callable[[FaultKind, str, re.Match[str]], ApiError]


class GcpEmulator(Emulator):
    """State of all three services, the WSGI app serving them, and the seeding API the tests use."""

    def __init__(
        self,
        operation_polls: int | None = DEFAULT_OPERATION_POLLS,
        operation_seconds: float | None = DEFAULT_OPERATION_SECONDS,
    ) -> None:
        super().__init__()
        #: Test-only: GETs of an operation until it is DONE (0: writes answer DONE at once; None: polls do not
        #: count, the default). Read at each write.
        self.operation_polls = operation_polls
        #: Seconds after which an operation is DONE, polled or not (None: only polls or :meth:`finish_operations`
        #: finish it). Read at each write.
        self.operation_seconds = operation_seconds
        self.url = ""
        self._server: RunningServer | None = None
        lock = self._lock = threading.RLock()
        self.quotas = Quotas(lock, self.wake_at)
        self.gke = Gke(
            lock, lambda: self.operation_polls, lambda: self.operation_seconds, self._gpu_quota, self.wake_at
        )
        self.compute = Compute(
            lock, lambda: self.operation_polls, self.gke, lambda: self.operation_seconds, self.wake_at
        )
        self.regions = Regions(lock, self.quotas)
        self.machine_types = MachineTypes(lock)
        # Errors armed per operation beyond the shared fault kinds (e.g. a 403 rate limit): operation -> queue.
        self._errors: dict[str, list[ApiError]] = {}
        self._routes: list[tuple[Route, _FaultRenderer]] = [
            (r, service.fault)
            for service in (self.gke, self.quotas, self.compute, self.regions, self.machine_types)
            for r in service.routes()
        ]

    # ----- wiring -----

    def tick(self) -> None:
        """Finish the operations and apply the quota decisions whose time is up (short instance groups retry)."""
        self.gke.refresh()
        self.compute.refresh()
        self.quotas.tick()

    def env(self) -> dict[str, str]:
        """Environment for a subprocess running product code against this emulator."""
        return {ENV_VAR: self.url, "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true"}

    def client_options(self) -> dict[str, str]:
        return {"api_endpoint": self.url}

    def stop(self) -> None:
        """Stop the server started by :func:`start_gcp` (fixtures manage theirs)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    # ----- faults beyond the shared kinds -----

    def inject_error(self, operation: str, error: ApiError, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` answer ``error`` (after the shared faults, if any)."""
        with self._lock:
            self._errors.setdefault(operation, []).extend([error] * times)

    def inject_rate_limit_403(self, operation: str, reason: str = "rateLimitExceeded", times: int = 1) -> None:
        """Compute Engine / GKE rate limits: HTTP 403 with reason ``rateLimitExceeded``/``userRateLimitExceeded``."""
        self.inject_error(operation, rate_limit_403(reason), times)

    def inject_permission_denied(self, operation: str, permission: str, times: int = 1) -> None:
        self.inject_error(operation, permission_403(permission), times)

    def _take_error(self, operation: str) -> ApiError | None:
        with self._lock:
            queue = self._errors.get(operation)
            return queue.pop(0) if queue else None

    # ----- seeding and inspection -----

    def add_node_pool(
        self,
        project: str,
        location: str,
        cluster: str,
        name: str,
        *,
        zones: Iterable[str],
        per_zone_count: int,
        machine_type: str = "g2-standard-8",
        accelerator_type: str = "nvidia-l4",
        accelerator_count: int = 1,
        autoscaling: tuple[int, int] | None = None,
        labels: Mapping[str, str] | None = None,
        spot: bool = False,
    ) -> Pool:
        """A node pool (and its cluster, created on first use) running ``per_zone_count`` nodes per zone."""
        scaling = None
        if autoscaling is not None:
            scaling = Autoscaling(
                min_node_count=autoscaling[0],
                max_node_count=autoscaling[1],
                location_policy="ANY" if spot else "BALANCED",
            )
        pool = Pool(
            project=project,
            location=location,
            cluster=cluster,
            name=name,
            zones=tuple(zones),
            size=per_zone_count,
            initial_node_count=per_zone_count,
            machine_type=machine_type,
            accelerator_type=accelerator_type,
            accelerator_count=accelerator_count,
            labels=dict(labels or {}),
            spot=spot,
            autoscaling=scaling,
        )
        self.gke.add_pool(pool)
        return pool

    def stock_out(self, machine_type: str, zones: Iterable[str]) -> None:
        """Compute has no ``machine_type`` capacity in ``zones`` until :meth:`restock`: instance groups there stay
        short of their target (ZONE_RESOURCE_POOL_EXHAUSTED)."""
        with self._lock:
            self.gke.capacity.stockouts.update((zone, machine_type) for zone in zones)

    def restock(self) -> None:
        with self._lock:
            self.gke.capacity.stockouts.clear()

    def running_nodes(self, project: str, location: str, cluster: str, name: str) -> int:
        """The pool's instances that exist (all zones): those that register as Kubernetes nodes."""
        with self._lock:
            return self.gke.running_nodes(self.node_pool(project, location, cluster, name))

    def _gpu_quota(self, project: str, quota_id: str, region: str) -> int | None:
        entry = self.quotas.entries.get((project, COMPUTE_SERVICE, quota_id))
        return entry.value_for({"region": region}) if entry else None

    def node_pool(self, project: str, location: str, cluster: str, name: str) -> Pool:
        """The live record of a pool (``.size`` per zone, ``.autoscaling``); read it, do not edit it."""
        self.gke.refresh()
        pool = self.gke.find_pool(project, location, cluster, name)
        if pool is None:
            raise KeyError(f"no node pool {project}/{location}/{cluster}/{name}")
        return pool

    def autoscale(self, project: str, location: str, cluster: str, name: str, per_zone: int) -> None:
        """GKE's cluster autoscaler resizes the pool (its own decision: no operation on the cluster), only while the
        pool's autoscaling is on and within its per-zone bounds; the instance groups follow as on a setSize."""
        with self._lock:
            self.gke.refresh()
            pool = self.gke.find_pool(project, location, cluster, name)
            if pool is None:
                raise KeyError(f"no node pool {project}/{location}/{cluster}/{name}")
            auto = pool.autoscaling
            if auto is None or not auto.enabled:
                raise ValueError(f"node pool {name}: its autoscaling is off, its autoscaler resizes nothing")
            if not auto.min_node_count <= per_zone <= auto.max_node_count:
                raise ValueError(
                    f"node pool {name}: {per_zone} per zone is outside its autoscaling bounds "
                    f"{auto.min_node_count}..{auto.max_node_count}"
                )
            pool.size = per_zone
            self.gke.deliver(pool)

    def node_pool_size(self, project: str, location: str, cluster: str, name: str) -> int:
        """The current per-zone size: what the real API shows only as the instance groups' targetSize."""
        return self.node_pool(project, location, cluster, name).size

    def add_instance(
        self,
        project: str,
        zone: str,
        name: str,
        *,
        machine_type: str = "g2-standard-8",
        accelerators: Iterable[tuple[str, int]] = (("nvidia-l4", 1),),
        labels: Mapping[str, str] | None = None,
        status: str = "RUNNING",
        spot: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> Instance:
        """An instance; ``accelerators`` are its attached GPUs (``guestAccelerators``: none for a type that has them
        built in, such as a2-highgpu-1g), ``metadata`` its metadata items (``created-by`` for a MIG member)."""
        instance = Instance(
            project,
            zone,
            name,
            machine_type,
            list(accelerators),
            dict(labels or {}),
            status,
            spot,
            dict(metadata or {}),
        )
        self.compute.add_instance(instance)
        return instance

    def instance(self, project: str, zone: str, name: str) -> Instance | None:
        self.compute.refresh()
        return self.compute.instances.get((project, zone, name))

    def set_quota(
        self,
        project: str,
        quota_id: str,
        region: str | None,
        value: int,
        *,
        dimensions: Mapping[str, str] | None = None,
        service: str = COMPUTE_SERVICE,
    ) -> None:
        """Set a QuotaInfo limit. ``region=None`` for global quotas such as ``GPUS-ALL-REGIONS-per-project``."""
        self.quotas.set_quota(project, quota_id, _dims(region, dimensions), value, service)

    def quota_value(
        self,
        project: str,
        quota_id: str,
        region: str | None,
        *,
        dimensions: Mapping[str, str] | None = None,
        service: str = COMPUTE_SERVICE,
    ) -> int:
        return self.quotas.quota_value(project, quota_id, _dims(region, dimensions), service)

    def set_quota_usage(
        self,
        project: str,
        quota_id: str,
        region: str | None,
        usage: int,
        *,
        dimensions: Mapping[str, str] | None = None,
        service: str = COMPUTE_SERVICE,
    ) -> None:
        """What the project uses of a quota: a decrease below it needs ``QUOTA_DECREASE_BELOW_USAGE`` waived."""
        self.quotas.set_usage(project, quota_id, _dims(region, dimensions), usage, service)

    def grant(self, preference_name: str, value: int | None = None, after_s: float = 0.0) -> None:
        """Approve an open increase (fully, or partially with ``value``), now or ``after_s`` later on the
        emulator's clock, looked at or not; raises the QuotaInfo limit."""
        self.quotas.grant(preference_name, value, after_s)

    def deny(self, preference_name: str, after_s: float = 0.0) -> None:
        self.quotas.deny(preference_name, after_s)

    def decide_next_preference(
        self, grant: bool, value: int | None = None, after_s: float = 0.0, quota_id: str | None = None
    ) -> None:
        """The next increase written (for ``quota_id``, or any) is granted (``value``: partially) or denied
        ``after_s`` after it was written: how a sandbox scripts the reviewers before the job runs."""
        self.quotas.decide_next(grant, value, after_s, quota_id)

    def start_cluster_operation(
        self, project: str, location: str, cluster: str, op_type: str = "UPGRADE_MASTER"
    ) -> str:
        """Start a cluster-level operation (a control plane upgrade, as GKE starts on its own); its name."""
        return self.gke.start_cluster_operation(project, location, cluster, op_type).staged.name

    def finish_operations(self) -> None:
        """Bring every pending GKE and Compute operation to DONE, applying its change."""
        self.gke.finish_all()
        self.compute.finish_all()

    # ----- WSGI -----

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        call = Call.make(request.method, request.path, environ.get("QUERY_STRING", ""), request.get_data())
        return self._answer(call)(environ, start_response)

    def _answer(self, call: Call) -> Response:
        # Operations whose time is up are done before anything is read or written.
        self.tick()
        for candidate, render_fault in self._routes:
            match = candidate.pattern.match(call.path)
            if match is None or candidate.method != call.method:
                continue
            fault = self.begin(call.method, call.path, candidate.operation, _raw_query(call), call.body)
            try:
                if fault is not None and fault != "lost":
                    raise render_fault(fault, candidate.operation, match)
                error = self._take_error(candidate.operation)
                if error is not None:
                    raise error
                reply = candidate.handler(call, match)
                if fault == "lost":  # carried out; the answer never reaches the client
                    raise render_fault("timeout", candidate.operation, match)
            except ApiError as error:
                return _json(error.status_code, error.body())
            return _json(reply.status, reply.body)
        self.begin(call.method, call.path, "unrouted", _raw_query(call), call.body)
        unrouted = GoogleError(404, "NOT_FOUND", f"The GCP emulator has no route for {call.method} {call.path}.")
        return _json(404, unrouted.body())


def _dims(region: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    dims = {"region": region} if region else {}
    dims.update(extra or {})
    return dims


def _raw_query(call: Call) -> str:
    return "&".join(f"{key}={value}" for key, values in call.query.items() for value in values)


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json; charset=UTF-8")


def start_gcp(
    port: int = 0,
    operation_polls: int | None = DEFAULT_OPERATION_POLLS,
    operation_seconds: float | None = DEFAULT_OPERATION_SECONDS,
) -> GcpEmulator:
    """Serve a fresh emulator on 127.0.0.1 (for the demo sandbox); call ``.stop()`` when done."""
    emulator = GcpEmulator(operation_polls, operation_seconds)
    emulator._server = start(emulator, port)
    emulator.url = emulator._server.url
    return emulator
