"""The parts of a job's text report that every job shares: the headline of a scope's block, the lines for a
scope where nothing was done (another run holds the Lease, the scope failed, the plan was refused) and the run's
one refusal above every scope's plan."""

from __future__ import annotations

import re
from datetime import datetime


def headline(job: str, kind: str, scope: str | None, at: datetime, dry_run: bool) -> str:
    """``gpu-jobs quotas in cluster ml-prod at ...``; ``kind`` is the scope's (cluster, account)."""
    mode = " (dry run: nothing changed)" if dry_run else ""
    where = f" in {kind} {scope}" if scope else ""
    return f"gpu-jobs {job}{where} at {at.isoformat(timespec='seconds')}{mode}"


def nothing_done(lock_holder: str | None, error: str | None = None) -> str | None:
    """The one line of a scope where nothing was done, or None when the job went ahead there."""
    if error:
        return f"  FAILED: {error}. Nothing changed."
    if lock_holder:
        return f"  another run holds the lease ({lock_holder}): nothing done"
    return None


def refused(reason: str) -> str:
    return f"  REFUSED: {reason}. Nothing changed. The plan was:"


def run_refused(job: str, at: datetime, dry_run: bool, reason: str, kind: str) -> str:
    """The run's own block when the limit refused the plan of every scope at once: said once, above each scope's
    plan (``kind``: cluster, account)."""
    return f"{headline(job, kind, None, at, dry_run)}\n  REFUSED: {reason}. Nothing changed. Each {kind}'s plan was:\n"


def sentence(text: str) -> str:
    """A message as a sentence a person reads (a Kubernetes Event's), ending with a full stop. Report rows and plan
    reasons are fragments (``stays up: ...``); an Event stands alone, so a first plain lowercase word is capitalised
    (never a name: ``p-spot:``, ``gpu-jobs.io/...`` and ``train-0`` are left as they are)."""
    text = text.strip()
    if not text:
        return text
    if re.match(r"[a-z]+ ", text):
        text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."
