"""Planning cost of the pure core: ``plan_nodegroups`` for many groups, ``desired`` calls, and the
working-hours check a quota rule with ``offHours`` makes per namespace.

    .venv/bin/python bench/planning.py [--groups 200] [--namespaces 5000] [--repeat 5]

Every group and the quota rule have DE/BE public holidays (the holiday table is the costly part of compiling a
schedule). Prints the best of ``--repeat`` wall times per figure (the machine is shared: the best is the least
disturbed), in milliseconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from jobs.core.group_config import GroupConfig
from jobs.core.nodegroup_plan import ObservedGroup, plan_nodegroups
from jobs.core.resolved import view_of
from jobs.core.schedule import in_working_hours
from jobs.policy_file import parse_policy

NIGHT = datetime.fromisoformat("2026-12-01T21:00:00+01:00")
LOCATORS = (
    ("eks", "cloud: aws\n    aws: {{region: eu-west-1, cluster: ml, nodegroup: g{i}}}"),
    ("gke", "cloud: gcp\n    gcp: {{project: p, location: europe-west4, cluster: c, nodePool: g{i}}}"),
    ("aks", "cloud: azure\n    azure: {{subscription: s, resourceGroup: rg, cluster: a, agentPool: g{i}}}"),
)


def policy_text(groups: int) -> str:
    lines = [
        "apiVersion: gpu-jobs/v1",
        "kind: GpuPolicy",
        "defaults:",
        "  timezone: Europe/Berlin",
        "  holidays: {country: DE, subdivision: BE}",
        '  workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]',
        "  onBusy: wait",
        "  maxDelay: 1h",
        "nodeGroups:",
    ]
    for i in range(groups):
        lines.append(f"  - name: g{i}\n    {LOCATORS[i % 3][1].format(i=i)}\n    up: {{min: 1, desired: 2, max: 4}}")
    return "\n".join(lines) + "\n"


def best(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    policy = parse_policy(policy_text(args.groups), "bench.yaml")
    load_ms = (time.perf_counter() - start) * 1000
    up = GroupConfig(min=1, desired=2, max=4, autoscaling=True)
    observed = tuple(
        ObservedGroup(g, LOCATORS[i % 3][0], up, None, (), (f"n{i}",), cluster="ml")  # type: ignore[arg-type]
        for i, g in enumerate(policy.node_groups)
    )
    first = best(1, lambda: plan_nodegroups(policy, observed, NIGHT))
    instants = iter(NIGHT + timedelta(minutes=i) for i in range(1, 10_000))
    fresh = best(args.repeat, lambda: plan_nodegroups(policy, observed, next(instants)))
    again = best(args.repeat, lambda: plan_nodegroups(policy, observed, NIGHT))
    schedule = view_of(policy).group(policy.node_groups[0].name).schedule
    desired = best(args.repeat, lambda: [schedule.desired(next(instants)) for _ in range(100)]) / 100
    tz, holidays, windows = ZoneInfo("Europe/Berlin"), policy.defaults.holidays, policy.defaults.working_hours or ()
    quota = best(args.repeat, lambda: [in_working_hours(tz, holidays, windows, NIGHT) for _ in range(args.namespaces)])
    print(f"policy load ({args.groups} groups, DE/BE holidays): {load_ms:.0f} ms")
    print(f"plan_nodegroups, {args.groups} groups: first call {first:.0f} ms (holiday tables loaded)")
    print(f"  at a new instant: {fresh:.0f} ms; again at the same instant (look-again): {again:.0f} ms")
    print(f"a group's desired state at a new instant, one call: {desired:.2f} ms")
    print(f"in_working_hours x {args.namespaces} (one offHours rule per namespace, one now): {quota:.0f} ms")


if __name__ == "__main__":
    main()
