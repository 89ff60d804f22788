"""A small fleet across every provider, wired to the real adapters, for the nodegroups job's integration tests."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from jobs.adapters.kube.client import api_client
from jobs.adapters.kube.events import KubeEvents
from jobs.adapters.kube.lease import LeaseLock
from jobs.adapters.kube.records import ConfigMapRecords
from jobs.adapters.kube.workloads import KubeCluster
from jobs.adapters.settings import AdapterSettings
from jobs.commands.nodegroup_clouds import nodegroup_cloud
from jobs.core.policy import Policy
from jobs.labels import NODEGROUPS_LEASE
from jobs.nodegroups.job import JobSettings, Ports, Report, identities, run
from jobs.policy_file import parse_policy
from jobs.retry import Backoff
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import CONTEXT, KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace

SUB = "00000000-0000-0000-0000-000000000001"
# Tue 2026-12-01 (Europe/Berlin): working hours Mon-Fri 08:00-20:00.
EVENING = datetime.fromisoformat("2026-12-01T20:05:00+01:00")
MORNING = datetime.fromisoformat("2026-12-02T07:55:00+01:00")  # inside the 15 min warm-up
CA = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/ml-prod": "owned"}

# Three clusters reached through one emulated API, each group's nodes labelled as its provider labels them: the
# job's mechanics, not its view of a fleet (tests/integration/nodegroups/test_fleet.py gives each cluster its own).
POLICY = textwrap.dedent(f"""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    clusters:
      - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}, kubeContext: {CONTEXT}}}
      - {{name: research, cloud: gcp, gcp: {{project: ml-research, location: europe-west4, cluster: research}},
          kubeContext: {CONTEXT}}}
      - {{name: aks-ml, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg-ml, cluster: aks-ml}},
          kubeContext: {CONTEXT}}}
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


@dataclass
class Fleet:
    kube: KubeHandle
    aws: AwsEmulator
    gcp: GcpEmulator
    azure: AzureEmulator
    policy: Policy
    ports: Ports
    settings: JobSettings

    def run(self, at: datetime, *, policy: Policy | None = None, **overrides: Any) -> Report:
        settings = JobSettings(**{**self.settings.__dict__, **overrides})
        report = run(policy or self.policy, at, settings, self.ports, _Log())
        self.sync_nodes()
        return report

    def sync_nodes(self) -> None:
        """What the clouds do to a cluster: a group scaled to zero (or stopped) takes its Node objects with it, a
        group brought back registers fresh ones (uncordoned, unannotated)."""
        for group in self.policy.node_groups:
            config = self.ports.clouds[group.cloud].describe(group, live_size=True)
            running = not config.stopped and (config.desired or 0) > 0
            name, labels = NODES[group.name]
            node = self.kube.get("Node", name)
            if node is not None and not running:
                self.kube.cluster.delete("Node", name)
            elif node is None and running:
                self.kube.create(gpu_node(name, labels=labels))

    def cloud_writes(self) -> int:
        return len(self.aws.log.writes()) + len(self.gcp.log.writes()) + len(self.azure.log.writes())

    def all_writes(self) -> int:
        return self.cloud_writes() + len(self.kube.log.writes())

    def clear_logs(self) -> None:
        for log in (self.aws.log, self.gcp.log, self.azure.log, self.kube.log):
            log.clear()

    def configs(self) -> dict[str, Any]:
        """Every group's configuration as the real adapters read it, live size included."""
        return {g.name: self.ports.clouds[g.cloud].describe(g, live_size=True) for g in self.policy.node_groups}


class _Log:
    """structlog's interface, recording events: tests may look at what the job said."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _add(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    info = warning = error = debug = _add


# One node per group (enough to see its pods), by group.
NODES = {
    "train": ("ip-10-0-1-1", {"eks.amazonaws.com/nodegroup": "gpu-a100"}),
    "batch": ("ip-10-0-2-1", {"gpu-jobs.dev/pool": "batch-g5"}),
    "research": ("gke-research-h100-1", {"cloud.google.com/gke-nodepool": "h100"}),
    "finetune": ("aks-a100-1", {"kubernetes.azure.com/agentpool": "a100"}),
    "vision": ("aks-t4-1", {"kubernetes.azure.com/agentpool": "t4"}),
}


def seed(kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator) -> None:
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
    kube.create(namespace("gpu-jobs"))
    for name, label in NODES.values():
        kube.create(gpu_node(name, labels=label))


def make_fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    aws.update_timing = type(aws.update_timing)(seconds=0.05)  # updates finish with time, as in EKS
    gcp.operation_seconds = 0.05
    seed(kube, aws, gcp, azure)
    settings = AdapterSettings(
        poll_interval_s=0.01,
        operation_timeout_s=10,
        request_timeout_s=5,
        gcp_endpoint=gcp.url,
        azure_endpoint=azure.url,
        emulator_credentials=True,
    )
    api = api_client()
    policy = parse_policy(POLICY, "policy.yaml")
    known = identities(policy, None)
    ports = Ports(
        clouds={c: nodegroup_cloud(c, settings) for c in ("aws", "gcp", "azure")},
        cluster=KubeCluster(api),
        records=ConfigMapRecords(api, "gpu-jobs", known),
        lock=LeaseLock(api, "gpu-jobs", NODEGROUPS_LEASE),
        events=KubeEvents(api, "gpu-jobs", "nodegroups", known),
    )
    job_settings = JobSettings(
        backoff=Backoff(deadline_s=3, base_s=0.01, cap_s=0.05),
        workers=8,
        drain_poll_s=0.01,
        settle_timeout_s=15,
        holder="test-run",
    )
    fleet = Fleet(kube, aws, gcp, azure, policy, ports, job_settings)
    fleet.clear_logs()
    return fleet


__all__ = ["EVENING", "MORNING", "Fleet", "gpu_pod", "make_fleet"]
