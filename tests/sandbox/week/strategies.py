"""The three strategies the week is run under, each moving a :class:`~tests.sandbox.week.model.Model`'s group sizes.

- :class:`AlwaysOn`: no schedule: every group starts the week at its working size, and the Cluster Autoscaler sizes
  the groups that have one (:class:`FleetCloud`) all week.
- :class:`Naive`: what a CronJob with two ``scale`` commands does: every scheduled group to 0 with its autoscaler off
  at 20:00 (GKE and AKS refuse a manual resize of an autoscaled pool; EKS's autoscaler would bring the group back for
  the first pending pod) and back to its working size with its autoscaler at 08:00 (policy timezone), every day; no
  busy check, no warm-up, no wake.

- :class:`GpuJobs`: the product: ``gpu-jobs nodegroups --cluster C --at T`` per cluster, as each cluster's CronJob
  runs it (every 10 minutes), against the sandbox's emulated clusters and clouds (:class:`tests.sandbox.world.World`);
  the model's pods and ready nodes are mirrored into each cluster's API (what the job sees), the groups' sizes read
  back from the emulated clouds (what the job did), and a pod the job evicted is an interruption. And
  ``gpu-jobs sweep --part pods --cluster C --at T`` per cluster every 15 minutes (its CronJob's schedule), live, over
  the week's DCGM series (:mod:`tests.sandbox.week.dcgm`): a pod it deleted is done (not an interruption, not
  resubmitted).

The policy's always-on serving group is in no strategy's model (:func:`scheduled`): nobody would put production
serving in a scale script, and gpu-jobs never changes it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any, Protocol

from jobs.core.resolved import ResolvedPolicy, view_of
from jobs.labels import CA_ENABLED_TAG
from tests import forkserver
from tests.emulators.aws import moto_state
from tests.emulators.kube import karpenter, seed
from tests.sandbox.fleet import Fleet, Group
from tests.sandbox.karpenter_world import SANDBOX_LIMITS
from tests.sandbox.week.model import (
    SCALE_DOWN_DELAY_AFTER_ADD,
    SCALE_DOWN_UNNEEDED,
    SLOW_BOOT,
    Cloud,
    Figures,
    GroupModel,
    Model,
)
from tests.sandbox.week.workload import NAMESPACE, Job
from tests.sandbox.world import GROUP_LABEL, World, _label_value, _node, _node_name, child_env

GPU_JOBS = (sys.executable, "-m", "jobs")
#: The sweep-pods CronJob's schedule (kustomize/base/cronjob-sweep-pods.yaml: ``*/15 * * * *``, UTC): its grace period
#: of 30m is honoured to within one run.
SWEEP_EVERY = timedelta(minutes=15)
#: The writes the naive script's scale-down and scale-up cost per group kind: the autoscaler off (or on) besides the
#: resize (EKS: the discovery tags on its ASG; a plain ASG has no autoscaler here); a Karpenter pool's limits to zero
#: and its claims deleted, then only its limits back.
NAIVE_WRITES = {"eks": (2, 2), "asg": (1, 1), "gke": (2, 2), "aks": (2, 2), "karpenter": (2, 1)}
CLOUD_OF = {"eks": "aws", "asg": "aws", "gke": "gcp", "aks": "azure", "karpenter": "kube"}
#: The sandbox NodePool's ``disruption.consolidateAfter`` (tests.emulators.kube.karpenter.nodepool, WhenEmpty): how
#: long Karpenter leaves an empty node before it removes it.
CONSOLIDATE_AFTER = timedelta(minutes=5)


class Strategy(Protocol):
    name: str

    def before(self, model: Model, at: datetime) -> None: ...

    def after(self, model: Model, at: datetime) -> None: ...

    def api_calls(self) -> dict[str, int]: ...


def managed(fleet: Fleet) -> list[Group]:
    """The policy's GPU groups (the unmanaged ones are the same in every strategy: left out of the figures)."""
    return [g for g in fleet.groups if g.managed and g.hardware.gpus and not g.system]


def zones(group: Group) -> int:
    """How many nodes one size step is: a GKE pool has that many per zone."""
    return max(1, len(group.hardware.zones)) if group.kind == "gke" else 1


