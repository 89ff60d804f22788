"""The sandbox world: every emulator in one process on 127.0.0.1, seeded with the sample fleet.

``World.start()`` runs one Kubernetes API emulator per cluster of the policy (each holding only that cluster's
nodes and pods, as a real fleet does) and writes one kubeconfig with a context per cluster, named after it; AWS
(moto + extras), GCP, Azure and a real Prometheus (DCGM series of the fleet's pods), all on ephemeral ports, seeded
from :mod:`tests.sandbox.fleet`. ``world.env()`` is what a ``gpu-jobs`` or ``kubectl`` subprocess needs (a central
install: every context); :meth:`World.kubeconfig_for` is what a per-cluster install sees (one current context).

Each cluster gets the install its GitOps tool would sync (its cloud's overlay, told the cluster's name), applied
with the real kubectl (:mod:`tests.sandbox.install`): namespace ``gpu-jobs``, ServiceAccounts, RBAC, the policy
ConfigMap, the CronJobs. A job executor (:mod:`tests.sandbox.executor`) runs the Jobs created there
(``kubectl create job --from=cronjob/...``) as local processes with their ServiceAccount's RBAC.

A small reconciler (:meth:`World.sync_nodes`, run by a background thread) keeps each cluster's Node objects in
step with the emulated clouds' live sizes, as the cloud controllers would: when a group goes to zero its nodes
(and the pods still bound to them) disappear; when it comes back, fresh nodes join. It works in-process on the
emulators' state, so it never shows up in their request logs. It keeps GKE nodes' Compute Engine instances in
step too (the GCP emulator's node pools have none of their own): the sweep sees them as the pools' members.

The sweep's data (:func:`_workloads`): the real Prometheus holds every cluster's DCGM series labelled
``cluster=<name>`` (one shared Thanos in the policy; ``GPU_JOBS_PROMETHEUS_URL`` points every cluster at it, the
matchers pick each one's), one series set per GPU of every node: a pod's GPUs with its labels, in the shape of its
cluster's scrape (:data:`SHAPES`), and every GPU no pod holds with none (unallocated). Pods' ``status.startTime``
matches their series: they start where the data starts (:data:`DCGM_WINDOW` before the sandbox's start), a young
one later.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import yaml

from jobs.core.policy import Policy
from jobs.labels import KEEP_ALIVE_UNTIL_ANNOTATION
from jobs.policy_file import load_policy
from tests.emulators.kube import seed
from tests.emulators.kube.cluster import timestamp
from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.sandbox import install as installer
from tests.sandbox.executor import JobExecutor
from tests.sandbox.fleet import CLOUD_QUOTAS, FINISHED, JOB_NAMESPACE, SNOOZE, Fleet, Group, Hardware, Pod, build_fleet
from tests.sandbox.karpenter_world import adopt_nodes

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator
    from tests.emulators.azure.emulator import AzureEmulator
    from tests.emulators.base import RequestLog
    from tests.emulators.gcp.emulator import GcpEmulator
    from tests.emulators.prometheus.pushgateway import PushgatewayServer
    from tests.emulators.prometheus.server import PrometheusServer
    from tests.emulators.webhook.receiver import WebhookReceiver

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "gitops" / "policy.yaml"
#: Which fleet group a node belongs to (label values cannot hold "/": eks/x becomes eks.x).
GROUP_LABEL = "sandbox.gpu-jobs.dev/group"
SYNC_INTERVAL_S = 0.2
#: How far back the DCGM series go. The demo's sweep marks at ``start - 31m`` and acts at ``start``: its 2 h window
#: at the first instant reaches back to ``start - 2h31m``; 3 h covers it (every query inside the data, none after it).
DCGM_WINDOW = timedelta(hours=3)
#: The sandbox's notifications (docs/people.md): to its own webhook receiver, whose URL is the Secret seeded in each
#: cluster's gpu-jobs namespace; each namespace's owner is its ``team`` label. Added to the sandbox's copy of a policy
#: that has no ``notify`` of its own (the shipped example does not: an install without the Secret would say so).
SANDBOX_NOTIFY = "notify:\n  webhook: {secretRef: {name: gpu-jobs-notify, key: url}}\n  owner: {namespaceLabel: team}\n"


@dataclass(frozen=True)
class Shape:
    """How a cluster's Prometheus scrape shapes the DCGM labels."""

    exported_labels: bool = False  # a ServiceMonitor without honorLabels: exported_pod, exported_namespace...
    old_labels: bool = False  # an old exporter: pod_name / pod_namespace / container_name
    hostname_label: Literal["Hostname", "hostname"] = "Hostname"


