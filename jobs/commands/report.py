"""``gpu-jobs report``: what the jobs saved over a week (``--week 2026-W49``) or the last days (``--since 7d``), as
measured from each cluster's history (``jobs.history``), per group and in total, priced per the policy's
``pricing:`` or the shipped list prices. Per cluster (``--cluster``: the in-cluster config or current context), or
the fleet through each cluster's kubeContext, as the jobs reach it. A cluster whose history cannot be read is a
failed item (exit 1): its savings are unknown, never zero."""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobs import savings
from jobs.core.policy import Policy
from jobs.errors import CloudError
from jobs.history import Entry, current_week, measure, week_window
from jobs.outcome import ExitCode, Outcome
from jobs.policy_file import load_policy
from jobs.scopes import Scope, account_scopes, cluster_scopes
from jobs.settings import DEFAULT_POLICY, SettingsError, choice_setting, env, parse_at

if TYPE_CHECKING:
    from jobs.adapters.kube.client import Kubeconfig

_RENDER = {"text": savings.to_text, "markdown": savings.to_markdown, "json": savings.to_json}
#: The longest ``--since``: what the longest retention keeps.
MAX_SINCE = timedelta(weeks=60)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default=env("POLICY", DEFAULT_POLICY), help="policy file [GPU_JOBS_POLICY]")
    window = parser.add_mutually_exclusive_group()
    window.add_argument("--week", metavar="YYYY-Www", help="an ISO week in the policy's timezone, e.g. 2026-W49")
    window.add_argument("--since", metavar="DURATION", help="the last 7d, 36h... up to now (default: this week)")
    parser.add_argument("--output", metavar="text|markdown|json", help="[GPU_JOBS_OUTPUT]")
    parser.add_argument("--at", default=env("AT"), help="the report's 'now' (ISO 8601) [GPU_JOBS_AT]")
    parser.add_argument(
        "--cluster",
        default=env("CLUSTER"),
        metavar="NAME",
        help="this cluster only, through the in-cluster config or current context; without it, every cluster with"
        " a kubeContext [GPU_JOBS_CLUSTER]",
    )


def _since(text: str) -> timedelta:
    number, unit = text[:-1], text[-1:]
    if not number.isdigit() or unit not in "hdw" or int(number) == 0:
        raise SettingsError(f"--since {text!r}: use e.g. 36h, 7d or 2w")
    value = timedelta(hours=int(number)) * {"h": 1, "d": 24, "w": 168}[unit]
    if value > MAX_SINCE:
        raise SettingsError(f"--since {text!r}: at most 60w (the longest retention)")
    return value


def window(args: argparse.Namespace, policy: Policy, now: datetime) -> tuple[str, datetime, datetime]:
    timezone = policy.defaults.timezone
    if args.since:
        return f"since {args.since}", now - _since(args.since), now
    label = args.week or current_week(now, timezone)
    try:
        start, end = week_window(label, timezone)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if start > now:
        raise SettingsError(f"--week {label}: it has not started yet ({now.isoformat()} is the report's now)")
    return label, start, min(end, now)  # a group still down counts until now, never into the future


def _read(kube: Kubeconfig, scope: Scope, namespace: str) -> list[Entry]:
    from jobs.adapters.kube.history import ConfigMapHistory  # noqa: PLC0415  # the Kubernetes client, here only

    api = kube.client(scope.context, cluster=scope.name if scope.kind == "cluster" else "")
    return ConfigMapHistory(api, namespace, scope.name).read()


def run(args: argparse.Namespace, log: Any) -> Outcome:
    output = choice_setting(args.output, "OUTPUT", "text", tuple(_RENDER))
    policy = load_policy(args.policy)
    now = parse_at(args.at, policy.defaults.timezone) or datetime.now(UTC).replace(microsecond=0)
    now = now.astimezone(ZoneInfo(policy.defaults.timezone))
    label, start, end = window(args, policy, now)
    scopes = list(cluster_scopes(policy, args.cluster or None, log))
    sweep = policy.sweep
    if not args.cluster and sweep is not None and sweep.untagged_instances is not None:
        scopes += account_scopes(policy)  # the instances part's history is in the install's own cluster
    from jobs.adapters.kube.client import Kubeconfig, job_namespace  # noqa: PLC0415

    namespace = job_namespace()
    kube = Kubeconfig()  # read once for every cluster

    def read(scope: Scope) -> tuple[list[Entry], savings.ScopeRead]:
        try:
            return _read(kube, scope, namespace), savings.ScopeRead(scope.name)
        except (CloudError, SettingsError) as exc:
            log.error("report.unreadable", scope=scope.name, error=str(exc))
            return [], savings.ScopeRead(scope.name, f"its history cannot be read ({exc})")

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(scopes)))) as pool:
        read_all = list(pool.map(read, scopes))
    entries = [e for found, _ in read_all for e in found]
    report = savings.build(label, start, end, measure(entries, start, end), policy, [r for _, r in read_all])
    print(_RENDER[output](report), end="")
    log.info("report.shown", window=label, scopes=len(scopes), entries=len(entries), failed=report.failed)
    failures = tuple(f"{r.name}: {r.error}" for r in report.scopes if r.error)
    code = ExitCode.ITEM_FAILED if failures else ExitCode.OK
    reason = f"history not read: {'; '.join(failures)}" if failures else None  # run.summary's sentence says it
    return Outcome(code, planned=len(report.savings.groups), failed=len(failures), reason=reason, failures=failures)
