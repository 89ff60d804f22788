"""``gpu-jobs nodegroups``: converge every GPU node group to the state its schedule wants now."""

from __future__ import annotations

import argparse
import os
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobs.adapters.settings import AdapterSettings
from jobs.nodegroups import job
from jobs.nodegroups import report as render
from jobs.nodegroups.job import JobSettings, Ports, Report
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import load_policy
from jobs.retry import Backoff
from jobs.settings import DEFAULT_POLICY, SettingsError, env, env_flag, parse_at


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default=env("POLICY", DEFAULT_POLICY), help="policy file [GPU_JOBS_POLICY]")
    parser.add_argument(
        "--dry-run", action="store_true", default=None, help="plan and report, change nothing [GPU_JOBS_DRY_RUN]"
    )
    parser.add_argument("--output", choices=("text", "json"), default=env("OUTPUT", "text"), help="[GPU_JOBS_OUTPUT]")
    parser.add_argument("--at", default=env("AT"), help="evaluate the schedule at this instant [GPU_JOBS_AT]")
    parser.add_argument("--only", default=env("ONLY"), metavar="GROUP", help="one node group only [GPU_JOBS_ONLY]")
    parser.add_argument(
        "--max-changes",
        type=int,
        default=int(env("MAX_CHANGES", "50") or 50),
        help="refuse a plan changing more groups than this (exit 3) [GPU_JOBS_MAX_CHANGES]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(env("WORKERS", "16") or 16),
        help="groups worked on at once [GPU_JOBS_WORKERS]",
    )


def _peak_rss_mib() -> float | None:
    """This process's peak resident memory (VmHWM: of this program only, not what was forked before exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return round(kib / 1024, 1) if kib is not None else None


def _ports(clouds: set[str], settings: AdapterSettings) -> Ports:
    # SDKs are imported here, and only for the clouds the policy uses.
    from jobs.adapters import kube  # noqa: PLC0415
    from jobs.adapters.registry import nodegroup_cloud  # noqa: PLC0415
    from jobs.labels import NODEGROUPS_LEASE  # noqa: PLC0415

    try:
        api = kube.api_client(settings.request_timeout_s)
    except kube.ConfigException as exc:
        raise SettingsError(f"no Kubernetes configuration (in-cluster or KUBECONFIG): {exc}") from None
    namespace = kube.job_namespace()
    return Ports(
        clouds={name: nodegroup_cloud(name, settings) for name in sorted(clouds)},
        cluster=kube.KubeCluster(api),
        records=kube.ConfigMapRecords(api, namespace),
        lock=kube.LeaseLock(api, namespace, NODEGROUPS_LEASE),
        events=kube.KubeEvents(api, namespace, "nodegroups"),
    )


def run_command(args: argparse.Namespace, log: Any) -> tuple[Report, Outcome]:
    policy = load_policy(args.policy)
    if args.only and args.only not in {g.name for g in policy.node_groups}:
        raise SettingsError(f"--only {args.only!r}: no such node group in {args.policy}")
    dry_run = bool(args.dry_run) or env_flag("DRY_RUN")
    now = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC)
    adapter_settings = AdapterSettings.from_env()
    settings = JobSettings(
        dry_run=dry_run,
        max_changes=args.max_changes,
        only=args.only,
        workers=max(1, args.workers),
        backoff=Backoff(deadline_s=float(env("RETRY_DEADLINE", "600") or 600)),
        lease_duration=timedelta(minutes=30),
        holder=f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{os.getpid()}",
        drain_poll_s=adapter_settings.poll_interval_s,
    )
    ports = _ports({g.cloud for g in policy.node_groups if args.only in (None, g.name)}, adapter_settings)
    started = time.monotonic()
    report = job.run(policy, now, settings, ports, log)
    # The job's own time, without interpreter start-up and SDK imports: what concurrency can change.
    log.info(
        "nodegroups.timing",
        run_s=round(time.monotonic() - started, 3),
        workers=settings.workers,
        peak_rss_mib=_peak_rss_mib(),
    )
    applied = sum(r.status == "applied" for r in report.results)
    failed = sum(r.status == "failed" for r in report.results)
    code = ExitCode.REFUSED if report.refused else ExitCode.ITEM_FAILED if failed else ExitCode.OK
    if report.refused:
        log.error("nodegroups.refused", reason=report.refused)
    if report.lock_holder:
        log.info("nodegroups.locked", holder=report.lock_holder, message="another run holds the lease; exiting")
    outcome = Outcome(
        code, planned=len(report.results), applied=applied, failed=failed, skipped=len(report.skips), dry_run=dry_run
    )
    return report, outcome


def run(args: argparse.Namespace, log: Any) -> Outcome:
    report, outcome = run_command(args, log)
    print(render.to_json(report) if args.output == "json" else render.to_text(report), end="")
    return outcome
