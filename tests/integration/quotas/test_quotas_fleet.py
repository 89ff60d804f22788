"""``gpu-jobs quotas`` from a central install: several clusters, each through its own kubeconfig context and its own
Kubernetes API emulator, in one process as the CronJob runs it. What the text report says about the run as a whole
(a refusal over the limit across clusters) and about each cluster."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.emulators.kube.seed import namespace
from tests.integration.cli import CliRun, run_cli
from tests.sandbox.world import write_kubeconfig

pytestmark = pytest.mark.integration

CLUSTERS = ("ml-prod", "research", "aks-ml")
POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: Europe/Berlin}
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}, kubeContext: ml-prod}
      - {name: research, cloud: gcp, gcp: {project: p, location: europe-west4, cluster: research},
         kubeContext: research}
      - {name: aks-ml, cloud: azure, azure: {subscription: s, resourceGroup: rg, cluster: aks-ml}, kubeContext: aks-ml}
    namespaceQuotas:
      exclude: [kube-system, kube-public, kube-node-lease, default, gpu-jobs]
      rules:
        - namespaces: ["team-*"]
          hard: {nvidia.com/gpu: 4}
    """)
AT = "2026-12-01T12:00:00+01:00"


@pytest.fixture(scope="module")
def _other_apis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeHandle, KubeHandle]]:
    handles = tuple(start_kube(tmp_path_factory.mktemp(name) / "kubeconfig") for name in CLUSTERS[1:])
    yield handles[0], handles[1]
    for handle in handles:
        handle.stop()


@pytest.fixture
def fleet(kube: KubeHandle, _other_apis: tuple[KubeHandle, KubeHandle], tmp_path: Path) -> dict[str, KubeHandle]:
    """ml-prod with two namespaces to give a quota; research and aks-ml with one namespace each, its quota already
    what the policy says after a first run."""
    for api in _other_apis:
        api.reset()
    apis = dict(zip(CLUSTERS, (kube, *_other_apis), strict=True))
    for name, api in apis.items():
        api.identify(name)
        for ns in ("team-a", "team-b") if name == "ml-prod" else ("team-c",):
            api.create(namespace(ns))
    return apis


def quotas(apis: dict[str, KubeHandle], tmp_path: Path, *args: str, current: str = "ml-prod") -> CliRun:
    """``gpu-jobs quotas`` with a kubeconfig that has a context per cluster (``current``: a per-cluster install's)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    kubeconfig = write_kubeconfig(tmp_path / "fleet.kubeconfig", apis, current=current)
    env = {"KUBECONFIG": str(kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs"}
    return run_cli(["quotas", "--policy", str(policy), "--at", AT, *args], env)


def test_a_refused_central_dry_run_says_the_refusal_once_then_each_clusters_plan(
    fleet: dict[str, KubeHandle], tmp_path: Path
) -> None:
    for quiet in ("research", "aks-ml"):  # their quotas made: nothing left to change there
        assert quotas(fleet, tmp_path, "--cluster", quiet, current=quiet).code == 0
    for api in fleet.values():
        api.log.clear()

    run = quotas(fleet, tmp_path, "--dry-run", "--max-changes", "1")

    assert (run.code, run.summary["exit_code"]) == (3, 3)
    lines = run.stdout.splitlines()
    refusal = "the plan changes 2 namespace quotas across 3 clusters, more than the limit of 1 per run"
    # Said once, for the run, above every cluster's plan: not under each cluster.
    assert lines[:4] == [
        f"gpu-jobs quotas at {AT} (dry run: nothing changed)",
        f"  REFUSED: {refusal} (raise --max-changes",  # within 120 characters, wrapped at a word
        "    / GPU_JOBS_MAX_CHANGES if this is intended).",
        "  Nothing changed. Each cluster's plan was:",
    ]
    assert sum("REFUSED" in line for line in lines) == 1
    headlines = [i for i, line in enumerate(lines) if line.startswith("gpu-jobs quotas in cluster")]
    blocks = {
        lines[i].split()[4]: lines[i + 1 : j] for i, j in zip(headlines, [*headlines[1:], len(lines)], strict=True)
    }
    assert list(blocks) == list(CLUSTERS)
    assert [line.split()[:2] for line in blocks["ml-prod"]] == [["team-a", "create"], ["team-b", "create"]]
    for quiet in ("research", "aks-ml"):  # one line each
        assert blocks[quiet] == ["  nothing to change: 1 namespace has the quota the policy says"]
    assert refusal in run.summary["summary"]
    assert all(api.log.writes() == [] for api in fleet.values())
