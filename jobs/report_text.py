"""The parts of a job's text report that every job shares: the headline of a scope's block and the lines for a
scope where nothing was done (another run holds the Lease, the scope failed, the plan was refused)."""

from __future__ import annotations

from datetime import datetime


def headline(job: str, scope: str | None, at: datetime, dry_run: bool) -> str:
    mode = " (dry run: nothing changed)" if dry_run else ""
    where = f" in cluster {scope}" if scope else ""
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
