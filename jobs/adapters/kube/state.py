"""Durable job state in the job's own namespace: one ConfigMap per item, for any job and any kind of state
(pre-shutdown records, request ids, marks). A :class:`Codec` says how one kind of state is named, written and read;
the store does the rest the same way for all of them:

- one list call finds every entry of the kind (a label selector), never a read per item;
- writes carry the resourceVersion last seen, so a concurrent writer makes this one fail (409) instead of silently
  overwriting it;
- entries are decoded one by one: a malformed one is that item's problem (the codec returns its error value), not
  the run's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

from jobs.adapters.kube.client import ApiClient, json_pages, request
from jobs.adapters.kube.rbac import Grant
from jobs.events import ObjectRef
from jobs.labels import MANAGED_BY, MANAGED_BY_LABEL, RECORD_KIND_LABEL

RBAC = (Grant("", "configmaps", ("list", "create", "update"), "namespace"),)  # update: optimistic concurrency

T = TypeVar("T")


class Codec(Protocol[T]):
    """How one kind of state maps onto ConfigMaps. ``decode`` never raises: what cannot be used comes back as the
    kind's own error value, so the item fails and the others go on."""

    @property
    def kind(self) -> str:
        """The value of the gpu-jobs.dev/record label that selects this kind's ConfigMaps."""
        ...

    def keys(self) -> Mapping[str, str]:
        """Each item's key and the name of its ConfigMap."""
        ...

    def encode(self, key: str, value: T) -> tuple[dict[str, str], dict[str, str]]:
        """The ConfigMap's extra labels and its data."""
        ...

    def decode(self, key: str, name: str, data: Mapping[str, str]) -> T: ...


class ConfigMapState(Generic[T]):
    """A typed state store over ConfigMaps (see the module's docstring). Thread-safe."""

    def __init__(self, api: ApiClient, namespace: str, codec: Codec[T]) -> None:
        self.api = api
        self.namespace = namespace
        self.codec = codec
        self._names = dict(codec.keys())
        self._versions: dict[str, str] = {}
        self._uids: dict[str, str] = {}  # as read or written: the Events on a ConfigMap name it by uid
        self._lock = threading.Lock()
        self._configmaps = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"

    def _listing(self) -> dict[str, Any]:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{RECORD_KIND_LABEL}={self.codec.kind}"
        listing = json_pages(self.api, "list configmaps", self._configmaps, labelSelector=selector)
        return {cm["metadata"]["name"]: cm for cm in listing}

    def unclaimed(self) -> dict[str, Mapping[str, str]]:
        """The data of this kind's ConfigMaps that no item claims (one list call): state left by items that are
        gone from the policy, for the job to report, never to act on."""
        claimed = set(self._names.values())
        return {name: cm.get("data") or {} for name, cm in self._listing().items() if name not in claimed}

    def load(self) -> dict[str, T]:
        found = self._listing()
        entries: dict[str, T] = {}
        for key, name in self._names.items():
            cm = found.get(name)
            if cm is None:
                continue
            with self._lock:
                self._versions[key] = str(cm["metadata"]["resourceVersion"])
                self._uids[key] = str(cm["metadata"].get("uid", ""))
            entries[key] = self.codec.decode(key, name, cm.get("data") or {})
        return entries

    def save(self, key: str, value: T) -> None:
        name = self._names[key]
        labels, data = self.codec.encode(key, value)
        with self._lock:
            version = self._versions.get(key)
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, RECORD_KIND_LABEL: self.codec.kind, **labels},
        }
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
        if version is None:
            saved = request(self.api, "create configmaps", "POST", self._configmaps, body=body)
        else:
            metadata["resourceVersion"] = version  # a writer that came in between makes this a 409
            path = f"{self._configmaps}/{quote(name, safe='')}"
            saved = request(self.api, "update configmaps", "PUT", path, body=body)
        with self._lock:
            self._versions[key] = str(saved["metadata"]["resourceVersion"])
            self._uids[key] = str(saved["metadata"].get("uid", ""))

    def ref(self, key: str) -> ObjectRef:
        """The ConfigMap of ``key``, for an Event on it: its uid as this run last read or wrote it (none read: no
        uid, and no read for one)."""
        with self._lock:
            uid = self._uids.get(key, "")
        return ObjectRef("ConfigMap", self._names[key], self.namespace, uid)
