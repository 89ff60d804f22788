"""A week of nights as the fleet lives them, every run a real ``gpu-jobs nodegroups`` process per cluster against
the sandbox: the evening (research-h100 postponed, its training still running), a person scaling a pool back up
by hand, the night run past maxDelay that drains research-h100 (its StatefulSets recreate their pods under the same
names: replacements, not the evicted pods), the morning, a missed evening caught up at night, and Monday. Every run
ends well inside a minute with the policy holding (exit 0), and what comes back in the morning is the size recorded
before the first shutdown, not the one a person set in the night.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tests.envelope import items
from tests.sandbox.demo import Phase, run_gpu_jobs
from tests.sandbox.world import World

pytestmark = pytest.mark.integration

BERLIN = ZoneInfo("Europe/Berlin")
# Tue 2027-03-09, a plain week (no holiday in DE-BE, GB-ENG or US-NY, no DST change).
EVENING = datetime(2027, 3, 9, 22, 1, tzinfo=BERLIN)  # every Berlin group's day is over; research-h100 is busy
BY_HAND = "training-a100"  # scaled back up by a person at night (its window ends at 22:00)
NIGHT = datetime(2027, 3, 10, 0, 5, tzinfo=BERLIN)  # research-h100's maxDelay (2h) has passed: it is drained
MORNING = datetime(2027, 3, 10, 8, 16, tzinfo=BERLIN)  # inside every warm-up
MISSED = datetime(2027, 3, 11, 2, 0, tzinfo=BERLIN)  # Wednesday's evening run never happened
MONDAY = datetime(2027, 3, 15, 8, 16, tzinfo=BERLIN)
LIMIT_S = 60.0  # the bound for every run of the sequence


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World.start(sync=False) as started:
        for kube in started.kubes.values():  # the drained pods' containers exit on SIGTERM: no real 30 s grace
            kube.cluster.pod_stop_s = 0.2
        yield started


def night_run(world: World, name: str, at: datetime) -> Phase:
    phase = run_gpu_jobs(world, name, "nodegroups", "--at", at.isoformat(), "--output", "json", per_cluster=True)
    phase.at = at
    # On a failure: the failed items and the error log lines, not the tail of a long JSON line.
    failed = [(i["scope"], i["name"], i["reason"]) for i in phase.report["items"] if i["status"] == "failed"]
    errors = [line for line in phase.stderr.splitlines() if '"level": "error"' in line]
    assert phase.code == 0, (name, failed, errors[-5:])
    assert phase.seconds < LIMIT_S, (name, phase.seconds)
    return phase


def eks_sizes(world: World, cluster: str, nodegroup: str) -> tuple[int, int, int]:
    scaling = world.aws.client("eks").describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
    config = scaling["scalingConfig"]
    return config["minSize"], config["desiredSize"], config["maxSize"]


def test_a_week_of_nights_ends_every_run_in_time_with_the_policy_holding(world: World) -> None:
    groups = {g.name: g for g in world.fleet.groups}
    research, by_hand_group = groups["research-h100"], groups[BY_HAND]
    by_hand = world.policy.group(BY_HAND)
    loc = by_hand.locator.model_dump(by_alias=True)
    before = eks_sizes(world, loc["cluster"], loc["nodegroup"])

    evening = night_run(world, "evening", EVENING)
    skipped = {s["name"]: s["reason"] for s in items(evening.report, "node group") if "warning" in s}
    assert "postponed" in skipped["research-h100"]
    assert eks_sizes(world, loc["cluster"], loc["nodegroup"])[1] == 0

    # 23:00: a person brings the pool back by hand (what `aws eks update-nodegroup-config` sends).
    world.aws.client("eks").update_nodegroup_config(
        clusterName=loc["cluster"],
        nodegroupName=loc["nodegroup"],
        scalingConfig={"minSize": 0, "desiredSize": 2, "maxSize": 8},
    )
    # The update finishes with time, as in EKS; by the next run its nodes have registered.
    deadline = time.monotonic() + 30
    while world.live_nodes(by_hand_group) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    world.sync_nodes()
    assert len(world.nodes_of(by_hand_group)) == 2

    night = night_run(world, "night", NIGHT)
    results = {g["name"]: g for g in items(night.report, "node group") if "message" in g}
    assert results["research-h100"]["status"] == "applied", results["research-h100"]
    assert results["research-h100"]["direction"] == "down"
    assert night.nodes["research-h100"] == (research.nodes, 0)
    assert results[BY_HAND]["direction"] == "down"  # off-hours again: level-triggered
    assert eks_sizes(world, loc["cluster"], loc["nodegroup"])[1] == 0

    morning = night_run(world, "morning", MORNING)
    restored = {g["name"] for g in items(morning.report, "node group") if g.get("direction") == "up"}
    assert {"research-h100", BY_HAND} <= restored
    # The size recorded before the first shutdown, not the one set by hand in the night.
    assert eks_sizes(world, loc["cluster"], loc["nodegroup"]) == before

    missed = night_run(world, "missed evening, caught up", MISSED)
    assert BY_HAND in {g["name"] for g in items(missed.report, "node group") if g.get("direction") == "down"}

    monday = night_run(world, "monday", MONDAY)
    assert BY_HAND in {g["name"] for g in items(monday.report, "node group") if g.get("direction") == "up"}
    assert eks_sizes(world, loc["cluster"], loc["nodegroup"]) == before
