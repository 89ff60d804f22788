"""A Karpenter NodePool as a node group, through ``gpu-jobs nodegroups`` (a separate process, as the CronJob runs
it) against the Kubernetes emulator and its Karpenter model on emulated time: the evening (a zero limit before any
claim goes, idle claims removed on every run, running work per ``onBusy``), the morning (the limits exactly back),
and what goes wrong (a lost record, a lost answer, Karpenter on its own pool)."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobs.adapters.kube import karpenter as karpenter_adapter
from jobs.adapters.kube.client import request
from jobs.adapters.kube.karpenter import KarpenterPools
from jobs.adapters.settings import AdapterSettings
from jobs.core.group_config import GroupConfig
from jobs.history import Entry, decode
from jobs.labels import RECORD_KIND_LABEL
from jobs.policy_file import parse_policy
from tests.docs import shell_block
from tests.emulators.kube import karpenter as model
from tests.emulators.kube import seed
from tests.emulators.kube.fixtures import KubeHandle
from tests.envelope import items
from tests.integration.cli import run_cli
from tests.sandbox.karpenter_world import KarpenterWorld, seed_gpu_pool

pytestmark = pytest.mark.integration
KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"

# Monday 2 March 2026, UTC: working hours Mon-Fri 08:00-20:00, warm-up 15 min.
EVENING = datetime(2026, 3, 2, 20, 5, tzinfo=UTC)
MORNING = datetime(2026, 3, 3, 7, 50, tzinfo=UTC)
LIMITS = {"cpu": "1000", "nvidia.com/gpu": "64"}
ZERO = {"cpu": "0", "nodes": "0"}


def policy(on_busy: str = "wait", extra: str = "") -> str:
    return f"""\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
clusters:
  - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}}}
defaults:
  timezone: UTC
  workingHours: [{{days: Mon-Fri, start: "08:00", end: "20:00"}}]
  warmUp: 15m
