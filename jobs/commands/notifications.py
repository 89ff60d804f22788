"""The notifications' wiring, called once after every reconciling command's run (``JobSpec.reconcile``): the
policy's ``notify`` section, the webhook URL from its Secret (or ``GPU_JOBS_NOTIFY_URL``), each cluster's
namespaces through that cluster's own API. What is sent and how is ``jobs.notify``.

Nothing is imported, read or sent without a ``notify`` section, in a dry run, or when the run announced nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobs import errors
from jobs.adapters.settings import AdapterSettings
from jobs.core.policy_notify import Notify
from jobs.envelope import ScopeResult
from jobs.retry import Backoff
from jobs.scopes import Scope
from jobs.settings import seconds_setting
from jobs.stopping import STOP

if TYPE_CHECKING:
    from jobs.commands.reconcile import Run
    from jobs.notify import Namespaces, Ports, Webhook

#: The ``jobs.adapters.kube`` modules notifications read through (namespaces' owner labels, the webhook's Secret):
#: in the ``KUBE_PORTS`` of every job whose report announces something to people (nodegroups, sweep).
NOTIFY_PORTS = ("namespaces", "secrets")
#: Between a message's attempts: short, since a notification waits on nothing but the receiver.
RETRY_BASE_S = 0.5


def send(results: Sequence[ScopeResult], run: Run, log: Any) -> list[ScopeResult]:
    """The results, with a warning line where a notification was not delivered. Never raises: a notification
    that fails (even by a bug) is reported, and the run's exit code stays the work's."""
    section = run.policy.notify
    if section is None or run.settings.dry_run:
        return list(results)
    from jobs.notify import NOTIFY_BUDGET_S, notices, notify  # noqa: PLC0415 - not in a dry run's start-up

    if not notices(results):
        return list(results)
    backoff = Backoff(
        deadline_s=seconds_setting("RETRY_DEADLINE", NOTIFY_BUDGET_S), base_s=RETRY_BASE_S, run=run.settings.deadline
    )
    try:
        wired = lambda: _ports(run, section)  # noqa: E731 - built only when something is sent
        # A stop request (SIGTERM) ends a wait between attempts at once, and no attempt starts after it.
        return notify(results, section, wired, backoff, log.bind(part="notify"), sleep=_pause, stopped=STOP.is_set)
    except Exception as exc:  # a courtesy must never cost the run its report
        log.error("notify.crashed", error=repr(exc), exc_info=True)
        line = f"notifications not sent: unexpected error: {exc!r}"
        return [replace(r, warnings=(*r.warnings, line)) for r in results]


def _pause(seconds: float) -> None:
    STOP.wait(seconds)


def _ports(run: Run, section: Notify) -> Ports:
    from jobs.adapters.kube import client  # noqa: PLC0415 - the Kubernetes client only when something is sent
    from jobs.adapters.kube.namespaces import KubeNamespaces  # noqa: PLC0415
    from jobs.adapters.kube.secrets import KubeSecrets  # noqa: PLC0415
    from jobs.adapters.webhook import URL_ENV, WebhookPost  # noqa: PLC0415
    from jobs.notify import Ports  # noqa: PLC0415

    adapters = AdapterSettings.from_env(run.settings.deadline)
    kube = run.kubeconfig

    def namespaces(scope: Scope) -> Namespaces:
        try:
            return KubeNamespaces(kube.client(scope.context, cluster=scope.name))
        except errors.ConfigError as exc:  # no client for it: its items go to the nobody's message
            raise errors.Unavailable(str(exc), operation="get namespaces") from None

    def webhook() -> Webhook:
        url = os.environ.get(URL_ENV)
        if not url:
            ref = section.webhook.secret_ref
            try:
                api = kube.client()  # the install's own cluster: the Secret is beside the job
            except errors.ConfigError as exc:
                raise errors.Unavailable(str(exc), operation="get secrets") from None
            url = KubeSecrets(api, client.job_namespace()).value(ref.name, ref.key)
        return WebhookPost(url, adapters)

    return Ports(namespaces, webhook)
