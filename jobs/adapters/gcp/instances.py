"""Compute Engine GPU instances for the sweep job (``Instances``; one account scope is one project), through
``google-cloud-compute`` over REST.

Compute Engine facts this module is shaped by:
- GPUs come two ways: attached (``guestAccelerators``, N1 and friends), or built into an accelerator-optimised
  machine type (A2, A3, G2...), whose ``machineTypes.get`` lists them as ``accelerators``. Both are the cloud's own
  data; no family names. A machine type's accelerators are the same in every zone: read once per name per run.
- One ``instances.aggregatedList`` per project (every zone, paged), filtered on ``status`` to the states the sweep
  judges. An instance in a transition (PROVISIONING, STAGING, STOPPING, SUSPENDING, REPAIRING) is judged by the next
  run, once it landed. A zone that cannot be read (an ``unreachables`` entry, an UNREACHABLE scope warning) fails the
  list: an instance not seen is never judged. (The pinned SDK has no ``returnPartialSuccess``, so an unreachable zone
  may also fail the call itself; either way the scope fails and the next run looks again.)
- Tags are labels: lowercase keys, set all at once with the ``labelFingerprint`` read with them; a stale fingerprint
  is 412 conditionNotMet (``Conflict``: the job reads again, next run). Each setLabels carries a ``requestId``
  derived from the instance, the fingerprint and the labels, so a resend after a lost answer is recognised by
  Compute as the same request, not refused as stale.
- A managed instance group's member carries the metadata item ``created-by`` (the group's URL); a GKE node the
  labels ``goog-k8s-cluster-name`` / ``goog-k8s-node-pool-name`` (``goog-gke-node``): reported as members, since the
  group would replace a member stopped behind its back.
- stop, delete and setLabels answer a zonal Operation; they return once Compute accepted it (the instance is
  STOPPING meanwhile; the next run sees it TERMINATED or gone). An operation that already failed raises.
- Rate limits are 403 with reason ``rateLimitExceeded`` (``Throttled``, retried); any other 403 is ``Denied``
  (:mod:`jobs.adapters.gcp.errors`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from jobs.adapters.gcp.errors import translated
from jobs.adapters.gcp.session import GcpSession
from jobs.adapters.permissions import Permissions
from jobs.adapters.settings import AdapterSettings
from jobs.core.untagged import GpuInstance, InstanceState
from jobs.errors import Invalid, NotFound, Unavailable

# compute_v1 costs ~1.5 s and ~150 MiB to import (every Compute type): paid when the sweep lists GCP instances, not
# by whoever imports this module for its PERMISSIONS.
if TYPE_CHECKING:
    from google.cloud import compute_v1

#: Exactly the IAM permissions behind the calls below.
PERMISSIONS = Permissions(
    "gcp",
    (
        "compute.instances.list",  # instances.aggregatedList
        "compute.machineTypes.get",  # machineTypes.get (GPUs built into the machine type)
        "compute.instances.setLabels",  # instances.setLabels (the mark)
        "compute.instances.stop",  # instances.stop
        "compute.instances.delete",  # instances.delete (action terminate)
    ),
)

#: The Compute statuses the sweep judges, as it judges them; the rest are transitions (see the module docstring).
STATES: dict[str, InstanceState] = {"RUNNING": "running", "TERMINATED": "stopped", "SUSPENDED": "stopped"}
LIST_FILTER = " OR ".join(f"(status = {status})" for status in STATES)
#: The labels GKE puts on its nodes' instances.
GKE_CLUSTER_LABEL = "goog-k8s-cluster-name"
GKE_NODE_POOL_LABEL = "goog-k8s-node-pool-name"
GKE_NODE_LABEL = "goog-gke-node"
#: The metadata item Compute sets on a managed instance group's members: the group's partial URL.
CREATED_BY = "created-by"
_PAGE = 500  # aggregatedList's largest page
_UNREACHABLE = "UNREACHABLE"
# requestId namespace: the same write (instance, fingerprint, labels) always gets the same id.
_REQUESTS = uuid.UUID("5f1c0a52-6d8e-4b43-9a53-2d0f3b6c9e11")


class GcpInstances:
    """``Instances`` for GCP. One client per API for every project, built on first use under a lock and shared by
    the job's threads; the SDK's own retries are off (the job retries). Thread-safe."""

    def __init__(self, settings: AdapterSettings) -> None:
        self._settings = settings
        self._session = GcpSession(settings)
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self._gpus: dict[str, int] = {}  # machine type name -> GPUs built in (0: none)

    # --- Instances ----------------------------------------------------------------------------------------------

    def gpu_instances(self, account: str) -> list[GpuInstance]:
        project = account
        listed = self._list(project)
        out: list[GpuInstance] = []
        for instance in listed:
            gpus = sum(int(a.accelerator_count) for a in instance.guest_accelerators)
            if not gpus:
                gpus = self._built_in_gpus(project, _last(instance.zone), _last(instance.machine_type))
            if gpus > 0:
                out.append(_gpu_instance(project, instance, gpus))
        return out

    def set_tags(self, instance: GpuInstance, changes: Mapping[str, str | None]) -> None:
        if instance.version is None:
            raise Invalid(f"{instance.id}: no labelFingerprint was read with it", operation="instances.setLabels")
        labels = {k: v for k, v in instance.tags.items() if k not in changes}
        labels.update({k: v for k, v in changes.items() if v is not None})
        from google.cloud import compute_v1  # noqa: PLC0415

        request = compute_v1.SetLabelsInstanceRequest(
            project=instance.account,
            zone=instance.zone,
            instance=instance.name,
            instances_set_labels_request_resource=compute_v1.InstancesSetLabelsRequest(
                labels=labels, label_fingerprint=instance.version
            ),
            request_id=str(uuid.uuid5(_REQUESTS, f"{instance.id}\n{instance.version}\n{sorted(labels.items())}")),
        )
        with translated("instances.setLabels", instance.id):
            op = self._instances().set_labels_unary(request=request, **self._session.call_options())
        _accepted(op, "instances.setLabels", instance.id)

    def act(self, instance: GpuInstance, action: Literal["stop", "terminate"]) -> None:
        # Both are idempotent (a stopped instance stays stopped; deleting a deleting one answers its operation or
        # 404), so a resend after a lost answer is safe without a requestId.
        from google.cloud import compute_v1  # noqa: PLC0415

        where = {"project": instance.account, "zone": instance.zone, "instance": instance.name}
        client = self._instances()
        if action == "stop":
            with translated("instances.stop", instance.id):
                op = client.stop_unary(request=compute_v1.StopInstanceRequest(**where), **self._session.call_options())
            _accepted(op, "instances.stop", instance.id)
        else:
            with translated("instances.delete", instance.id):
                op = client.delete_unary(
                    request=compute_v1.DeleteInstanceRequest(**where), **self._session.call_options()
                )
            _accepted(op, "instances.delete", instance.id)

    # --- internals ----------------------------------------------------------------------------------------------

    def _list(self, project: str) -> list[compute_v1.Instance]:
        from google.cloud import compute_v1  # noqa: PLC0415

        request = compute_v1.AggregatedListInstancesRequest(project=project, filter=LIST_FILTER, max_results=_PAGE)
        found: list[compute_v1.Instance] = []
        unreachable: set[str] = set()
        target = f"projects/{project}"
        with translated("instances.aggregatedList", target):
            pager = self._instances().aggregated_list(request=request, **self._session.call_options())
            for page in pager.pages:
                unreachable.update(page.unreachables)
                for scope, scoped in page.items.items():
                    if "warning" in scoped and scoped.warning.code == _UNREACHABLE:  # type: ignore[attr-defined]
                        unreachable.add(scope)
                    found.extend(scoped.instances)
        if unreachable:
            raise Unavailable(
                f"{target}: Compute could not list {', '.join(sorted(unreachable))}: no instance there is judged",
                operation="instances.aggregatedList",
                code=_UNREACHABLE,
            )
        return found

    def _built_in_gpus(self, project: str, zone: str, name: str) -> int:
        with self._lock:
            if name in self._gpus:
                return self._gpus[name]
        try:
            with translated("machineTypes.get", f"projects/{project}/zones/{zone}/machineTypes/{name}"):
                machine = self._machine_types().get(
                    project=project, zone=zone, machine_type=name, **self._session.call_options()
                )
            gpus = sum(int(a.guest_accelerator_count) for a in machine.accelerators)
        except NotFound:
            gpus = 0  # a custom machine type: none has GPUs built in (attached ones are guestAccelerators)
        with self._lock:
            self._gpus[name] = gpus
        return gpus

    def _instances(self) -> compute_v1.InstancesClient:
        from google.cloud import compute_v1  # noqa: PLC0415

        client: compute_v1.InstancesClient = self._client("instances", compute_v1.InstancesClient)
        return client

    def _machine_types(self) -> compute_v1.MachineTypesClient:
        from google.cloud import compute_v1  # noqa: PLC0415

        client: compute_v1.MachineTypesClient = self._client("machineTypes", compute_v1.MachineTypesClient)
        return client

    def _client(self, key: str, make: Any) -> Any:
        with self._lock:
            if key not in self._clients:
                with translated("client", "compute.googleapis.com"):
                    self._clients[key] = make(transport="rest", **self._session.client_kwargs())
            return self._clients[key]


def _accepted(op: compute_v1.Operation, operation: str, target: str) -> None:
    """Compute took the write; raise only if its operation already failed (it usually is PENDING here)."""
    errors = list(op.error.errors) if "error" in op else []
    if not errors:
        return
    code = errors[0].code or "OPERATION_FAILED"
    message = "; ".join(e.message or e.code for e in errors)
    kind = NotFound if code == "RESOURCE_NOT_FOUND" else Invalid
    raise kind(f"{target}: {operation} failed: {message}", operation=operation, code=code)


def _gpu_instance(project: str, instance: compute_v1.Instance, gpus: int) -> GpuInstance:
    zone = _last(instance.zone)
    labels = dict(instance.labels)
    return GpuInstance(
        cloud="gcp",
        account=project,
        id=f"projects/{project}/zones/{zone}/instances/{instance.name}",
        name=instance.name,
        zone=zone,
        type=_last(instance.machine_type),
        gpus=gpus,
        state=STATES.get(instance.status, "other"),
        tags=labels,
        group=_group(labels, _metadata(instance).get(CREATED_BY, "")),
        version=instance.label_fingerprint or None,
    )


def _metadata(instance: compute_v1.Instance) -> dict[str, str]:
    items: Iterable[Any] = instance.metadata.items if "metadata" in instance else ()
    return {str(item.key): str(item.value) for item in items}


def _group(labels: Mapping[str, str], created_by: str) -> str | None:
    """What would replace the instance if it were stopped alone: its GKE node pool or managed instance group."""
    cluster = labels.get(GKE_CLUSTER_LABEL)
    group = f"managed instance group {created_by.rsplit('/', 1)[-1]}" if "/instanceGroupManagers/" in created_by else ""
    if cluster or GKE_NODE_LABEL in labels:
        pool = labels.get(GKE_NODE_POOL_LABEL)
        where = f"GKE cluster {cluster or '(unnamed)'}" + (f" node pool {pool}" if pool else "")
        return f"{where} ({group})" if group else where
    return group or None


def _last(url: str) -> str:
    """The resource name at the end of a Compute URL (``.../zones/us-central1-a`` -> ``us-central1-a``)."""
    return url.rsplit("/", 1)[-1]
