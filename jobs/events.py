"""The one Events port: every job tells the people who own an object it touched what it did and why, as a
Kubernetes Event on that object (``kubectl describe`` shows it).

An Event is a courtesy, never the work: ``emit`` does not raise. The adapter logs a failed Event and goes on; the
job's result stays what the work did. The object's uid comes from what the run already observed (an Event with no
uid is listed by ``kubectl get events`` but not shown under the object), never from a read per Event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class ObjectRef:
    """The object an Event is on: in the cluster the Events port writes to."""

    kind: str  # "ConfigMap", "ResourceQuota", "Pod", "Node", ...
    name: str
    namespace: str = ""  # "" for a cluster-scoped object (the Event then goes to "default")
    uid: str = ""  # as the run observed it; "" when the run never saw the object
    api_version: str = "v1"


class Events(Protocol):
    def emit(self, ref: ObjectRef, reason: str, message: str, type: EventType = "Normal") -> None:
        """Record ``message`` (a sentence a person reads) on ``ref``. Never raises."""
        ...


class OnceEvents(Events, Protocol):
    """Events that announce something once: a later run that says the same thing again adds nothing."""

    def emit_once(self, ref: ObjectRef, name: str, reason: str, message: str, type: EventType = "Warning") -> bool:
        """Record ``message`` on ``ref`` as the Event ``name`` (in ``ref``'s namespace), unless an Event of that name
        is already there. Never raises: False when the Event could not be written (the person is not told yet)."""
        ...


class NoEvents:
    """Where no cluster is there to hold Events (a dry run, a cloud account with no record cluster)."""

    def emit(self, ref: ObjectRef, reason: str, message: str, type: EventType = "Normal") -> None:
        return None

    def emit_once(self, ref: ObjectRef, name: str, reason: str, message: str, type: EventType = "Warning") -> bool:
        return True
