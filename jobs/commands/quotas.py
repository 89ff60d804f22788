"""``gpu-jobs quotas``: make every namespace's GPU ResourceQuota what the policy says, in each cluster."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from jobs.core.limits import DEFAULT_LIMIT
from jobs.core.policy import Policy
from jobs.fleet import Target, run_targets
from jobs.lease import run_holder
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
from jobs.quotas import job
from jobs.quotas import report as render
from jobs.retry import Backoff
from jobs.runner import FleetRun, outcome
from jobs.settings import (
    SettingsError,
    add_run_arguments,
    choice_setting,
    env_flag,
    int_setting,
    limit_setting,
    parse_at,
    seconds_setting,
)

#: The ``jobs.adapters.kube`` modules this job is wired with: its ServiceAccount is granted exactly the union of
#: their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py).
KUBE_PORTS = ("quotas", "lease")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "namespace quotas", "off-hours limits")
    parser.add_argument(
        "--workers", metavar="N", help="quotas written at once, per cluster (default 8) [GPU_JOBS_WORKERS]"
    )


def _ports(target: Target, request_timeout_s: float) -> job.Ports:
    # The Kubernetes client is imported only by the jobs, not by validate or calendar.
    from jobs.adapters.kube import client, lease, quotas  # noqa: PLC0415

    try:
        api = client.api_client(request_timeout_s, context=target.context)
    except client.ConfigException as exc:
        raise SettingsError(f"no Kubernetes configuration for cluster {target.cluster}: {exc}") from None
    lock = lease.LeaseLock(api, client.job_namespace(), f"gpu-jobs-quotas-{target.cluster}")
    return job.Ports(quotas.KubeQuotas(api), lock, quotas.QuotaEvents(api))


def run_command(args: argparse.Namespace, log: Any) -> tuple[list[job.Report], Outcome]:
    policy: Policy = load_policy(args.policy)
    if policy.namespace_quotas is None:
        raise SettingsError(f"{args.policy} has no namespaceQuotas: nothing for the quotas job to do")
    dry_run = bool(args.dry_run) or env_flag("DRY_RUN")
    limit = limit_setting(args.max_changes, "MAX_CHANGES", DEFAULT_LIMIT)
    now = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC)
    targets = run_targets(policy, args.cluster or None, log)
    workers = int_setting(args.workers, "WORKERS", 8, minimum=1)
    holder = run_holder()
    request_timeout_s = seconds_setting("REQUEST_TIMEOUT", 30.0, minimum=0.1)
    backoff = Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 120.0))
    work = {
        t.cluster: job.ClusterRun(
            policy,
            now,
            job.Settings(t.cluster, dry_run, limit, holder, backoff=backoff, workers=workers),
            _ports(t, request_timeout_s),
            log.bind(cluster=t.cluster),
        )
        for t in targets
    }
    reports = FleetRun(work, limit=limit, workers=8, log=log, noun="namespace quotas").run()
    return reports, outcome([job.tally(r) for r in reports], dry_run=dry_run)


def run(args: argparse.Namespace, log: Any) -> Outcome:
    output = choice_setting(args.output, "OUTPUT", "text", ("text", "json"))  # before any work: a typo is exit 2
    reports, result = run_command(args, log)
    print(render.to_json(reports) if output == "json" else render.to_text(reports), end="")
    return result
