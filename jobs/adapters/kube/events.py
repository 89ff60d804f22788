"""Kubernetes Events on what a job touched, so ``kubectl describe`` shows what it did and why."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant
from jobs.adapters.kube.records import record_name
from jobs.core.group_record import GroupIdentity
from jobs.report_text import sentence

#: Events on the nodegroups job's record ConfigMaps, in its own namespace. Jobs that report on objects in other
#: namespaces (a team's ResourceQuota) grant themselves events cluster-wide in their own module.
RBAC = (Grant("", "events", ("create",), "namespace"),)


class KubeEvents:
    """Kubernetes Events on the record ConfigMap of each group: ``kubectl describe`` shows what the job did."""

    def __init__(self, api: ApiClient, namespace: str, component: str, identities: Mapping[str, GroupIdentity]) -> None:
        self.api = api
        self.namespace = namespace
        self.component = component
        self.identities = dict(identities)

    def emit(self, group: str, reason: str, message: str, *, warning: bool = False) -> None:
        target = record_name(self.identities[group])
        emit_event(self.api, self.component, "ConfigMap", target, self.namespace, reason, message, warning=warning)


def emit_event(
    api: ApiClient,
    component: str,
    kind: str,
    name: str,
    namespace: str,
    reason: str,
    message: str,
    *,
    warning: bool = False,
    uid: str | None = None,
) -> None:
    """A Kubernetes Event on the object a job touched (``kubectl describe`` shows it), in that object's namespace.
    Sent as plain JSON: the answer (the Event) is not needed, nor the generated API class.

    ``involvedObject.uid`` is what ``kubectl describe`` selects Events by: without it they are listed by
    ``kubectl get events`` but never shown under the object. A caller that has the object passes its uid; else it
    is read with the ``list`` the job already holds on that kind (an object that is gone has no uid to give).

    Every job's Events go through here, so each message is made a sentence once (``kubectl describe`` shows it
    alone, not under a report's headline)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    involved = {"apiVersion": "v1", "kind": kind, "name": name, "namespace": namespace}
    if uid is None:
        uid = _uid_of(api, kind, name, namespace)
    if uid:
        involved["uid"] = uid
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": sentence(message)[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "reportingComponent": f"gpu-jobs/{component}",
        "reportingInstance": os.environ.get("HOSTNAME", "gpu-jobs"),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    request(api, "create events", "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", body=event)


#: The core/v1 kinds Events are put on, and their resources.
_RESOURCES = {"ConfigMap": "configmaps", "ResourceQuota": "resourcequotas"}


def _uid_of(api: ApiClient, kind: str, name: str, namespace: str) -> str:
    resource = _RESOURCES.get(kind)
    if resource is None:
        return ""
    with contextlib.suppress(errors.CloudError):  # an Event without a uid is still an Event
        found = request(
            api,
            f"list {resource}",
            "GET",
            f"/api/v1/namespaces/{quote(namespace, safe='')}/{resource}",
            query=[("fieldSelector", f"metadata.name={name}")],
        )
        items = (found or {}).get("items") or []
        if items:
            return str(items[0]["metadata"].get("uid", ""))
    return ""
