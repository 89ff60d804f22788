"""What every reconciling command does once its run is reported, whatever the job: tell the people its report
announces something to (``notifications``: with the policy's ``notify``), append what it did to each scope's
history (``jobs.history``, in the cluster it acted on) and push its gauges to a Pushgateway when
``GPU_JOBS_PUSHGATEWAY_URL`` is set (``jobs.metrics``).

None of them can fail a run or change its exit code: the actions happened. A message not delivered or a history
that could not be written is a warning of its scope (in the report and the JSON), a push that failed a logged
warning.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobs.commands import notifications
from jobs.envelope import ScopeResult
from jobs.outcome import Outcome
from jobs.scopes import Scope
from jobs.settings import env

if TYPE_CHECKING:
    from jobs.adapters.kube.client import Kubeconfig
    from jobs.commands.reconcile import Run
    from jobs.history import Recorded, Savings


def after_run(job: str, run: Run, results: Sequence[ScopeResult], ended: Outcome, log: Any) -> list[ScopeResult]:
    """The results with each scope's warnings, if any; the messages sent, the history written, the gauges pushed."""
    results = notifications.send(results, run, log)
    if ended.dry_run:
        return list(results)  # a dry run changed nothing: nothing to keep, and it must not pose as the last run
    from jobs.history import RECORDED_JOBS, with_warning  # noqa: PLC0415 - not in a dry run's start-up

    recorded: dict[Scope, Recorded | None] = {}
    if job in RECORDED_JOBS:
        kube = run.kubeconfig  # the run's: read once, each request bounded by the run's deadline
        recorded = {r.scope: _record(kube, run, r, log) for r in results}
    url = env("PUSHGATEWAY_URL")
    if url:
        _push(url, job, run, results, ended, [r for r in recorded.values() if r is not None], log)
    return [with_warning(r, done) if (done := recorded.get(r.scope)) is not None else r for r in results]


def _record(kube: Kubeconfig, run: Run, result: ScopeResult, log: Any) -> Recorded | None:
    if result.state not in ("applied", "planned"):
        return None  # nothing done there (refused, another run's, unread): nothing to keep
    from jobs.adapters.kube.client import job_namespace  # noqa: PLC0415
    from jobs.adapters.kube.history import ConfigMapHistory  # noqa: PLC0415
    from jobs.history import Recorded, record  # noqa: PLC0415

    scope = result.scope
    try:
        api = kube.client(_context(run, scope), cluster=scope.name if scope.kind == "cluster" else "")
    except Exception as exc:  # no configuration: the same warning as a write that failed
        return Recorded(scope.name, warning=f"history not written ({exc})")
    store = ConfigMapHistory(api, job_namespace(), scope.name, log)
    # Retention counts back from the run's own instant (``--at`` for a replay): a week written for a past instant
    # is not pruned by the same run.
    return record(result, run.policy, store, result.at, log)


def _context(run: Run, scope: Scope) -> str | None:
    """The kubeconfig context the run reached ``scope`` through (a job's report names the cluster, not its context):
    a cluster's ``kubeContext`` in a central run; the in-cluster config or current context for a per-cluster run
    (``--cluster``) and for an account, whose state is in the install's own cluster (``jobs.scopes``)."""
    if scope.kind != "cluster" or getattr(run.args, "cluster", None):
        return None
    try:
        return run.policy.cluster(scope.name).kube_context
    except KeyError:
        return None


def _push(
    url: str,
    job: str,
    run: Run,
    results: Sequence[ScopeResult],
    ended: Outcome,
    recorded: Sequence[Recorded],
    log: Any,
) -> None:
    from jobs.history import current_week, measure, week_window  # noqa: PLC0415 - only with a Pushgateway
    from jobs.metrics import exposition, push, run_gauges  # noqa: PLC0415

    timezone = run.policy.defaults.timezone
    start, _ = week_window(current_week(run.now, timezone), timezone)
    week: dict[str, Savings] = {r.scope: measure(r.history, start, run.now) for r in recorded}
    body = exposition(run_gauges(job, time.time(), int(ended.exit_code), results, week))
    install = getattr(run.args, "cluster", None) or env("CLUSTER") or "central"
    try:
        push(url, (("job", "gpu-jobs"), ("gpu_job", job), ("install", install)), body)
    except OSError as exc:
        log.warning("metrics.unpushed", url=url, error=str(exc))
        return
    log.info("metrics.pushed", url=url, gpu_job=job, install=install)
