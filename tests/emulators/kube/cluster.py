"""The emulated cluster's storage: objects by resource, a global resourceVersion, and the controllers that keep
ResourceQuota and PodDisruptionBudget ``status`` current. Also the seeding API tests use to set up a cluster
without HTTP (and without admission: seeded pods keep the phase and node they are given).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from . import admission, apps, managed_fields, validation
from .errors import not_found
from .resources import RESOURCE_TYPES, ResourceType, by_kind

Json = dict[str, Any]
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_ALIASES = {rt.kind: rt for rt in reversed(RESOURCE_TYPES)}  # "Event" means core/v1 unless apiVersion says so


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _list_key(obj: Json) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def resource_type(kind_or_plural: str, api_version: str | None = None) -> ResourceType:
    """``Pod``/``pods``/``po``, optionally pinned to an apiVersion (``events.k8s.io/v1`` for the new Event)."""
    if api_version:
        return (
            by_kind(api_version, kind_or_plural)
            if kind_or_plural[:1].isupper()
            else next(rt for rt in RESOURCE_TYPES if rt.api_version == api_version and rt.plural == kind_or_plural)
        )
    for rt in RESOURCE_TYPES:
        if kind_or_plural in (rt.plural, *rt.short_names):
            return rt
    if kind_or_plural in _ALIASES:
        return _ALIASES[kind_or_plural]
    raise KeyError(f"the emulator does not serve {kind_or_plural!r}")


class Cluster:
    """All stored objects. Thread-safe: the HTTP handlers and the test thread share it."""

    def __init__(self, now: Callable[[], datetime] | None = None) -> None:
        #: The clock for creationTimestamp and managedFields times; tests may replace it.
        self._default_now: Callable[[], datetime] = now or (lambda: datetime.now(UTC))
        self.now = self._default_now
        self.lock = threading.RLock()
        self._objects: dict[str, dict[tuple[str, str], Json]] = {}
        #: Each resource's keys, kept sorted as objects come and go: a list or a namespace's objects is a slice
        #: found by bisection, not a sort of the whole store per call (which made every write O(N log N)).
        self._keys: dict[str, list[tuple[str, str]]] = {}
        #: Per resource: the resourceVersion at which its ``namespace/name`` list keys were computed, the keys in
        #: storage order, and whether that order is also their string order (see :meth:`list_keys`).
        self._list_keys: dict[str, tuple[int, list[str], bool]] = {}
        self._rv = 0
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.now = self._default_now
            #: How long a deleted namespace stays Terminating (its content being deleted): 0 finishes at once; a
            #: test that needs to see the Terminating state raises it.
            self.namespace_termination_s = 0.0
            self._terminating: dict[str, datetime] = {}
            #: Pods deleted gracefully through the API: (namespace, name) -> (uid, the end of their grace period,
            #: when the kubelet is done with them). Exact to the microsecond (``deletionTimestamp`` is whole
            #: seconds, as on the wire).
            self._pod_deadlines: dict[tuple[str, str], tuple[str, datetime, datetime]] = {}
            #: How long a pod's containers take to exit once told to stop (SIGTERM): None, the whole grace period
            #: (they ignore it and the kubelet kills them when it ends); a number of seconds, at most that long, as
            #: real containers that exit on SIGTERM do. The pod is Terminating until then, ``deletionTimestamp``
            #: still says the end of its grace period. Tests set it short rather than wait a real 30 s.
            self.pod_stop_s: float | None = None
            #: The resourceVersion the workload controllers last looked at (they run only after a change).
            self._reconciled_rv = -1
            self._objects = {rt.key: {} for rt in RESOURCE_TYPES}
            self._keys = {rt.key: [] for rt in RESOURCE_TYPES}
            self._list_keys = {}
            self._rv = 0
            #: What each pod's container printed (``kubectl logs``), written by whoever runs it (the sandbox's job
            #: executor); gone with the pod.
            self._pod_logs: dict[tuple[str, str], str] = {}
            #: Controllers beyond the built-in ones (the Karpenter model, :mod:`.karpenter`), run by :meth:`settle`
            #: on the emulator's clock: what is due happens before any observer looks.
            self.controllers: list[Callable[[], None]] = []
            for name in DEFAULT_NAMESPACES:
                self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        with self.lock:
            self.require(resource_type("pods"), namespace, name)
            self._pod_logs[(namespace, name)] = text

    def pod_log(self, namespace: str, name: str) -> str:
        with self.lock:
            return self._pod_logs.get((namespace, name), "")

    # Low-level storage used by the verbs ------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def stored(self, rt: ResourceType, namespace: str, name: str) -> Json | None:
        """The live object itself (not a copy): callers hold ``lock`` and must not mutate it."""
        return self._objects[rt.key].get((namespace if rt.namespaced else "", name))

    def require(self, rt: ResourceType, namespace: str, name: str) -> Json:
        obj = self.stored(rt, namespace, name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def scan(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Json]:
        """Live objects in (namespace, name) order; ``namespace`` None means all namespaces."""
        yield from self.ordered(rt, namespace)

    def ordered(self, rt: ResourceType, namespace: str | None = None) -> list[Json]:
        """What :meth:`scan` yields, as a list taken now: a slice of the sorted keys, no scan of other namespaces."""
        keys, objects = self._keys[rt.key], self._objects[rt.key]
        lo, hi = self._span(keys, namespace)
        return [objects[key] for key in keys[lo:hi]]

    @staticmethod
    def _span(keys: list[tuple[str, str]], namespace: str | None) -> tuple[int, int]:
        if namespace is None:
            return 0, len(keys)
        # Every (namespace, name) sorts after (namespace,) and before (namespace + "\0",); no other namespace does.
        return bisect.bisect_left(keys, (namespace,)), bisect.bisect_left(keys, (namespace + "\0",))

    def list_keys(self, rt: ResourceType, namespace: str | None = None) -> tuple[list[str], bool]:
        """The ``namespace/name`` keys that list paging compares (continue tokens carry one), in :meth:`ordered`'s
        order, and whether that order is also their string order, so that a page may start by bisection.

        Within one namespace it always is; across namespaces it is not when one namespace's name is another's
        prefix followed by a character below ``/`` (``a`` and ``a-b``): (namespace, name) order puts ``a/x``
        first, string order ``a-b/y``. Cached until the next write.
        """
        cached = self._list_keys.get(rt.key)
        if cached is None or cached[0] != self._rv:
            objects = self._objects[rt.key]
            texts = [_list_key(objects[key]) for key in self._keys[rt.key]]
            cached = (self._rv, texts, all(a < b for a, b in itertools.pairwise(texts)))
            self._list_keys[rt.key] = cached
        _, texts, monotonic = cached
        lo, hi = self._span(self._keys[rt.key], namespace)
        return texts[lo:hi], monotonic or namespace is not None

    def new_metadata(self, obj: Json) -> None:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta.setdefault("creationTimestamp", timestamp(self.now()))
        if "spec" in obj:
            meta["generation"] = 1

    def commit(self, rt: ResourceType, obj: Json) -> Json:
        """Store ``obj`` under a new resourceVersion, then let the controllers react."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        if key not in self._objects[rt.key]:
            bisect.insort(self._keys[rt.key], key)
        self._objects[rt.key][key] = obj
        self._react(rt, meta.get("namespace", ""))
        return obj

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Json:
        key = (namespace if rt.namespaced else "", name)
        obj = self._objects[rt.key].pop(key)
        if rt.kind == "Pod":
            self._pod_logs.pop(key, None)
        keys = self._keys[rt.key]
        del keys[bisect.bisect_left(keys, key)]
        self._rv += 1
        if rt.kind == "Namespace":
            for other in RESOURCE_TYPES:
                if other.namespaced:
                    self._objects[other.key] = {k: v for k, v in self._objects[other.key].items() if k[0] != name}
                    self._keys[other.key] = [k for k in self._keys[other.key] if k[0] != name]
        self._react(rt, namespace)
        return obj

    def terminate_namespace(self, namespace: Json) -> Json:
        """A namespace deleted through the API: Terminating until :meth:`finalize_namespaces` removes it."""
        self._terminating[namespace["metadata"]["name"]] = datetime.fromisoformat(
            namespace["metadata"]["deletionTimestamp"]
        )
        return self.commit(resource_type("namespaces"), namespace)

    def finalize_namespaces(self) -> None:
        """The namespace controller: a namespace deleted ``namespace_termination_s`` ago or more loses its content
        and is removed. Called on every API request (and after each delete)."""
        with self.lock:
            for name, since in list(self._terminating.items()):
                if (self.now() - since).total_seconds() >= self.namespace_termination_s:
                    del self._terminating[name]
                    if self.stored(resource_type("namespaces"), "", name) is not None:
                        self.remove(resource_type("namespaces"), "", name)

    def terminate_pod(self, pod: Json, grace_s: int, deadline: datetime | None = None) -> Json:
        """A pod deleted gracefully: ``deletionTimestamp`` (now + grace, as the real server sets it) and
        ``deletionGracePeriodSeconds``; still listed, still charged to quota, until :meth:`expire_pods` removes it
        once the grace period has passed (what the kubelet does after stopping its containers)."""
        meta = pod["metadata"]
        now = self.now()
        deadline = deadline or now + timedelta(seconds=grace_s)
        meta["deletionTimestamp"] = timestamp(deadline)
        meta["deletionGracePeriodSeconds"] = grace_s
        key = (meta["namespace"], meta["name"])
        gone = deadline
        if self.pod_stop_s is not None:
            # Told to stop at the first delete: a later, shorter one may only bring the end closer.
            earlier = self._pod_deadlines.get(key)
            told = earlier[2] if earlier and earlier[0] == meta["uid"] else now + timedelta(seconds=self.pod_stop_s)
            gone = min(deadline, told)
        self._pod_deadlines[key] = (meta["uid"], deadline, gone)
        return self.commit(resource_type("pods"), pod)

    def pod_deadline(self, namespace: str, name: str) -> datetime | None:
        """The end of the pod's grace period (its ``deletionTimestamp``, exact), if it is being deleted."""
        entry = self._pod_deadlines.get((namespace, name))
        return entry[1] if entry else None

    def pod_gone_at(self, namespace: str, name: str) -> datetime | None:
        """When a terminating pod's containers will have exited and it will be gone (None: not terminating)."""
        entry = self._pod_deadlines.get((namespace, name))
        return entry[2] if entry else None

    def expire_pods(self) -> None:
        """Remove the gracefully deleted pods whose containers have exited (their grace period passed, or
        ``pod_stop_s``). Called on every API request and every read through the seeding API, so no observer ever
        sees a pod after its time is up."""
        with self.lock:
            if not self._pod_deadlines:
                return
            now, pods = self.now(), resource_type("pods")
            for key, (uid, _, gone) in list(self._pod_deadlines.items()):
                stored = self.stored(pods, *key)
                if stored is None or stored["metadata"].get("uid") != uid:
                    del self._pod_deadlines[key]  # gone another way (its namespace, a force delete)
                elif now >= gone:
                    del self._pod_deadlines[key]
                    self.remove(pods, *key)

    def settle(self) -> None:
        """Everything due: pods past their grace period, the workload controllers (:mod:`.apps`), namespaces done
        terminating. Before every request is answered and every seeded read."""
        with self.lock:
            for controller in self.controllers:
                controller()  # first: a controller catching up on past time must see the pods of that time
            self.expire_pods()
            self.reconcile_workloads()
            self.finalize_namespaces()
            for controller in self.controllers:
                controller()

    def reconcile_workloads(self) -> None:
        """The Deployment, ReplicaSet and StatefulSet controllers, after any change (cheap when nothing changed or
        no namespace has a workload: a 10,000-pod list pays nothing for them)."""
        with self.lock:
            if self._rv == self._reconciled_rv:
                return
            namespaces = sorted(
                {
                    key[0]
                    for kind in ("deployments", "replicasets", "statefulsets")
                    for key in self._keys[f"{kind}.apps"]
                }
            )
            if namespaces:
                apps.reconcile(self, namespaces)
            self._reconciled_rv = self._rv

    def _react(self, rt: ResourceType, namespace: str) -> None:
        """Synchronous stand-ins for the quota and disruption controllers."""
        if rt.namespaced:  # every namespaced object may count against a count/<resource> quota
            pods = list(self.scan(resource_type("pods"), namespace))
            counts = {t.key: sum(1 for _ in self.scan(t, namespace)) for t in RESOURCE_TYPES if t.namespaced}
            for quota in list(self.scan(resource_type("resourcequotas"), namespace)):
                status = admission.quota_status(quota, pods, counts)
                self._set_status(resource_type("resourcequotas"), quota, status)
        if rt.plural in ("pods", "poddisruptionbudgets"):
            pods = list(self.scan(resource_type("pods"), namespace))
            for pdb in list(self.scan(resource_type("poddisruptionbudgets"), namespace)):
                self._set_status(resource_type("poddisruptionbudgets"), pdb, admission.pdb_status(pdb, pods))

    def _set_status(self, rt: ResourceType, obj: Json, status: Json) -> None:
        if obj.get("status") != status:
            self._rv += 1
            updated = {**obj, "status": status, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
            self._objects[rt.key][(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = updated

    # Seeding and reading API for tests -------------------------------------------------------------------------

    def create(self, obj: Json, manager: str | None = None) -> Json:
        """Store an object as is (status, node, timestamps kept; no admission), with uid and resourceVersion.

        ``obj`` needs ``apiVersion``, ``kind`` and ``metadata.name`` (and ``metadata.namespace`` if namespaced).
        With ``manager`` (e.g. ``"kubectl-create"``) its fields are owned by that Update manager, so a later
        server-side apply meets the conflicts it would meet on a real cluster. Returns a copy of what was stored.
        """
        rt = by_kind(obj["apiVersion"], obj["kind"])
        validation.check_seed(rt, obj)
        stored = copy.deepcopy(obj)
        validation.canonicalise(rt, stored)  # a real server would hold quantities in canonical form
        if rt.namespaced:
            stored["metadata"].setdefault("namespace", "default")
        with self.lock:
            self.new_metadata(stored)
            if manager:
                managed_fields.record_update(None, stored, manager, "", rt.api_version, timestamp(self.now()))
            if rt.kind == "Namespace":
                stored.setdefault("spec", {"finalizers": ["kubernetes"]})
                stored.setdefault("status", {"phase": "Active"})
            return copy.deepcopy(self.commit(rt, stored))

    def put(self, obj: Json) -> Json:
        """Overwrite a stored object (e.g. to move a pod to ``Succeeded`` as the kubelet would)."""
        rt = by_kind(obj["apiVersion"], obj["kind"])
        with self.lock:
            meta = obj["metadata"]
            old = self.require(rt, meta.get("namespace", ""), meta["name"])
            stored = copy.deepcopy(obj)
            stored["metadata"] = {**old["metadata"], **stored["metadata"]}
            return copy.deepcopy(self.commit(rt, stored))

    def get(self, kind: str, name: str, namespace: str = "", api_version: str | None = None) -> Json | None:
        """A copy of a stored object, or None. ``kind`` is a kind, plural or short name (``Pod``, ``pods``, ``po``)."""
        rt = resource_type(kind, api_version)
        with self.lock:
            self.settle()
            obj = self.stored(rt, namespace or ("default" if rt.namespaced else ""), name)
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, kind: str, namespace: str | None = None, api_version: str | None = None) -> list[Json]:
        with self.lock:
            self.settle()
            return [copy.deepcopy(o) for o in self.scan(resource_type(kind, api_version), namespace)]

    def delete(self, kind: str, name: str, namespace: str = "", api_version: str | None = None) -> None:
        """Remove an object at once (a force delete, or the cloud taking a node away), whatever its grace period."""
        rt = resource_type(kind, api_version)
        with self.lock:
            self.require(rt, namespace or ("default" if rt.namespaced else ""), name)
            self.remove(rt, namespace or ("default" if rt.namespaced else ""), name)
