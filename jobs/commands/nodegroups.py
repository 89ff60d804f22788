"""``gpu-jobs nodegroups``: converge every GPU node group to the state its schedule wants now."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobs.adapters.settings import AdapterSettings
from jobs.core.limits import DEFAULT_LIMIT
from jobs.core.policy import Policy
from jobs.fleet import Target, run_targets
from jobs.lease import run_holder
from jobs.nodegroups import job
from jobs.nodegroups import report as render
from jobs.nodegroups.job import JobSettings, Ports, Report
from jobs.nodegroups.ports import NodeGroupCloud
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
from jobs.retry import Backoff
from jobs.runner import FleetRun
from jobs.runner import outcome as runner_outcome
from jobs.settings import (
    SettingsError,
    add_run_arguments,
    choice_setting,
    env,
    env_flag,
    int_setting,
    limit_setting,
    parse_at,
    seconds_setting,
)

#: The ``jobs.adapters.kube`` modules this job is wired with: its ServiceAccount is granted exactly the union of
#: their ``RBAC`` (checked against the rendered Roles by tests/integration/test_deploy.py).
KUBE_PORTS = ("workloads", "records", "events", "lease")  # records: a kind of state (kube/state.py)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser, "node groups", "the schedule")
    parser.add_argument("--only", default=env("ONLY"), metavar="GROUP", help="one node group only [GPU_JOBS_ONLY]")
    parser.add_argument(
        "--workers", metavar="N", help="groups worked on at once, per cluster (default 16) [GPU_JOBS_WORKERS]"
    )


def _peak_rss_mib() -> float | None:
    """This process's peak resident memory (VmHWM: of this program only, not what was forked before exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return round(kib / 1024, 1) if kib is not None else None


def _clouds(names: set[str], settings: AdapterSettings) -> dict[str, NodeGroupCloud]:
    # SDKs are imported here, and only for the clouds the policy uses.
    from jobs.commands.nodegroup_clouds import nodegroup_cloud  # noqa: PLC0415

    return {name: nodegroup_cloud(name, settings) for name in sorted(names)}


def _ports(policy: Policy, target: Target, clouds: dict[str, NodeGroupCloud], settings: AdapterSettings) -> Ports:
    """One cluster's ports, through a client of its own (its context, or the in-cluster / current config)."""
    from jobs.adapters.kube import client, events, lease, records, workloads  # noqa: PLC0415
    from jobs.labels import nodegroups_lease  # noqa: PLC0415

    try:
        api = client.api_client(settings.request_timeout_s, context=target.context)
    except client.ConfigException as exc:
        where = (
            f"context {target.context!r} for cluster {target.cluster}" if target.context else "in-cluster or KUBECONFIG"
        )
        raise SettingsError(f"no Kubernetes configuration ({where}): {exc}") from None
    namespace = client.job_namespace()
    known = job.identities(policy, target.cluster)
    return Ports(
        clouds=clouds,
        cluster=workloads.KubeCluster(api),
        records=records.ConfigMapRecords(api, namespace, known),
        lock=lease.LeaseLock(api, namespace, nodegroups_lease(target.cluster)),
        events=events.KubeEvents(api, namespace, "nodegroups", known),
    )


def run_command(args: argparse.Namespace, log: Any) -> tuple[list[Report], Outcome]:
    policy = load_policy(args.policy)
    only = args.only or None  # an empty value in a manifest means "not set", never "match nothing"
    if only and only not in {g.name for g in policy.node_groups}:
        raise SettingsError(f"--only {only!r}: no such node group in {args.policy}")
    dry_run = bool(args.dry_run) or env_flag("DRY_RUN")
    now = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC)
    targets = [
        t
        for t in run_targets(policy, args.cluster or None, log)
        if only is None or policy.cluster_of(policy.group(only)).name == t.cluster
    ]
    adapter_settings = AdapterSettings.from_env()
    settings = JobSettings(
        dry_run=dry_run,
        limit=limit_setting(args.max_changes, "MAX_CHANGES", DEFAULT_LIMIT),
        only=only,
        workers=int_setting(args.workers, "WORKERS", 16, minimum=1),
        backoff=Backoff(deadline_s=seconds_setting("RETRY_DEADLINE", 600.0)),
        lease_duration=timedelta(minutes=30),
        holder=run_holder(),
        drain_poll_s=adapter_settings.poll_interval_s,
        settle_timeout_s=adapter_settings.operation_timeout_s,
    )
    groups = [g for t in targets for g in policy.groups_in(t.cluster) if only in (None, g.name)]
    clouds = _clouds({g.cloud for g in groups}, adapter_settings)
    ports = {t.cluster: _ports(policy, t, clouds, adapter_settings) for t in targets}
    started = time.monotonic()
    reports = FleetRun(
        {
            name: job.ClusterRun(policy, now, replace(settings, cluster=name), cluster_ports, log.bind(cluster=name))
            for name, cluster_ports in ports.items()
        },
        limit=settings.limit,
        workers=settings.workers,
        log=log,
        noun="node groups",
    ).run()
    # The job's own time, without interpreter start-up and SDK imports: what concurrency can change.
    log.info(
        "nodegroups.timing",
        run_s=round(time.monotonic() - started, 3),
        workers=settings.workers,
        clusters=len(reports),
        peak_rss_mib=_peak_rss_mib(),
    )
    for report in reports:
        if report.refused:
            log.error("nodegroups.refused", cluster=report.cluster, reason=report.refused)
        if report.lock_holder:
            log.info(
                "nodegroups.locked",
                cluster=report.cluster,
                holder=report.lock_holder,
                message="another run holds the lease",
            )
    outcome = runner_outcome([job.tally(r) for r in reports], dry_run=dry_run)
    return reports, outcome


def run(args: argparse.Namespace, log: Any) -> Outcome:
    output = choice_setting(args.output, "OUTPUT", "text", ("text", "json"))  # before any work: a typo is exit 2
    reports, outcome = run_command(args, log)
    print(render.to_json(reports) if output == "json" else render.to_text(reports), end="")
    return outcome