def autoscaled(group: Group) -> bool:
    """Whether the seeded group has an autoscaler: every EKS managed node group (EKS tags its ASG for the Cluster
    Autoscaler's discovery), the GKE and AKS pools seeded with autoscaling, a Karpenter pool (Karpenter); not the
    sandbox's plain ASG (seeded without tags)."""
    return group.kind in ("eks", "karpenter") or (
        group.kind in ("gke", "aks") and group.hardware.autoscaling is not None
    )


def pool_bounds(limits: dict[str, Any], machine: str) -> tuple[int, int] | None:
    """(0, how many ``machine`` nodes a NodePool's ``limits`` let Karpenter launch), None where they let it launch
    none (the product's ``cpu: "0"``, ``nodes: "0"`` at night)."""
    capacity = next(t for t in karpenter.CATALOGUE if t.name == machine).capacity
    most = [
        int(karpenter.parse(value) // per)
        for name, value in limits.items()
        if (per := Fraction(1) if name == "nodes" else capacity.get(name, Fraction(0)))
    ]
    top = min(most, default=100)  # a pool without limits: more nodes than the week ever asks for
    return (0, top) if top > 0 else None


@dataclass
class FleetCloud:
    """The clouds of the strategies that run no product: each group's autoscaler on, within its seeded bounds, where
    it has one (:func:`autoscaled`), unless the strategy turned it ``off``; the autoscaler's size is the model's."""

    fleet: Fleet
    off: set[str] = field(default_factory=set)

    def bounds(self, group: str) -> tuple[int, int] | None:
        g = self.fleet.group(group)
        if group in self.off or not autoscaled(g):
            return None
        if g.kind == "karpenter":
            return pool_bounds(SANDBOX_LIMITS, g.hardware.machine)
        return g.min * zones(g), g.max * zones(g)

    def scale(self, group: str, nodes: int) -> None:
        return None


@dataclass
class WorldCloud:
    """The emulated clouds under the product, as their autoscalers see them: on while the cloud says so (the
    discovery tag on the ASG, the pool's autoscaling, a running AKS pool's autoscaler), within the bounds the cloud
    has at that moment (the product changes them), and the size written back to the cloud the way each autoscaler
    does: the Cluster Autoscaler sets the ASG's desired capacity (EKS shows it as the node group's desiredSize); GKE's
    and AKS's own autoscalers resize the pool. A Karpenter pool's "cloud" is its NodePool in its cluster: on while its
    limits let Karpenter launch; its nodes' NodeClaims are the mirror's (:meth:`GpuJobs.after`)."""

    world: World

    def bounds(self, group: str) -> tuple[int, int] | None:
        g, world = self.world.fleet.group(group), self.world
        loc = g.locator
        if g.kind == "karpenter":
            pool = world.kubes[g.cluster].get("nodepools", loc["nodePool"], api_version=karpenter.API_VERSION)
            return pool_bounds((pool or {}).get("spec", {}).get("limits") or {}, g.hardware.machine)
        if g.kind in ("eks", "asg"):
            asg = moto_state.find_asg(loc["region"], world.asg_names[g.name])
            tags = {t.get("Key", t.get("key")) for t in (asg.tags if asg is not None else [])}
            return (int(asg.min_size), int(asg.max_size)) if asg is not None and CA_ENABLED_TAG in tags else None
        if g.kind == "gke":
            auto = world.gcp.node_pool(loc["project"], loc["location"], loc["cluster"], loc["nodePool"]).autoscaling
            on = auto is not None and auto.enabled
            return (auto.min_node_count * zones(g), auto.max_node_count * zones(g)) if auto and on else None
        pool = world.azure.agent_pool(loc["subscription"], loc["resourceGroup"], loc["cluster"], loc["agentPool"])
        if not pool.enable_auto_scaling or pool.power_state != "Running":
            return None
        return pool.min_count or 0, pool.max_count or 0

    def scale(self, group: str, nodes: int) -> None:
        g, world = self.world.fleet.group(group), self.world
        loc = g.locator
        if g.kind == "karpenter":
            return  # Karpenter writes NodeClaims, not a size: the mirror makes and deletes them
        if g.kind in ("eks", "asg"):
            asg = moto_state.find_asg(loc["region"], world.asg_names[g.name])
            assert asg is not None
            asg.set_desired_capacity(nodes)
        elif g.kind == "gke":
            world.gcp.autoscale(loc["project"], loc["location"], loc["cluster"], loc["nodePool"], nodes // zones(g))
        else:
            world.azure.autoscale(loc["subscription"], loc["resourceGroup"], loc["cluster"], loc["agentPool"], nodes)


def scheduled(fleet: Fleet, view: ResolvedPolicy) -> list[Group]:
    """The groups a strategy can change: the managed ones but the policy's ``alwaysOn`` group (production serving, the
    same in every column, as the unmanaged ones: left out of the figures)."""
    return [g for g in managed(fleet) if not view.group(g.name).group.always_on]


def new_model(fleet: Fleet, view: ResolvedPolicy, jobs: tuple[Job, ...], start: datetime, cloud: Cloud) -> Model:
    """The scheduled groups at their working size (ready at ``start``) and the week's jobs, none submitted yet;
    ``cloud`` is what their autoscalers see and write."""
    groups: dict[str, GroupModel] = {}
    by_name = {g.name: g for g in fleet.groups}
    for g in scheduled(fleet, view):
        rg = view.group(g.name)

        def working(at: datetime, rg: Any = rg) -> bool:
            desired = rg.schedule.desired(at, timedelta(days=1))
            return bool(desired.state == "up" and not desired.reason.startswith("warming up"))

        pool = g.kind == "karpenter"
        groups[g.name] = GroupModel(
            g.name,
            g.cluster,
            g.hardware.gpus,
            working,
            boot=SLOW_BOOT.get(g.name, timedelta(minutes=10)),
            per_step=zones(g),
            unneeded=CONSOLIDATE_AFTER if pool else SCALE_DOWN_UNNEEDED,
            delay_after_add=timedelta(0) if pool else SCALE_DOWN_DELAY_AFTER_ADD,
        )
    model = Model(groups, jobs, lambda gm, i: _node_name(by_name[gm.name], i), cloud)
    for name in groups:
        model.seed_nodes(name, by_name[name].nodes, start)
    return model


@dataclass
class AlwaysOn:
    fleet: Fleet
    name: str = "always-on"
    cloud: FleetCloud = field(init=False)

    def __post_init__(self) -> None:
        self.cloud = FleetCloud(self.fleet)

    def before(self, model: Model, at: datetime) -> None:
        return None  # nothing sizes the groups but their autoscalers

    def after(self, model: Model, at: datetime) -> None:
        return None

    def api_calls(self) -> dict[str, int]:
        return {"aws": 0, "gcp": 0, "azure": 0}


@dataclass
class Naive:
    fleet: Fleet
    view: ResolvedPolicy
    name: str = "naive"
    calls: dict[str, int] = field(default_factory=lambda: {"aws": 0, "gcp": 0, "azure": 0, "kube": 0})
    cloud: FleetCloud = field(init=False)
    _night: bool | None = None

    def __post_init__(self) -> None:
        self.cloud = FleetCloud(self.fleet)

    def before(self, model: Model, at: datetime) -> None:
        local = at.astimezone(self.view.groups[0].schedule.tz)
        night = local.hour >= 20 or local.hour < 8
        if night == self._night:
            return
        self._night = night
        for g in scheduled(self.fleet, self.view):
            if night:
                self.cloud.off.add(g.name)
            else:
                self.cloud.off.discard(g.name)
            # A Karpenter pool's working size is none: its nodes come with pods.
            model.resize(g.name, 0 if night or g.kind == "karpenter" else g.nodes, at)
            self.calls[CLOUD_OF[g.kind]] += NAIVE_WRITES[g.kind][0 if night else 1]

    def after(self, model: Model, at: datetime) -> None:
        return None

    def api_calls(self) -> dict[str, int]:
        return dict(self.calls)


@dataclass
class SweepRuns:
    """What the week's sweep runs did: runs made and skipped (where they could find nothing idle), their wall time,
    the kube API calls made while they ran and the Prometheus queries, pods marked, unmarked (busy again) and acted
    on (deleted), by name and reason."""

    runs: int = 0
    skipped: int = 0
    failed_runs: int = 0  # no report (exit 2 or 3, a crash)
    failed_items: int = 0
    seconds: float = 0.0
    kube_calls: int = 0
    #: Instant queries the week's Prometheus answered (its own ``prometheus_http_requests_total``): the sweep's.
    queries: int = 0
    marked: int = 0
    unmarked: int = 0
    acted: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # pod acted on -> its idle reason (idle, leaked-memory)

    #: The product's ``gpu-jobs report`` for the week: its ``sweep`` section (None: no report read).
    reported: dict[str, Any] | None = None
    #: Seconds to write the week's DCGM series and start Prometheus over them.
    prometheus_s: float = 0.0

    def as_json(self, always_on: Figures, product: Figures) -> dict[str, Any]:
        """The runs, and the GPU-hours the idle and leaked pods held (the simulator's truth: busy minus work) under
        always-on and gpu-jobs beside what the product's report says it reclaimed."""
        return {
            "runs": self.runs,
            "runsSkipped": self.skipped,
            "failedToRun": self.failed_runs,
            "failedItems": self.failed_items,
            "runSeconds": round(self.seconds, 1),
            "apiCalls": {"kube": self.kube_calls, "prometheus": self.queries},
            "marked": self.marked,
            "unmarked": self.unmarked,
            "deleted": sorted(self.acted),
            "idleReasons": dict(sorted(self.reasons.items())),
            "idlePodGpuHours": {
                "always-on": round(always_on.busy - always_on.work, 2),
                "gpu-jobs": round(product.busy - product.work, 2),
            },
            "report": self.reported,
            "prometheusSeconds": round(self.prometheus_s, 1),
        }

    @staticmethod
    def lines(doc: dict[str, Any]) -> list[str]:
        """The text lines of :meth:`as_json`."""
        calls = ", ".join(f"{k} {v}" for k, v in sorted(doc["apiCalls"].items())) or "none"
        held = doc["idlePodGpuHours"]
        reported = doc["report"]
        deleted = ", ".join(f"{name}: {doc['idleReasons'].get(name)}" for name in doc["deleted"])
        said = (
            f"{reported.get('podsActedOn')} pods acted on, at least {reported.get('idleGpuHoursReclaimed')} idle"
            " GPU-hours ended"
            if reported
            else "n/a (no report read)"
        )
        return [
            "",
            f"sweep (sweep --part pods per cluster every 15 min, live): {doc['runs']} runs, {doc['runsSkipped']}"
            f" skipped where it could find nothing idle; {doc['failedItems']} failed items,"
            f" {doc['failedToRun']} failed to run; {doc['runSeconds']:.0f} s; API calls: {calls}",
            f"  marked {doc['marked']}, deleted {len(doc['deleted'])} ({deleted or 'none'}),"
            f" busy again {doc['unmarked']}; DCGM series written and Prometheus ready in {doc['prometheusSeconds']:.0f} s",
            f"  GPU-hours held by the idle and leaked pods: always-on {held['always-on']}, gpu-jobs {held['gpu-jobs']}"
            " (simulator)",
            f"  gpu-jobs report, sweep: {said}",
        ]


@dataclass
class GpuJobs:
    """The real ``nodegroups`` job per cluster against ``world``, and its ``sweep --part pods`` every 15 minutes.
    ``every_step``: every cluster's nodegroups job at every step and its sweep at every tick, as the CronJobs run.
    Otherwise a cluster's nodegroups job is skipped at a step where none of its inputs moved (no schedule change of
    its groups since the step before, no group with nodes that its schedule wants down, none up without nodes and
    without an autoscaler to bring them, no node or pod of the cluster started, ended or moved): a level-triggered
    job plans nothing there; and its sweep where it could find nothing idle
    (:meth:`_sweep_due`). A skipped run is counted as such."""

    world: World
    view: ResolvedPolicy
    step: timedelta
    every_step: bool = False
    name: str = "gpu-jobs"
    runs: int = 0
    skipped: int = 0
    failed_runs: int = 0  # runs that printed no report (exit 2 or 3, a crash)
    runs_with_failed_items: int = 0  # exit 1: the run went through, some item failed (its reasons below)
    failed_items: dict[str, int] = field(default_factory=dict)  # "group: reason" -> how many runs said it
    run_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    sweep: SweepRuns = field(default_factory=SweepRuns)
    #: Each week pod's DCGM series, (since, until] (:func:`tests.sandbox.week.dcgm.series`): where the sweep can skip.
    series: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)
    _pods: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # pod -> (cluster, node or None)
    _claims: dict[str, dict[str, str]] = field(default_factory=dict)  # Karpenter pool -> its node -> its NodeClaim
    _nodes: dict[str, set[str]] = field(default_factory=dict)  # group -> its Node objects in its cluster
    _changed: set[str] = field(default_factory=set)  # clusters whose pods or nodes moved since their last run
    _calls0: dict[str, int] = field(default_factory=dict)
    cloud: WorldCloud = field(init=False)

    def __post_init__(self) -> None:
        world = self.world
        self.cloud = WorldCloud(world)
        for kube in world.kubes.values():
            kube.cluster.pod_stop_s = 0.0  # an evicted pod's container exits at once: no real 30 s grace
            kube.create(seed.namespace(NAMESPACE, {"team": NAMESPACE}))
        # A clean slate on the GPU groups: the sandbox's own story pods go with their Deployments, ReplicaSets and
        # StatefulSets (whose controllers would start them again on any node with free GPUs, the week's included),
        # and the week's pods are the workload. The unmanaged groups' too: they have no DCGM series in the week, and
        # a cluster whose running GPU pods have none is one the sweep refuses to judge.
        for g in world.fleet.groups:
            if not g.hardware.gpus:
                continue
            kube = world.kubes[g.cluster]
            names = {n["metadata"]["name"] for n in world.nodes_of(g)}
            if g in managed(world.fleet):
                self._nodes[g.name] = names
            pods = [p for p in kube.list("Pod") if p["spec"].get("nodeName") in names]
            for kind, name, namespace in sorted({o for p in pods for o in _controllers(kube, p)}):
                with contextlib.suppress(Exception):
                    kube.cluster.delete(kind, name, namespace)
            for pod in pods:
                with contextlib.suppress(Exception):
                    kube.cluster.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        # The week's model is each Karpenter pool's Karpenter from now on (launch, registration, consolidation, the
        # end of a claim someone deleted): the emulator's own, on the wall clock, stops.
        for g in world.fleet.groups:
            if g.kind == "karpenter" and g.name in world.karpenters:
                world.karpenters[g.name].detach()
                claims = self._claims.setdefault(g.name, {})
                for claim in world.karpenters[g.name].claims(g.locator["nodePool"]):
                    node = (claim.get("status") or {}).get("nodeName")
                    if node:
                        claims[node] = claim["metadata"]["name"]
        self._changed = {c.name for c in world.policy.fleet}
        self._calls0 = self._calls()

    def _calls(self) -> dict[str, int]:
        logs = self.world.logs()
        found = {k: len(v.reads()) + len(v.writes()) for k, v in logs.items() if not k.startswith("kube:")}
        found["kube"] = sum(len(v.reads()) + len(v.writes()) for k, v in logs.items() if k.startswith("kube:"))
        return found

    def api_calls(self) -> dict[str, int]:
        now = self._calls()
        return {k: now[k] - self._calls0.get(k, 0) for k in now}

    # --- the jobs -----------------------------------------------------------------------------------------------

    def _due(self, cluster: str, at: datetime) -> bool:
        if self.every_step or cluster in self._changed:
            return True
        for g in managed(self.world.fleet):
            if g.cluster != cluster:
                continue
            schedule = self.view.group(g.name).schedule
            now, before = schedule.desired(at), schedule.desired(at - self.step)
            live = self.world.live_nodes(g)
            if now.state != before.state or (now.state != "up" and live > 0):
                return True
            # Up and empty: the job acts unless the group's autoscaler is on (then the size is the autoscaler's).
            if now.state == "up" and live == 0 and self.cloud.bounds(g.name) is None:
                return True
        return False

    def _run(self, cluster: str, at: datetime) -> tuple[str, int, str, str]:
        env = {**child_env(self.world), "KUBECONFIG": str(self.world.kubeconfig_for(cluster))}
        argv = [*GPU_JOBS, "nodegroups", "--cluster", cluster, "--at", at.isoformat(), "--output", "json"]
        done = forkserver.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
        return cluster, done.returncode, done.stdout, done.stderr

    def before(self, model: Model, at: datetime) -> None:
        clusters = [c.name for c in self.world.policy.fleet]
        due = [c for c in clusters if self._due(c, at)]
        self.skipped += len(clusters) - len(due)
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, len(due))) as pool:
            for cluster, code, stdout, stderr in pool.map(lambda c: self._run(c, at), due):
                self.runs += 1
                self._changed.discard(cluster)
                if code == 1:
                    self.runs_with_failed_items += 1
                    self._note_failed(stdout)
                if code not in (0, 1):
                    self.failed_runs += 1
                    self.errors.append(f"{at.isoformat()} {cluster}: exit {code}: {stderr.strip()[-300:]}")
        self.run_seconds += time.perf_counter() - began
        self._sweep(model, at)
        # Pods the job evicted (a drain) are gone from their cluster: interrupted by the product.
        present = {(c, p["metadata"]["name"]) for c, k in self.world.kubes.items() for p in k.list("Pod", NAMESPACE)}
        for name, (cluster, node) in list(self._pods.items()):
            if node is not None and (cluster, name) not in present:
                pod = model.pods.get(name)
                if pod is not None and pod.state == "running":
                    model.interrupt(pod)
                del self._pods[name]
        for name in model.groups:
            group = self.world.fleet.group(name)
            if group.kind == "karpenter":
                model.remove(name, self._claims_gone(group))
            else:
                model.resize(name, self.world.live_nodes(group), at)

    # --- the sweep ---------------------------------------------------------------------------------------------

    def _sweep(self, model: Model, at: datetime) -> None:
        """The sweep-pods CronJob of every cluster, at each of its ticks in ``(at - step, at]``, where it could find
        something idle (:meth:`_sweep_due`; ``every_step``: at every tick); a pod it deleted is done in the model."""
        ticks = sweep_ticks(at - self.step, at)
        if not ticks:
            return
        tick = ticks[-1]  # two ticks in one step (a step over 15 min): the CronJob's late run catches up once
        clusters = [c.name for c in self.world.policy.fleet]
        due = [c for c in clusters if self._sweep_due(c, tick, model)]
        self.sweep.skipped += len(clusters) - len(due)
        if not due:
            return
        calls, began = self._kube_calls(), time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(due)) as pool:
            done = list(pool.map(lambda c: self._run_sweep(c, tick), due))
        self.sweep.seconds += time.perf_counter() - began
        self.sweep.kube_calls += self._kube_calls() - calls  # the pods part calls no cloud
        for cluster, code, stdout, stderr in done:
            self.sweep.runs += 1
            if code not in (0, 1):
                self.sweep.failed_runs += 1
                self.errors.append(f"{tick.isoformat()} sweep {cluster}: exit {code}: {stderr.strip()[-300:]}")
            for item in _items(stdout):
                self._note_sweep_item(model, cluster, item)

    def _sweep_due(self, cluster: str, tick: datetime, model: Model) -> bool:
        """Whether the cluster's sweep at ``tick`` could find anything idle. Not when every Running GPU pod there is
        younger than the window (never judged) or a busy pod of the week whose series cover the whole window (judged
        busy: the series are the truth, written from the pods' profiles): that run marks, deletes and refuses
        nothing, as a nodegroups run with no input moved plans nothing; it is counted as skipped."""
        idle = self.world.policy.sweep.idle_pods if self.world.policy.sweep is not None else None
        if self.every_step or idle is None:
            return idle is not None
        for pod in self.world.kubes[cluster].list("Pod"):
            if not _running_gpu(pod):
                continue
            started = pod.get("status", {}).get("startTime")
            if started and datetime.fromisoformat(started) > tick - idle.window_td:
                continue  # young: too little data, never judged
            name, known = pod["metadata"]["name"], model.pods.get(pod["metadata"]["name"])
            since, until = self.series.get(name, (tick, tick))
            busy = known is not None and known.job.profile == "busy" and pod["metadata"]["namespace"] == NAMESPACE
            if not (busy and since <= tick - idle.window_td and until >= tick):
                return True
        return False

    def _kube_calls(self) -> int:
        return sum(len(log.all()) for name, log in self.world.logs().items() if name.startswith("kube:"))

    def _run_sweep(self, cluster: str, at: datetime) -> tuple[str, int, str, str]:
        # Live, as kustomize/components/sweep-live turns the shipped dry-run CronJob (GPU_JOBS_DRY_RUN=false).
        env = {
            **child_env(self.world),
            "KUBECONFIG": str(self.world.kubeconfig_for(cluster)),
            "GPU_JOBS_DRY_RUN": "false",
        }
        argv = [*GPU_JOBS, "sweep", "--part", "pods", "--cluster", cluster, "--at", at.isoformat(), "--output", "json"]
        done = forkserver.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
        return cluster, done.returncode, done.stdout, done.stderr

    def _note_sweep_item(self, model: Model, cluster: str, item: dict[str, Any]) -> None:
        # One envelope item: kind, name, status, reason and the pod's detail (state, action, namespace, pod...).
        if item.get("status") == "failed":
            key = f"sweep {item.get('name')}: {str(item.get('reason', '')).split(':')[0][:120]}"
            self.failed_items[key] = self.failed_items.get(key, 0) + 1
            self.sweep.failed_items += 1
        if item.get("kind") != "pod" or item.get("status") != "applied":
            return
        state = item.get("state")
        if state == "marked":
            self.sweep.marked += 1
        elif state == "unmarked":
            self.sweep.unmarked += 1
        elif state == "acted":
            name = str(item.get("pod"))
            self.sweep.acted.append(name)
            self.sweep.reasons[name] = str(item.get("idleReason"))
            pod = model.pods.get(name)
            if item.get("namespace") == NAMESPACE and pod is not None and pod.state == "running":
                model.finish(pod)  # deleted: a bare pod is gone for good
                self._pods.pop(name, None)
                self._changed.add(cluster)

    def _note_failed(self, stdout: str) -> None:
        try:
            items = json.loads(stdout).get("items", [])
        except ValueError:
            return
        for item in items:
            if item.get("status") == "failed":
                # Times and pod names vary run to run: the reason's first clause is what repeats.
                key = f"{item.get('name')}: {str(item.get('reason', '')).split(':')[0][:120]}"
                self.failed_items[key] = self.failed_items.get(key, 0) + 1

    # --- the mirror: what each cluster's API shows of the model ----------------------------------------------

    def _claims_gone(self, group: Group) -> set[str]:
        """The pool's nodes whose NodeClaim the product deleted: Karpenter's termination ends them now (claim and
        node gone; the model interrupts what ran there)."""
        cluster, claims = self.world.kubes[group.cluster].cluster, self._claims.setdefault(group.name, {})
        gone = set()
        for node, name in list(claims.items()):
            claim = cluster.get("nodeclaims", name, api_version=karpenter.API_VERSION)
            if claim is None or claim["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(Exception):
                    cluster.delete("nodeclaims", name, api_version=karpenter.API_VERSION)
                gone.add(node)
                del claims[node]
                self._changed.add(group.cluster)
        return gone

    def _mirror_claims(self, gm: GroupModel, group: Group, at: datetime) -> None:
        """A NodeClaim per node of the pool's model from its launch, registered (``status.nodeName``) once Ready;
        the claim of a node the model consolidated away is deleted, as Karpenter does."""
        pool, claims = self.world.karpenters[group.name], self._claims.setdefault(group.name, {})
        cluster = pool.cluster
        for node in gm.nodes:
            if node.name not in claims:
                launched = pool.seed_claim(group.locator["nodePool"], group.hardware.machine, registered=False)
                claims[node.name] = launched["metadata"]["name"]
                self._changed.add(group.cluster)
            claim = cluster.get("nodeclaims", claims[node.name], api_version=karpenter.API_VERSION)
            if claim is not None and node.ready <= at and not (claim.get("status") or {}).get("nodeName"):
                pool.register(claim, node.name)
        kept = {n.name for n in gm.nodes}
        for node in [n for n in claims if n not in kept]:
            with contextlib.suppress(Exception):
                cluster.delete("nodeclaims", claims[node], api_version=karpenter.API_VERSION)
            del claims[node]
            self._changed.add(group.cluster)

    def after(self, model: Model, at: datetime) -> None:
        world = self.world
        by_name = {g.name: g for g in world.fleet.groups}
        for gm in model.groups.values():
            kube, group = world.kubes[gm.cluster], by_name[gm.name]
            if group.kind == "karpenter":
                self._mirror_claims(gm, group, at)
            ready = {n.name for n in gm.nodes if n.ready <= at}
            known = self._nodes.setdefault(gm.name, set())
            for name in sorted(ready - known):
                kube.create(_node(group, name))
                self._changed.add(gm.cluster)
            for name in known - ready:
                with contextlib.suppress(Exception):
                    kube.cluster.delete("Node", name)
                self._changed.add(gm.cluster)
            self._nodes[gm.name] = ready
        for pod in model.pods.values():
            cluster = model.groups[pod.job.group].cluster
            kube = world.kubes[cluster]
            want = pod.node if pod.state == "running" else None
            had = self._pods.get(pod.name)
            if pod.state == "done":
                if had is not None:
                    with contextlib.suppress(Exception):
                        kube.cluster.delete("Pod", pod.name, NAMESPACE)
                    del self._pods[pod.name]
                    self._changed.add(cluster)
                continue
            if had is not None and had[1] == want:
                continue
            if had is not None:
                with contextlib.suppress(Exception):
                    kube.cluster.delete("Pod", pod.name, NAMESPACE)
            manifest = seed.gpu_pod(
                pod.name,
                NAMESPACE,
                want,
                pod.job.gpus,
                labels={"app": pod.job.kind, GROUP_LABEL: _label_value(pod.job.group)},
                phase="Running" if want else "Pending",
                created=pod.started or pod.job.submit,
                started=pod.started,
                grace_s=0,
            )
            # The pod asks for its group's nodes, as a person's manifest does: what tells a wake which group it needs.
            selector = self.view.group(pod.job.group).node_selector
            if selector:
                manifest["spec"]["nodeSelector"] = dict(selector)
            kube.create(manifest)
            self._pods[pod.name] = (cluster, want)
            self._changed.add(cluster)


def sweep_ticks(after: datetime, until: datetime) -> list[datetime]:
    """The sweep CronJob's instants in ``(after, until]``: every quarter-hour, UTC."""
    every = SWEEP_EVERY // timedelta(seconds=1)
    first = (int(after.timestamp()) // every + 1) * every
    return [datetime.fromtimestamp(t, after.tzinfo) for t in range(first, int(until.timestamp()) + 1, every)]


def _controllers(kube: Any, pod: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(kind, name, namespace) of the pod's controllers: its StatefulSet, or its ReplicaSet and that one's
    Deployment."""
    namespace = pod["metadata"]["namespace"]
    found: set[tuple[str, str, str]] = set()
    for ref in pod["metadata"].get("ownerReferences") or ():
        found.add((ref["kind"], ref["name"], namespace))
        owner = kube.get(ref["kind"], ref["name"], namespace) if ref["kind"] == "ReplicaSet" else None
        for up in (owner or {}).get("metadata", {}).get("ownerReferences") or ():
            found.add((up["kind"], up["name"], namespace))
    return found


def _running_gpu(pod: dict[str, Any]) -> bool:
    if pod.get("status", {}).get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    limits = [c.get("resources", {}).get("limits", {}) for c in pod["spec"].get("containers", [])]
    return any(k.endswith("gpu") or k.startswith("nvidia.com/") for lim in limits for k in lim)


def _items(stdout: str) -> list[dict[str, Any]]:
    """The items of a run's JSON report (the last line holding one), or none."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return [i for i in doc.get("items", []) if isinstance(i, dict)]
    return []


def gpu_jobs_strategy(world: World, step: timedelta, every_step: bool) -> GpuJobs:
    return GpuJobs(world, view_of(world.policy), step, every_step)
