"""Compute Engine v1 over REST: instances (aggregated list, get, stop, delete, setLabels), machine types (get),
zonal operations, and the instance group managers behind GKE node pools.

Provider rules enforced here:
- setLabels needs the instance's current ``labelFingerprint``; a stale or missing one is 412 conditionNotMet.
  Label keys and values follow GCE's syntax (lowercase, <= 63 chars, at most 64 labels).
- stop / delete / setLabels return a zonal Operation, DONE once its time is up (``operation_seconds``), polled or
  not (``wait`` finishes it at once); the instance is STOPPING meanwhile and TERMINATED / gone / relabelled at DONE.
  A write that repeats the ``requestId`` of an earlier one is not carried out again: it answers the earlier
  operation (so a resent setLabels is not refused as stale).
- Errors use Compute's shape: {"error": {"code", "message", "errors": [{"reason", "message", "domain"}]}}.
- The aggregated list keys scopes ``zones/<zone>``; a zone that has no instances left carries a
  NO_RESULTS_ON_PAGE warning instead of ``instances``, as on the real API. ``filter`` takes the expressions of
  :mod:`.filters` (others: 400).
- machineTypes.get describes :mod:`.machine_types`; an accelerator-optimised type lists its built-in GPUs as
  ``accelerators``. An instance's ``metadata`` items (``created-by`` on a managed instance group's member) are listed.
- A rate limit is a 403 with reason ``rateLimitExceeded`` and the quota metric in the message
  (:func:`rate_limit_403`), not a 429.
- An instance group manager of a GKE node pool reports the pool's live per-zone size as ``targetSize``, and the
  instances it could not create yet (stockout, quota: :mod:`.capacity`) as ``currentActions.creating``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.emulators.base import FaultKind
from tests.emulators.gcp.filters import compile_filter
from tests.emulators.gcp.gke import COMPUTE, Gke
from tests.emulators.gcp.machine_types import MACHINE_TYPES
from tests.emulators.gcp.ops import StagedOperation
from tests.emulators.gcp.wire import (
    SEG,
    ApiError,
    Call,
    ComputeError,
    Reply,
    Route,
    compute_fault,
    operation_id,
    page,
    proto_reply,
    rfc3339_now,
    route,
)

# compute_v1 takes seconds to import (one huge proto module): the functions import it when Compute is
# actually called, so sessions that only use GKE or Cloud Quotas do not pay for it.
if TYPE_CHECKING:
    from google.cloud import compute_v1

#: The fingerprint GCE gives a resource without labels.
EMPTY_LABELS_FINGERPRINT = "42WmSpB8rSM="
MAX_LABELS = 64
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")

_ZONE = f"/compute/v1/projects/(?P<project>{SEG})/zones/(?P<zone>{SEG})"
_INSTANCE = f"{_ZONE}/instances/(?P<instance>{SEG})"


def label_fingerprint(labels: dict[str, str]) -> str:
    if not labels:
        return EMPTY_LABELS_FINGERPRINT
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


@dataclass
class Instance:
    project: str
    zone: str
    name: str
    machine_type: str
    accelerators: list[tuple[str, int]]
    labels: dict[str, str]
    status: str
    spot: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    id: int = field(default_factory=lambda: secrets.randbits(62))
    created: str = field(default_factory=rfc3339_now)

    @property
    def link(self) -> str:
        return f"{COMPUTE}/projects/{self.project}/zones/{self.zone}/instances/{self.name}"

    def to_proto(self) -> compute_v1.Instance:
        from google.cloud import compute_v1

        zone_url = f"{COMPUTE}/projects/{self.project}/zones/{self.zone}"
        return compute_v1.Instance(
            kind="compute#instance",
            id=self.id,
            name=self.name,
            zone=zone_url,
            machine_type=f"{zone_url}/machineTypes/{self.machine_type}",
            status=self.status,
            labels=self.labels,
            label_fingerprint=label_fingerprint(self.labels),
            guest_accelerators=[
                compute_v1.AcceleratorConfig(
                    accelerator_type=f"{zone_url}/acceleratorTypes/{kind}", accelerator_count=count
                )
                for kind, count in self.accelerators
            ],
            scheduling=compute_v1.Scheduling(
                provisioning_model="SPOT" if self.spot else "STANDARD",
                # GPU instances cannot live-migrate.
                on_host_maintenance="TERMINATE" if self.accelerators else "MIGRATE",
            ),
            metadata=compute_v1.Metadata(
                kind="compute#metadata",
                fingerprint=label_fingerprint(self.metadata),
                items=[compute_v1.Items(key=k, value=v) for k, v in self.metadata.items()],
            ),
            creation_timestamp=self.created,
            self_link=self.link,
        )


@dataclass
class ComputeOperation:
    project: str
    zone: str
    op_type: str
    target: Instance
    staged: StagedOperation
    id: int = field(default_factory=lambda: secrets.randbits(62))
    inserted: str = field(default_factory=rfc3339_now)

    def to_proto(self) -> compute_v1.Operation:
        from google.cloud import compute_v1

        zone_url = f"{COMPUTE}/projects/{self.project}/zones/{self.zone}"
        done = self.staged.done
        return compute_v1.Operation(
            kind="compute#operation",
            id=self.id,
            name=self.staged.name,
            zone=zone_url,
            operation_type=self.op_type,
            target_link=self.target.link,
            target_id=self.target.id,
            status=compute_v1.Operation.Status.__members__[self.staged.status],
            user="gpu-jobs@example.iam.gserviceaccount.com",
            progress=100 if done else 0,
            insert_time=self.inserted,
            start_time=self.staged.started_at,
            end_time=self.staged.ended_at or None,
            self_link=f"{zone_url}/operations/{self.staged.name}",
        )


class Compute:
    """State and REST handlers of the Compute part (reads GKE pools for their instance group managers)."""

    def __init__(
        self,
        lock: threading.RLock,
        operation_polls: Callable[[], int | None],
        gke: Gke,
        operation_seconds: Callable[[], float | None] = lambda: None,
        wake_at: Callable[[float], None] = lambda deadline: None,
    ) -> None:
        # compute_v1 takes seconds to import on a busy machine: pay that here, not inside the first request, where
        # it outlasts the client's read timeout (the handlers import it lazily, cheaply from then on).
        from google.cloud import compute_v1  # noqa: F401

        self._lock = lock
        self._wake_at = wake_at
        self._polls = operation_polls
        self._seconds = operation_seconds
        self._gke = gke
        self.instances: dict[tuple[str, str, str], Instance] = {}
        self.operations: dict[tuple[str, str, str], ComputeOperation] = {}
        self._requests: dict[tuple[str, str], ComputeOperation] = {}  # (project, requestId) -> its operation
        #: Zones Compute cannot read right now: the aggregated list answers them with an UNREACHABLE warning.
        self.unreachable_zones: set[str] = set()
        self._zones_seen: set[tuple[str, str]] = set()

    def routes(self) -> list[Route]:
        return [
            route(
                "GET",
                f"/compute/v1/projects/(?P<project>{SEG})/aggregated/instances",
                "instances.aggregatedList",
                self._aggregated,
            ),
            route("GET", f"{_ZONE}/instances", "instances.list", self._list),
            route("GET", _INSTANCE, "instances.get", self._get),
            route("POST", f"{_INSTANCE}/stop", "instances.stop", self._stop),
            route("DELETE", _INSTANCE, "instances.delete", self._delete),
            route("POST", f"{_INSTANCE}/setLabels", "instances.setLabels", self._set_labels),
            route("GET", f"{_ZONE}/machineTypes/(?P<type>{SEG})", "machineTypes.get", self._get_machine_type),
            route("GET", f"{_ZONE}/operations/(?P<op>{SEG})", "zoneOperations.get", self._get_op),
            route("POST", f"{_ZONE}/operations/(?P<op>{SEG})/wait", "zoneOperations.wait", self._wait_op),
            route("GET", f"{_ZONE}/instanceGroupManagers/(?P<igm>{SEG})", "instanceGroupManagers.get", self._get_igm),
        ]

    def fault(self, kind: FaultKind, operation: str, match: re.Match[str]) -> ApiError:
        return compute_fault(kind, match.group(0).removeprefix("/compute/v1/"))

    # ----- seeding -----

    def add_instance(self, instance: Instance) -> None:
        with self._lock:
            self.instances[(instance.project, instance.zone, instance.name)] = instance
            self._zones_seen.add((instance.project, instance.zone))

    def refresh(self) -> None:
        """Finish every operation whose time is up, so that what it changes shows on the next read."""
        with self._lock:
            for op in self.operations.values():
                op.staged.refresh()

    def finish_all(self) -> None:
        with self._lock:
            for op in self.operations.values():
                op.staged.finish()

    # ----- helpers -----

    def _instance(self, m: re.Match[str]) -> Instance:
        found = self.instances.get((m["project"], m["zone"], m["instance"]))
        if found is None:
            raise ComputeError(
                404,
                "notFound",
                f"The resource 'projects/{m['project']}/zones/{m['zone']}/instances/{m['instance']}' was not found",
            )
        return found

    def _start(self, instance: Instance, op_type: str, apply: Callable[[], None]) -> ComputeOperation:
        staged = StagedOperation(operation_id(), self._polls(), apply, self._seconds())
        if staged.deadline is not None and staged.status != "DONE":
            self._wake_at(staged.deadline)
        op = ComputeOperation(instance.project, instance.zone, op_type, instance, staged)
        self.operations[(instance.project, instance.zone, staged.name)] = op
        return op

    def _op(self, m: re.Match[str]) -> ComputeOperation:
        op = self.operations.get((m["project"], m["zone"], m["op"]))
        if op is None:
            raise ComputeError(
                404,
                "notFound",
                f"The resource 'projects/{m['project']}/zones/{m['zone']}/operations/{m['op']}' was not found",
            )
        return op

    # ----- handlers -----

    def _aggregated(self, call: Call, m: re.Match[str]) -> Reply:
        from google.cloud import compute_v1

        matches = compile_filter(call.arg("filter")) if call.arg("filter").strip() else None
        project = m["project"]
        with self._lock:
            found = sorted(
                (i for (p, _, _), i in self.instances.items() if p == project), key=lambda i: (i.zone, i.name)
            )
            if matches is not None:
                found = [i for i in found if matches(_as_json(i.to_proto()))]
            chunk, token = page(found, call, compute=True)
            items: dict[str, compute_v1.InstancesScopedList] = {}
            for instance in chunk:
                scoped = items.setdefault(f"zones/{instance.zone}", compute_v1.InstancesScopedList())
                scoped.instances.append(instance.to_proto())
            for zone in sorted(self.unreachable_zones):
                items.pop(f"zones/{zone}", None)
                items[f"zones/{zone}"] = compute_v1.InstancesScopedList(
                    warning=compute_v1.Warning(
                        code="UNREACHABLE",
                        message=f"Scope 'zones/{zone}' is unreachable; the results may be incomplete.",
                        data=[compute_v1.Data(key="scope", value=f"zones/{zone}")],
                    )
                )
            for p, zone in sorted(self._zones_seen):
                scope = f"zones/{zone}"
                if p == project and scope not in items and not any(i.zone == zone for i in found):
                    items[scope] = compute_v1.InstancesScopedList(
                        warning=compute_v1.Warning(
                            code="NO_RESULTS_ON_PAGE",
                            message=f"There are no results for scope '{scope}' on this page.",
                            data=[compute_v1.Data(key="scope", value=scope)],
                        )
                    )
        listing = compute_v1.InstanceAggregatedList(
            kind="compute#instanceAggregatedList",
            id=f"projects/{project}/aggregated/instances",
            items=items,
            next_page_token=token or None,
            self_link=f"{COMPUTE}/projects/{project}/aggregated/instances",
        )
        return proto_reply(listing, call)

    def _list(self, call: Call, m: re.Match[str]) -> Reply:
        from google.cloud import compute_v1

        with self._lock:
            found = sorted(
                (i for (p, z, _), i in self.instances.items() if (p, z) == (m["project"], m["zone"])),
                key=lambda i: i.name,
            )
            chunk, token = page(found, call, compute=True)
            listing = compute_v1.InstanceList(
                kind="compute#instanceList",
                id=f"projects/{m['project']}/zones/{m['zone']}/instances",
                items=[i.to_proto() for i in chunk],
                next_page_token=token or None,
            )
        return proto_reply(listing, call)

    def _get(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            return proto_reply(self._instance(m).to_proto(), call)

    def _repeated(self, call: Call, m: re.Match[str]) -> Reply | None:
        """The earlier operation of a write that repeats its ``requestId``; None for a new request."""
        request_id = call.arg("requestId")
        op = self._requests.get((m["project"], request_id)) if request_id else None
        return proto_reply(op.to_proto(), call) if op is not None else None

    def _remember(self, call: Call, op: ComputeOperation) -> ComputeOperation:
        if call.arg("requestId"):
            self._requests[(op.project, call.arg("requestId"))] = op
        return op

    def _stop(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            if (earlier := self._repeated(call, m)) is not None:
                return earlier
            instance = self._instance(m)

            def apply() -> None:
                instance.status = "TERMINATED"

            op = self._remember(call, self._start(instance, "stop", apply))
            if not op.staged.done and instance.status != "TERMINATED":
                instance.status = "STOPPING"
            return proto_reply(op.to_proto(), call)

    def _delete(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            if (earlier := self._repeated(call, m)) is not None:
                return earlier
            instance = self._instance(m)
            key = (instance.project, instance.zone, instance.name)

            def apply() -> None:
                self.instances.pop(key, None)

            op = self._remember(call, self._start(instance, "delete", apply))
            if not op.staged.done and instance.status == "RUNNING":
                instance.status = "STOPPING"
            return proto_reply(op.to_proto(), call)

    def _set_labels(self, call: Call, m: re.Match[str]) -> Reply:
        from google.cloud import compute_v1

        request = call.parse(compute_v1.InstancesSetLabelsRequest, compute=True)
        labels = dict(request.labels)
        _check_labels(labels)
        with self._lock:
            if (earlier := self._repeated(call, m)) is not None:
                return earlier
            instance = self._instance(m)
            if request.label_fingerprint != label_fingerprint(instance.labels):
                message = "Labels fingerprint either invalid or resource labels have changed"
                raise ComputeError(412, "conditionNotMet", message)

            def apply() -> None:
                instance.labels = labels

            return proto_reply(self._remember(call, self._start(instance, "setLabels", apply)).to_proto(), call)

    def _get_machine_type(self, call: Call, m: re.Match[str]) -> Reply:
        from google.cloud import compute_v1

        found = MACHINE_TYPES.get(m["type"])
        if found is None:
            raise ComputeError(
                404,
                "notFound",
                f"The resource 'projects/{m['project']}/zones/{m['zone']}/machineTypes/{m['type']}' was not found",
            )
        zone_url = f"{COMPUTE}/projects/{m['project']}/zones/{m['zone']}"
        machine = compute_v1.MachineType(
            kind="compute#machineType",
            id=int(hashlib.sha256(found.name.encode()).hexdigest()[:12], 16),
            name=found.name,
            description=found.description,
            guest_cpus=found.cpus,
            memory_mb=found.memory_mb,
            accelerators=[
                compute_v1.Accelerators(guest_accelerator_type=kind, guest_accelerator_count=count)
                for kind, count in found.accelerators
            ],
            zone=m["zone"],
            self_link=f"{zone_url}/machineTypes/{found.name}",
        )
        return proto_reply(machine, call)

    def _get_op(self, call: Call, m: re.Match[str]) -> Reply:
        with self._lock:
            op = self._op(m)
            op.staged.poll()
            return proto_reply(op.to_proto(), call)

    def _wait_op(self, call: Call, m: re.Match[str]) -> Reply:
        # The real `wait` blocks until DONE (or about two minutes); emulated operations finish on demand.
        with self._lock:
            op = self._op(m)
            op.staged.finish()
            return proto_reply(op.to_proto(), call)

    def _get_igm(self, call: Call, m: re.Match[str]) -> Reply:
        from google.cloud import compute_v1

        with self._lock:
            pool = self._gke.find_pool_by_igm(m["project"], m["zone"], m["igm"])
            if pool is None:
                raise ComputeError(
                    404,
                    "notFound",
                    f"The resource 'projects/{m['project']}/zones/{m['zone']}/instanceGroupManagers/{m['igm']}' "
                    "was not found",
                )
            zone_url = f"{COMPUTE}/projects/{m['project']}/zones/{m['zone']}"
            self._gke.retry(pool)
            creating = max(0, pool.size - pool.running.get(m["zone"], 0))
            stable = self._gke.pool_is_stable(pool) and not creating
            igm = compute_v1.InstanceGroupManager(
                kind="compute#instanceGroupManager",
                name=m["igm"],
                zone=zone_url,
                base_instance_name=m["igm"].removesuffix("-grp"),
                instance_group=f"{zone_url}/instanceGroups/{m['igm']}",
                instance_template=f"{COMPUTE}/projects/{m['project']}/global/instanceTemplates/{m['igm']}",
                target_size=pool.size,
                # An instance group short of its target keeps trying: the missing instances stay "creating".
                current_actions=compute_v1.InstanceGroupManagerActionsSummary(
                    creating=creating, none=pool.size - creating
                ),
                status=compute_v1.InstanceGroupManagerStatus(is_stable=stable),
                self_link=f"{zone_url}/instanceGroupManagers/{m['igm']}",
            )
            return proto_reply(igm, call)


def _check_labels(labels: dict[str, str]) -> None:
    if len(labels) > MAX_LABELS:
        raise ComputeError(400, "invalid", f"Invalid value for field 'labels': at most {MAX_LABELS} labels.")
    for key, value in labels.items():
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ComputeError(400, "invalid", f"Invalid value for field 'labels': '{key}={value}'.")


def _as_json(message: compute_v1.Instance) -> dict[str, Any]:
    """The instance as the API renders it (camelCase names), which is what a list filter's fields name."""
    from google.cloud import compute_v1

    rendered: dict[str, Any] = json.loads(compute_v1.Instance.to_json(message, indent=None))
    return rendered


def rate_limit_403(metric: str = "Read requests", reason: str = "rateLimitExceeded") -> ComputeError:
    """A Compute Engine rate quota exceeded, as Compute answers it: HTTP 403 (not 429), reason ``rateLimitExceeded``
    in domain ``usageLimits``, and the quota metric and its per-minute limit in the message."""
    message = (
        f"Quota exceeded for quota metric '{metric}' and limit '{metric} per minute' of service "
        "'compute.googleapis.com' for consumer 'project_number:123456789012'."
    )
    return ComputeError(403, reason, message, domain="usageLimits")
