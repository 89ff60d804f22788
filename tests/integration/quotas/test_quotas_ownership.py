"""``gpu-jobs quotas`` against the Kubernetes API emulator where the managed quota is not (only) the job's: a
same-named quota another field manager created, and scopes added to the managed quota, each made with the real
kubectl as a person would. Exit 0 only when the policy holds: a quota in the way is a conflict (exit 1) with how to
resolve it and is never written; scopes are removed where the job's own apply owns them, else a conflict."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import gpu_node, gpu_pod, namespace, resource_quota
from tests.envelope import items
from tests.integration.cli import run_cli

pytestmark = pytest.mark.integration

KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"
POLICY = textwrap.dedent("""\
    apiVersion: gpu-jobs/v1
    kind: GpuPolicy
    defaults: {timezone: Europe/Berlin}
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}}
    namespaceQuotas:
      default: {nvidia.com/gpu: 0}
      exclude: [kube-system, kube-public, kube-node-lease, default, gpu-jobs]
      rules:
        - {namespaces: ["team-*"], hard: {nvidia.com/gpu: 4}}
    """)
DAY = "2026-12-01T12:00:00+01:00"
#: Until jobs/quotas/job.py reports the core's conflict and failed entries without writing them (the quotafix
#: branch's report has the change): remove the marker with it. Strict, so the change makes these pass or fail loudly.
GPU = "requests.nvidia.com/gpu"


class Job:
    """``gpu-jobs quotas`` as its CronJob runs it, and kubectl as a person runs it, against one emulated API."""

    def __init__(self, kube: KubeHandle, tmp: Path) -> None:
        self.kube, self.tmp = kube, tmp

    def run(self, *args: str) -> tuple[int, dict[str, Any], str]:
        policy = self.tmp / "policy.yaml"
        policy.write_text(POLICY)
        environ = {"KUBECONFIG": str(self.kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs"}
        done = run_cli(["quotas", "--policy", str(policy), "--at", DAY, *args], environ)
        return done.code, done.summary, done.stdout

    def json(self, *args: str) -> tuple[int, dict[str, Any], dict[str, dict[str, Any]]]:
        code, summary, out = self.run("--output", "json", *args)
        return code, summary, {n["namespace"]: n for n in items(json.loads(out), "namespace quota")}

    def kubectl(self, *args: str) -> str:
        if not KUBECTL.is_file():
            pytest.fail(f"kubectl is missing at {KUBECTL}: run .ci/install-kubectl first")
        done = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kube.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def apply(self, manager: str, quota: dict[str, Any]) -> None:
        manifest = self.tmp / f"{manager}.yaml"
        manifest.write_text(yaml.safe_dump(quota))
        self.kubectl("apply", "--server-side", "--field-manager", manager, "-f", str(manifest))

    def quota(self, ns: str) -> dict[str, Any]:
        found = self.kube.get("ResourceQuota", "gpu-quota", ns)
        assert found is not None
        return found

    def quota_writes(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.kube.log.writes() if "/resourcequotas" in r.path]

    def pod(self, name: str, ns: str, gpus: int) -> None:
        """Create a pod asking ``gpus`` GPUs (admitted, or ApiException 403 from quota admission)."""
        with self.kube.api_client() as api:
            client.CoreV1Api(api).create_namespaced_pod(ns, gpu_pod(name, ns, node="gpu-1", gpus=gpus))


@pytest.fixture
def job(kube: KubeHandle, tmp_path: Path) -> Job:
    for name in ("gpu-jobs", "team-a", "misc"):
        kube.create(namespace(name))
    kube.create(gpu_node("gpu-1"))
    kube.identify("ml-prod")
    kube.log.clear()
    return Job(kube, tmp_path)


def test_a_same_named_quota_another_manager_created_is_a_conflict_never_written(job: Job) -> None:
    """Issue 18 item 1: it was reported unchanged with a warning, exit 0, and the namespace kept 7 GPUs."""
    job.apply("someone-else", resource_quota("gpu-quota", "misc", {GPU: "7"}))
    job.kube.log.clear()

    code, summary, found = job.json()

    assert (code, summary["failed"], summary["applied"]) == (1, 1, 1)
    misc = found["misc"]
    assert (misc["action"], misc["status"], misc["hard"]) == ("conflict", "failed", {GPU: "0"})
    assert job.quota_writes() == ["PATCH /api/v1/namespaces/team-a/resourcequotas/gpu-quota"]  # none in misc
    assert job.quota("misc")["spec"]["hard"] == {GPU: "7"}
    assert [m["manager"] for m in job.quota("misc")["metadata"]["managedFields"]] == ["someone-else"]
    # The text report says what is in the way and how to resolve it; a dry run says the same, and exits 1 too.
    code, _, text = job.run("--dry-run")
    assert code == 1
    assert "misc        conflict conflict  requests.nvidia.com/gpu=0  (default)" in text
    assert "field managers someone-else; it says requests.nvidia.com/gpu=7" in text
    assert "Delete it (kubectl -n misc delete resourcequota gpu-quota) for the next run to write the policy's" in text
    assert "hand it to gpu-jobs (label it app.kubernetes.io/managed-by=gpu-jobs" in text
    assert "give namespaceQuotas another quotaName" in text

    # Resolved as the message says: deleted, the next run writes the policy's quota and a 4-GPU pod is refused.
    job.kubectl("-n", "misc", "delete", "resourcequota", "gpu-quota")
    code, _, found = job.json()
    assert (code, found["misc"]["action"]) == (0, "create")
    assert job.quota("misc")["spec"]["hard"] == {GPU: "0"}
    with pytest.raises(ApiException, match="exceeded quota: gpu-quota"):
        job.pod("big", "misc", gpus=4)


def test_scopes_another_manager_added_to_the_managed_quota_are_a_conflict(job: Job) -> None:
    """Issue 18 item 2: ``scopes: [Terminating]`` added by hand was reported unchanged (exit 0), and a pod asking 4
    GPUs was admitted in a namespace the policy gives 0. Server-side apply cannot remove the field: a conflict."""
    assert job.run()[0] == 0
    job.kubectl(
        "-n", "misc", "patch", "resourcequota", "gpu-quota", "--type=merge", "-p", '{"spec":{"scopes":["Terminating"]}}'
    )
    job.pod("long-running", "misc", gpus=4)  # not terminating: outside the quota's scope, so admitted
    job.kube.log.clear()

    code, summary, found = job.json()

    assert (code, summary["failed"]) == (1, 1)
    misc = found["misc"]
    assert (misc["action"], misc["status"]) == ("conflict", "failed")
    assert found["team-a"]["status"] == "unchanged"
    assert job.quota_writes() == []
    assert job.quota("misc")["spec"]["scopes"] == ["Terminating"]
    _, _, text = job.run()
    assert "scopes Terminating set on gpu-quota by kubectl-patch: the policy gives none" in text
    assert (
        """kubectl -n misc patch resourcequota gpu-quota --type=json -p '[{"op":"remove","path":"/spec/scopes"}]'"""
        in text
    )

    # Resolved as the message says: the quota limits every pod again, and the job finds it as the policy says.
    job.kubectl(
        "-n",
        "misc",
        "patch",
        "resourcequota",
        "gpu-quota",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/scopes"}]',
    )
    code, _, found = job.json()
    assert (code, found["misc"]["action"]) == (0, "unchanged")
    with pytest.raises(ApiException, match="exceeded quota: gpu-quota"):
        job.pod("another", "misc", gpus=4)


def test_scopes_the_jobs_own_field_manager_owns_are_removed(job: Job) -> None:
    """Scopes applied under the job's field manager (``--field-manager gpu-jobs-quotas``) are the job's own field:
    its next apply, which gives none, removes them and the quota limits every pod again."""
    assert job.run()[0] == 0
    scoped = job.quota("misc")
    body = resource_quota("gpu-quota", "misc", {GPU: "0"}, dict(scoped["metadata"]["labels"]))
    body["spec"]["scopes"] = ["Terminating"]
    job.apply("gpu-jobs-quotas", body)
    job.pod("long-running", "misc", gpus=4)  # admitted while the quota is scoped
    job.kube.log.clear()

    code, summary, found = job.json()

    assert (code, summary["applied"], summary["failed"]) == (0, 1, 0)
    assert (found["misc"]["action"], found["misc"]["status"]) == ("update", "applied")
    assert "scopes Terminating (not in the policy) removed: the quota limits every pod" in found["misc"]["warnings"]
    assert job.quota_writes() == ["PATCH /api/v1/namespaces/misc/resourcequotas/gpu-quota"]
    assert "scopes" not in job.quota("misc")["spec"]
    with pytest.raises(ApiException, match="exceeded quota: gpu-quota"):
        job.pod("another", "misc", gpus=4)
    job.kube.log.clear()
    assert job.json()[0] == 0
    assert job.quota_writes() == []  # a second run writes nothing
