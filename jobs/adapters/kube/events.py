"""The Events port (``jobs.events``) on a Kubernetes API: one class for every job, so ``kubectl describe`` shows
what a job did to an object and why.

An Event is a courtesy, never the work: a failed Event is logged here and the job goes on (no job catches one).
The object's uid is the one the run observed (the record it read or wrote, the quota it listed or applied, the pod
it judged): an Event never reads anything.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant
from jobs.events import EventType, ObjectRef
from jobs.report_text import sentence

#: Events on the job's own objects (its record ConfigMaps), in its namespace. Jobs that put Events on objects in
#: other namespaces (a team's ResourceQuota, a pod) grant themselves events cluster-wide in their own module.
RBAC = (Grant("", "events", ("create",), "namespace"),)


class KubeEvents:
    """``Events`` for one cluster: each Event is one POST of plain JSON (the answer is not needed, nor the generated
    API class). ``component`` is the Events' source (``nodegroups``, ``quotas``...)."""

    def __init__(self, api: ApiClient, component: str, log: Any) -> None:
        self.api = api
        self.component = component
        self.log = log

    def emit(self, ref: ObjectRef, reason: str, message: str, type: EventType = "Normal") -> None:
        try:
            self._create(ref, reason, message, type)
        except errors.CloudError as exc:  # the work it tells of is done: losing the Event must not undo that
            self.log.warning(
                "event.failed", kind=ref.kind, namespace=ref.namespace, name=ref.name, reason=reason, error=str(exc)
            )

    def emit_once(self, ref: ObjectRef, name: str, reason: str, message: str, type: EventType = "Warning") -> bool:
        try:
            self._create(ref, reason, message, type, name)
        except errors.Conflict:  # AlreadyExists: announced by an earlier run, and once is the point
            self.log.debug("event.exists", namespace=ref.namespace, name=name, reason=reason)
        except errors.CloudError as exc:
            self.log.warning(
                "event.failed", kind=ref.kind, namespace=ref.namespace, name=ref.name, reason=reason, error=str(exc)
            )
            return False
        return True

    def _create(self, ref: ObjectRef, reason: str, message: str, type: EventType, name: str | None = None) -> None:
        # ``involvedObject.uid`` is what ``kubectl describe`` selects Events by: without it an Event is listed by
        # ``kubectl get events`` but never shown under the object (an object that is gone has no uid to give).
        namespace = ref.namespace or "default"  # a cluster-scoped object's Events go to "default", as kubectl's do
        involved = {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name, "namespace": ref.namespace}
        if not ref.namespace:
            del involved["namespace"]
        if ref.uid:
            involved["uid"] = ref.uid
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name or f"{ref.name}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            # Every job's Events come here, so each message is made a sentence once (``kubectl describe`` shows it
            # alone, not under a report's headline).
            "message": sentence(message)[:1024],
            "type": type,
            "source": {"component": self.component},
            "reportingComponent": f"gpu-jobs/{self.component}",
            "reportingInstance": os.environ.get("HOSTNAME", "gpu-jobs"),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        request(self.api, "create events", "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", body=event)
