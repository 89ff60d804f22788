"""One run at a time per job and cluster: a coordination.k8s.io Lease in the job's namespace (the CronJob and a
`kubectl create job --from` run may overlap)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant
from jobs.lease import Holder, taken_over

RBAC = (Grant("coordination.k8s.io", "leases", ("get", "create", "update"), "namespace"),)


def micro_time(when: datetime) -> str:
    """A ``MicroTime`` as the API server writes it (RFC 3339, UTC, microseconds), the form it always parses."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """A time the API server wrote (``Z`` or an offset; one without is UTC, as the server means it)."""
    when = datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class LeaseLock:
    """A coordination.k8s.io Lease: whoever holds an unexpired lease runs; the other run exits cleanly. Every update
    sends back the resourceVersion it read, so of two runs writing at once one gets a 409 and yields."""

    def __init__(self, api: ApiClient, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
        self._path = f"{self._leases}/{quote(name, safe='')}"

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> Holder | None:
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration.total_seconds()),
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
        }
        try:
            lease = self._read()
        except errors.NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                request(self.api, "create leases", "POST", self._leases, body=body)
            except errors.Conflict:
                return Holder("another run (lease created concurrently)", now, duration)
            return None
        current = lease.get("spec") or {}
        other = current.get("holderIdentity")
        if other and other != holder:
            renewed = parse_time(str(current["renewTime"])) if current.get("renewTime") else None
            held_for = timedelta(seconds=current.get("leaseDurationSeconds") or 0)
            if not taken_over(renewed, held_for, now):
                return Holder(str(other), renewed, held_for)
        lease["spec"] = spec
        try:
            self._replace(lease)
        except errors.Conflict:
            return Holder("another run (lease taken concurrently)", now, duration)
        return None

    def renew(self, holder: str, now: datetime, duration: timedelta) -> bool:
        lease = self._read()
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != holder:
            return False
        spec["renewTime"] = micro_time(now)
        spec["leaseDurationSeconds"] = int(duration.total_seconds())
        lease["spec"] = spec
        try:
            self._replace(lease)
        except errors.Conflict:
            return False  # someone wrote the Lease since it was read: it is theirs now
        return True

    def release(self, holder: str) -> None:
        lease = self._read()
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != holder:
            return
        spec.pop("holderIdentity", None)
        spec["leaseDurationSeconds"] = 1
        lease["spec"] = spec
        self._replace(lease)

    def _read(self) -> dict[str, Any]:
        lease: dict[str, Any] = request(self.api, "get leases", "GET", self._path)
        return lease

    def _replace(self, lease: dict[str, Any]) -> None:
        # The Lease as read carries its resourceVersion: a rival that wrote it meanwhile makes this a 409.
        request(self.api, "update leases", "PUT", self._path, body=lease)
