"""A fleet of two clusters, each with a Kubernetes API of its own: a run judges every group through its own
cluster's API, per-cluster (``--cluster``) or central (every cluster with a ``kubeContext``), and refuses to shut
down a group whose nodes it cannot see.

ml-prod (EKS) holds the idle node group ``train``; research (GKE) holds ``h100``, with training running on it.
"""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace
from tests.envelope import items
from tests.integration.cli import run_cli
from tests.sandbox.world import write_kubeconfig

pytestmark = pytest.mark.integration

EVENING = "2026-12-01T20:05:00+01:00"  # Tue, after the 08:00-20:00 Berlin working day
ML_PROD = "{name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}%s}"
RESEARCH = "{name: research, cloud: gcp, gcp: {project: ml-research, location: europe-west4, cluster: research}%s}"
GROUPS = """\
    nodeGroups:
      - name: train
        cloud: aws
        aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}
      - name: research-h100
        cloud: gcp
        gcp: {project: ml-research, location: europe-west4, cluster: research, nodePool: h100}
"""


def policy(*clusters: str, groups: str = GROUPS) -> str:
    listed = "".join(f"      - {c}\n" for c in clusters)
    return (
        textwrap.dedent("""\
        apiVersion: gpu-jobs/v1
        kind: GpuPolicy
        defaults:
          timezone: Europe/Berlin
          workingHours: [{days: Mon-Fri, start: "08:00", end: "20:00"}]
        """)
        + (f"clusters:\n{textwrap.dedent(listed)}" if clusters else "")
        + textwrap.dedent(groups)
    )


CENTRAL = policy(ML_PROD % ", kubeContext: ml-prod", RESEARCH % ", kubeContext: research")


class World:
    """Two clusters' APIs, the clouds behind them, and kubeconfigs as a per-cluster or a central install has them."""

    def __init__(self, ml_prod: KubeHandle, research: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, tmp: Path):
        self.ml_prod, self.research, self.aws, self.gcp, self.tmp = ml_prod, research, aws, gcp, tmp
        self.stderr = ""
        self.kubeconfig = write_kubeconfig(tmp / "fleet.kubeconfig", {"ml-prod": ml_prod, "research": research}, None)

    def only(self, api: KubeHandle, context: str = "current") -> Path:
        """A kubeconfig whose one (current) context reaches ``api``: a per-cluster install's view."""
        return write_kubeconfig(self.tmp / f"{context}-{id(api)}.kubeconfig", {context: api}, context)

    def gpu_jobs(self, text: str, *args: str, kubeconfig: Path | None = None) -> tuple[int, dict[str, Any], str]:
        path = self.tmp / "policy.yaml"
        path.write_text(text)
        environ = {
            **self.aws.env(),
            "KUBECONFIG": str(kubeconfig or self.kubeconfig),
            "GPU_JOBS_GCP_ENDPOINT": self.gcp.url,
            "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_POLL_INTERVAL": "0.01",
            "GPU_JOBS_RETRY_DEADLINE": "1",
            "GPU_JOBS_POLICY": str(path),
        }
        done = run_cli(["nodegroups", "--at", EVENING, *args], environ)
        self.stderr = done.stderr
        return done.code, done.summary, done.stdout

    def records(self, api: KubeHandle) -> set[str]:
        return {
            cm["metadata"]["labels"]["gpu-jobs.dev/node-group"]
            for cm in api.list("ConfigMap", "gpu-jobs")
            if "gpu-jobs.dev/node-group" in cm["metadata"].get("labels", {})
        }

    def leases(self, api: KubeHandle) -> set[str]:
        return {lease["metadata"]["name"] for lease in api.list("Lease", "gpu-jobs", "coordination.k8s.io/v1")}


