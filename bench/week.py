"""The simulated week (issue 26): the same week and workload under three strategies side by side, always-on, a naive
20:00/08:00 schedule, and gpu-jobs (its real ``nodegroups`` job per cluster against the sandbox's emulators).

    .venv/bin/python bench/week.py [--days 7 | --hours N] [--from-hour H] [--step-minutes 10] [--seed 26]
                                   [--every-step] [--shipped-max-delay] [--output text|json]

Monday 00:00 in the policy's timezone (``--monday``, a plain week by default: no holiday, no DST change) to the next
Monday 00:00, in 10-minute steps, the gpu-jobs column on the week's policy (:mod:`tests.sandbox.week.policy`) with
each cluster's live sweep beside its ``nodegroups``; ``--from-hour`` starts the slice that many hours after Monday
00:00 (its jobs are those submitted inside the slice). The workload (:mod:`tests.sandbox.week.workload`) and the
scheduler and autoscaler model (:mod:`tests.sandbox.week.model`) are test infrastructure; the gpu-jobs column is the
product.

Prints per strategy: billed GPU-hours (node-hours x GPUs), busy GPU-hours (running pods x GPUs), their ratio, idle
GPU-hours, busy pods interrupted, pod-minutes waiting for capacity in working hours, API calls per cloud; the
product's ``gpu-jobs report`` for the week beside the simulator's truth, in all and per group; the sweep's runs and
what it deleted; the targets, met or NOT met (printed, never asserted); the wall time and how many job runs were
made and skipped. ``--output json`` prints one line instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.core.resolved import view_of
from jobs.policy_file import load_policy
from tests.emulators.prometheus.pushgateway import start_pushgateway
from tests.sandbox.fleet import Fleet, build_fleet
from tests.sandbox.week import dcgm, figures
from tests.sandbox.week.model import Model
from tests.sandbox.week.policy import for_the_week
from tests.sandbox.week.strategies import AlwaysOn, GpuJobs, Naive, Strategy, managed, new_model
from tests.sandbox.week.workload import Job, generate
from tests.sandbox.world import DEFAULT_POLICY, World, child_env

#: A plain week: no holiday in DE-BE, GB-ENG, US or US-NY (2027-03-08 was Berlin's Women's Day), no clock change
#: (both are behind it: the US on 2027-03-14, Europe on 2027-03-28).
PLAIN_MONDAY = date(2027, 4, 12)


def simulate(model: Model, strategy: Strategy, start: datetime, end: datetime, step: timedelta) -> None:
    at, began = start, time.perf_counter()
    while at < end:
        if at > start and (at - start) % timedelta(hours=6) == timedelta(0):  # progress on stderr, stdout stays clean
            print(f"{strategy.name}: {at.isoformat()} after {time.perf_counter() - began:.0f} s", file=sys.stderr)
        strategy.before(model, at)
        model.step(at, step)
        strategy.after(model, at)
        at += step


def run_product(
    args: argparse.Namespace, fleet: Fleet, jobs: tuple[Job, ...], start: datetime, end: datetime, step: timedelta
) -> tuple[GpuJobs, figures.Column, figures.Report, str]:
    """The gpu-jobs column: a sandbox world on the week's policy, the week, the product's report."""
    with tempfile.TemporaryDirectory(prefix="gpu-jobs-week-") as scratch:
        product_policy, policy_note = for_the_week(Path(args.policy), Path(scratch), overnight=args.overnight)
        # The week's Prometheus: the workload's DCGM series at the week's times (the sandbox's own describe its story
        # pods at the wall clock's now), scraping the Pushgateway the jobs push their gauges to.
        gateway = start_pushgateway()
        series = dcgm.series(fleet, jobs, end)
        try:
            prometheus = dcgm.start(series, scrape=[gateway.address])
        except BaseException:
            gateway.stop()
            raise
        with World.start(product_policy, sync=False, prometheus=False) as world:
            world.prometheus, world.pushgateway = prometheus, gateway  # stopped with the world
            product = GpuJobs(world, view_of(world.policy), step, args.every_step)
            product.series = {s.workload.pod: (s.since, s.until) for s in series}
            model = new_model(fleet, view_of(world.policy), jobs, start, product.cloud)
            queries = dcgm.queries_answered(prometheus.url)
            simulate(model, product, start, end, step)
            product.sweep.queries = dcgm.queries_answered(prometheus.url) - queries
            column = figures.Column("gpu-jobs", model.figures, product.api_calls(), model.waited_min("wake"))
            report = figures.product_report(child_env(world), figures.iso_week(start), end)
            product.sweep.reported = {"podsActedOn": report.pods, "idleGpuHoursReclaimed": report.idle_gpu_hours}
    product.sweep.prometheus_s = prometheus.timings.total_s
    return product, column, report, policy_note


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(DEFAULT_POLICY))
    parser.add_argument("--monday", type=date.fromisoformat, default=PLAIN_MONDAY)
    span = parser.add_mutually_exclusive_group()
    span.add_argument("--days", type=float, default=None)
    span.add_argument("--hours", type=float, default=None)
    parser.add_argument("--from-hour", type=float, default=0.0, help="start this many hours after Monday 00:00")
    parser.add_argument("--step-minutes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument(
        "--every-step", action="store_true", help="run every cluster's job at every step (its sweep at every tick)"
    )
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--shipped-max-delay",
        dest="overnight",
        action="store_false",
        help="keep the policy's maxDelay on the training groups (the week gives them 10h for overnight training)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    began = time.perf_counter()
    policy = load_policy(Path(args.policy))
    fleet, view = build_fleet(policy), view_of(policy)
    tz = ZoneInfo(policy.defaults.timezone)
    monday = datetime(args.monday.year, args.monday.month, args.monday.day, tzinfo=tz)
    hours = args.hours if args.hours is not None else 24 * (args.days if args.days is not None else 7)
    start = monday + timedelta(hours=args.from_hour)
    end = start + timedelta(hours=hours)
    step = timedelta(minutes=args.step_minutes)
    week = generate(monday, 7, args.seed)
    jobs = tuple(j for j in week if start <= j.submit < end)

    columns: dict[str, figures.Column] = {}
    strategy: AlwaysOn | Naive
    for strategy in (AlwaysOn(fleet), Naive(fleet, view)):
        model = new_model(fleet, view, jobs, start, strategy.cloud)
        simulate(model, strategy, start, end, step)
        waited = model.waited_min("wake")
        columns[strategy.name] = figures.Column(strategy.name, model.figures, strategy.api_calls(), waited)
    product, run_figures, report, policy_note = run_product(args, fleet, jobs, start, end, step)
    columns["gpu-jobs"] = run_figures
    truth = figures.truth_by_group(columns["always-on"].figures, columns["gpu-jobs"].figures)
    wall = time.perf_counter() - began
    steps = int((end - start) / step)
    clusters = len(policy.fleet)
    warm_up = {g.name: view.group(g.name).settings.warm_up / timedelta(minutes=1) for g in managed(fleet)}
    run = {
        "wallSeconds": round(wall, 1),
        "jobRuns": product.runs,
        "jobRunsSkipped": product.skipped,
        "jobRunSeconds": round(product.run_seconds, 1),
        "jobRunsFailedToRun": product.failed_runs,
        "jobRunsWithFailedItems": product.runs_with_failed_items,
        "failedItems": product.failed_items,
        "steps": steps,
        "pods": len(jobs),
        "cores": os.cpu_count(),
        "policy": policy_note,
    }
    sweep = product.sweep.as_json(columns["always-on"].figures, columns["gpu-jobs"].figures)
    if args.output == "json":
        print(figures.render_json(columns, report, truth, {"run": run, "sweep": sweep}))
    else:
        header = [
            f"simulated {start.isoformat()} .. {end.isoformat()} ({hours:g} h, {steps} steps of {step}), "
            f"{len(jobs)} pods, seed {args.seed}, policy {os.path.relpath(args.policy)}",
            f"gpu-jobs: {product.runs} nodegroups runs (one per cluster, {clusters} clusters), "
            f"{product.skipped} skipped where no input moved"
            + (" (none: --every-step)" if args.every_step else "")
            + f"; {product.runs_with_failed_items} with a failed item (exit 1), {product.failed_runs} failed to run",
            f"wall time {wall:.0f} s (job runs {product.run_seconds:.0f} s) on {os.cpu_count()} cores",
            f"the week's policy: {policy_note}",
        ]
        print(figures.render_text(columns, report, truth, warm_up, header))
        for reason, count in sorted(product.failed_items.items(), key=lambda kv: -kv[1])[:8]:
            print(f"failed item in {count} run(s): {reason}")
        print(*product.sweep.lines(sweep), sep="\n")
        for error in product.errors[:5]:
            print(f"run error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
