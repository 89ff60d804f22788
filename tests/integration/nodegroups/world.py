"""A small fleet across every provider, wired to the real adapters, for the nodegroups job's integration tests.

Two worlds over the same clouds and the same policy (three clusters: ml-prod on EKS, research on GKE, aks-ml on AKS):

- :func:`make_fleet`: one emulated Kubernetes API holds every cluster's nodes, and no cluster identity. It serves
  the job's mechanics driven in process (:meth:`Fleet.run`: one scope over all groups, through the runner as the
  command drives it, :func:`run`), which bypass the command's wiring and so never prove a cluster. One API cannot be three
  clusters: ``gpu-jobs nodegroups`` refuses it, and it is not for CLI runs.
- :func:`make_central_fleet`: one emulated API per cluster, each holding only its own cluster's nodes, pods,
  ``gpu-jobs`` namespace and identity, and a kubeconfig with one context per cluster (named after it, as the
  policy's ``kubeContext`` says): what a central install of ``gpu-jobs nodegroups`` reaches.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from jobs import envelope
from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.lease import LeaseLock
from jobs.adapters.kube.records import ConfigMapRecords
from jobs.adapters.kube.workloads import KubeCluster
from jobs.adapters.settings import AdapterSettings
from jobs.commands.nodegroup_clouds import nodegroup_cloud
from jobs.core.policy import Policy
from jobs.core.providers import PROVIDERS
from jobs.core.resolved import view_of
from jobs.labels import NODEGROUPS_LEASE
from jobs.nodegroups.job import NodeGroupsWork
from jobs.nodegroups.observe import identities
from jobs.nodegroups.report import NodeGroupsReport, report_of, result
from jobs.nodegroups.settings import NodeGroupsSettings, Ports
from jobs.policy_file import parse_policy
from jobs.retry import Backoff
from jobs.runner import Reconcile, RunSettings, Tally, outcome
from jobs.scopes import cluster as cluster_scope
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace
from tests.fakes import RecordingLog as _Log
from tests.sandbox.world import write_kubeconfig

SUB = "00000000-0000-0000-0000-000000000001"
# Tue 2026-12-01 (Europe/Berlin): working hours Mon-Fri 08:00-20:00.
EVENING = datetime.fromisoformat("2026-12-01T20:05:00+01:00")
MORNING = datetime.fromisoformat("2026-12-02T07:55:00+01:00")  # inside the 15 min warm-up
CA = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/ml-prod": "owned"}

CLUSTERS = ("ml-prod", "research", "aks-ml")
# Three clusters, each reached through the kubeconfig context named after it; each group's nodes labelled as its
# provider labels them.
POLICY = textwrap.dedent(f"""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    clusters:
      - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}, kubeContext: ml-prod}}
      - {{name: research, cloud: gcp, gcp: {{project: ml-research, location: europe-west4, cluster: research}},
          kubeContext: research}}
      - {{name: aks-ml, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml}},
          kubeContext: aks-ml}}
    defaults:
      timezone: Europe/Berlin
      workingHours: [{{days: Mon-Fri, start: "08:00", end: "20:00"}}]
      warmUp: 15m
    nodeGroups:
      - name: train
        cloud: aws
        aws: {{region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}}
      - name: batch
        cloud: aws
        aws: {{region: eu-west-1, autoScalingGroup: batch-g5}}
        cluster: ml-prod
        nodeSelector: {{gpu-jobs.dev/pool: batch-g5}}
      - name: research
        cloud: gcp
        gcp: {{project: ml-research, location: europe-west4, cluster: research, nodePool: h100}}
      - name: finetune
        cloud: azure
        azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml, agentPool: a100}}
      - name: vision
        cloud: azure
        azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml, agentPool: t4}}
        strategy: stop
""")


_RUN_FIELDS = {f.name for f in fields(RunSettings)}


def configured(settings: NodeGroupsSettings, **overrides: Any) -> NodeGroupsSettings:
    """``settings`` with ``overrides``, each where it belongs: the run's (``dry_run``, ...) or the job's (``only``)."""
    run = {k: v for k, v in overrides.items() if k in _RUN_FIELDS}
    own = {k: v for k, v in overrides.items() if k not in _RUN_FIELDS}
    return replace(settings, run=replace(settings.run, **run), **own)


def run(policy: Policy, now: datetime, settings: NodeGroupsSettings, ports: Ports, log: Any) -> NodeGroupsReport:
    """One run of one cluster at the schedule instant ``now``, through the runner, read as the command reads it."""
    work = NodeGroupsWork(policy, now, settings, ports, log)
    runner: Reconcile[Any, Any, Any, Any] = Reconcile(
        {cluster_scope(settings.cluster or ""): work}, settings.run, now, log, "node groups"
    )
    return report_of(runner.run()[0], policy, settings)


def tally(report: NodeGroupsReport) -> Tally:
    """What the cluster counts for ``run.summary`` and the exit code."""
    return envelope.tally(result(report))


def text(report: NodeGroupsReport) -> str:
    """The cluster's block of the text report, as the command prints it."""
    return envelope.to_text([result(report)], "")


