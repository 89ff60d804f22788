"""The nodegroups job's durable state: one record ConfigMap per node group in the job's namespace, holding what
the group looked like before it went down, so a crash mid-run never loses what is needed to restore it."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from kubernetes import client

from jobs.adapters.kube.client import call, pages
from jobs.adapters.kube.rbac import Grant
from jobs.core.nodegroups import GroupIdentity, Record, RecordError
from jobs.labels import MANAGED_BY, MANAGED_BY_LABEL, NODE_GROUP_LABEL, RECORD_KEY, RECORD_KIND_LABEL

RBAC = (Grant("", "configmaps", ("list", "create", "update"), "namespace"),)  # update: optimistic concurrency


def _version(obj: Any) -> str:
    return str(obj.metadata.resource_version)


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
        found = {cm.metadata.name: cm for cm in pages("list configmaps", listing)}
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
