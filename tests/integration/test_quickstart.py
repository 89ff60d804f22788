"""docs/quickstart.md, as a person types it: each ``bash`` block run by bash in a clone's top directory (this
checkout's ``kustomize/``, ``gitops/`` and ``.venv``), with the real kubectl and a kubeconfig whose one context is
the sandbox's EKS cluster ``ml-prod``, as a person's kubeconfig reaches their cluster. The Jobs made from the
pilot's CronJobs are run by the sandbox's executor as ``gpu-jobs`` processes with their ServiceAccount's RBAC."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs import shell_block
from tests.envelope import items
from tests.integration.test_install import NAMESPACE, conditions, summary
from tests.sandbox.world import World

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/quickstart.md"
CLUSTER = "ml-prod"  # the quickstart's example: the example policy's EKS cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World.start(prometheus=False, sync=False) as started:
        yield started


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone's top directory: what the quickstart reads and writes (``pilot/`` is made in it)."""
    top = tmp_path_factory.mktemp("clone")
    for tree in ("kustomize", "gitops"):
        shutil.copytree(ROOT / tree, top / tree)
    (top / ".venv").symlink_to(ROOT / ".venv")
    return top


def bash(world: World, clone: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **world.env(),
        "KUBECONFIG": str(world.kubeconfig_for(CLUSTER)),
        "PATH": f"{ROOT / '.tools' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("GPU_JOBS_POLICY")  # the quickstart names the policy file itself
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_quickstart_as_typed_installs_in_dry_run_and_its_one_off_runs_report_without_writing(
    world: World, clone: Path
) -> None:
    kube = world.kubes[CLUSTER]
    # 1. The policy: valid, and the calendar shows the cluster's groups only.
    checked = bash(world, clone, shell_block(PAGE, "## 1. Name your cluster"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ours = {g.name for g in world.policy.node_groups if world.policy.cluster_of(g).name == CLUSTER}
    others = {g.name for g in world.policy.node_groups} - ours
    assert all(name in checked.stdout for name in ours), checked.stdout
    assert not any(re.search(rf"\b{name}\b", checked.stdout) for name in others), checked.stdout

    # 2. The pilot install: every CronJob told its cluster, nodegroups and quotas in dry run, the sweep's already.
    installed = bash(world, clone, shell_block(PAGE, "## 2. Install in dry run"))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (clone / "pilot" / "kustomization.yaml").is_file()
    listed = [line.split()[0] for line in installed.stdout.splitlines() if line.split()]
    cronjobs = {c["metadata"]["name"]: c for c in kube.list("CronJob", NAMESPACE)}
    assert set(cronjobs) == {"nodegroups", "quotas", "cloud-quotas", "sweep-pods", "sweep-instances"}
    assert set(cronjobs) <= set(listed)  # `kubectl get cronjobs` lists them
    identity = kube.get("ConfigMap", "gpu-jobs-cluster", NAMESPACE)
    assert identity is not None
    assert identity["data"] == {"cluster": CLUSTER}  # the install's one per-cluster value
    for name, cronjob in cronjobs.items():
        (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        if name in ("nodegroups", "quotas", "sweep-pods"):  # told their cluster by its identity
            assert env["GPU_JOBS_CLUSTER"] == {"configMapKeyRef": {"name": "gpu-jobs-cluster", "key": "cluster"}}
        assert env["GPU_JOBS_DRY_RUN"] == "true", name
    assert {n for n, c in cronjobs.items() if c["spec"].get("suspend")} == {"cloud-quotas", "sweep-instances"}

    # 3. One-off runs of nodegroups and quotas: complete, in dry run, and nothing written in the cluster.
    quotas_before = kube.list("ResourceQuota")
    configmaps_before = {c["metadata"]["name"] for c in kube.list("ConfigMap", NAMESPACE)}
    ran = bash(world, clone, shell_block(PAGE, "## 3. A one-off run, and its report"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert re.search(r"job.batch/nodegroups-pilot-\d+ condition met", ran.stdout), ran.stdout
    assert re.search(r"job.batch/quotas-pilot-\d+ condition met", ran.stdout), ran.stdout
    reports = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{") and '"event"' not in line]
    assert [r["dryRun"] for r in reports] == [True, True]
    nodegroups, quotas = reports
    assert {g["cluster"] for g in items(nodegroups, "node group")} <= {CLUSTER}
    assert [s["name"] for s in quotas["scopes"]] == [CLUSTER]
    assert items(quotas, "namespace quota")  # the plan names the namespaces it governs
    jobs = [j for j in kube.list("Job", NAMESPACE) if "-pilot-" in j["metadata"]["name"]]
    assert len(jobs) == 2
    assert all(conditions(j) == {"SuccessCriteriaMet", "Complete"} for j in jobs)
    for job in jobs:
        (pod,) = [
            p
            for p in kube.list("Pod", NAMESPACE)
            if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == job["metadata"]["name"]
        ]
        log = kube.cluster.pod_log(NAMESPACE, pod["metadata"]["name"])
        run = summary(log)
        assert (run["dry_run"], run["applied"], run["exit_code"]) == (True, 0, 0)
        assert '"dryRun": true' in log  # and the report, beside the summary
    assert kube.list("ResourceQuota") == quotas_before
    assert {c["metadata"]["name"] for c in kube.list("ConfigMap", NAMESPACE)} == configmaps_before  # no record

    # The same plans as text, from the person's machine.
    text = bash(world, clone, shell_block(PAGE, "The same plans as text, from your machine"))
    assert text.returncode == 0, text.stdout + text.stderr
    assert f"gpu-jobs nodegroups in cluster {CLUSTER}" in text.stdout
    assert CLUSTER in text.stdout.split("gpu-jobs quotas", 1)[1]
