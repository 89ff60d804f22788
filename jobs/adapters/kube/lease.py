"""One run at a time per job and cluster: a coordination.k8s.io Lease in the job's namespace (the CronJob and a
`kubectl create job --from` run may overlap)."""

from __future__ import annotations

from datetime import datetime, timedelta

from kubernetes import client

from jobs import errors
from jobs.adapters.kube.client import call
from jobs.adapters.kube.rbac import Grant
from jobs.lease import Holder, taken_over

RBAC = (Grant("coordination.k8s.io", "leases", ("get", "create", "update"), "namespace"),)


class LeaseLock:
    """A coordination.k8s.io Lease: whoever holds an unexpired lease runs; the other run exits cleanly."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name

    def acquire(self, holder: str, now: datetime, duration: timedelta) -> Holder | None:
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
                return Holder("another run (lease created concurrently)", now, duration)
            return None
        current = lease.spec
        if current and current.holder_identity and current.holder_identity != holder:
            held_for = timedelta(seconds=current.lease_duration_seconds or 0)
            if not taken_over(current.renew_time, held_for, now):
                return Holder(str(current.holder_identity), current.renew_time, held_for)
        lease.spec = spec
        try:
            # The lease read above carries its resourceVersion: a rival that took it meanwhile makes this a 409.
            call("update leases", lambda: self.coordination.replace_namespaced_lease(self.name, self.namespace, lease))
        except errors.Conflict:
            return Holder("another run (lease taken concurrently)", now, duration)
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
