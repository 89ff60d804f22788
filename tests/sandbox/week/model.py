"""A small scheduler and Cluster Autoscaler model, moved by time (test infrastructure).

Each managed group has nodes; a node bills from the moment its group grows (``launched``) and takes pods only
after its boot delay (``ready``). Pods are Pending until a ready node of their group has free GPUs (first fit, in
submission order). The autoscaler adds nodes for pods that fit nowhere, within the group's ``max``, only to a group
that is up (a group someone scaled to zero stays there: GKE and AKS pools have their autoscaler off then, and the
model treats EKS alike), and removes the nodes it added once they are empty. When a group shrinks (its base size
falls) the newest nodes go first, with their pods: each running pod so ended is an interruption, and it goes back
to Pending (training resumes from its last checkpoint, anything else starts over).

The figures are integrated over each step ``[t, t + step)``: billed GPU-hours (nodes x GPUs per node, booting
included, as the cloud bills), busy GPU-hours (running pods x their GPUs), pod-minutes Pending in the group's
working hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.sandbox.week.workload import Job

#: How long a GPU node takes from launch to Ready (driver, device plugin, health checks); H100s longer.
BOOT = timedelta(minutes=10)
SLOW_BOOT = {"research-h100": timedelta(minutes=20)}
#: How long a node the autoscaler added stays once empty before it removes it.
SCALE_DOWN_AFTER = timedelta(minutes=10)


@dataclass
class Node:
    name: str
    launched: datetime
    ready: datetime
    extra: bool = False  # added by the autoscaler (it removes it again once empty)
    empty_since: datetime | None = None


@dataclass
class Pod:
    job: Job
    state: str = "pending"  # pending | running | done
    node: str | None = None
    done: timedelta = timedelta(0)  # work done, kept across an interruption up to the last checkpoint
    started: datetime | None = None
    interruptions: int = 0
    waited_working: timedelta = timedelta(0)
    waited_total: timedelta = timedelta(0)

    @property
    def name(self) -> str:
        return self.job.name


@dataclass
class GroupModel:
    name: str
    cluster: str
    gpus_per_node: int
    max_nodes: int
    working: Callable[[datetime], bool]  # the group's working hours (warm-up excluded)
    boot: timedelta = BOOT
    nodes: list[Node] = field(default_factory=list)
    serial: int = 0

    def gpus_used(self, node: str, pods: Iterable[Pod]) -> int:
        return sum(p.job.gpus for p in pods if p.state == "running" and p.node == node)


@dataclass
class Figures:
    billed: float = 0.0  # GPU-hours
    busy: float = 0.0
    work: float = 0.0  # busy GPU-hours of pods doing work (not the idle or leaked ones, which hold GPUs all the same)
    idle_working: float = 0.0  # billed and not busy, inside the group's working hours
    idle_off: float = 0.0  # ... outside them (warm-up included): what a schedule can save
    waiting_working_min: float = 0.0
    interrupted: int = 0  # interruptions of running pods doing work (not idle or leaked ones)
    interrupted_pods: list[str] = field(default_factory=list)
    max_wait_working_min: float = 0.0
    per_group_billed: dict[str, float] = field(default_factory=dict)


@dataclass
class Model:
    """The fleet's managed groups and the week's pods under one strategy."""

    groups: dict[str, GroupModel]
    jobs: tuple[Job, ...]
    name_node: Callable[[GroupModel, int], str]
    pods: dict[str, Pod] = field(default_factory=dict)
    figures: Figures = field(default_factory=Figures)
    _next: int = 0  # next job of ``jobs`` to submit

    def waited_min(self, kind: str) -> float | None:
        """The longest any pod of ``kind`` waited in all (None: no such pod was submitted)."""
        waits = [p.waited_total / timedelta(minutes=1) for p in self.pods.values() if p.job.kind == kind]
        return max(waits) if waits else None

    def node_names(self, group: str) -> list[str]:
        return [n.name for n in self.groups[group].nodes]

    def running_on(self, group: str) -> list[Pod]:
        names = set(self.node_names(group))
        return [p for p in self.pods.values() if p.state == "running" and p.node in names]

    def seed_nodes(self, group: str, count: int, at: datetime) -> None:
        """Nodes already up and ready at the week's start."""
        g = self.groups[group]
        for _ in range(count):
            g.nodes.append(Node(self.name_node(g, g.serial), at - g.boot, at - timedelta(seconds=1)))
            g.serial += 1

    def interrupt(self, pod: Pod) -> None:
        """A running pod ended from outside (its node went, or it was evicted): back to Pending."""
        if pod.job.profile == "busy":
            self.figures.interrupted += 1
            self.figures.interrupted_pods.append(pod.name)
        pod.interruptions += 1
        keep = pod.job.checkpoint
        pod.done = timedelta(0) if keep is None else keep * math.floor(pod.done / keep)
        pod.state, pod.node, pod.started = "pending", None, None

    def finish(self, pod: Pod) -> None:
        """A pod ended for good from outside (the sweep deleted it): done, never resubmitted, no interruption."""
        pod.state, pod.node = "done", None

    def resize(self, group: str, base: int, at: datetime) -> None:
        """The group's base size (what the cloud runs for it, without the autoscaler's own nodes) is ``base``."""
        g = self.groups[group]
        extra = [n for n in g.nodes if n.extra] if base > 0 else []
        plain = [n for n in g.nodes if not n.extra]
        while len(plain) < base:
            plain.append(Node(self.name_node(g, g.serial), at, at + g.boot))
            g.serial += 1
        gone = plain[base:] + ([n for n in g.nodes if n.extra] if base == 0 else [])
        for node in gone:
            for pod in [p for p in self.pods.values() if p.state == "running" and p.node == node.name]:
                self.interrupt(pod)
        g.nodes = plain[:base] + extra

    def step(self, at: datetime, step: timedelta) -> None:
        """Submit, schedule, autoscale, account for ``[at, at + step)``, then run the pods' work forward."""
        while self._next < len(self.jobs) and self.jobs[self._next].submit <= at:
            job = self.jobs[self._next]
            self.pods[job.name] = Pod(job)
            self._next += 1
        self._schedule(at)
        self._autoscale(at)
        hours = step / timedelta(hours=1)
        f = self.figures
        for g in self.groups.values():
            billed = len(g.nodes) * g.gpus_per_node * hours
            f.billed += billed
            f.per_group_billed[g.name] = f.per_group_billed.get(g.name, 0.0) + billed
            held = sum(p.job.gpus for p in self.pods.values() if p.state == "running" and p.job.group == g.name)
            idle = billed - held * hours
            if g.working(at):
                f.idle_working += idle
            else:
                f.idle_off += idle
        for pod in self.pods.values():
            if pod.state == "running":
                f.busy += pod.job.gpus * hours
                if pod.job.profile == "busy":
                    f.work += pod.job.gpus * hours
                pod.done += step
                if pod.job.work is not None and pod.done >= pod.job.work:
                    pod.state, pod.node = "done", None
            elif pod.state == "pending":
                pod.waited_total += step
                if self.groups[pod.job.group].working(at):
                    pod.waited_working += step
                    f.waiting_working_min += step / timedelta(minutes=1)
                    f.max_wait_working_min = max(f.max_wait_working_min, pod.waited_working / timedelta(minutes=1))

    def _schedule(self, at: datetime) -> None:
        for pod in self.pods.values():
            if pod.state != "pending":
                continue
            g = self.groups[pod.job.group]
            for node in g.nodes:
                if node.ready <= at and g.gpus_used(node.name, self.pods.values()) + pod.job.gpus <= g.gpus_per_node:
                    pod.state, pod.node, pod.started = "running", node.name, at
                    pod.waited_working = timedelta(0)
                    break

    def _autoscale(self, at: datetime) -> None:
        for g in self.groups.values():
            if not g.nodes:
                continue  # a group at zero stays there: only the strategy brings it back
            booting = sum(g.gpus_per_node for n in g.nodes if n.ready > at)
            wanted = sum(p.job.gpus for p in self.pods.values() if p.state == "pending" and p.job.group == g.name)
            need = max(0, wanted - booting)
            while need > 0 and len(g.nodes) < g.max_nodes:
                g.nodes.append(Node(self.name_node(g, g.serial), at, at + g.boot, extra=True))
                g.serial += 1
                need -= g.gpus_per_node
            for node in [n for n in g.nodes if n.extra]:
                if node.ready <= at and g.gpus_used(node.name, self.pods.values()) == 0 and wanted == 0:
                    node.empty_since = node.empty_since or at
                    if at - node.empty_since >= SCALE_DOWN_AFTER:
                        g.nodes.remove(node)
                else:
                    node.empty_since = None
