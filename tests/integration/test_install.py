"""The install inside the sandbox: each cluster's rendered install applied with the real kubectl, and Jobs created
from its CronJobs (``kubectl create job --from=cronjob/...``) run by the sandbox's executor as real ``gpu-jobs``
processes with nothing but their ServiceAccount's RBAC and the mounted policy ConfigMap.

One world for the module; each test works in a cluster of its own, so the order does not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.labels import NODE_GROUP_LABEL
from tests.envelope import items
from tests.integration.cli import run_cli
from tests.sandbox import install as installer
from tests.sandbox.world import World

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
NAMESPACE = "gpu-jobs"
#: A plain Tuesday evening (as in test_sandbox): training-a100 in ml-prod is past its working hours, idle.
EVENING = "2027-03-09T22:01:00+01:00"
MORNING = "2027-03-10T10:00:00+01:00"
IDENTITY = {
    "aws": "eks.amazonaws.com/role-arn",
    "gcp": "iam.gke.io/gcp-service-account",
    "azure": "azure.workload.identity/client-id",
}

pytestmark = pytest.mark.integration

Json = dict[str, Any]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World.start(prometheus=False, sync=False) as started:
        yield started


def kubectl(world: World, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(world.kubeconfig)}
    return subprocess.run(
        [str(KUBECTL), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def start_job(world: World, cluster: str, cronjob: str, name: str, **settings: str) -> None:
    """``kubectl create job --from=cronjob/...``; with settings, through the ``set env`` pipeline of docs/deploying.md."""
    create = ("--context", cluster, "-n", NAMESPACE, "create", "job", f"--from=cronjob/{cronjob}", name)
    if not settings:
        done = kubectl(world, *create)
    else:
        manifest = kubectl(world, *create, "--dry-run=client", "-o", "yaml")
        assert manifest.returncode == 0, manifest.stderr
        pairs = [f"{k}={v}" for k, v in settings.items()]
        changed = kubectl(world, "set", "env", "--local", "-f", "-", *pairs, "-o", "yaml", stdin=manifest.stdout)
        assert changed.returncode == 0, changed.stderr
        done = kubectl(world, "--context", cluster, "create", "-f", "-", stdin=changed.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"job.batch/{name} created"


def finished(world: World, cluster: str, name: str) -> tuple[Json, Json, str]:
    """The Job once finished, its pod, and ``kubectl logs job/<name>``."""
    assert world.executor is not None
    job = world.executor.wait(cluster, NAMESPACE, name)
    pods = [
        p
        for p in world.kubes[cluster].list("Pod", NAMESPACE)
        if any(o["uid"] == job["metadata"]["uid"] for o in p["metadata"].get("ownerReferences") or [])
    ]
    assert len(pods) == 1
    logs = kubectl(world, "--context", cluster, "-n", NAMESPACE, "logs", f"job/{name}")
    assert logs.returncode == 0, logs.stderr
    return job, pods[0], logs.stdout


def conditions(job: Json) -> set[str]:
    return {c["type"] for c in job["status"].get("conditions") or [] if c["status"] == "True"}


def exit_code(pod: Json) -> int:
    code: int = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
    return code


def summary(logs: str) -> Json:
    events = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    found: Json = next(e for e in events if e.get("event") == "run.summary")
    return found


def report(logs: str) -> Json:
    """The ``--output json`` report in the pod's log: the JSON document that is not a log event (on one line, or
    indented over several)."""
    decoder = json.JSONDecoder()
    at = 0
    while (at := logs.find("{", at)) >= 0:
        try:
            document, end = decoder.raw_decode(logs, at)
        except ValueError:
            at += 1
            continue
        if isinstance(document, dict) and "event" not in document:
            return document
        at = end
    raise AssertionError(f"no JSON report in the log:\n{logs}")


def test_each_cluster_runs_its_clouds_install_told_its_name_and_a_second_apply_changes_nothing(world: World) -> None:
    for cluster in world.policy.fleet:
        kube = world.kubes[cluster.name]
        lines = world.installed[cluster.name].splitlines()
        assert "cronjob.batch/nodegroups created" in lines
        assert "cronjob.batch/quotas created" in lines
        assert any(line.startswith("configmap/gpu-jobs-policy") for line in lines)
        for name in ("nodegroups", "quotas"):
            cronjob = kube.get("CronJob", name, NAMESPACE)
            assert cronjob is not None, (cluster.name, name)
            container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("valueFrom") for e in container["env"]}
            assert env["GPU_JOBS_CLUSTER"] == {"configMapKeyRef": {"name": "gpu-jobs-cluster", "key": "cluster"}}
        identity = kube.get("ConfigMap", "gpu-jobs-cluster", NAMESPACE)
        assert identity is not None
        assert identity["data"] == {"cluster": cluster.name}
        account = kube.get("ServiceAccount", "gpu-jobs-nodegroups", NAMESPACE)
        assert account is not None
        identities = set(IDENTITY.values()) & set(account["metadata"].get("annotations") or {})
        assert identities == {IDENTITY[cluster.cloud]}, cluster.name  # its cloud's identity only
        assert kube.get("ClusterRoleBinding", "gpu-jobs-quotas") is not None

    again = installer.install("batch", "aws", "batch", {**os.environ, "KUBECONFIG": str(world.kubeconfig)})
    assert again.splitlines()
    assert all(line.endswith(" unchanged") for line in again.splitlines()), again


def test_a_quotas_job_does_what_a_cli_run_would_with_its_service_accounts_rbac(world: World) -> None:
    cluster = "aks-ml"
    plan = run_cli(
        ["quotas", "--dry-run", "--cluster", cluster, "--output", "json"],
        {**world.env(), "KUBECONFIG": str(world.kubeconfig_for(cluster))},
    )
    assert plan.code == 0, plan.stderr
    quotas = items(json.loads(plan.stdout), "namespace quota")
    planned = {e["namespace"]: e["hard"] for e in quotas if e["action"] == "create"}
    assert len(planned) >= 20

    start_job(world, cluster, "quotas", "quotas-manual-1")
    job, pod, logs = finished(world, cluster, "quotas-manual-1")

    assert conditions(job) == {"SuccessCriteriaMet", "Complete"}
    assert (job["status"]["succeeded"], exit_code(pod)) == (1, 0), logs
    assert summary(logs)["exit_code"] == 0
    quotas = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in world.kubes[cluster].list("ResourceQuota")}
    assert {ns: quotas.get(ns) for ns in planned} == planned  # what the CLI planned, the Job did
    # The run's credentials were a token of the CronJob's ServiceAccount, which the emulator authorises by RBAC.
    callers = {c.name for c in world.kubes[cluster].emulator.service_account_tokens.values()}
    assert callers == {"gpu-jobs-quotas"}


def test_a_nodegroups_job_scales_what_a_cli_run_plans_and_describe_shows_its_events(world: World) -> None:
    from tests.emulators.aws import moto_state

    cluster = "ml-prod"
    env = {**world.env(), "KUBECONFIG": str(world.kubeconfig_for(cluster))}
    plan = run_cli(["nodegroups", "--dry-run", "--cluster", cluster, "--at", EVENING, "--output", "json"], env)
    assert plan.code == 0, plan.stderr
    planned = {g["name"]: g["after"] for g in items(json.loads(plan.stdout), "node group") if "after" in g}
    assert set(planned) == {"training-a100", "train-h100"}  # the Karpenter pool too, under the same RBAC

    start_job(world, cluster, "nodegroups", "nodegroups-evening", GPU_JOBS_AT=EVENING, GPU_JOBS_OUTPUT="json")
    job, pod, logs = finished(world, cluster, "nodegroups-evening")

    assert conditions(job) == {"SuccessCriteriaMet", "Complete"}, logs
    assert exit_code(pod) == 0
    applied = {g["name"]: (g["status"], g["after"]) for g in items(report(logs), "node group") if "after" in g}
    assert applied == {name: ("applied", after) for name, after in planned.items()}
    nodegroup = moto_state.find_nodegroup("eu-west-1", "ml-prod", "gpu-a100-spot")
    assert nodegroup is not None
    assert nodegroup.scaling_config["desiredSize"] == 0

    # The command of docs/nodegroups.md: the change is an Event on the group's record, shown under it.
    described = kubectl(
        world, "--context", cluster, "-n", NAMESPACE, "describe", "configmap", "-l", f"{NODE_GROUP_LABEL}=training-a100"
    )
    assert described.returncode == 0, described.stderr
    events = described.stdout.split("Events:", 1)[1]
    assert "<none>" not in events
    assert "NodeGroupScaled" in events, described.stdout

    # The same Job in the morning restores the group at its recorded size.
    start_job(world, cluster, "nodegroups", "nodegroups-morning", GPU_JOBS_AT=MORNING)
    job, pod, logs = finished(world, cluster, "nodegroups-morning")
    assert conditions(job) == {"SuccessCriteriaMet", "Complete"}, logs
    nodegroup = moto_state.find_nodegroup("eu-west-1", "ml-prod", "gpu-a100-spot")
    assert nodegroup is not None
    assert nodegroup.scaling_config["desiredSize"] == 4


def test_a_job_with_a_bad_policy_configmap_fails_with_exit_2_and_changes_nothing(world: World) -> None:
    cluster = "batch"
    kube = world.kubes[cluster]
    cronjob = kube.get("CronJob", "quotas", NAMESPACE)
    assert cronjob is not None
    volume = next(v for v in cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    policy = kube.get("ConfigMap", volume["configMap"]["name"], NAMESPACE)
    assert policy is not None
    text = policy["data"]["policy.yaml"]
    assert "days: Mon-Fri" in text
    policy["data"]["policy.yaml"] = text.replace("days: Mon-Fri", "days: Mon-Fry", 1)
    kube.put(policy)
    writes_before = len(kube.log.writes())

    start_job(world, cluster, "quotas", "quotas-bad-policy")
    job, pod, logs = finished(world, cluster, "quotas-bad-policy")

    assert conditions(job) == {"FailureTarget", "Failed"}
    assert job["status"]["failed"] == 1
    assert "succeeded" not in job["status"]
    assert exit_code(pod) == 2
    assert "Mon-Fry" in logs
    assert kube.list("ResourceQuota") == []
    assert len(kube.log.writes()) == writes_before + 1  # the Job's creation: the run wrote nothing
    policy["data"]["policy.yaml"] = text
    kube.put(policy)


def test_a_verb_removed_from_the_role_fails_the_run_as_in_a_cluster(world: World) -> None:
    cluster = "notebooks"
    role = kubectl(world, "--context", cluster, "get", "clusterrole", "gpu-jobs-quotas", "-o", "yaml")
    assert role.returncode == 0, role.stderr
    rules = yaml.safe_load(role.stdout)["rules"]
    index = next(i for i, r in enumerate(rules) if "resourcequotas" in r["resources"])
    verbs = [v for v in rules[index]["verbs"] if v != "patch"]
    assert len(verbs) == len(rules[index]["verbs"]) - 1
    patch = json.dumps([{"op": "replace", "path": f"/rules/{index}/verbs", "value": verbs}])
    patched = kubectl(
        world, "--context", cluster, "patch", "clusterrole", "gpu-jobs-quotas", "--type=json", "-p", patch
    )
    assert patched.returncode == 0, patched.stderr

    started = time.monotonic()
    start_job(world, cluster, "quotas", "quotas-without-patch")
    job, pod, logs = finished(world, cluster, "quotas-without-patch")

    assert conditions(job) == {"FailureTarget", "Failed"}
    assert exit_code(pod) == 1
    errors = [json.loads(line).get("error", "") for line in logs.splitlines() if line.startswith("{")]
    denied = 'User "system:serviceaccount:gpu-jobs:gpu-jobs-quotas" cannot patch resource "resourcequotas"'
    assert any(denied in error for error in errors), logs
    assert world.kubes[cluster].list("ResourceQuota") == []
    assert time.monotonic() - started < 60
