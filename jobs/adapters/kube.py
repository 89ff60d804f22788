"""The Kubernetes side of the jobs, through the official ``kubernetes`` client.

In a pod the client uses the in-cluster service account; elsewhere the kubeconfig (``KUBECONFIG``), which is
also how the local emulator is reached. Every ApiException is translated into ``jobs.errors``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from jobs import errors
from jobs.core.nodegroup_plan import GpuPod, NodeInfo
from jobs.core.nodegroups import GroupIdentity, Record, RecordError
from jobs.labels import (
    CORDONED_BY_ANNOTATION,
    GPU_RESOURCE_PREFIXES,
    KEEP_ALIVE_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODE_GROUP_LABEL,
    RECORD_KEY,
    RECORD_KIND_LABEL,
    SAFE_TO_EVICT_ANNOTATION,
)

__all__ = ["ConfigException", "ConfigMapRecords", "KubeCluster", "KubeEvents", "LeaseLock", "api_client"]

# What the code below calls, for the shipped RBAC Role/ClusterRole (checked by a test).
RBAC_RULES = {
    ("", "nodes"): ("list", "patch"),
    ("", "pods"): ("list", "get"),
    ("", "pods/eviction"): ("create",),
    ("", "configmaps"): ("list", "create", "update"),
    ("", "events"): ("create",),
    ("coordination.k8s.io", "leases"): ("get", "create", "update"),
}
SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
PAGE = 500
T = TypeVar("T")


def job_namespace() -> str:
    if ns := os.environ.get("GPU_JOBS_NAMESPACE"):
        return ns
    if SA_NAMESPACE_FILE.exists():
        return SA_NAMESPACE_FILE.read_text().strip()
    return "gpu-jobs"


def api_client(timeout_s: float = 30.0, context: str | None = None) -> client.ApiClient:
    """A client for one cluster: the kubeconfig ``context`` when given (a central install reaching a fleet), else the
    in-cluster service account, else the kubeconfig's current context. Each client has its own Configuration: the
    process-wide default would be shared (and raced on) by the clients of several clusters."""
    configuration = client.Configuration()
    if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        # The client reads KUBECONFIG once, at import; read it now so the current environment counts.
        config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped in the client
            config_file=os.environ.get("KUBECONFIG"), context=context, client_configuration=configuration
        )
    configuration.connection_pool_maxsize = 32  # the job works on many groups at once
    configuration.retries = False  # the job retries what is worth retrying
    api = client.ApiClient(configuration)
    api.rest_client.pool_manager.connection_pool_kw["timeout"] = urllib3.Timeout(total=timeout_s)
    return api


def translate(exc: Exception, operation: str) -> errors.CloudError:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        reason = exc.reason or ""
        try:
            message = json.loads(exc.body or "{}").get("message", reason)
        except ValueError:
            message = reason
        kind: type[errors.CloudError] = {
            404: errors.NotFound,
            409: errors.Conflict,
            403: errors.Denied,
            401: errors.Denied,
            422: errors.Invalid,
            400: errors.Invalid,
            429: errors.Throttled,
        }.get(status, errors.Unavailable if status >= 500 else errors.CloudError)
        return kind(f"{operation}: {status} {message}", operation=operation, code=str(status))
    return errors.Unavailable(f"{operation}: {exc}", operation=operation, code=type(exc).__name__)


def call(operation: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise translate(exc, operation) from exc


def _pages(operation: str, list_fn: Callable[..., Any], **kwargs: Any) -> Iterator[Any]:
    token = None
    while True:
        page = call(operation, partial(list_fn, limit=PAGE, _continue=token, **kwargs))
        yield from page.items
        token = page.metadata._continue
        if not token:
            return


def _version(obj: Any) -> str:
    return str(obj.metadata.resource_version)


def _gpus(pod: Any) -> int:
    total = 0
    for container in pod.spec.containers or []:
        resources = container.resources
        wanted = {**((resources and resources.limits) or {}), **((resources and resources.requests) or {})}
        for name, value in wanted.items():
            if name.startswith(GPU_RESOURCE_PREFIXES):
                total += int(str(value))
    return total


class KubeCluster:
    """Nodes and GPU pods (reads), cordon and eviction (writes)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def nodes(self) -> list[NodeInfo]:
        found = []
        for n in _pages("list nodes", self.core.list_node):
            unschedulable = bool(n.spec and n.spec.unschedulable)
            ours = unschedulable and CORDONED_BY_ANNOTATION in (n.metadata.annotations or {})
            found.append(NodeInfo(n.metadata.name, dict(n.metadata.labels or {}), unschedulable, ours))
        return found

    def gpu_pods(self) -> list[GpuPod]:
        found = []
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        for pod in _pages("list pods", self.core.list_pod_for_all_namespaces, field_selector=selector):
            gpus = _gpus(pod)
            if not gpus or not pod.spec.node_name:
                continue
            notes = pod.metadata.annotations or {}
            evictable = notes.get(SAFE_TO_EVICT_ANNOTATION) != "false" and KEEP_ALIVE_ANNOTATION not in notes
            found.append(GpuPod(pod.metadata.namespace, pod.metadata.name, pod.spec.node_name, gpus, evictable))
        return found

    def cordon(self, node: str) -> None:
        mark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: "nodegroups"}}, "spec": {"unschedulable": True}}
        call("patch nodes", lambda: self.core.patch_node(node, mark))

    def uncordon(self, node: str) -> None:
        unmark = {"metadata": {"annotations": {CORDONED_BY_ANNOTATION: None}}, "spec": {"unschedulable": None}}
        with contextlib.suppress(errors.NotFound):  # the node went away with its group: nothing left to undo
            call("patch nodes", lambda: self.core.patch_node(node, unmark))

    def evict(self, pod: GpuPod) -> None:
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace))
        try:
            call(
                "create pods/eviction", lambda: self.core.create_namespaced_pod_eviction(pod.name, pod.namespace, body)
            )
        except errors.Throttled as exc:  # 429 from eviction means a PodDisruptionBudget said no (for now)
            raise errors.Busy(str(exc), operation=exc.operation, code="DisruptionBudget") from exc
        except errors.NotFound:
            pass  # already gone

    def pod_exists(self, pod: GpuPod) -> bool:
        try:
            call("get pods", lambda: self.core.read_namespaced_pod(pod.name, pod.namespace))
        except errors.NotFound:
            return False
        return True


