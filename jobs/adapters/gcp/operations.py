"""Google long-running operations (GKE's ``Operation``) followed until DONE, and what a failed one means."""

from __future__ import annotations

from collections.abc import Callable

from google.cloud import container_v1

from jobs.adapters.gcp.errors import RPC_CODE_ERRORS
from jobs.adapters.polling import poll_until
from jobs.adapters.settings import AdapterSettings
from jobs.errors import CloudError, Unavailable

_DONE = container_v1.Operation.Status.DONE


def wait(
    op: container_v1.Operation,
    poll: Callable[[], container_v1.Operation],
    settings: AdapterSettings,
    where: str,
    name: str,
) -> container_v1.Operation:
    """``op`` (full resource ``name``) polled until DONE (``poll`` reads it again); ``Unavailable`` after the
    operation timeout, ``DeadlineReached`` at the run's deadline. ``where`` says what the operation does."""

    def timed_out(last: container_v1.Operation) -> CloudError:
        return Unavailable(
            f"{where} not DONE after {settings.operation_timeout_s:g}s (operation {name})",
            operation="operations.get",
            code="OPERATION_TIMEOUT",
        )

    return poll_until(
        op,
        lambda o: o.status == _DONE,
        poll,
        interval_s=settings.poll_interval_s,
        timeout_s=settings.operation_timeout_s,
        timed_out=timed_out,
        deadline=settings.deadline,
        what=f"the GKE operation {name} ({where})",
    )


def failure(op: container_v1.Operation) -> tuple[int, str] | None:
    """(google.rpc code, message) of a DONE operation that failed; None if it succeeded."""
    code = op.error.code if "error" in op else 0
    message = (op.error.message if code else "") or op.status_message
    if not code and not message:
        return None
    return code, message


def error_for(code: int) -> type[CloudError]:
    """The project error for a failed operation's google.rpc code (Unavailable when it may work later)."""
    return RPC_CODE_ERRORS.get(code, Unavailable)
