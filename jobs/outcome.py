"""How a command ends: its counts for the ``run.summary`` event and an honest exit code."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ITEM_FAILED = 1  # some item failed; the others were still processed
    BAD_CONFIG = 2  # bad policy or configuration: nothing was changed
    REFUSED = 3  # a safety guard refused the plan: nothing was changed


@dataclass(frozen=True)
class Outcome:
    exit_code: ExitCode = ExitCode.OK
    planned: int = 0
    applied: int = 0
    failed: int = 0
    skipped: int = 0
    dry_run: bool = False
    reason: str | None = None  # why the run ended as it did, when no item says it (stopped during start-up)
    failures: tuple[str, ...] = ()  # the failed items (or scopes) as "name: reason", for the summary's sentence
    notes: tuple[str, ...] = ()  # what else the summary's sentence says: the limit's refusal, a Lease held elsewhere