def document(report: NodeGroupsReport) -> dict[str, Any]:
    """The cluster's JSON envelope, as the command prints it."""
    return envelope.document("nodegroups", [result(report)], outcome([tally(report)], dry_run=report.dry_run))


@dataclass
class Fleet:
    kube: KubeHandle  # ml-prod's API (in the one-API world, every cluster's)
    aws: AwsEmulator
    gcp: GcpEmulator
    azure: AzureEmulator
    policy: Policy
    ports: Ports  # through ``kube``, for the in-process runs
    settings: NodeGroupsSettings
    kubes: dict[str, KubeHandle]  # each cluster's API, by cluster name
    kubeconfig: Path  # what a central install has: a context per cluster in the central world

    @property
    def apis(self) -> tuple[KubeHandle, ...]:
        """Every distinct API of the world, ml-prod's first."""
        return distinct(self.kubes)

    def run(self, at: datetime, *, policy: Policy | None = None, **overrides: Any) -> NodeGroupsReport:
        if len(self.apis) > 1:  # ``ports`` reach ml-prod only: the central world runs through the CLI
            raise TypeError("Fleet.run drives the one-API world (make_fleet); run the central world with gpu-jobs")
        settings = configured(self.settings, **overrides)
        report = run(policy or self.policy, at, settings, self.ports, _Log())
        self.sync_nodes()
        return report

    def sync_nodes(self) -> None:
        """What the clouds do to a cluster: a group scaled to zero (or stopped) takes its Node objects with it, a
        group brought back registers fresh ones (uncordoned, unannotated)."""
        for group in self.policy.node_groups:
            config = self.ports.clouds[view_of(self.policy).group(group.name).kind].describe(group, live_size=True)
            running = not config.stopped and (config.desired or 0) > 0
            name, labels = NODES[group.name]
            api = self.kubes[self.policy.cluster_of(group).name]
            node = api.get("Node", name)
            if node is not None and not running:
                api.cluster.delete("Node", name)
            elif node is None and running:
                api.create(gpu_node(name, labels=labels))

    def cli_env(self, policy: Path) -> dict[str, str]:
        """What ``gpu-jobs nodegroups`` needs to reach this world's clouds and clusters (a central install)."""
        return {
            **self.aws.env(),
            "KUBECONFIG": str(self.kubeconfig),
            "GPU_JOBS_GCP_ENDPOINT": self.gcp.url,
            "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
            "GPU_JOBS_AZURE_ENDPOINT": self.azure.url,
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_POLICY": str(policy),
        }

    def cloud_writes(self) -> int:
        return len(self.aws.log.writes()) + len(self.gcp.log.writes()) + len(self.azure.log.writes())

    def all_writes(self) -> int:
        return self.cloud_writes() + sum(len(api.log.writes()) for api in self.apis)

    def clear_logs(self) -> None:
        for log in (self.aws.log, self.gcp.log, self.azure.log, *(api.log for api in self.apis)):
            log.clear()

    def configs(self) -> dict[str, Any]:
        """Every group's configuration as the real adapters read it, live size included."""
        return {
            g.name: self.ports.clouds[view_of(self.policy).group(g.name).kind].describe(g, live_size=True)
            for g in self.policy.node_groups
        }


# One node per group (enough to see its pods), by group.
NODES = {
    "train": ("ip-10-0-1-1", {"eks.amazonaws.com/nodegroup": "gpu-a100"}),
    "batch": ("ip-10-0-2-1", {"gpu-jobs.dev/pool": "batch-g5"}),
    "research": ("gke-research-h100-1", {"cloud.google.com/gke-nodepool": "h100"}),
    "finetune": ("aks-a100-1", {"kubernetes.azure.com/agentpool": "a100"}),
    "vision": ("aks-t4-1", {"kubernetes.azure.com/agentpool": "t4"}),
}