def record_name(identity: GroupIdentity) -> str:
    """The record ConfigMap of a group: named after the cloud's group and a digest of its identity, so a group
    renamed in the policy finds its record and a name pointed at another group does not."""
    native = identity.locator[-1][1] if identity.locator else "group"
    for key in ("nodegroup", "autoScalingGroup", "nodePool", "agentPool"):
        native = dict(identity.locator).get(key, native)
    digest = hashlib.sha256(json.dumps(identity.to_json(), sort_keys=True).encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9-]+", "-", native.lower()).strip("-")[:40] or "group"
    return f"gpu-jobs-nodegroup-{slug}-{digest}"


class ConfigMapRecords:
    """One ConfigMap per node group in the job's namespace; writes carry the resourceVersion last seen, so a
    concurrent writer makes this one fail (409) instead of silently losing a record. Records are parsed one by one:
    a malformed one makes its own group fail, not the run."""

    def __init__(self, api: client.ApiClient, namespace: str, identities: Mapping[str, GroupIdentity]) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.identities = dict(identities)
        self._versions: dict[str, str] = {}
        self._lock = threading.Lock()

    def load(self) -> dict[str, Record | RecordError]:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{RECORD_KIND_LABEL}=nodegroup"
        listing = partial(self.core.list_namespaced_config_map, namespace=self.namespace, label_selector=selector)
        found = {cm.metadata.name: cm for cm in _pages("list configmaps", listing)}
        records: dict[str, Record | RecordError] = {}
        for group, identity in self.identities.items():
            cm = found.get(record_name(identity))
            if cm is None:
                continue
            with self._lock:
                self._versions[group] = cm.metadata.resource_version
            records[group] = _parse_record(cm, identity)
        return records

    def save(self, group: str, record: Record) -> None:
        identity = self.identities[group]
        name = record_name(identity)
        with self._lock:
            version = self._versions.get(group)
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=self.namespace,
                labels={MANAGED_BY_LABEL: MANAGED_BY, RECORD_KIND_LABEL: "nodegroup", NODE_GROUP_LABEL: group},
                resource_version=version,
            ),
            data={RECORD_KEY: json.dumps(replace(record, describes=identity).to_json(), indent=2, sort_keys=True)},
        )
        if version is None:
            saved = call("create configmaps", lambda: self.core.create_namespaced_config_map(self.namespace, body))
        else:
            replace_it = partial(self.core.replace_namespaced_config_map, name, self.namespace, body)
            saved = call("update configmaps", replace_it)
        with self._lock:
            self._versions[group] = _version(saved)