@pytest.fixture
def world(kube: KubeHandle, _research_api: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, tmp_path: Path) -> World:
    _research_api.reset()
    aws.update_timing = type(aws.update_timing)(seconds=0.05)  # updates finish with time, as in EKS
    gcp.operation_seconds = 0.05
    aws.add_eks_nodegroup("eu-west-1", "ml-prod", "gpu-a100", 1, 1, 8, instance_types=("p4d.24xlarge",))
    gcp.add_node_pool(
        "ml-research",
        "europe-west4",
        "research",
        "h100",
        zones=("europe-west4-a", "europe-west4-b"),
        per_zone_count=1,
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        accelerator_count=8,
        autoscaling=(1, 4),
    )
    for api, name in ((kube, "ml-prod"), (_research_api, "research")):
        api.create(namespace("gpu-jobs"))
        api.create(namespace("ml"))
        api.identify(name)
    kube.create(gpu_node("ip-10-0-1-1", labels={"eks.amazonaws.com/nodegroup": "gpu-a100"}))
    for zone in ("a", "b"):
        name = f"gke-research-h100-{zone}"
        _research_api.create(gpu_node(name, labels={"cloud.google.com/gke-nodepool": "h100"}))
        _research_api.create(gpu_pod(f"train-{zone}", "ml", node=name, gpus=8))
    for log in (aws.log, gcp.log, kube.log, _research_api.log):
        log.clear()
    return World(kube, _research_api, aws, gcp, tmp_path)