def seed(
    policy: Policy, kubes: dict[str, KubeHandle], aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator
) -> None:
    """The clouds' groups, and each group's node in its cluster's API (``kubes``, by cluster name)."""
    aws.add_eks_nodegroup("eu-west-1", "ml-prod", "gpu-a100", 1, 3, 8, instance_types=("p4d.24xlarge",))
    aws.add_asg("eu-west-1", "batch-g5", 2, 2, 4, instance_type="g5.12xlarge")
    gcp.add_node_pool(
        "ml-research",
        "europe-west4",
        "research",
        "h100",
        zones=("europe-west4-a", "europe-west4-b"),
        per_zone_count=2,
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        accelerator_count=8,
        autoscaling=(1, 4),
    )
    azure.add_agent_pool(SUB, "rg-ml", "aks-ml", "a100", "Standard_NC24ads_A100_v4", 2, autoscaling=(1, 6))
    azure.add_agent_pool(SUB, "rg-ml", "aks-ml", "t4", "Standard_NC4as_T4_v3", 3)
    azure.add_agent_pool(SUB, "rg-ml", "aks-ml", "system", "Standard_D4s_v5", 3, mode="System", autoscaling=(3, 5))
    for api in distinct(kubes):
        api.create(namespace("gpu-jobs"))
    for group in policy.node_groups:
        name, label = NODES[group.name]
        kubes[policy.cluster_of(group).name].create(gpu_node(name, labels=label))


def distinct(kubes: dict[str, KubeHandle]) -> tuple[KubeHandle, ...]:
    """The APIs behind the clusters, each once (one API stands for all three in the one-API world)."""
    return tuple({id(api): api for api in kubes.values()}.values())


def make_fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    """The one-API world (in-process runs only): ``kube`` stands for every cluster and proves none."""
    return _fleet(dict.fromkeys(CLUSTERS, kube), kube.kubeconfig, aws, gcp, azure, monkeypatch)


def make_central_fleet(
    kubes: dict[str, KubeHandle],
    aws: AwsEmulator,
    gcp: GcpEmulator,
    azure: AzureEmulator,
    monkeypatch: pytest.MonkeyPatch,
    tmp: Path,
) -> Fleet:
    """The central world: ``kubes`` gives each cluster of :data:`CLUSTERS` an API of its own (reset, distinct),
    which is seeded with that cluster's identity as its per-cluster install would create it."""
    assert sorted(kubes) == sorted(CLUSTERS)
    assert len(distinct(kubes)) == len(CLUSTERS)
    kubeconfig = write_kubeconfig(tmp / "fleet.kubeconfig", kubes, current="ml-prod")
    fleet = _fleet(kubes, kubeconfig, aws, gcp, azure, monkeypatch)
    for cluster, api in kubes.items():
        api.identify(cluster)
    fleet.clear_logs()
    return fleet


def _fleet(
    kubes: dict[str, KubeHandle],
    kubeconfig: Path,
    aws: AwsEmulator,
    gcp: GcpEmulator,
    azure: AzureEmulator,
    monkeypatch: pytest.MonkeyPatch,
) -> Fleet:
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # the in-process clients: its current context
    aws.update_timing = type(aws.update_timing)(seconds=0.05)  # updates finish with time, as in EKS
    gcp.operation_seconds = 0.05
    policy = parse_policy(POLICY, "policy.yaml")
    seed(policy, kubes, aws, gcp, azure)
    settings = AdapterSettings(
        poll_interval_s=0.01,
        operation_timeout_s=10,
        request_timeout_s=5,
        gcp_endpoint=gcp.url,
        azure_endpoint=azure.url,
        emulator_credentials=True,
    )
    api = api_client()
    known = identities(policy, None)
    ports = Ports(
        clouds={kind: nodegroup_cloud(kind, settings) for kind in PROVIDERS},
        cluster=KubeCluster(api),
        records=ConfigMapRecords(api, "gpu-jobs", known),
        lock=LeaseLock(api, "gpu-jobs", NODEGROUPS_LEASE),
        events=KubeEvents(api, "nodegroups", _Log()),
    )
    job_settings = NodeGroupsSettings(
        run=RunSettings(workers=8, holder="test-run"),
        backoff=Backoff(deadline_s=3, base_s=0.01, cap_s=0.05),
        drain_poll_s=0.01,
        settle_timeout_s=15,
    )
    fleet = Fleet(kubes["ml-prod"], aws, gcp, azure, policy, ports, job_settings, kubes, kubeconfig)
    fleet.clear_logs()
    return fleet


__all__ = [
    "EVENING",
    "MORNING",
    "Fleet",
    "configured",
    "document",
    "gpu_pod",
    "make_central_fleet",
    "make_fleet",
    "run",
    "tally",
    "text",
]
