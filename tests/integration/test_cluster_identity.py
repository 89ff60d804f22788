"""The cluster's identity as a person meets it: a cluster without one is refused with the command that creates it,
that command from docs/cluster-identity.md run as typed with the real kubectl, then the same run goes through. The
refusals of every job through another cluster's API are in test_sandbox.py; the loop's rule in unit/test_runner.py.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.docs import shell_block
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.integration.cli import run_cli
from tests.sandbox.world import write_kubeconfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: Europe/Berlin}
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}, kubeContext: ml-prod}
    namespaceQuotas:
      default: {nvidia.com/gpu: 0}
    """)


def migration_command() -> str:
    """The one shell command of the migration section, as the page shows it."""
    block = shell_block("docs/cluster-identity.md", "## Migrating an existing install")
    (command,) = [line.strip() for line in block.splitlines() if line.strip()]
    return command


def test_a_cluster_without_identity_is_refused_until_the_documented_command_creates_it(
    kube: KubeHandle, tmp_path: Path
) -> None:
    for name in ("gpu-jobs", "team-a"):
        kube.create(namespace(name))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {"ml-prod": kube}, current="ml-prod")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {"KUBECONFIG": str(kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_POLICY": str(policy)}
    kube.log.clear()

    refused = run_cli(["quotas", "--cluster", "ml-prod", "--dry-run"], env)

    assert refused.code == 1
    assert refused.summary["failed"] == 1
    said = " ".join(refused.stdout.split())  # the reason's prose wraps within 120 characters
    assert "cluster ml-prod: refused before reading anything" in said
    assert "has no cluster identity (ConfigMap gpu-jobs/gpu-jobs-cluster, key cluster)" in said
    # The command to copy stays on one line of its own.
    assert "    kubectl -n gpu-jobs create configmap gpu-jobs-cluster --from-literal=cluster=ml-prod." in refused.stdout
    assert max(len(line) for line in refused.stdout.splitlines()) <= 120
    assert kube.log.operations() == ["get configmaps"]  # nothing that decides was read

    command = migration_command()
    assert command.startswith(f"kubectl --context ml-prod -n gpu-jobs create configmap {'gpu-jobs-cluster'}")
    created = subprocess.run(
        command.replace("kubectl", str(KUBECTL), 1),
        shell=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (created.returncode, created.stdout.strip()) == (0, "configmap/gpu-jobs-cluster created"), created.stderr

    accepted = run_cli(["quotas", "--cluster", "ml-prod", "--dry-run"], env)

    assert (accepted.code, accepted.summary["failed"]) == (0, 0)
    assert accepted.summary["planned"] > 0  # the default quota for every namespace (a dry run: nothing written)
    assert "team-a" in accepted.stdout
    assert "refused" not in accepted.stdout
