"""Long-running operations, as GKE and Compute operations run: they finish once their time is up, polled or not (a
real operation runs on the server, whoever watches it). Counting polls is a test-only shortcut, off by default."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tests.emulators.gcp.wire import rfc3339_now

OpStatus = Literal["PENDING", "RUNNING", "DONE"]


@dataclass
class StagedOperation:
    """PENDING when created, RUNNING once looked at, DONE once ``seconds_to_done`` have passed since creation
    (``None``: only :meth:`finish` ends it). ``polls_to_done`` (tests only; ``None`` by default) also ends it on that
    poll, and ``0`` at once.

    The change the operation stands for is applied (``on_done``) only when it reaches DONE, so a client that
    reads the resource before its operation finished sees the old state, as on the real cloud.
    """

    name: str
    polls_to_done: int | None
    on_done: Callable[[], None]
    seconds_to_done: float | None = None
    status: OpStatus = "PENDING"
    polls: int = 0
    created: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=rfc3339_now)
    ended_at: str = ""

    def __post_init__(self) -> None:
        if self.polls_to_done is not None and self.polls_to_done <= 0:
            self.finish()

    @property
    def deadline(self) -> float | None:
        """When the operation is DONE on the monotonic clock, polled or not (None: never by itself)."""
        return None if self.seconds_to_done is None else self.created + self.seconds_to_done

    @property
    def done(self) -> bool:
        self.refresh()
        return self.status == "DONE"

    def refresh(self) -> None:
        """Finish if the time is up; every read of the operation (or of what it changes) calls this."""
        if self.status == "DONE" or self.seconds_to_done is None:
            return
        if time.monotonic() - self.created >= self.seconds_to_done:
            self.finish()

    def poll(self) -> None:
        if self.done:
            return
        self.polls += 1
        if self.polls_to_done is not None and self.polls >= self.polls_to_done:
            self.finish()
        else:
            self.status = "RUNNING"

    def finish(self) -> None:
        if self.status == "DONE":
            return
        self.status = "DONE"
        self.ended_at = rfc3339_now()
        self.on_done()
