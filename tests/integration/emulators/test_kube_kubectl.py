"""Kube emulator: the real kubectl (extracted by .ci/install-kubectl) can get, describe, create, apply, cordon and
drain."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

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
    # The bare key is in hard but never in used: no evaluator reports it (describe shows it as 0 all the same).
    assert quota["status"]["used"] == {"requests.nvidia.com/gpu": "3"}
    assert quota["status"]["hard"] == {"requests.nvidia.com/gpu": "4", "nvidia.com/gpu": "4"}


def test_kubectl_create_quota_and_apply_get_canonical_quantities(
    kube: KubeHandle, kubectl: KubectlRunner, tmp_path: Path
) -> None:
    kube.create(seed.namespace("team-b"))
    # kubectl create quota sends protobuf; the server re-encodes the quantities either way.
    kubectl("create", "quota", "gpu", "-n", "team-b", "--hard=requests.cpu=4000m,requests.memory=1024Mi")
    created = json.loads(kubectl("get", "quota", "gpu", "-n", "team-b", "-o", "json").stdout)
    assert created["spec"]["hard"] == {"requests.cpu": "4", "requests.memory": "1Gi"}
    config = tmp_path / "quota.yaml"
    config.write_text(yaml.safe_dump(seed.resource_quota("gpu", "team-b", {"requests.nvidia.com/gpu": "8.0"})))
    kubectl("apply", "--server-side", "--field-manager", "quotas", "--force-conflicts", "-f", str(config))
    applied = json.loads(kubectl("get", "quota", "gpu", "-n", "team-b", "-o", "json").stdout)
    assert applied["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"
    assert applied["status"]["used"]["requests.nvidia.com/gpu"] == "0"


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
    pods = kube.list("Pod", "default")
    assert len([p for p in pods if not p["metadata"].get("deletionTimestamp")]) == 2  # the evicted one: Terminating
    assert kube.log.count("create pods/eviction") >= 3


# kubectl's typed clients (create namespace/configmap/quota/pdb) send protobuf and never retry in JSON --------------


def test_create_namespace_in_protobuf_then_get_it_as_json(kube: KubeHandle, kubectl: KubectlRunner) -> None:
    assert kubectl("create", "namespace", "x").stdout.strip() == "namespace/x created"
    namespace = json.loads(kubectl("get", "namespace", "x", "-o", "json").stdout)
    assert namespace["metadata"]["name"] == "x"
    assert namespace["status"] == {"phase": "Active"}
    assert kube.log.count("create namespaces") == 1
    refused = kubectl("create", "namespace", "x", ok=False)
    assert refused.stderr.strip() == 'Error from server (AlreadyExists): namespaces "x" already exists'


def test_create_configmap_quota_and_pdb_in_protobuf(kube: KubeHandle, kubectl: KubectlRunner) -> None:
    kubectl("create", "configmap", "settings", "--from-literal=mode=fast", "--from-literal=empty=")
    kubectl("create", "quota", "gpu", "--hard=requests.nvidia.com/gpu=4,pods=10")
    kubectl("create", "pdb", "trainer", "--selector=app=trainer", "--min-available=0")
    configmap = kube.get("ConfigMap", "settings", "default")
    assert configmap is not None
    assert configmap["data"] == {"mode": "fast", "empty": ""}
    quota = kube.get("ResourceQuota", "gpu", "default")
    assert quota is not None
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "4", "pods": "10"}}
    budget = kube.get("PodDisruptionBudget", "trainer", "default", "policy/v1")
    assert budget is not None
    assert budget["spec"] == {"minAvailable": 0, "selector": {"matchLabels": {"app": "trainer"}}}
    assert [m["manager"] for m in budget["metadata"]["managedFields"]] == ["kubectl-create"]


def test_apply_a_namespace_goes_in_json(kube: KubeHandle, kubectl: KubectlRunner, tmp_path: Path) -> None:
    manifest = tmp_path / "namespace.yaml"
    manifest.write_text(yaml.safe_dump(seed.namespace("team-b", labels={"team": "b"})))
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "namespace/team-b created"
    namespace = kube.get("Namespace", "team-b")
    assert namespace is not None
    assert namespace["metadata"]["labels"]["team"] == "b"


# The same bodies straight over HTTP ------------------------------------------------------------------------------

#: ``kubectl create namespace x`` as kubectl 1.37 puts it on the wire (from ``-v=8``).
KUBECTL_NAMESPACE_X = bytes.fromhex(
    "6b387300 0a0f0a02 76311209 4e616d65 73706163 6512190a 110a0178 12001a00"
    "22002a00 32003800 42001200 1a020a00 1a002200"
)


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128  # a one-byte length is all these tests need
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw)


def _post(kube: KubeHandle, path: str, body: bytes, content_type: str, accept: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        kube.url + path, body, {"Content-Type": content_type, "Accept": accept}, method="POST"
    )
    try:
        response = urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as error:
        response = error  # a Status body, read like any other
    with response:
        assert response.headers["Content-Type"] == "application/json"
        return response.getcode(), json.loads(response.read())


PROTOBUF = "application/vnd.kubernetes.protobuf"
KUBECTL_ACCEPT = "application/vnd.kubernetes.protobuf,application/json"


def test_protobuf_namespace_over_http_is_created_and_answered_in_json(kube: KubeHandle) -> None:
    code, created = _post(kube, "/api/v1/namespaces", KUBECTL_NAMESPACE_X, PROTOBUF, KUBECTL_ACCEPT)
    assert code == 201
    assert (created["kind"], created["metadata"]["name"], created["status"]) == ("Namespace", "x", {"phase": "Active"})
    labelled = _envelope(
        "v1", "Namespace", _field(1, _field(1, b"y") + _field(11, _field(1, b"team") + _field(2, b"a")))
    )
    code, created = _post(kube, "/api/v1/namespaces", labelled, PROTOBUF, KUBECTL_ACCEPT)
    assert code == 201
    assert created["metadata"]["labels"] == {"team": "a"}


def test_protobuf_the_emulator_cannot_decode_is_415_and_garbage_400(kube: KubeHandle) -> None:
    pod = _envelope("v1", "Pod", _field(1, _field(1, b"p")) + _field(2, _field(2, _field(1, b"c"))))
    code, status = _post(kube, "/api/v1/namespaces/default/pods", pod, PROTOBUF, KUBECTL_ACCEPT)
    assert (code, status["kind"], status["apiVersion"], status["status"]) == (415, "Status", "v1", "Failure")
    assert (status["reason"], status["code"]) == ("UnsupportedMediaType", 415)
    assert status["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )
    assert kube.list("Pod", "default") == []

    code, status = _post(kube, "/api/v1/namespaces", b'{"kind": "Namespace"}', "text/plain", KUBECTL_ACCEPT)
    assert (code, status["reason"]) == (415, "UnsupportedMediaType")
    assert status["message"].endswith("application/json, application/yaml, application/vnd.kubernetes.protobuf")

    code, status = _post(kube, "/api/v1/namespaces", b'{"kind": "Namespace"}', PROTOBUF, KUBECTL_ACCEPT)
    assert (code, status["reason"]) == (400, "BadRequest")
    assert "does not appear to be a protobuf message" in status["message"]


def test_a_client_that_accepts_no_json_is_406(kube: KubeHandle) -> None:
    code, status = _post(kube, "/api/v1/namespaces", KUBECTL_NAMESPACE_X, PROTOBUF, PROTOBUF)
    assert (code, status["reason"], status["message"]) == (
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json",
    )
    assert kube.get("Namespace", "x") is None