nodeGroups:
  - name: train-h100
    karpenter: {{cluster: ml-prod, nodePool: gpu-h100}}
    gpusPerNode: 8
    onBusy: {on_busy}
{extra}"""


@dataclass
class Run:
    code: int
    summary: dict[str, Any]
    document: dict[str, Any]

    @property
    def item(self) -> dict[str, Any]:
        (found,) = items(self.document, "node group")
        return found


def gpu_jobs(kube: KubeHandle, tmp_path: Path, at: datetime, on_busy: str = "wait", extra: str = "") -> Run:
    path = tmp_path / "policy.yaml"
    path.write_text(policy(on_busy, extra))
    env = {
        "KUBECONFIG": str(kube.kubeconfig),
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_POLICY": str(path),
        "GPU_JOBS_POLL_INTERVAL": "0.01",
        "GPU_JOBS_RETRY_DEADLINE": "1",
    }
    done = run_cli(["nodegroups", "--at", at.isoformat(), "--output", "json"], env)
    return Run(done.code, done.summary, json.loads(done.stdout))


def world(kube: KubeHandle, *, grace: str | None = "24h", controller_on_pool: bool = False) -> KarpenterWorld:
    """The evening's pool (a busy and an idle claim), in a cluster that says it is ml-prod; ``grace``: the pool's
    terminationGracePeriod (None: none)."""
    kube.identify("ml-prod")
    found = seed_gpu_pool(kube, limits=dict(LIMITS), start=EVENING, controller_on_pool=controller_on_pool)
    if grace is None:
        for claim in found.karpenter.claims(found.pool):
            claim["spec"].pop("terminationGracePeriod", None)
            kube.put(claim)
    kube.log.clear()
    return found


def limits(kube: KubeHandle) -> dict[str, str] | None:
    pool = kube.get("nodepools", "gpu-h100", api_version=model.API_VERSION)
    assert pool is not None
    found: dict[str, str] | None = pool["spec"].get("limits")
    return found


def claims(w: KarpenterWorld) -> list[str]:
    return sorted(
        c["metadata"]["name"] for c in w.karpenter.claims(w.pool) if not c["metadata"].get("deletionTimestamp")
    )


def record(kube: KubeHandle) -> dict[str, Any]:
    (found,) = [
        c for c in kube.list("ConfigMap", "gpu-jobs") if c["metadata"]["name"].startswith("gpu-jobs-nodegroup-")
    ]
    data: dict[str, Any] = json.loads(found["data"]["record.json"])
    return data


def history_entries(kube: KubeHandle) -> list[Entry]:
    found: list[Entry] = []
    for cm in kube.list("ConfigMap", "gpu-jobs"):
        if (cm["metadata"].get("labels") or {}).get(RECORD_KIND_LABEL) == "history":
            entries, problems = decode(cm["data"]["entries"])
            assert problems == []
            found += entries
    return found


def test_the_evening_zero_limit_first_idle_claim_removed_busy_one_kept_under_wait_then_a_quiet_second_run(
    kube: KubeHandle, tmp_path: Path
) -> None:
    w = world(kube)
    run = gpu_jobs(kube, tmp_path, EVENING)
    assert (run.code, run.summary["applied"], run.summary["failed"]) == (0, 1, 0)
    ops = kube.log.operations()
    assert ops.index("patch nodepools") < ops.index("delete nodeclaims")  # the limit before any claim goes
    assert ops.count("delete nodeclaims") == 1
    assert limits(kube) == ZERO
    assert claims(w) == [w.busy_claim]  # the idle claim is being deleted; the busy one stays (wait)
    assert kube.get("pods", w.gpu_pod, "ml") is not None
    kept = record(kube)
    assert kept["config"]["limits"] == LIMITS
    assert "consolidates" not in kept["config"]  # read for the report, never restored
    # Karpenter (WhenEmpty after 5m) would have removed the idle claim's node by itself: the night avoids nothing.
    (down,) = [e for e in history_entries(kube) if e.kind == "down"]
    assert (down.nodes, down.gpus, down.floor, down.would_run()) == (2, 16, 0, (0, 0))
    assert kept["phase"] == "down"
    assert kept["busySince"]
    assert "kept until" in run.item["reason"]
    assert w.busy_node in run.item["reason"]
    on_pool = {e["reason"]: e for e in kube.list("Event", "default") if e["involvedObject"]["kind"] == "NodePool"}
    assert sorted(on_pool) == ["LimitsSet", "NodeClaimsDeleted"]
    assert w.idle_claim in on_pool["NodeClaimsDeleted"]["message"]
    assert w.busy_claim in on_pool["NodeClaimsDeleted"]["message"]  # kept, and why
    w.karpenter.advance(60)
    assert [c["metadata"]["name"] for c in w.karpenter.claims(w.pool)] == [w.busy_claim]

    kube.log.clear()
    second = gpu_jobs(kube, tmp_path, EVENING.replace(minute=15))
    assert (second.code, second.summary["applied"], second.summary["failed"]) == (0, 0, 0)
    assert kube.log.writes() == []  # nothing written: the limit is down, only running work remains


@pytest.mark.parametrize(
    ("disruption", "stored", "consolidates"),
    [
        # The emulator's pool: Karpenter removes an empty node 5 minutes after it empties.
        (
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
            True,
        ),
        # Never: the empty nodes stay, and so do their GPUs.
        (
            {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never"},
            {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never"},
            False,
        ),
        # No disruption block: the CRD's defaults, v1's WhenEmptyOrUnderutilized after 0s.
        (None, {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}, True),
    ],
)
def test_describe_reads_whether_karpenter_removes_the_pools_empty_nodes_and_the_record_keeps_only_the_limits(
    kube: KubeHandle, disruption: dict[str, str] | None, stored: dict[str, str], consolidates: bool
) -> None:
    pool = model.nodepool("gpu-h100", limits=dict(LIMITS), taints=[model.GPU_TAINT])
    if disruption is None:
        del pool["spec"]["disruption"]
    else:
        pool["spec"]["disruption"] = disruption
    with kube.api_client() as api:  # through the API server, which fills in the CRD's defaults
        request(api, "create nodepools", "POST", f"/apis/{model.API_VERSION}/nodepools", body=pool)
        group = parse_policy(policy(), "policy.yaml").node_groups[0]
        config = KarpenterPools(AdapterSettings(), api).describe(group)
    found = kube.get("nodepools", "gpu-h100", api_version=model.API_VERSION)
    assert found is not None
    assert {k: found["spec"]["disruption"][k] for k in stored} == stored
    assert config.consolidates is consolidates
    assert GroupConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    assert config.to_json()["consolidates"] is consolidates  # what the history's down entry reads (its floor)
    # A record keeps what a restore writes back, the limits; never the consolidation.
    recorded = config.recordable().to_json()
    assert (recorded["limits"], "consolidates" in recorded) == (LIMITS, False)


@pytest.mark.parametrize(
    ("spec", "consolidates"),
    [
        # A static pool keeps its replicas: Karpenter ignores its consolidation.
        ({"replicas": 2, "disruption": {"consolidateAfter": "0s"}}, False),
        # A disruption without consolidateAfter (refused by the CRD) is Karpenter's nil duration: never.
        ({"disruption": {"consolidationPolicy": "WhenEmpty"}}, False),
        ({"disruption": {"consolidationPolicy": "Balanced", "consolidateAfter": "30s"}}, True),
        ({}, True),
    ],
)
def test_consolidation_of_pools_the_api_server_never_shows(spec: dict[str, Any], consolidates: bool) -> None:
    assert karpenter_adapter.consolidates(spec) is consolidates


def test_a_claim_launched_after_the_limit_and_a_notready_claim_go_on_the_next_run(
    kube: KubeHandle, tmp_path: Path
) -> None:
    w = world(kube, grace=None)
    assert gpu_jobs(kube, tmp_path, EVENING).code == 0
    late = w.karpenter.seed_claim(w.pool)  # launched just before the limit showed (Karpenter's cache)
    never = w.karpenter.seed_claim(w.pool, registered=False)  # its node never registers (kubelet never joins)
    assert sorted(claims(w)) == sorted([w.busy_claim, late["metadata"]["name"], never["metadata"]["name"]])

    kube.log.clear()
    run = gpu_jobs(kube, tmp_path, EVENING.replace(minute=15))
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert kube.log.count("patch nodepools") == 0  # the limit is already down
    assert claims(w) == [w.busy_claim]


def test_drain_lets_karpenter_drain_a_busy_claim(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube, grace=None)
    run = gpu_jobs(kube, tmp_path, EVENING, on_busy="drain")
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert claims(w) == []
    w.karpenter.advance(120)  # Karpenter evicts the GPU pod (30 s grace), then the instance stops
    assert kube.get("pods", w.gpu_pod, "ml") is None
    assert w.karpenter.claims(w.pool) == []


def test_drain_keeps_a_busy_claim_whose_termination_grace_period_would_force_its_pods(
    kube: KubeHandle, tmp_path: Path
) -> None:
    w = world(kube, grace="24h")
    run = gpu_jobs(kube, tmp_path, EVENING, on_busy="drain")
    assert run.code == 0
    assert claims(w) == [w.busy_claim]
    assert "as onBusy force would" in json.dumps(run.document)
    assert kube.get("pods", w.gpu_pod, "ml") is not None


def test_force_deletes_the_busy_claim_and_the_pods_that_would_hold_it(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube, grace="24h")
    run = gpu_jobs(kube, tmp_path, EVENING, on_busy="force")
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert claims(w) == []
    assert "delete pods" in kube.log.operations()
    w.karpenter.advance(120)
    assert kube.get("pods", w.gpu_pod, "ml") is None
    assert w.karpenter.claims(w.pool) == []


@pytest.mark.parametrize("on_busy", ["wait", "drain"])
def test_a_do_not_disrupt_pod_is_running_work_gpus_or_not(kube: KubeHandle, tmp_path: Path, on_busy: str) -> None:
    w = world(kube, grace=None)
    pod = seed.gpu_pod("notebook", "ml", node=w.idle_node, gpus=0)
    pod["metadata"]["annotations"] = {model.DO_NOT_DISRUPT: "true"}
    kube.create(pod)
    run = gpu_jobs(kube, tmp_path, EVENING, on_busy=on_busy)
    assert run.code == 0
    assert w.idle_claim in claims(w)
    assert kube.get("pods", "notebook", "ml") is not None


def test_karpenter_on_its_own_pool_is_refused_and_nothing_changes(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube, controller_on_pool=True)
    run = gpu_jobs(kube, tmp_path, EVENING)
    assert (run.code, run.summary["failed"]) == (1, 1)
    message = run.item["reason"]
    assert "Karpenter controller runs on NodePool gpu-h100" in message
    assert w.idle_node in message
    assert limits(kube) == LIMITS
    assert sorted(claims(w)) == sorted([w.busy_claim, w.idle_claim])
    assert kube.log.count("patch nodepools") == kube.log.count("delete nodeclaims") == 0


def test_the_morning_writes_the_recorded_limits_back_exactly(kube: KubeHandle, tmp_path: Path) -> None:
    world(kube)
    assert gpu_jobs(kube, tmp_path, EVENING).code == 0
    assert limits(kube) == ZERO
    run = gpu_jobs(kube, tmp_path, MORNING)
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert limits(kube) == LIMITS  # `nodes` gone again, the GPU limit back, as stored
    assert record(kube)["phase"] == "up"
    kube.log.clear()
    assert gpu_jobs(kube, tmp_path, MORNING.replace(minute=55)).summary["applied"] == 0
    assert kube.log.writes() == []


def test_a_lost_record_fails_the_morning_and_guesses_no_limits(kube: KubeHandle, tmp_path: Path) -> None:
    world(kube)
    assert gpu_jobs(kube, tmp_path, EVENING).code == 0
    name = next(
        c["metadata"]["name"] for c in kube.list("ConfigMap", "gpu-jobs") if "nodegroup-" in c["metadata"]["name"]
    )
    kube.cluster.delete("ConfigMap", name, "gpu-jobs")
    run = gpu_jobs(kube, tmp_path, MORNING)
    assert (run.code, run.summary["failed"]) == (1, 1)
    assert "no record" in run.item["reason"]
    assert limits(kube) == ZERO


def test_a_lost_answer_on_the_limit_patch_is_read_back_not_resent(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube, grace=None)
    kube.inject("patch nodepools", "lost")
    run = gpu_jobs(kube, tmp_path, EVENING)
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert kube.log.count("patch nodepools") == 1
    assert limits(kube) == ZERO
    assert claims(w) == [w.busy_claim]


def test_the_shipped_rbac_is_enough_for_a_forced_night_and_a_morning_and_all_of_its_karpenter_part_is_used(
    kube: KubeHandle, tmp_path: Path
) -> None:
    from tests.integration.test_deploy import rendered_allow_list

    w = world(kube)
    allowed = rendered_allow_list("production/aws")
    kube.allow_only(*allowed)
    prewarm = "    prewarm: {nodes: 1}\n"
    evening = gpu_jobs(kube, tmp_path, EVENING, on_busy="force", extra=prewarm)
    assert claims(w) == []
    morning = gpu_jobs(kube, tmp_path, MORNING, on_busy="force", extra=prewarm)
    assert (evening.code, evening.summary["applied"], morning.code, morning.summary["applied"]) == (0, 1, 0, 1)
    assert limits(kube) == LIMITS
    used = {tuple(op.split(" ", 1)) for op in kube.log.operations()}
    assert used <= allowed
    karpenter = {("get", "nodepools"), ("patch", "nodepools"), ("list", "nodeclaims"), ("delete", "nodeclaims")}
    prewarm_grants = {("create", "pods"), ("get", "priorityclasses"), ("create", "priorityclasses")}
    assert karpenter | prewarm_grants | {("delete", "pods"), ("create", "events")} <= used


def test_the_pages_kubectl_check_shows_the_night_and_the_morning(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube)

    def check() -> list[str]:
        outputs = []
        for line in shell_block("docs/karpenter.md", "After a night").splitlines():
            args = shlex.split(line)
            assert args[0] == "kubectl"
            done = subprocess.run(
                [str(KUBECTL), "--kubeconfig", str(kube.kubeconfig), *args[1:]],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            outputs.append(done.stdout)
        return outputs

    assert gpu_jobs(kube, tmp_path, EVENING).code == 0
    limits_text, claims_text = check()
    assert json.loads(limits_text) == ZERO
    assert w.busy_claim in claims_text
    w.karpenter.advance(60)  # the idle claim had nothing to drain: its instance is gone
    assert w.idle_claim not in check()[1]
    assert gpu_jobs(kube, tmp_path, MORNING).code == 0
    assert json.loads(check()[0]) == LIMITS


def test_prewarm_places_placeholders_before_the_window_and_removes_them_when_it_opens(
    kube: KubeHandle, tmp_path: Path
) -> None:
    w = world(kube, grace=None)
    prewarm = "    prewarm: {nodes: 1}\n"
    assert gpu_jobs(kube, tmp_path, EVENING, extra=prewarm).code == 0
    w.karpenter.advance(120)
    assert claims(w) == [w.busy_claim]

    morning = gpu_jobs(kube, tmp_path, MORNING, extra=prewarm)  # 07:50: warming up for 08:00
    assert (morning.code, morning.summary["applied"]) == (0, 1)
    assert limits(kube) == LIMITS
    (placeholder,) = [p for p in kube.list("pods", "gpu-jobs") if "gpu-jobs.dev/prewarm" in p["metadata"]["labels"]]
    assert placeholder["spec"]["priorityClassName"] == "gpu-jobs-prewarm"
    assert placeholder["spec"]["nodeSelector"] == {model.NODEPOOL_LABEL: w.pool}
    priority = kube.get("priorityclasses", "gpu-jobs-prewarm", api_version="scheduling.k8s.io/v1")
    assert priority is not None
    assert priority["value"] < 0
    w.karpenter.advance(120)  # Karpenter launches a node for it within the limits
    assert len(claims(w)) == 2
    bound = kube.get("pods", placeholder["metadata"]["name"], "gpu-jobs")
    assert bound is not None
    assert bound["spec"].get("nodeName")

    kube.log.clear()
    assert gpu_jobs(kube, tmp_path, MORNING.replace(minute=55), extra=prewarm).summary["applied"] == 0
    assert kube.log.writes() == []  # still warming up: nothing to change
    opened = gpu_jobs(kube, tmp_path, MORNING.replace(hour=8, minute=5), extra=prewarm)
    assert (opened.code, opened.summary["applied"]) == (0, 1)
    left = [p for p in kube.list("pods", "gpu-jobs") if "gpu-jobs.dev/prewarm" in p["metadata"]["labels"]]
    assert [p for p in left if not p["metadata"].get("deletionTimestamp")] == []


def test_a_lost_answer_on_a_claim_delete_is_read_back(kube: KubeHandle, tmp_path: Path) -> None:
    w = world(kube)
    kube.inject("delete nodeclaims", "lost")
    run = gpu_jobs(kube, tmp_path, EVENING)
    assert (run.code, run.summary["applied"]) == (0, 1)
    assert kube.log.count("delete nodeclaims") == 1
    assert claims(w) == [w.busy_claim]


NIGHT = datetime(2026, 3, 2, 23, 0, tzinfo=UTC)
WAKE = "    wake: {namespaces: [ml], for: 2h, maxNodes: 1}\n"


def pending(name: str, namespace: str, pool: str) -> dict[str, Any]:
    """A training pod that asks for the pool's nodes (its nodeSelector) and cannot run: the pool is at zero."""
    pod = model.pending_gpu_pod(name, gpus=8, namespace=namespace)
    pod["spec"]["nodeSelector"] = {model.NODEPOOL_LABEL: pool}
    return pod


