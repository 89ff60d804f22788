"""The parts of a job's text report that every job shares: the headline of a scope's block, the lines for a
scope where nothing was done (another run holds the Lease, the scope failed, the plan was refused) and the run's
one refusal above every scope's plan."""

from __future__ import annotations

import re
import textwrap
from datetime import datetime

#: The text report's widest line: it reads in a terminal, in pod logs and in a pull request; a longer line (a full
#: resource path, a long reason) wraps under its columns.
LINE_WIDTH = 120


def fitted(line: str, indent: int) -> list[str]:
    """``line`` within :data:`LINE_WIDTH`, the rest wrapped under column ``indent`` (where the reason starts), or
    under a small indent where the columns before it are too wide to leave room."""
    if len(line) <= LINE_WIDTH:
        return [line]
    head, rest = line[:indent], line[indent:]
    under = indent if indent <= LINE_WIDTH - 40 else 6
    wrapped = textwrap.wrap(rest, LINE_WIDTH - under, break_long_words=True, break_on_hyphens=False) or [""]
    if under == indent:
        return [head + wrapped[0], *(" " * under + more for more in wrapped[1:])]
    return [*([head.rstrip()] if head.strip() else []), *(" " * under + more for more in wrapped)]


#: A command a person copies from a reason (``kubectl -n gpu-jobs create configmap ...``), up to the end of its
#: clause: a wrapped line keeps it whole.
_COMMAND = re.compile(r"kubectl [^;()]*?(?=[.;)]?(?:\s|$)(?:[A-Z(]|$))")
_KEEP = "\x00"  # stands for a space inside a command while the line is wrapped


def fit(line: str) -> list[str]:
    """A line of prose (a headline, a refusal, a note) within :data:`LINE_WIDTH`, its rest indented two more than
    the line itself; a command in it is never split (it may then pass the width: a command must stay copyable)."""
    indent = len(line) - len(line.lstrip(" "))
    if len(line) <= LINE_WIDTH:
        return [line]
    kept = _COMMAND.sub(lambda m: m.group(0).replace(" ", _KEEP), line.strip())
    wrapped = textwrap.wrap(
        kept,
        LINE_WIDTH,
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + 2),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [part.replace(_KEEP, " ") for part in wrapped]


def fit_text(text: str) -> str:
    """Every line of ``text`` within :data:`LINE_WIDTH` (lines already within it are left exactly as they are)."""
    return "\n".join(part for line in text.split("\n") for part in (fit(line) if line else [line]))


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
    return f"  REFUSED: {reason}.\n  Nothing changed. The plan was:"


def run_refused(job: str, at: datetime, dry_run: bool, reason: str, kind: str) -> str:
    """The run's own block when the limit refused the plan of every scope at once: said once, above each scope's
    plan (``kind``: cluster, account)."""
    said = f"  REFUSED: {reason}.\n  Nothing changed. Each {kind}'s plan was:"
    return f"{headline(job, kind, None, at, dry_run)}\n{said}\n"


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
