"""``gpu-jobs calendar``: the desired state of every node group, why, the next changes, and a week grid."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from jobs.calendar import report
from jobs.core.calendar import build_calendar, compare
from jobs.core.group_record import Record
from jobs.core.policy import Policy
from jobs.core.wake import WakeRecord
from jobs.outcome import Outcome
from jobs.policy_file import load_policy
from jobs.settings import DEFAULT_POLICY, SettingsError, env, parse_at

#: A year at most: the grid is drawn per half hour and a longer view is not what a review needs.
MAX_DAYS = 366

_RENDER = {"text": report.to_text, "json": report.to_json, "markdown": report.to_markdown}


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days") from None
    if not 1 <= days <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"{days} is not between 1 and {MAX_DAYS}")
    return days


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default=env("POLICY", DEFAULT_POLICY), help="policy file [GPU_JOBS_POLICY]")
    parser.add_argument("--at", default=env("AT"), help="ISO 8601 instant (default: now) [GPU_JOBS_AT]")
    parser.add_argument(
        "--days", type=_days, default=7, help=f"days to draw and list changes for, 1 to {MAX_DAYS} (default 7)"
    )
    parser.add_argument("--output", choices=sorted(_RENDER), default="text")
    parser.add_argument(
        "--compare",
        metavar="OTHER_POLICY",
        help="the policy before the change: show what the change does over the same 7 days (see also gpu-jobs diff)",
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="also read each cluster's node group records (kubeconfig, read-only) and show the wakes in force",
    )
    parser.add_argument(
        "--cluster", default=env("CLUSTER"), metavar="NAME", help="only this cluster's node groups [GPU_JOBS_CLUSTER]"
    )


def _wakes(policy: Policy, cluster: str | None) -> dict[str, WakeRecord]:
    """The wakes in the records of each cluster (its kubeConfig context), read-only."""
    from jobs.adapters.kube import client, records  # noqa: PLC0415
    from jobs.nodegroups.observe import identities  # noqa: PLC0415

    kube = client.Kubeconfig()
    found: dict[str, WakeRecord] = {}
    for c in policy.fleet:
        if cluster is not None and c.name != cluster:
            continue
        store = records.ConfigMapRecords(
            kube.client(c.kube_context, cluster=c.name), client.job_namespace(), identities(policy, c.name)
        )
        found |= {name: r.wake for name, r in store.load().items() if isinstance(r, Record) and r.wake is not None}
    return found


def run(args: argparse.Namespace, log: Any) -> Outcome:
    policy = load_policy(args.policy)
    tz = ZoneInfo(policy.defaults.timezone)
    at = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC).astimezone(tz)
    cluster = args.cluster or None
    if cluster and cluster not in {c.name for c in policy.fleet}:
        known = ", ".join(c.name for c in policy.fleet)
        raise SettingsError(f"--cluster / GPU_JOBS_CLUSTER {cluster!r} is not a cluster of the policy ({known})")
    calendar = build_calendar(policy, at, args.days, cluster, _wakes(policy, cluster) if args.live else None)
    diff = compare(load_policy(args.compare), policy, at, cluster) if args.compare else None
    print(_RENDER[args.output](calendar, diff), end="")
    # The report is on stdout; the log says what was shown, once (not the report again, line by line).
    log.info("calendar.shown", node_groups=len(calendar.groups), at=at.isoformat(), compared=bool(args.compare))
    return Outcome(planned=len(calendar.groups))
