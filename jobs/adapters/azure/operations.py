"""ARM long-running operations (an SDK ``LROPoller``) followed to the end, within the adapters' timeout."""

from __future__ import annotations

from typing import Any

from azure.core.polling import LROPoller

from jobs.adapters.azure.errors import Translate, call, translate
from jobs.adapters.settings import AdapterSettings
from jobs.errors import Unavailable


def finish(
    poller: LROPoller[Any],
    settings: AdapterSettings,
    where: str,
    operation: str,
    what: str,
    *,
    translate: Translate = translate,
) -> None:
    """Wait for the operation; its failure is translated, a timeout is ``Unavailable``. On a timeout the SDK's
    polling thread carries on in the background and ends with the operation; the job treats the item as failed for
    this run and converges on the next; the same when the run's deadline ends the wait first (``DeadlineReached``)."""
    wait = settings.deadline.wait(settings.operation_timeout_s)
    timeout = max(0.0, wait.ends - settings.deadline.clock())
    call(where, operation, lambda: poller.result(timeout=timeout), translate=translate)
    if not poller.done() and wait.cut:
        raise settings.deadline.reached(f"waiting for {where}: {what} (operation status {poller.status()})")
    if not poller.done():
        raise Unavailable(
            f"{where}: {what} did not complete within {settings.operation_timeout_s:g}s"
            f" (operation status {poller.status()})",
            operation=operation,
            code="OperationTimeout",
        )
