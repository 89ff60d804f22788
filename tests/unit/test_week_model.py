"""The simulated week's Cluster Autoscaler model (tests/sandbox/week/model.py), against a cloud kept in memory: it
acts only while the cloud says the autoscaler is on, adds nodes for pods that fit nowhere, removes empty Ready nodes
after 10 minutes and no sooner than 10 minutes after its last addition, never below ``min``, and writes every size it
chooses to the cloud; and how the wait target reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.sandbox.week.figures import Column, wait_target
from tests.sandbox.week.model import Figures, GroupModel, Model
from tests.sandbox.week.workload import Job

START = datetime.fromisoformat("2027-04-12T09:00:00+02:00")
STEP = timedelta(minutes=10)


@dataclass
class Cloud:
    bounds_of: dict[str, tuple[int, int] | None]
    writes: list[tuple[str, int]] = field(default_factory=list)

    def bounds(self, group: str) -> tuple[int, int] | None:
        return self.bounds_of[group]

    def scale(self, group: str, nodes: int) -> None:
        self.writes.append((group, nodes))


def model(cloud: Cloud, nodes: int, jobs: tuple[Job, ...] = (), *, gpus: int = 8, per_step: int = 1) -> Model:
    group = GroupModel("train", "ml-prod", gpus, lambda at: True, per_step=per_step)
    m = Model({"train": group}, jobs, lambda g, i: f"node-{i}", cloud)
    m.seed_nodes("train", nodes, START)
    return m


def run(m: Model, steps: int) -> list[int]:
    """The group's size after each step."""
    sizes = []
    for i in range(steps):
        m.step(START + i * STEP, STEP)
        sizes.append(len(m.groups["train"].nodes))
    return sizes


def test_empty_nodes_go_after_ten_minutes_down_to_min_and_the_cloud_is_told() -> None:
    cloud = Cloud({"train": (1, 8)})
    m = model(cloud, 4)
    assert run(m, 4) == [4, 1, 1, 1]  # empty from 09:00; at 09:10, ten minutes on, three go and min 1 stays
    assert cloud.writes == [("train", 1)]
    assert m.figures.interrupted == 0


def test_a_pod_that_fits_nowhere_gets_a_node_which_stays_ten_minutes_after_its_addition() -> None:
    cloud = Cloud({"train": (0, 8)})
    job = Job("t", "training", "train", 8, START, timedelta(minutes=20))
    m = model(cloud, 0, (job,))
    assert run(m, 6) == [1, 1, 1, 1, 0, 0]
    # Added at 09:00, Ready at 09:10 (boot), the pod runs 09:10-09:30, the node is empty from 09:30 and goes at 09:40.
    assert cloud.writes == [("train", 1), ("train", 0)]
    assert m.pods["t"].state == "done"
    assert m.pods["t"].waited_total == timedelta(minutes=10)


def test_an_autoscaler_that_is_off_changes_nothing() -> None:
    cloud = Cloud({"train": None})
    job = Job("t", "training", "train", 8, START, timedelta(hours=1))
    m = model(cloud, 0, (job,))
    assert run(m, 3) == [0, 0, 0]
    assert cloud.writes == []
    assert m.pods["t"].state == "pending"


def test_a_pool_in_two_zones_grows_and_shrinks_a_node_per_zone_at_a_time() -> None:
    cloud = Cloud({"train": (2, 6)})
    jobs = tuple(Job(f"t{i}", "training", "train", 8, START, timedelta(minutes=10)) for i in range(3))
    m = model(cloud, 2, jobs, per_step=2)
    # 09:00: two pods run, the third fits nowhere: a node in each zone. 09:10: it runs on a node that was empty.
    # 09:20: three empty nodes, two of them for ten minutes, but only a pair can go (the pool keeps 1 per zone).
    assert run(m, 4) == [4, 4, 2, 2]
    assert cloud.writes == [("train", 4), ("train", 2)]
    assert all(p.state == "done" for p in m.pods.values())


def test_the_wait_target_names_each_group_over_its_warm_up_beside_always_ons_wait() -> None:
    product, always = Figures(), Figures()
    product.per_group_max_wait_working_min = {"train-h100": 20.0, "training-a100": 10.0}
    always.per_group_max_wait_working_min = {"train-h100": 20.0}
    product.max_wait_working_min = 20.0
    columns = {"always-on": Column("always-on", always, {}), "gpu-jobs": Column("gpu-jobs", product, {})}
    over = wait_target(columns, {"train-h100": 15.0, "training-a100": 20.0})
    assert (
        over
        == "  [NOT met] working-hours wait <= each group's warmUp: train-h100 20 min against warmUp 15 (always-on 20 min)"
    )
    met = wait_target(columns, {"train-h100": 30.0, "training-a100": 20.0})
    assert met == "  [met] working-hours wait <= each group's warmUp (longest 20 min)"
