"""``gpu-jobs quotas`` as a CronJob runs it, against the Kubernetes API emulator: namespace GPU quotas made what the
policy says, written with server-side apply as the enforced key, and nothing else touched."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import MANAGED, gpu_node, gpu_pod, namespace, resource_quota
from tests.envelope import items
from tests.integration.cli import run_cli

pytestmark = pytest.mark.integration

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
        - namespaces: ["team-*"]
          hard: {nvidia.com/gpu: 4}
        - selector: {matchLabels: {team: research}}
          hard: {nvidia.com/gpu: 2, memory: 256Gi}
          offHours:
            workingHours: [{days: Mon-Fri, start: "08:00", end: "19:00"}]
            hard: {nvidia.com/gpu: 8}
    """)
DAY = "2026-12-01T12:00:00+01:00"
NIGHT = "2026-12-01T19:00:00+01:00"


@pytest.fixture
def cluster(kube: KubeHandle) -> KubeHandle:
    for name, labels in [("gpu-jobs", {}), ("team-a", {}), ("lab", {"team": "research"}), ("misc", {})]:
        obj = namespace(name)
        obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), **labels}
        kube.create(obj)
    kube.create(gpu_node("gpu-1"))
    kube.identify("ml-prod")
    kube.log.clear()
    return kube


