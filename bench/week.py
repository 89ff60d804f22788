"""The simulated week (issue 26): the same week and workload under three strategies side by side, always-on, a naive
20:00/08:00 schedule, and gpu-jobs (its real ``nodegroups`` job per cluster against the sandbox's emulators).

    .venv/bin/python bench/week.py [--days 7 | --hours N] [--from-hour H] [--step-minutes 10] [--seed 26]
                                   [--every-step] [--output text|json]

Monday 00:00 in the policy's timezone (``--monday``, a plain week by default: no holiday, no DST change) to the next
Monday 00:00, in 10-minute steps; ``--from-hour`` starts the slice that many hours after Monday 00:00 (its jobs are
those submitted inside the slice). The workload (:mod:`tests.sandbox.week.workload`) and the scheduler and
autoscaler model (:mod:`tests.sandbox.week.model`) are test infrastructure; the gpu-jobs column is the product.

Prints per strategy: billed GPU-hours (node-hours x GPUs), busy GPU-hours (running pods x GPUs), their ratio, idle
GPU-hours, busy pods interrupted, pod-minutes waiting for capacity in working hours, API calls per cloud; the
product's ``gpu-jobs report`` for the week beside the simulator's truth (n/a while the command does not exist); the
targets, met or NOT met (printed, never asserted); the wall time and how many job runs were made and skipped.
``--output json`` prints one line instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.core.resolved import view_of  # noqa: E402
from jobs.policy_file import load_policy  # noqa: E402
from tests.sandbox.fleet import build_fleet  # noqa: E402
from tests.sandbox.week import figures  # noqa: E402
from tests.sandbox.week.model import Model  # noqa: E402
from tests.sandbox.week.strategies import AlwaysOn, GpuJobs, Naive, Strategy, managed, new_model  # noqa: E402
from tests.sandbox.week.workload import generate  # noqa: E402
from tests.sandbox.world import DEFAULT_POLICY, World, child_env  # noqa: E402

PLAIN_MONDAY = date(2027, 3, 8)  # no holiday in DE-BE, GB-ENG, US or US-NY that week, no DST change


def simulate(model: Model, strategy: Strategy, start: datetime, end: datetime, step: timedelta) -> None:
    at = start
    while at < end:
        strategy.before(model, at)
        model.step(at, step)
        strategy.after(model, at)
        at += step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(DEFAULT_POLICY))
    parser.add_argument("--monday", type=date.fromisoformat, default=PLAIN_MONDAY)
    span = parser.add_mutually_exclusive_group()
    span.add_argument("--days", type=float, default=None)
    span.add_argument("--hours", type=float, default=None)
    parser.add_argument("--from-hour", type=float, default=0.0, help="start this many hours after Monday 00:00")
    parser.add_argument("--step-minutes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--every-step", action="store_true", help="run every cluster's job at every step")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
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
    for strategy in (AlwaysOn(fleet), Naive(fleet, view)):
        model = new_model(fleet, view, jobs, start)
        simulate(model, strategy, start, end, step)
        columns[strategy.name] = figures.Column(strategy.name, model.figures, strategy.api_calls())
    world_began = time.perf_counter()
    with World.start(args.policy, sync=False) as world:
        world_s = time.perf_counter() - world_began
        product = GpuJobs(world, view, step, args.every_step)
        model = new_model(fleet, view, jobs, start)
        simulate(model, product, start, end, step)
        columns["gpu-jobs"] = figures.Column("gpu-jobs", model.figures, product.api_calls())
        report, note = figures.product_report(child_env(world), figures.iso_week(start))
    truth = figures.truth_avoided(columns["always-on"].figures, columns["gpu-jobs"].figures)
    wall = time.perf_counter() - began
    steps = int((end - start) / step)
    clusters = len(policy.fleet)
    warm_up = min(view.group(g.name).settings.warm_up for g in managed(fleet)) / timedelta(minutes=1)
    run = {
        "wallSeconds": round(wall, 1),
        "worldStartSeconds": round(world_s, 1),
        "jobRuns": product.runs,
        "jobRunsSkipped": product.skipped,
        "jobRunSeconds": round(product.run_seconds, 1),
        "jobRunsFailedToRun": product.failed_runs,
        "steps": steps,
        "pods": len(jobs),
        "cores": os.cpu_count(),
    }
    if args.output == "json":
        print(figures.render_json(columns, report, truth, {"run": run}))
    else:
        header = [
            f"simulated {start.isoformat()} .. {end.isoformat()} ({hours:g} h, {steps} steps of {step}), "
            f"{len(jobs)} pods, seed {args.seed}, policy {args.policy}",
            f"gpu-jobs: {product.runs} nodegroups runs (one per cluster, {clusters} clusters), "
            f"{product.skipped} skipped where no input moved"
            + (" (none: --every-step)" if args.every_step else "")
            + f"; {product.failed_runs} failed to run",
            f"wall time {wall:.0f} s (world start {world_s:.0f} s, job runs {product.run_seconds:.0f} s) "
            f"on {os.cpu_count()} cores",
        ]
        print(figures.render_text(columns, report, note, truth, warm_up, header))
        for error in product.errors[:5]:
            print(f"run error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