#: Clusters not named: ``pod``/``namespace`` (honorLabels), ``Hostname``. The GKE clusters scrape through a
#: ServiceMonitor without honorLabels (and their GPUs no pod holds carry the exporter's own pod labels); aks-ml runs an
#: old exporter, its ``hostname`` relabelled.
SHAPES: dict[str, Shape] = {
    "research": Shape(exported_labels=True),
    "notebooks": Shape(exported_labels=True),
    "aks-ml": Shape(old_labels=True, hostname_label="hostname"),
}
MIG_RESOURCE = "nvidia.com/mig-{profile}"
#: Framebuffer sizes by model (MiB), as dcgm-exporter reports FB_USED + FB_FREE.
MEMORY_MIB = {"NVIDIA A100-SXM4-80GB": 81920, "NVIDIA H100 80GB HBM3": 81559, "NVIDIA L4": 23034}
MEMORY_MIB |= {"Tesla T4": 15360, "NVIDIA A10G": 23028}
MIG_MEMORY_MIB = {"1g.10gb": 9856}
log = logging.getLogger(__name__)


def _label_value(group: str) -> str:
    return group.replace("/", ".")


def _suffix(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Placement:
    """Which node runs a pod (one replica), and which GPUs it holds there (for the DCGM series): GPU indexes, the
    MIG instance ids of its slices (GPU 0), or the time-sliced copy it gets (``vgpu``) of one shared GPU."""

    node: str
    gpus: tuple[int, ...]
    slices: tuple[int, ...] = ()
    vgpu: int | None = None


@dataclass(frozen=True)
class Seat:
    """One pod placed and seeded: its fleet entry, its actual name (a Deployment's pods get generated names)."""

    pod: Pod
    name: str
    cluster: str
    placement: Placement


@dataclass
class World:
    policy_path: Path
    policy: Policy
    fleet: Fleet
    workdir: Path
    kubes: dict[str, KubeHandle]  # cluster name -> its Kubernetes API
    aws: AwsEmulator
    gcp: GcpEmulator
    azure: AzureEmulator
    prometheus: PrometheusServer | None
    placements: dict[tuple[str, str], list[Placement]] = field(default_factory=dict)
    #: Every seeded pod (a Deployment's replicas one by one) with its name: what the DCGM series describe.
    seats: tuple[Seat, ...] = ()
    #: The instant the DCGM series end: the sandbox's start.
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    asg_names: dict[str, str] = field(default_factory=dict)  # group -> the ASG holding its instances
    karpenters: dict[str, Any] = field(default_factory=dict)  # group -> the Karpenter model of its NodePool
    _serial: dict[str, int] = field(default_factory=dict)  # group -> next node index
    _nodes: dict[str, list[str]] = field(default_factory=dict)  # group -> its Node names, oldest first
    _sync_lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _sync_thread: threading.Thread | None = None
    _own_workdir: bool = False
    #: What ``kubectl apply`` printed for each cluster's install.
    installed: dict[str, str] = field(default_factory=dict)
    executor: JobExecutor | None = None
    #: The webhook the sandbox's notifications go to: every message it accepted is in ``webhook.received()``.
    webhook: WebhookReceiver | None = None
    #: The real Pushgateway the jobs push their gauges to, scraped by ``prometheus`` (None without Prometheus).
    pushgateway: PushgatewayServer | None = None

    # --- lifecycle -----------------------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        policy_path: Path | str = DEFAULT_POLICY,
        workdir: Path | str | None = None,
        *,
        prometheus: bool = True,
        sync: bool = True,
        install: bool = True,
    ) -> World:
        """Start and seed everything; on any failure, stop what was already started and re-raise."""
        # Heavy SDK imports only here: importing this module (e.g. for its constants) stays cheap.
        from tests.emulators.aws.emulator import start_aws
        from tests.emulators.azure.emulator import start_azure_emulator
        from tests.emulators.gcp.emulator import start_gcp
        from tests.emulators.prometheus.pushgateway import start_pushgateway
        from tests.emulators.prometheus.server import start_prometheus
        from tests.emulators.webhook.receiver import start_receiver

        path = Path(policy_path).resolve()
        policy = load_policy(path)
        own = workdir is None
        work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gpu-jobs-sandbox-"))
        work.mkdir(parents=True, exist_ok=True)
        if policy.notify is None:  # the sandbox's own copy, notifying its receiver
            path = work / "policy.yaml"
            path.write_text(Path(policy_path).resolve().read_text().rstrip("\n") + "\n" + SANDBOX_NOTIFY)
            policy = load_policy(path)
        fleet = build_fleet(policy)
        nodes, placements = _layout(fleet)
        now = datetime.now(UTC)
        started: list[Callable[[], None]] = []
        try:
            with ThreadPoolExecutor(max_workers=5) as pool:
                # moto's warm-up takes the longest: the clouds start while the clusters are seeded, and Prometheus
                # once the pods have their names (a Deployment's are generated), its series describing those pods.
                aws_f = pool.submit(start_aws, 0, "eu-west-1")
                # 10 ms between ARM long-running-operation polls (real ARM says 1 s+): the demo stays fast.
                azure_f = pool.submit(start_azure_emulator, 0, retry_after_s=0.01)
                gcp_f = pool.submit(start_gcp, 0)
                kubes: dict[str, KubeHandle] = {}
                prom = None
                gateway = None
                try:
                    if prometheus:  # the jobs push their gauges to it (jobs/metrics.py); Prometheus scrapes it
                        gateway = start_pushgateway()
                        started.append(gateway.stop)
                    for cluster in policy.fleet:
                        kubes[cluster.name] = start_kube(work / "clusters" / cluster.name / "kubeconfig")
                        started.append(kubes[cluster.name].stop)
                    seats = _seed_kube(kubes, fleet, nodes, placements, now)
                    if prometheus:
                        workloads = _workloads(fleet, nodes, seats)
                        scrape = [gateway.address] if gateway is not None else []
                        prom = pool.submit(start_prometheus, workloads, now, window=DCGM_WINDOW, scrape=scrape)
                finally:  # whatever failed, what did start is stopped below
                    for future in (aws_f, azure_f, gcp_f):
                        with contextlib.suppress(BaseException):
                            started.append(future.result().stop)
                # Prometheus backfills and starts (~2 s) while the clouds are seeded and the clusters installed: it
                # is only needed by the jobs' environment, the executor's included.
                try:
                    aws, azure, gcp = aws_f.result(), azure_f.result(), gcp_f.result()
                    world = cls(
                        path,
                        policy,
                        fleet,
                        work,
                        kubes,
                        aws,
                        gcp,
                        azure,
                        None,
                        placements,
                        seats,
                        now,
                        _own_workdir=own,
                    )
                    world.webhook = start_receiver()
                    started.append(world.webhook.stop)
                    world.pushgateway = gateway
                    world._write_kubeconfigs()
                    world._seed(nodes)
                    world._seed_notify_secret()
                    if install:
                        world.install()
                finally:
                    if prom is not None:
                        with contextlib.suppress(BaseException):
                            started.append(prom.result().stop)
                world.prometheus = prom.result() if prom else None
            if install:
                world.executor = JobExecutor(world.kubes, world.cloud_env(), work).start()
        except BaseException:
            for stop in reversed(started):
                with contextlib.suppress(Exception):
                    stop()
            if own:
                shutil.rmtree(work, ignore_errors=True)
            raise
        if sync:
            world._sync_thread = threading.Thread(target=world._sync_loop, name="sandbox-node-sync", daemon=True)
            world._sync_thread.start()
        return world

    def stop(self) -> None:
        """Stop everything this world started (idempotent)."""
        self._stop.set()
        if self.executor is not None:
            self.executor.stop()
            self.executor = None
        if self._sync_thread is not None:
            self._sync_thread.join(timeout=5)
            self._sync_thread = None
        for stop in (*(k.stop for k in self.kubes.values()), self.aws.stop, self.gcp.stop, self.azure.stop):
            with contextlib.suppress(Exception):
                stop()
        if self.prometheus is not None:
            self.prometheus.stop()
        if self.webhook is not None:
            self.webhook.stop()
        if self.pushgateway is not None:
            self.pushgateway.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> World:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- what clients need -----------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """One context per cluster, named as the policy's ``kubeContext`` (or the cluster's name)."""
        return self.workdir / "kubeconfig"

    def kubeconfig_for(self, cluster: str, *, reaching: str | None = None) -> Path:
        """What a per-cluster install sees: one context, named after ``cluster``, current. ``reaching`` points it at
        another cluster's API instead: the misconfiguration the nodegroups job's safety invariant must catch."""
        target = reaching or cluster
        path = self.workdir / "clusters" / target / f"as-{cluster}.kubeconfig"
        if not path.exists():
            write_kubeconfig(path, {self._context(cluster): self.kubes[target]}, current=self._context(cluster))
        return path

    def _context(self, cluster: str) -> str:
        return self.policy.cluster(cluster).kube_context or cluster

    def _write_kubeconfigs(self) -> None:
        contexts = {self._context(name): kube for name, kube in self.kubes.items()}
        write_kubeconfig(self.kubeconfig, contexts, current=next(iter(contexts), None))

    def kube(self, cluster: str) -> KubeHandle:
        return self.kubes[cluster]

    def env(self) -> dict[str, str]:
        """Every variable a ``gpu-jobs`` subprocess (and ``kubectl``) needs to reach this world."""
        variables = {
            "KUBECONFIG": str(self.kubeconfig),
            **self.aws.env("eu-west-1"),
            **self.gcp.env(),
            **self.azure.env(),
            "GPU_JOBS_POLICY": str(self.policy_path),
            "GPU_JOBS_NAMESPACE": JOB_NAMESPACE,
            "GPU_JOBS_POLL_INTERVAL": "0.05",
        }
        if self.prometheus is not None:
            variables["GPU_JOBS_PROMETHEUS_URL"] = self.prometheus.url
        if self.pushgateway is not None:
            variables["GPU_JOBS_PUSHGATEWAY_URL"] = self.pushgateway.url
        return variables

    def cloud_env(self) -> dict[str, str]:
        """What a Job's pod gets from the sandbox: the clouds' endpoints and credentials, not the fleet's kubeconfig
        nor the policy file (a pod has its ServiceAccount and its mounted ConfigMap)."""
        own = ("KUBECONFIG", "GPU_JOBS_POLICY", "GPU_JOBS_NAMESPACE")
        return {k: v for k, v in self.env().items() if k not in own}

    def install(self) -> None:
        """Apply each cluster's install with kubectl, side by side (one kubectl per cluster)."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with ThreadPoolExecutor(max_workers=len(self.kubes) or 1) as pool:
            done = {
                c.name: pool.submit(installer.install, c.name, c.cloud, self._context(c.name), env)
                for c in self.policy.fleet
            }
            self.installed = {name: future.result() for name, future in done.items()}

    def logs(self) -> dict[str, RequestLog]:
        """The request log of every emulator that has one (the real Prometheus has none)."""
        kube = {f"kube:{name}": handle.log for name, handle in self.kubes.items()}
        return {**kube, "aws": self.aws.log, "gcp": self.gcp.log, "azure": self.azure.log}

    # --- the clouds' truth -----------------------------------------------------------------------------------

    def live_nodes(self, group: Group) -> int:
        """How many nodes the cloud runs for ``group`` right now (what its controllers would register)."""
        from tests.emulators.aws import moto_state

        loc = group.locator
        if group.kind == "karpenter":  # its claims' nodes, which Karpenter (the model) makes and removes itself
            return len(self.nodes_of(group))
        if group.kind in ("eks", "asg"):
            asg = moto_state.find_asg(loc["region"], self.asg_names[group.name])
            return int(asg.desired_capacity or 0) if asg is not None else 0
        if group.kind == "gke":
            size = self.gcp.node_pool_size(loc["project"], loc["location"], loc["cluster"], loc["nodePool"])
            return size * len(group.hardware.zones)
        pool = self.azure.agent_pool(loc["subscription"], loc["resourceGroup"], loc["cluster"], loc["agentPool"])
        return 0 if pool.power_state == "Stopped" else pool.count

    def nodes_of(self, group: Group) -> list[dict[str, Any]]:
        nodes = self.kubes[group.cluster].list("Node")
        return [n for n in nodes if n["metadata"]["labels"].get(GROUP_LABEL) == _label_value(group.name)]

    # --- seeding -----------------------------------------------------------------------------------------------

    def _seed(self, nodes: dict[str, list[str]]) -> None:
        """The clouds (the clusters were seeded first, see :func:`_seed_kube`)."""
        for group in self.fleet.groups:
            if group.kind == "karpenter":  # no cloud object: a NodePool in its cluster, its claims its nodes
                pool = group.locator["nodePool"]
                self.karpenters[group.name] = adopt_nodes(self.kubes[group.cluster], pool, nodes[group.name])
            else:
                self._seed_cloud(group)
            self._nodes[group.name] = list(nodes[group.name])
            self._serial[group.name] = len(nodes[group.name])
            if group.kind == "gke":
                for name in nodes[group.name]:
                    self._add_gke_instance(group, name)
        self._seed_instances()
        self._seed_cloud_quotas()

    def _seed_cloud(self, group: Group) -> None:
        loc, hw = group.locator, group.hardware
        if group.kind == "eks":
            seeded = self.aws.add_eks_nodegroup(
                loc["region"],
                loc["cluster"],
                loc["nodegroup"],
                group.min,
                group.desired,
                group.max,
                [hw.machine],
                capacity_type="SPOT" if hw.spot else "ON_DEMAND",
                tags={"team": group.name.split("-")[0]},
            )
            self.asg_names[group.name] = seeded.asg_name
        elif group.kind == "asg":
            self.aws.add_asg(
                loc["region"],
                loc["autoScalingGroup"],
                group.min,
                group.desired,
                group.max,
                hw.machine,
                {"team": "batch"},
            )
            self.asg_names[group.name] = loc["autoScalingGroup"]
        elif group.kind == "gke":
            self.gcp.add_node_pool(
                loc["project"],
                loc["location"],
                loc["cluster"],
                loc["nodePool"],
                zones=hw.zones,
                per_zone_count=group.desired,
                machine_type=hw.machine,
                accelerator_type=hw.accelerator,
                accelerator_count=hw.gpus,
                autoscaling=(group.min, group.max) if hw.autoscaling else None,
                spot=hw.spot,
            )
        else:
            self.azure.add_agent_pool(
                loc["subscription"],
                loc["resourceGroup"],
                loc["cluster"],
                loc["agentPool"],
                hw.machine,
                group.desired,
                mode="System" if group.system else "User",
                autoscaling=(group.min, group.max) if hw.autoscaling else None,
                spot=hw.spot,
            )

    def _seed_instances(self) -> None:
        gcp_project = next((g.locator["project"] for g in self.fleet.groups if g.kind == "gke"), "sandbox")
        azure_sub = next((g.locator["subscription"] for g in self.fleet.groups if g.kind == "aks"), "")
        for inst in self.fleet.instances:
            if inst.cloud == "aws":
                self.aws.add_instance(inst.where, inst.machine, inst.tags)
            elif inst.cloud == "gcp":
                self.gcp.add_instance(
                    gcp_project,
                    inst.where,
                    inst.name,
                    machine_type=inst.machine,
                    accelerators=inst.accelerators,
                    labels=inst.tags,
                )
            else:
                scale_set = (
                    f"/subscriptions/{azure_sub}/resourceGroups/rg-ml-scratch/providers/Microsoft.Compute"
                    f"/virtualMachineScaleSets/{inst.scale_set}"
                    if inst.scale_set
                    else None
                )
                self.azure.add_vm(
                    azure_sub, "rg-ml-scratch", inst.name, inst.machine, inst.where, inst.tags, scale_set=scale_set
                )

    def _add_gke_instance(self, group: Group, node: str) -> None:
        """A GKE node's Compute Engine instance, as GKE makes it: named as the node, in its zone, labelled with its
        cluster and pool, ``created-by`` its pool's managed instance group (the sweep reports it as a member)."""
        loc, hw = group.locator, group.hardware
        zone = _gke_zone(group, node)
        attached = () if hw.machine.startswith(("a2-", "a3-", "g2-")) else ((hw.accelerator, hw.gpus),)
        igm = f"gke-{loc['cluster']}-{loc['nodePool']}-{_suffix(zone)}-grp"[:63]
        self.gcp.add_instance(
            loc["project"],
            zone,
            node,
            machine_type=hw.machine,
            accelerators=attached,
            labels={
                "goog-gke-node": "",
                "goog-k8s-cluster-name": loc["cluster"],
                "goog-k8s-node-pool-name": loc["nodePool"],
            },
            spot=hw.spot,
            metadata={"created-by": f"projects/{loc['project']}/zones/{zone}/instanceGroupManagers/{igm}"},
        )

    def _remove_gke_instance(self, group: Group, node: str) -> None:
        compute = self.gcp.compute
        with compute._lock:  # the reconciler's in-process write, as GKE deletes a node's instance
            compute.instances.pop((group.locator["project"], _gke_zone(group, node), node), None)

    def _seed_cloud_quotas(self) -> None:
        for quota in CLOUD_QUOTAS:
            if quota.limit is None:
                continue  # the quota's default only (the emulators know every quota's default)
            if quota.cloud == "aws":
                self.aws.set_quota(quota.where, quota.quota, quota.limit)
            elif quota.cloud == "gcp":
                dims = dict(quota.dimensions)
                self.gcp.set_quota(quota.scope, quota.quota, quota.where, quota.limit, dimensions=dims)
            else:
                self.azure.set_quota(quota.scope, quota.where, quota.quota, quota.limit, usage=quota.usage)
        # Support decides nothing by itself: the demo (or a test) decides each request (decide_quota_request, grant,
        # deny), never the passing of time nor the number of polls.
        self.azure.quota_request_seconds = None

    # --- node reconciler ---------------------------------------------------------------------------------------

    def _seed_notify_secret(self) -> None:
        """The webhook's URL, in each cluster's gpu-jobs namespace, as ``kubectl create secret`` makes it."""
        assert self.webhook is not None
        url = base64.b64encode(self.webhook.url.encode()).decode()
        for kube in self.kubes.values():
            meta = {"name": "gpu-jobs-notify", "namespace": JOB_NAMESPACE}
            kube.create(
                {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": {"url": url}}
            )

    def sync_nodes(self) -> None:
        """Add or remove Node objects so each group has as many as its cloud runs (pods on removed nodes go).

        Cheap when nothing changed (one in-memory read per group): the world is the only writer of Nodes'
        existence, so it keeps their names itself instead of listing the cluster on every pass.
        """
        with self._sync_lock:
            for group in self.fleet.groups:
                if group.kind == "karpenter":
                    continue  # Karpenter adds and removes its nodes itself
                kube = self.kubes[group.cluster]
                names = self._nodes[group.name]
                want = self.live_nodes(group)
                while len(names) < want:
                    index = self._serial.get(group.name, 0)
                    self._serial[group.name] = index + 1
                    names.append(kube.create(_node(group, _node_name(group, index)))["metadata"]["name"])
                    if group.kind == "gke":
                        self._add_gke_instance(group, names[-1])
                if len(names) > want:
                    # The newest go first, as a scale-in picks them; their pods go with them.
                    gone, names[:] = set(names[want:]), names[:want]
                    for pod in kube.list("Pod"):
                        if pod["spec"].get("nodeName") in gone:
                            with contextlib.suppress(Exception):
                                kube.cluster.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                    for name in gone:
                        with contextlib.suppress(Exception):
                            kube.cluster.delete("Node", name)
                        if group.kind == "gke":
                            self._remove_gke_instance(group, name)

    def _sync_loop(self) -> None:
        while not self._stop.wait(SYNC_INTERVAL_S):
            try:
                self.sync_nodes()
            except Exception:  # a hiccup reading an emulator mid-update must not end the reconciler
                log.debug("node sync failed; retrying", exc_info=True)


# --- pure helpers ---------------------------------------------------------------------------------------------


def write_kubeconfig(path: Path, contexts: dict[str, KubeHandle], current: str | None) -> Path:
    """One kubeconfig reaching several emulated clusters, one context (and cluster, and user) per name."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": kube.url}} for name, kube in contexts.items()],
        "users": [{"name": name, "user": {"token": kube.emulator.token}} for name, kube in contexts.items()],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": JOB_NAMESPACE}} for name in contexts
        ],
        "current-context": current or "",
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _node_name(group: Group, index: int) -> str:
    key = _suffix(group.name)
    if group.kind in ("eks", "asg", "karpenter"):
        octet = int(key[:2], 16)
        return f"ip-10-{octet}-{index // 250}-{index % 250 + 4}.{group.locator['region']}.compute.internal"
    if group.kind == "gke":
        zone = group.hardware.zones[index % len(group.hardware.zones)]
        return f"gke-{group.locator['cluster']}-{group.locator['nodePool']}-{_suffix(zone)}-{index:04x}"[:63]
    return f"aks-{group.locator['agentPool']}-{int(key, 16) % 10**8:08d}-vmss{index:06x}"


def _gke_zone(group: Group, name: str) -> str:
    zones = group.hardware.zones
    return zones[int(name.rsplit("-", 1)[1], 16) % len(zones)]


def _node(group: Group, name: str, shared: bool = False) -> dict[str, Any]:
    """The Node of ``group`` named ``name``; ``shared``: its GPUs are time-sliced (advertised ``shared_last`` times
    each, labelled as the NVIDIA device plugin labels them)."""
    hw = group.hardware
    labels = {
        **group.node_labels,
        GROUP_LABEL: _label_value(group.name),
        "node.kubernetes.io/instance-type": hw.machine,
    }
    if group.kind == "gke":
        labels["topology.kubernetes.io/zone"] = _gke_zone(group, name)
    if hw.mig:
        labels["nvidia.com/mig.strategy"] = "mixed"
        node = seed.gpu_node(
            name, gpus=hw.gpus * hw.slices, labels=labels, resource=MIG_RESOURCE.format(profile=hw.mig)
        )
    else:
        if shared:
            labels |= {
                "nvidia.com/gpu.replicas": str(hw.shared_last),
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
            }
        node = seed.gpu_node(name, gpus=hw.gpus * (hw.shared_last if shared else 1), labels=labels)
    if not hw.gpus:  # the AKS System pool: no GPU resource at all
        for key in ("capacity", "allocatable"):
            node["status"][key].pop(seed.GPU)
    return node


def _shared_node(group: Group, nodes: list[str], name: str) -> bool:
    """Time-slicing is on the group's last node of its working size (and that node only)."""
    return group.hardware.shared_last > 1 and len(nodes) >= group.nodes and name == nodes[group.nodes - 1]


def _layout(fleet: Fleet) -> tuple[dict[str, list[str]], dict[tuple[str, str], list[Placement]]]:
    """Node names per group at working size, and a first-fit placement of the pods (each replica) on them: whole
    GPUs on ordinary nodes, MIG slices on a MIG pool's, copies of one GPU on a time-sliced node (for shared pods
    only, and only there)."""
    nodes = {g.name: [_node_name(g, i) for i in range(g.nodes)] for g in fleet.groups}
    free: dict[str, list[int]] = {}
    shared_free: dict[str, list[int]] = {}
    for g in fleet.groups:
        for name in nodes[g.name]:
            if _shared_node(g, nodes[g.name], name):
                shared_free[name] = list(range(g.hardware.shared_last))
                free[name] = []
            else:
                free[name] = list(range(g.hardware.slices if g.hardware.mig else g.hardware.gpus))
    placements: dict[tuple[str, str], list[Placement]] = {}
    for pod in fleet.pods:
        group = fleet.group(pod.group)
        for _ in range(pod.replicas):
            placement = None
            for node in nodes.get(pod.group, []):
                if pod.shared:
                    if shared_free.get(node):
                        placement = Placement(node, (0,), vgpu=shared_free[node].pop(0))
                elif len(free[node]) >= pod.gpus:
                    taken, free[node] = free[node][: pod.gpus], free[node][pod.gpus :]
                    placement = (
                        Placement(node, (0,), slices=tuple(taken))
                        if group.hardware.mig
                        else Placement(node, tuple(taken))
                    )
                if placement is not None:
                    placements.setdefault((pod.namespace, pod.name), []).append(placement)
                    break
            else:
                log.warning("no room for %s/%s on %s", pod.namespace, pod.name, pod.group)
    return nodes, placements


def _seed_kube(
    kubes: dict[str, KubeHandle],
    fleet: Fleet,
    nodes: dict[str, list[str]],
    placements: dict[tuple[str, str], list[Placement]],
    now: datetime,
) -> tuple[Seat, ...]:
    """Namespaces (every team's, in every cluster), the nodes, and the pods with their owners: a StatefulSet, a
    Deployment (its ReplicaSet between), or none. Pods start ``pod.age`` before ``now``."""
    from tests.emulators.kube import workloads

    for kube in kubes.values():
        for namespace in fleet.namespaces:
            if kube.get("Namespace", namespace) is None:  # `default` is every cluster's own
                kube.create(seed.namespace(namespace, {"team": namespace}))
    for group in fleet.groups:
        for name in nodes[group.name]:
            kubes[group.cluster].create(_node(group, name, _shared_node(group, nodes[group.name], name)))
    seats: list[Seat] = []
    for pod in fleet.pods:
        where = placements.get((pod.namespace, pod.name))
        if not where:
            continue
        group = fleet.group(pod.group)
        kube = kubes[group.cluster]
        started = now - pod.age
        annotations = dict(pod.annotations)
        if SNOOZE in annotations:  # a person's snooze, a week from the sandbox's start
            annotations.pop(SNOOZE)
            until = (now + timedelta(days=7)).replace(microsecond=0)
            annotations[KEEP_ALIVE_UNTIL_ANNOTATION] = until.isoformat().replace("+00:00", "Z")
        resource = MIG_RESOURCE.format(profile=group.hardware.mig) if pod.mig else seed.GPU
        if pod.owner == "none":
            finished = (pod.namespace, pod.name) in FINISHED
            manifest = seed.gpu_pod(
                pod.name,
                pod.namespace,
                where[0].node,
                pod.gpus,
                resource=resource,
                labels={"app": pod.name.rsplit("-", 1)[0]},
                annotations=annotations,
                phase="Succeeded" if finished else "Running",
                created=started,
                started=started,
                grace_s=pod.grace_s,
            )
            names = [kube.create(manifest)["metadata"]["name"]]
        else:
            seeder = workloads.deployment if pod.owner == "deployment" else workloads.statefulset
            base = pod.name if pod.owner == "deployment" else pod.name.rsplit("-", 1)[0]
            seeded = seeder(
                kube.cluster,
                base,
                pod.namespace,
                nodes=[p.node for p in where],
                replicas=len(where),
                gpus=pod.gpus,
                resource=resource,
                pod_annotations=annotations or None,
                started=started,
                grace_s=pod.grace_s,
            )
            names = []
            for stored in seeded.pods:  # created when they started, as kubectl's AGE should say
                stored["metadata"]["creationTimestamp"] = timestamp(started)
                names.append(kube.put(stored)["metadata"]["name"])
        seats += [Seat(pod, n, group.cluster, p) for n, p in zip(names, where, strict=True)]
    return tuple(seats)


def _memory(hw: Hardware) -> int:
    return MIG_MEMORY_MIB.get(hw.mig, 10240) if hw.mig else MEMORY_MIB.get(hw.model, 16384)


def _workloads(fleet: Fleet, nodes: dict[str, list[str]], seats: tuple[Seat, ...]) -> list[Any]:
    """DCGM series for every GPU of every cluster's nodes: a running pod's (busy, idle or leaked as the fleet says,
    in its cluster's label shape), and every GPU no pod holds (unallocated: no pod labels, or the exporter's own
    behind a ServiceMonitor). Every series carries ``cluster``."""
    from tests.emulators.prometheus.dcgm import Workload

    found: list[Workload] = []
    held: set[tuple[str, int, int]] = set()  # (node, gpu, MIG instance or -1)
    for seat in seats:
        pod, place = seat.pod, seat.placement
        if (pod.namespace, pod.name) in FINISHED:
            continue
        hw = fleet.group(pod.group).hardware
        shape = SHAPES.get(seat.cluster, Shape())
        young = pod.age if pod.age < DCGM_WINDOW else None  # a young pod: series only since it started
        # (gpu, MIG instance, profile) per device it holds: whole GPUs, or slices of GPU 0 on a MIG pool
        devices = (
            [(0, s, pod.profile) for s in place.slices]
            if hw.mig
            else [(g, -1, p) for g, p in zip(place.gpus, pod.gpu_profiles(), strict=False)]
        )
        for gpu, slice_id, profile in devices:
            held.add((place.node, gpu, slice_id))
            found.append(
                Workload(
                    seat.name,
                    pod.namespace,
                    "main",
                    gpu,
                    place.node,
                    hw.model,
                    profile=profile,
                    mig_profile=hw.mig or None,
                    mig_instance_id=max(slice_id, 0),
                    exported_labels=shape.exported_labels,
                    old_labels=shape.old_labels,
                    hostname_label=shape.hostname_label,
                    memory_total_mib=_memory(hw),
                    cluster=seat.cluster,
                    vgpu=place.vgpu,
                    started_ago=young,
                )
            )
    for group in fleet.groups:
        hw = group.hardware
        if not hw.gpus:
            continue
        shape = SHAPES.get(group.cluster, Shape())
        for node in nodes[group.name]:
            for gpu, slice_id in [(0, s) for s in range(hw.slices)] if hw.mig else [(g, -1) for g in range(hw.gpus)]:
                if (node, gpu, slice_id) in held:
                    continue
                found.append(
                    Workload(
                        "",
                        "",
                        "",
                        gpu,
                        node,
                        hw.model,
                        profile="idle",
                        mig_profile=hw.mig or None,
                        mig_instance_id=max(slice_id, 0),
                        memory_total_mib=_memory(hw),
                        cluster=group.cluster,
                        exporter_pod_labels=shape.exported_labels,
                        hostname_label=shape.hostname_label,
                    )
                )
    return found


def default_env_file() -> Path:
    return REPO / ".sandbox" / "env"


def child_env(world: World) -> dict[str, str]:
    """The current environment plus the world's: what a ``gpu-jobs`` child process runs with."""
    return {**os.environ, **world.env()}