def _parse_record(cm: Any, identity: GroupIdentity) -> Record | RecordError:
    where = f"record ConfigMap {cm.metadata.name}"
    try:
        record = Record.from_json(json.loads((cm.data or {})[RECORD_KEY]))
    except KeyError:
        return RecordError(f"{where} has no {RECORD_KEY}")
    except json.JSONDecodeError as exc:
        return RecordError(f"{where} is not JSON: {exc}")
    except RecordError as exc:
        return RecordError(f"{where}: {exc}")
    if record.describes is not None and record.describes != identity:
        return RecordError(f"{where} describes {record.describes.describe()}, not {identity.describe()}")
    return record


class LeaseLock:
    """A coordination.k8s.io Lease: whoever holds an unexpired lease runs; the other run exits cleanly."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> str | None:
        spec = client.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=int(duration.total_seconds()),
            acquire_time=now,
            renew_time=now,
        )
        try:
            lease = call("get leases", lambda: self.coordination.read_namespaced_lease(self.name, self.namespace))
        except errors.NotFound:
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=spec)
            try:
                call("create leases", lambda: self.coordination.create_namespaced_lease(self.namespace, body))
            except errors.Conflict:
                return "another run (lease created concurrently)"
            return None
        current = lease.spec
        if current and current.holder_identity and current.holder_identity != holder and current.renew_time:
            expires = current.renew_time + timedelta(seconds=current.lease_duration_seconds or 0)
            if expires > now:
                return str(current.holder_identity)
        lease.spec = spec
        try:
            # The lease read above carries its resourceVersion: a rival that took it meanwhile makes this a 409.
            call("update leases", lambda: self.coordination.replace_namespaced_lease(self.name, self.namespace, lease))
        except errors.Conflict:
            return "another run (lease taken concurrently)"
        return None

    def renew(self, holder: str, now: datetime, duration: timedelta) -> bool:
        lease = call("get leases", lambda: self.coordination.read_namespaced_lease(self.name, self.namespace))
        if lease.spec is None or lease.spec.holder_identity != holder:
            return False
        lease.spec.renew_time = now
        lease.spec.lease_duration_seconds = int(duration.total_seconds())
        try:
            call("update leases", lambda: self.coordination.replace_namespaced_lease(self.name, self.namespace, lease))
        except errors.Conflict:
            return False  # someone wrote the Lease since it was read: it is theirs now
        return True

    def release(self, holder: str) -> None:
        lease = call("get leases", lambda: self.coordination.read_namespaced_lease(self.name, self.namespace))
        if lease.spec is None or lease.spec.holder_identity != holder:
            return
        lease.spec.holder_identity = None
        lease.spec.lease_duration_seconds = 1
        call("update leases", lambda: self.coordination.replace_namespaced_lease(self.name, self.namespace, lease))


class KubeEvents:
    """Kubernetes Events on the record ConfigMap of each group: ``kubectl describe`` shows what the job did."""

    def __init__(
        self, api: client.ApiClient, namespace: str, component: str, identities: Mapping[str, GroupIdentity]
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.component = component
        self.identities = dict(identities)

    def emit(self, group: str, reason: str, message: str, *, warning: bool = False) -> None:
        target = record_name(self.identities[group])
        emit_event(self.core, self.component, "ConfigMap", target, self.namespace, reason, message, warning=warning)


def emit_event(
    core: client.CoreV1Api,
    component: str,
    kind: str,
    name: str,
    namespace: str,
    reason: str,
    message: str,
    *,
    warning: bool = False,
) -> None:
    """A Kubernetes Event on the object a job touched (``kubectl describe`` shows it), in that object's namespace."""
    now = datetime.now(UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=f"{name}.{uuid.uuid4().hex[:12]}", namespace=namespace),
        involved_object=client.V1ObjectReference(api_version="v1", kind=kind, name=name, namespace=namespace),
        reason=reason,
        message=message[:1024],
        type="Warning" if warning else "Normal",
        source=client.V1EventSource(component=component),
        reporting_component=f"gpu-jobs/{component}",
        reporting_instance=os.environ.get("HOSTNAME", "gpu-jobs"),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    # The answer (the Event) is not needed: skip the client's model building.
    call("create events", lambda: core.create_namespaced_event(namespace, event, _preload_content=False))