def counts(summary: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(summary[k] for k in ("planned", "applied", "failed", "skipped", "exit_code"))


def test_a_run_through_the_wrong_clusters_api_refuses_the_shutdown(world: World) -> None:
    # A per-cluster install of research whose kubeconfig reaches ml-prod: that API says it is ml-prod.
    code, summary, out = world.gpu_jobs(CENTRAL, "--cluster", "research", kubeconfig=world.only(world.ml_prod))
    assert (code, counts(summary)) == (1, (1, 0, 1, 0, 1))
    assert (
        f"research-h100  failed   not judged: cluster research: refused before reading anything: the API at"
        f" {world.ml_prod.url} is cluster ml-prod (ConfigMap gpu-jobs/gpu-jobs-cluster), not research"
    ) in out
    assert (world.gcp.log.writes(), world.ml_prod.log.writes(), world.research.log.writes()) == ([], [], [])
    assert world.ml_prod.log.operations() == ["get configmaps"]  # its identity, and nothing else


def test_a_group_whose_nodes_its_own_cluster_does_not_show_is_not_shut_down(world: World) -> None:
    # research's own API (it proves it is research) before the pool's nodes registered: they are not in sight.
    world.research.reset()
    world.research.identify("research")
    code, summary, out = world.gpu_jobs(CENTRAL, "--cluster", "research", kubeconfig=world.only(world.research))
    assert (code, counts(summary)) == (1, (0, 0, 1, 0, 1))  # one item, counted once: failed (not also skipped)
    assert (
        "research-h100: not shut down: the cloud reports 2 node(s) but cluster research's API shows none of them"
        " (wrong cluster, or nodes not registered yet)"
    ) in out
    assert (world.gcp.log.writes(), world.ml_prod.log.all(), world.research.log.writes()) == ([], [], [])


def test_a_per_cluster_run_sees_its_own_training_and_postpones(world: World) -> None:
    code, summary, out = world.gpu_jobs(CENTRAL, "--cluster", "research", kubeconfig=world.only(world.research))
    assert (code, counts(summary)) == (0, (0, 0, 0, 1, 0))
    assert "research-h100: shutdown postponed until" in out
    assert "GPU pods running (ml/train-a, ml/train-b)" in out
    # Its state lives in the cluster it acts on, never in another one; nothing of ml-prod is touched.
    assert (world.records(world.research), world.leases(world.research)) == (
        {"research-h100"},
        {"gpu-jobs-nodegroups-research"},
    )
    assert (world.ml_prod.log.writes(), world.gcp.log.writes(), world.aws.log.writes()) == ([], [], [])


def test_a_central_run_judges_each_group_through_its_own_cluster(world: World) -> None:
    code, summary, out = world.gpu_jobs(CENTRAL, "--output", "json")
    assert (code, counts(summary)) == (0, (1, 1, 0, 1, 0))
    doc = json.loads(out)
    assert [(c["name"], c["state"] == "refused") for c in doc["scopes"]] == [("ml-prod", False), ("research", False)]
    groups = items(doc, "node group")
    assert [(g["name"], g["cluster"], g["status"], g["direction"]) for g in groups if "direction" in g] == [
        ("train", "ml-prod", "applied", "down")
    ]
    assert [(s["name"], s["cluster"], s["status"]) for s in groups if "warning" in s] == [
        ("research-h100", "research", "skipped")
    ]
    assert (world.records(world.ml_prod), world.records(world.research)) == ({"train"}, {"research-h100"})
    assert (world.leases(world.ml_prod), world.leases(world.research)) == (
        {"gpu-jobs-nodegroups-ml-prod"},
        {"gpu-jobs-nodegroups-research"},
    )
    assert world.gcp.log.writes() == []
    # The second run plans nothing anywhere.
    code, summary, _ = world.gpu_jobs(CENTRAL)
    assert (code, counts(summary)) == (0, (0, 0, 0, 1, 0))


def test_only_one_group_of_a_central_run_acts_through_its_cluster_only(world: World) -> None:
    code, summary, out = world.gpu_jobs(CENTRAL, "--only", "train")
    assert (code, counts(summary)) == (0, (1, 1, 0, 0, 0))
    assert "in cluster ml-prod" in out
    assert "in cluster research" not in out
    assert world.research.log.all() == []


def test_several_clusters_without_contexts_or_cluster_is_a_configuration_error(world: World) -> None:
    code, summary, _ = world.gpu_jobs(policy(ML_PROD % "", RESEARCH % ""))
    assert (code, summary["exit_code"]) == (2, 2)
    assert "none has a kubeContext: set --cluster NAME (GPU_JOBS_CLUSTER)" in world.stderr
    # Implied clusters (no clusters: list) are a fleet too.
    code, summary, _ = world.gpu_jobs(policy())
    assert (code, summary["exit_code"]) == (2, 2)
    code, _, _ = world.gpu_jobs(CENTRAL, "--cluster", "staging")
    assert code == 2
    assert world.aws.log.writes() == []


def test_a_cluster_that_cannot_be_read_fails_its_groups_and_the_others_go_on(world: World) -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    fleet = yaml_config(world.kubeconfig)
    fleet["clusters"][1]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    broken = world.tmp / "broken.kubeconfig"
    broken.write_text(json.dumps(fleet))
    code, summary, out = world.gpu_jobs(CENTRAL, kubeconfig=broken)
    assert (code, counts(summary)) == (1, (2, 1, 1, 0, 1))
    assert "research-h100" in out
    assert "not judged: cluster research cannot be read" in out
    assert world.gcp.log.writes() == []
    assert len(world.aws.log.writes()) > 0


def yaml_config(path: Path) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


ASG = """\
    nodeGroups:
      - name: batch
        cloud: aws
        aws: {region: eu-west-1, autoScalingGroup: batch-g5}
        cluster: ml-prod
%s"""


@pytest.mark.parametrize(
    ("selector", "out"),
    [
        ("", "batch: not shut down: no node label for this group: its nodes and GPU pods cannot be seen"),
        # Every key counts: the node carries the pool label but not the team's, so it is not the group's.
        (
            "        nodeSelector: {gpu-jobs.dev/pool: batch-g5, team: nlp}\n",
            "batch: not shut down: the cloud reports 2 node(s) but cluster ml-prod's API shows none of them",
        ),
    ],
)
def test_a_plain_asg_whose_nodes_cannot_be_seen_is_never_idle(world: World, selector: str, out: str) -> None:
    world.aws.add_asg("eu-west-1", "batch-g5", 2, 2, 4, instance_type="g5.12xlarge")
    world.ml_prod.create(gpu_node("ip-10-0-2-1", labels={"gpu-jobs.dev/pool": "batch-g5", "team": "cv"}))
    world.ml_prod.create(gpu_pod("etl", "ml", node="ip-10-0-2-1"))
    text = policy(ML_PROD % ", kubeContext: ml-prod", groups=ASG % selector)
    code, summary, stdout = world.gpu_jobs(text)
    assert (code, counts(summary)) == (1, (0, 0, 1, 0, 1))  # one item, counted once: failed (not also skipped)
    assert out in stdout
    assert world.aws.log.writes() == []


def test_a_plain_asg_with_every_selector_key_matching_sees_its_pods(world: World) -> None:
    world.aws.add_asg("eu-west-1", "batch-g5", 2, 2, 4, instance_type="g5.12xlarge")
    world.ml_prod.create(gpu_node("ip-10-0-2-1", labels={"gpu-jobs.dev/pool": "batch-g5", "team": "nlp"}))
    world.ml_prod.create(gpu_pod("etl", "ml", node="ip-10-0-2-1"))
    selector = "        nodeSelector: {gpu-jobs.dev/pool: batch-g5, team: nlp}\n"
    code, _, out = world.gpu_jobs(policy(ML_PROD % ", kubeContext: ml-prod", groups=ASG % selector))
    assert code == 0
    assert "batch: shutdown postponed until" in out