def quotas(
    kube: KubeHandle, tmp_path: Path, *args: str, at: str = DAY, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    environ = {"KUBECONFIG": str(kube.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", **(env or {})}
    done = run_cli(["quotas", "--policy", str(policy), "--at", at, *args], environ)
    return done.code, done.summary, done.stdout


def hard(kube: KubeHandle, ns: str, name: str = "gpu-quota") -> dict[str, str] | None:
    quota = kube.get("ResourceQuota", name, ns)
    return None if quota is None else quota["spec"]["hard"]


def test_a_dry_run_shows_the_diff_and_writes_nothing(cluster: KubeHandle, tmp_path: Path) -> None:
    code, summary, out = quotas(cluster, tmp_path, "--dry-run")
    assert (code, summary["planned"], summary["dry_run"]) == (0, 3, True)
    assert "team-a      create  planned   requests.nvidia.com/gpu=4  (rules[0])" in out
    assert cluster.log.writes() == []


def test_quotas_are_written_as_the_enforced_key_and_a_second_run_writes_nothing(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    code, summary, out = quotas(cluster, tmp_path, "--output", "json")
    assert (code, summary["applied"]) == (0, 3)
    doc = json.loads(out)
    assert [s["name"] for s in doc["scopes"]] == ["ml-prod"]
    assert {n["namespace"]: (n["action"], n["rule"], n["hard"]) for n in items(doc, "namespace quota")} == {
        "team-a": ("create", "rules[0]", {"requests.nvidia.com/gpu": "4"}),
        "lab": ("create", "rules[1]", {"memory": "256Gi", "requests.nvidia.com/gpu": "2"}),
        "misc": ("create", "default", {"requests.nvidia.com/gpu": "0"}),
    }
    assert hard(cluster, "team-a") == {"requests.nvidia.com/gpu": "4"}
    assert cluster.get("ResourceQuota", "gpu-quota", "kube-system") is None  # excluded
    assert any(e["involvedObject"]["name"] == "gpu-quota" for e in cluster.list("Event", "team-a"))
    cluster.log.clear()
    code, summary, out = quotas(cluster, tmp_path)
    assert (code, summary["planned"]) == (0, 0)
    assert cluster.log.writes() == []
    assert "nothing to change" in out
    # The enforced key is enforced: a pod over the quota is refused by admission.
    pod = gpu_pod("big", "misc", gpus=1)
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException, match="exceeded quota"):
            core.create_namespaced_pod("misc", pod)


def test_off_hours_limits_apply_at_the_boundary(cluster: KubeHandle, tmp_path: Path) -> None:
    quotas(cluster, tmp_path)
    code, _, _ = quotas(cluster, tmp_path, at=NIGHT)
    assert code == 0
    assert hard(cluster, "lab") == {"requests.nvidia.com/gpu": "8"}


def test_foreign_quotas_are_untouched_and_an_excluded_namespace_loses_its_managed_quota(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    cluster.create(resource_quota("gpu-quota", "misc", {"requests.nvidia.com/gpu": "9"}))  # foreign
    cluster.create(resource_quota("gpu-quota", "kube-system", {"requests.nvidia.com/gpu": "0"}, MANAGED))
    code, summary, out = quotas(cluster, tmp_path)
    # In the way of the policy's quota in misc: a failed item, left as it is (tests/integration/quotas/
    # test_quotas_ownership.py has the whole story); kube-system is excluded, so its managed quota goes.
    assert (code, summary["failed"]) == (1, 1)
    assert hard(cluster, "misc") == {"requests.nvidia.com/gpu": "9"}
    assert "that gpu-jobs does not manage (no field manager; it says requests.nvidia.com/gpu=9)" in out
    assert cluster.get("ResourceQuota", "gpu-quota", "kube-system") is None


def test_a_field_owned_by_another_manager_is_a_conflict_for_that_namespace_only(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    body = resource_quota("gpu-quota", "team-a", {"requests.nvidia.com/gpu": "9"}, MANAGED)
    with cluster.api_client() as api:
        client.CoreV1Api(api).patch_namespaced_resource_quota(
            "gpu-quota", "team-a", body, field_manager="argocd", _content_type="application/apply-patch+yaml"
        )
    code, summary, out = quotas(cluster, tmp_path, "--output", "json")
    assert (code, summary["failed"], summary["applied"]) == (1, 1, 2)
    entry = next(n for n in items(json.loads(out), "namespace quota") if n["namespace"] == "team-a")
    assert (entry["action"], entry["status"]) == ("conflict", "failed")
    assert hard(cluster, "team-a") == {"requests.nvidia.com/gpu": "9"}  # not forced


def test_a_failed_write_says_why_in_the_report_and_in_one_log_line(cluster: KubeHandle, tmp_path: Path) -> None:
    cluster.inject("patch resourcequotas", "server_error", times=1)  # one namespace's write: whichever goes first
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {"KUBECONFIG": str(cluster.kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs", "GPU_JOBS_RETRY_DEADLINE": "0"}
    done = run_cli(["quotas", "--policy", str(policy), "--at", DAY, "--output", "json"], env)
    assert (done.code, done.summary["failed"], done.summary["applied"]) == (1, 1, 2)
    (failed,) = items(json.loads(done.stdout), "namespace quota", "failed")
    assert "500" in failed["reason"], failed  # the API's answer, not a bare "failed"
    logged = [json.loads(line) for line in done.stderr.splitlines() if '"quota.failed"' in line]
    assert [(e["namespace"], e["quota"], e["error"]) for e in logged] == [
        (failed["namespace"], "gpu-quota", failed["reason"])
    ]
    cluster.inject("patch resourcequotas", "server_error", times=1)
    text = run_cli(["quotas", "--policy", str(policy), "--at", DAY], env)  # the last namespace, in the text report
    assert text.code == 1
    assert f"error: {failed['reason']}" in text.stdout


def test_a_plan_over_the_limit_is_refused(cluster: KubeHandle, tmp_path: Path) -> None:
    code, summary, out = quotas(cluster, tmp_path, "--max-changes", "2")
    assert (code, summary["exit_code"]) == (3, 3)
    assert "REFUSED: the plan changes 3 namespace quotas, more than the limit of 2" in out
    assert cluster.log.writes() == []


@pytest.mark.parametrize(
    ("operation", "fault"),
    [
        ("list namespaces", "throttle"),
        ("list resourcequotas", "server_error"),
        ("patch resourcequotas", "throttle"),
        ("patch resourcequotas", "server_error"),
        ("patch resourcequotas", "timeout"),
        ("patch resourcequotas", "lost"),
    ],
)
def test_faults_are_retried_and_the_result_is_the_same(
    cluster: KubeHandle, tmp_path: Path, operation: str, fault: str
) -> None:
    cluster.emulator.timeout_hold_s = 0.5
    cluster.inject(operation, fault, times=1)  # type: ignore[arg-type]
    environ_timeout = {"GPU_JOBS_REQUEST_TIMEOUT": "0.3"} if fault == "timeout" else {}
    code, summary, _ = quotas(cluster, tmp_path, env=environ_timeout)
    assert (code, summary["applied"], summary["failed"]) == (0, 3, 0)
    assert hard(cluster, "team-a") == {"requests.nvidia.com/gpu": "4"}


def test_over_commit_is_measured_on_the_nodes_when_the_policy_gives_no_sizes(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    """The policy has no node groups for this cluster: the job counts the GPUs its nodes have allocatable."""
    cluster.create(namespace("team-b"))
    allocatable = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in cluster.list("Node"))
    code, _, out = quotas(cluster, tmp_path, "--dry-run", "--output", "json")

    assert code == 0
    (scope,) = json.loads(out)["scopes"]
    assert scope["warnings"] == [
        f"requests.nvidia.com/gpu: quotas add up to 10 but its nodes have {allocatable} allocatable now: over-committed"
    ]
    assert "list nodes" in cluster.log.operations()
    cluster.log.clear()
    assert quotas(cluster, tmp_path)[0] == 0  # planned, then planned again under the Lease: nodes counted once
    assert cluster.log.operations().count("list nodes") == 1


def test_usage_in_any_apimachinery_spelling_is_read_and_a_run_never_crashes_on_it(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    """Issue 18 item 4: a pod asking ``100u`` made ``status.used`` say ``100u``, which the job could not parse: every
    namespace of the cluster failed while that pod existed."""
    assert quotas(cluster, tmp_path)[0] == 0
    pod = gpu_pod("tiny", "lab", gpus=0)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"memory": "100u"}, "limits": {"memory": "100u"}}
    with cluster.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod("lab", pod)
    assert cluster.get("ResourceQuota", "gpu-quota", "lab")["status"]["used"]["memory"] == "100u"  # type: ignore[index]
    cluster.log.clear()
    code, summary, out = quotas(cluster, tmp_path, "--output", "json")
    assert (code, summary["failed"], summary["planned"]) == (0, 0, 0)
    assert {n["namespace"]: n["action"] for n in items(json.loads(out), "namespace quota")} == {
        "team-a": "unchanged",
        "lab": "unchanged",
        "misc": "unchanged",
    }
    assert cluster.log.writes() == []


def test_a_first_run_puts_each_event_on_its_quota_by_uid_without_a_read_per_event(
    cluster: KubeHandle, tmp_path: Path
) -> None:
    """Issue 23 item 6: the uid of each Event's quota is the one the run listed or applied (a list per Event made
    the first run over 5,000 namespaces 5,002 list calls)."""
    cluster.log.clear()
    assert quotas(cluster, tmp_path, at=DAY)[0] == 0
    uids = {q["metadata"]["namespace"]: q["metadata"]["uid"] for q in cluster.list("ResourceQuota")}
    events = [e["involvedObject"] for e in cluster.list("Event") if e["reason"] == "QuotaReconciled"]
    assert len(events) >= 2
    assert [(e["kind"], e["uid"]) for e in events] == [("ResourceQuota", uids[e["namespace"]]) for e in events]
    listed = cluster.log.operations().count("list resourcequotas")
    assert listed <= 2  # the plan's list and the look again under the Lease: none per Event


def test_the_report_and_the_events_say_old_and_new_limits_in_sentences(cluster: KubeHandle, tmp_path: Path) -> None:
    cluster.create(resource_quota("gpu-quota", "kube-system", {"requests.nvidia.com/gpu": "1"}, MANAGED))
    assert quotas(cluster, tmp_path, at=DAY)[0] == 0
    code, _, out = quotas(cluster, tmp_path, at=NIGHT)  # lab's off-hours rule: 8 GPUs, no memory limit
    assert code == 0
    assert (
        "lab         update  applied   requests.nvidia.com/gpu 2 -> 8, memory 256Gi -> removed  (rules[1].offHours)"
        in out
    )
    events = [(e["involvedObject"]["namespace"], e["reason"], e["message"]) for e in cluster.list("Event")]
    messages = {(ns, m) for ns, reason, m in events if reason == "QuotaReconciled"}
    assert {
        ("team-a", "Created the GPU quota: requests.nvidia.com/gpu=4 (rule rules[0])."),
        ("kube-system", "Deleted the GPU quota: requests.nvidia.com/gpu 1 -> removed (rule excluded)."),
        ("lab", "Created the GPU quota: memory=256Gi, requests.nvidia.com/gpu=2 (rule rules[1])."),
        (
            "lab",
            "Updated the GPU quota: requests.nvidia.com/gpu 2 -> 8, memory 256Gi -> removed (rule rules[1].offHours).",
        ),
    } <= messages
    assert [m for _, _, m in events if any(c in m for c in ("{", "'", "None"))] == []
