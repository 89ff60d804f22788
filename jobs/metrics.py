"""A few gauges per run, pushed to a Prometheus Pushgateway (``GPU_JOBS_PUSHGATEWAY_URL``): a CronJob's pod is
gone before any scrape, so it pushes what a team alerts on and graphs (docs/report.md gives the rules):

    gpu_jobs_last_run_timestamp_seconds{gpu_job}      when the job last ran (a job that stopped running)
    gpu_jobs_last_exit_code{gpu_job}                  its exit code (0 good, 1 failed items, 2 config, 3 refused)
    gpu_jobs_items_failed{gpu_job, scope}             failed items per cluster or account
    gpu_jobs_groups_down{cluster}                     node groups down now (nodegroups)
    gpu_jobs_avoided_gpu_hours_week{cluster, node_group}  GPU-hours avoided this ISO week, as measured

One PUT per run replaces its group (``job="gpu-jobs", gpu_job, install``): a scope gone from the policy leaves no
stale series behind. The text exposition format is written here (a dozen lines; no client library needed).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from jobs.envelope import ScopeResult, counts
from jobs.history import Savings


@dataclass(frozen=True)
class Gauge:
    name: str
    help: str
    samples: tuple[tuple[tuple[tuple[str, str], ...], float], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """Every digit (``:g`` would round a Unix time to the thousand seconds); whole numbers without ``.0``."""
    return str(int(value)) if value.is_integer() else repr(value)


def exposition(gauges: Iterable[Gauge]) -> str:
    """The Prometheus text format (version 0.0.4)."""
    lines: list[str] = []
    for g in gauges:
        lines += [f"# HELP {g.name} {g.help}", f"# TYPE {g.name} gauge"]
        for labels, value in g.samples:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{g.name}{{{inner}}} {_number(value)}" if inner else f"{g.name} {_number(value)}")
    return "\n".join(lines) + "\n"


def _down(result: ScopeResult) -> int:
    """The cluster's node groups down after the run: shut down by it, or found down as the schedule wants."""
    down = 0
    for item in result.items:
        if item.kind != "node group" or item.detail.get("unmanaged"):
            continue
        size = item.detail.get("size") or {}
        if (item.status == "applied" and item.detail.get("direction") == "down") or (
            item.status == "unchanged" and (size.get("stopped") or size.get("desired") == 0)
        ):
            down += 1
    return down


def run_gauges(
    job: str, ran_at: float, exit_code: int, results: Sequence[ScopeResult], week: Mapping[str, Savings]
) -> list[Gauge]:
    """The run's gauges; ``week``: each scope's savings so far this ISO week (from its history)."""
    me = (("gpu_job", job),)
    gauges = [
        Gauge("gpu_jobs_last_run_timestamp_seconds", "when the job last ran (Unix time)", ((me, ran_at),)),
        Gauge("gpu_jobs_last_exit_code", "the job's last exit code", ((me, float(exit_code)),)),
        Gauge(
            "gpu_jobs_items_failed",
            "items that failed in the job's last run, per scope",
            tuple(((*me, ("scope", r.scope.name)), float(counts(r)["failed"])) for r in results),
        ),
    ]
    if job == "nodegroups":
        gauges.append(
            Gauge(
                "gpu_jobs_groups_down",
                "node groups down after the last run, per cluster",
                tuple(((("cluster", r.scope.name),), float(_down(r))) for r in results if r.state != "failed"),
            )
        )
        gauges.append(
            Gauge(
                "gpu_jobs_avoided_gpu_hours_week",
                "GPU-hours avoided this ISO week as measured (nodes gone x GPUs that would have run)",
                tuple(
                    ((("cluster", g.scope), ("node_group", g.group)), round(g.avoided_gpu_hours, 3))
                    for s in week.values()
                    for g in s.groups
                    if g.avoided_gpu_hours is not None
                ),
            )
        )
    return gauges


def push(url: str, grouping: Sequence[tuple[str, str]], body: str, timeout_s: float = 10.0) -> None:
    """PUT ``body`` as the group ``grouping`` (its first pair is ``job``); raises OSError when it was not taken."""
    path = "/".join(f"{quote(k, safe='')}/{quote(v, safe='')}" for k, v in grouping)
    request = urllib.request.Request(  # noqa: S310  # the URL is the operator's setting (http or https)
        f"{url.rstrip('/')}/metrics/{path}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "text/plain; version=0.0.4"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
            answer.read()
    except urllib.error.HTTPError as exc:
        raise OSError(f"the Pushgateway answered {exc.code}: {exc.read()[:200].decode(errors='replace')}") from None
