"""A small scheduler and Cluster Autoscaler model, moved by time (test infrastructure).

Each managed group has nodes; a node bills from the moment its group grows (``launched``) and takes pods only
after its boot delay (``ready``). Pods are Pending until a ready node of their group has free GPUs (first fit, in
submission order).

The Cluster Autoscaler acts on a group while its cloud says the group's autoscaler is on (:class:`Cloud`: EKS's
discovery tags on the group's ASG, a GKE pool's autoscaling, an AKS pool's autoscaler on a running pool; Karpenter
while its NodePool's limits let it launch), within the bounds the cloud has then, and writes the size it chooses
to the cloud, as the real ones do: it adds nodes for pods that fit nowhere (up to ``max``), and removes any ready
node that has been empty for ``SCALE_DOWN_UNNEEDED``, no sooner than ``SCALE_DOWN_DELAY_AFTER_ADD`` after its last
addition to the group, down to ``min`` (the Cluster Autoscaler's defaults, which GKE's and AKS's autoscalers share;
Karpenter's consolidation of empty nodes after its NodePool's ``consolidateAfter``). It does not tell the nodes it
added from the others: a node is a node. When a group shrinks from outside (a strategy or the product sets its
size) the newest nodes go first, with their pods (a Karpenter pool's claims deleted: those nodes, :meth:`Model.remove`):
each running pod so ended is an interruption, and it goes back to Pending (training resumes from its last
checkpoint, anything else starts over).

The figures are integrated over each step ``[t, t + step)``: billed GPU-hours (nodes x GPUs per node, booting
included, as the cloud bills), busy GPU-hours (running pods x their GPUs), pod-minutes Pending in the group's
working hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from tests.sandbox.week.workload import Job

#: How long a GPU node takes from launch to Ready (driver, device plugin, health checks); H100s longer.
BOOT = timedelta(minutes=10)
SLOW_BOOT = {"research-h100": timedelta(minutes=20), "train-h100": timedelta(minutes=20)}
#: The Cluster Autoscaler's ``--scale-down-unneeded-time`` and ``--scale-down-delay-after-add`` (both 10m by default;
#: GKE's and AKS's autoscalers use the same).
SCALE_DOWN_UNNEEDED = timedelta(minutes=10)
SCALE_DOWN_DELAY_AFTER_ADD = timedelta(minutes=10)


class Cloud(Protocol):
    """A group's cloud as its autoscaler sees it: the strategy's (the emulated clouds under the product)."""

    def bounds(self, group: str) -> tuple[int, int] | None:
        """[min, max] nodes while the group's autoscaler is on, None while it is off."""
        ...

    def scale(self, group: str, nodes: int) -> None:
        """The autoscaler sets the group's size (nodes, all zones) within the bounds."""
        ...


@dataclass
class Node:
    name: str
    launched: datetime
    ready: datetime
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
    working: Callable[[datetime], bool]  # the group's working hours (warm-up excluded)
    boot: timedelta = BOOT
    #: How long a node is empty before its autoscaler removes it, and how long after an addition it removes none
    #: (a Karpenter pool: its NodePool's ``consolidateAfter``, and no delay).
    unneeded: timedelta = SCALE_DOWN_UNNEEDED
    delay_after_add: timedelta = SCALE_DOWN_DELAY_AFTER_ADD
    #: Nodes one autoscaler step adds or removes: a GKE pool's zones (the emulated pool has one size for every zone).
    per_step: int = 1
    nodes: list[Node] = field(default_factory=list)
    serial: int = 0
    added: datetime | None = None  # the autoscaler's last addition

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
    per_group_max_wait_working_min: dict[str, float] = field(default_factory=dict)
    per_group_billed: dict[str, float] = field(default_factory=dict)
    per_group_busy: dict[str, float] = field(default_factory=dict)
    per_group_idle_working: dict[str, float] = field(default_factory=dict)


@dataclass
class Model:
    """The fleet's managed groups and the week's pods under one strategy."""

    groups: dict[str, GroupModel]
    jobs: tuple[Job, ...]
    name_node: Callable[[GroupModel, int], str]
    cloud: Cloud
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

    def resize(self, group: str, size: int, at: datetime) -> None:
        """The group's size in its cloud is ``size`` (set from outside the model: a strategy, the product): nodes
        are launched, or the newest go with their pods."""
        g = self.groups[group]
        while len(g.nodes) < size:
            g.nodes.append(Node(self.name_node(g, g.serial), at, at + g.boot))
            g.serial += 1
        for node in g.nodes[size:]:
            for pod in [p for p in self.pods.values() if p.state == "running" and p.node == node.name]:
                self.interrupt(pod)
        del g.nodes[size:]

    def remove(self, group: str, names: set[str]) -> None:
        """These nodes of the group are gone (a Karpenter pool's claims deleted from outside), with their pods."""
        g = self.groups[group]
        for pod in [p for p in self.pods.values() if p.state == "running" and p.node in names]:
            self.interrupt(pod)
        g.nodes = [n for n in g.nodes if n.name not in names]

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
            f.per_group_busy[g.name] = f.per_group_busy.get(g.name, 0.0) + held * hours
            idle = billed - held * hours
            if g.working(at):
                f.idle_working += idle
                f.per_group_idle_working[g.name] = f.per_group_idle_working.get(g.name, 0.0) + idle
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
                    waited = pod.waited_working / timedelta(minutes=1)
                    f.max_wait_working_min = max(f.max_wait_working_min, waited)
                    group = pod.job.group
                    f.per_group_max_wait_working_min[group] = max(
                        f.per_group_max_wait_working_min.get(group, 0.0), waited
                    )

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
            bounds = self.cloud.bounds(g.name)
            if bounds is None:
                continue  # its autoscaler is off: only the strategy sizes it
            low, high = bounds
            size = len(g.nodes)
            booting = sum(g.gpus_per_node for n in g.nodes if n.ready > at)
            wanted = sum(p.job.gpus for p in self.pods.values() if p.state == "pending" and p.job.group == g.name)
            need = max(0, wanted - booting)
            while need > 0 and len(g.nodes) + g.per_step <= high:
                for _ in range(g.per_step):
                    g.nodes.append(Node(self.name_node(g, g.serial), at, at + g.boot))
                    g.serial += 1
                need -= g.gpus_per_node * g.per_step
                g.added = at
            for node in g.nodes:
                empty = node.ready <= at and g.gpus_used(node.name, self.pods.values()) == 0
                node.empty_since = (node.empty_since or at) if empty else None
            if wanted == 0 and (g.added is None or at - g.added >= g.delay_after_add):
                unneeded = [n for n in g.nodes if n.empty_since is not None and at - n.empty_since >= g.unneeded]
                removable = min(len(unneeded), len(g.nodes) - low) // g.per_step * g.per_step
                gone = {n.name for n in unneeded[len(unneeded) - removable :]} if removable > 0 else set()
                g.nodes = [n for n in g.nodes if n.name not in gone]
            if len(g.nodes) != size:
                self.cloud.scale(g.name, len(g.nodes))