def test_a_pending_pod_wakes_the_pool_within_its_recorded_limits_for_wake_for_then_it_goes_down_again(
    kube: KubeHandle, tmp_path: Path
) -> None:
    """At night, a Pending GPU pod in an allowed namespace gives the pool its recorded limits back with a ``nodes``
    limit of ``maxNodes``: Karpenter launches a claim for it, and no more. After ``wake.for`` the night comes back
    (zero limit, the claim removed once its pod is gone); a pod in a namespace not allowed wakes nothing."""
    w = world(kube)
    assert gpu_jobs(kube, tmp_path, EVENING, on_busy="force", extra=WAKE).code == 0
    w.karpenter.advance(120)
    assert (limits(kube), w.karpenter.claims(w.pool)) == (ZERO, [])

    kube.create(seed.namespace("interns"))
    kube.create(pending("stray-0", "interns", w.pool))
    nothing = gpu_jobs(kube, tmp_path, NIGHT, on_busy="force", extra=WAKE)
    assert (nothing.code, limits(kube)) == (0, ZERO)  # not allowed: nothing woken
    kube.cluster.delete("pods", "stray-0", "interns")

    kube.create(pending("late-0", "ml", w.pool))
    kube.log.clear()
    woke = gpu_jobs(kube, tmp_path, NIGHT.replace(minute=5), on_busy="force", extra=WAKE)
    assert woke.code == 0
    assert limits(kube) == {**LIMITS, "nodes": "1"}  # the recorded limits, at most one node
    (wake,) = items(woke.document, "wake")
    assert (wake["pod"], wake["nodes"], wake["status"]) == ("late-0", 1, "applied")
    assert "waking train-h100: 1 node" in wake["reason"]
    assert record(kube)["config"]["limits"] == LIMITS  # the record keeps what the morning restores
    w.karpenter.advance(600)
    assert len(claims(w)) == 1  # Karpenter launched for the pod, and no more
    assert gpu_jobs(kube, tmp_path, NIGHT.replace(minute=15), on_busy="force", extra=WAKE).summary["applied"] == 0

    kube.cluster.delete("pods", "late-0", "ml")  # its work done
    later = gpu_jobs(kube, tmp_path, NIGHT.replace(hour=1, day=3, minute=10), on_busy="force", extra=WAKE)
    assert (later.code, limits(kube)) == (0, ZERO)  # the wake is over: the night again
    w.karpenter.advance(120)
    assert claims(w) == []
    morning = gpu_jobs(kube, tmp_path, MORNING, on_busy="force", extra=WAKE)
    assert (morning.code, limits(kube)) == (0, LIMITS)  # exactly as before the night
