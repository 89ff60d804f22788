"""Long-running operations that advance one step per poll, as GKE and Compute operations do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tests.emulators.gcp.wire import rfc3339_now

OpStatus = Literal["PENDING", "RUNNING", "DONE"]


@dataclass
class StagedOperation:
    """PENDING when created, RUNNING on early polls, DONE on poll number ``polls_to_done``.

    The change the operation stands for is applied (``on_done``) only when it reaches DONE, so a client that
    reads the resource before its operation finished sees the old state, as on the real cloud.
    """

    name: str
    polls_to_done: int
    on_done: Callable[[], None]
    status: OpStatus = "PENDING"
    polls: int = 0
    started_at: str = field(default_factory=rfc3339_now)
    ended_at: str = ""

    def __post_init__(self) -> None:
        if self.polls_to_done <= 0:
            self.finish()

    @property
    def done(self) -> bool:
        return self.status == "DONE"

    def poll(self) -> None:
        if self.done:
            return
        self.polls += 1
        if self.polls >= self.polls_to_done:
            self.finish()
        else:
            self.status = "RUNNING"

    def finish(self) -> None:
        if self.done:
            return
        self.status = "DONE"
        self.ended_at = rfc3339_now()
        self.on_done()
