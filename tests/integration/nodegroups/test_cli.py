"""``gpu-jobs nodegroups`` as a CronJob runs it: a separate process, settings from the environment, honest exit
codes and one ``run.summary`` event. A central install: three clusters, each reached through its own kubeconfig
context and its own Kubernetes API (``central`` in conftest.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.adapters.kube.lease import LeaseLock
from jobs.labels import NODE_GROUP_LABEL, nodegroups_lease
from tests.envelope import items
from tests.integration.cli import GPU_JOBS, run_cli, summary_of
from tests.integration.nodegroups.world import EVENING, POLICY, Fleet
from tests.sandbox.world import write_kubeconfig

pytestmark = pytest.mark.integration
fleet_stderr: list[str] = []  # what each run printed on stderr, last run last


@pytest.fixture
def fleet(central: Fleet) -> Fleet:
    return central


def gpu_jobs(fleet: Fleet, tmp_path: Path, *args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    environ = {
        **fleet.cli_env(policy),
        "GPU_JOBS_POLL_INTERVAL": "0.01",
        "GPU_JOBS_RETRY_DEADLINE": "1",
        **env,
    }
    done = run_cli(["nodegroups", "--at", EVENING.isoformat(), *args], environ)
    fleet_stderr.append(done.stderr)
    return done.code, done.summary, done.stdout


def counts(summary: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(summary[k] for k in ("job", "dry_run", "planned", "applied", "failed", "exit_code"))


def test_dry_run_from_the_environment(fleet: Fleet, tmp_path: Path) -> None:
    code, summary, out = gpu_jobs(fleet, tmp_path, GPU_JOBS_DRY_RUN="true")
    assert (code, counts(summary)) == (0, ("nodegroups", True, 5, 0, 0, 0))
    assert "dry run: nothing changed" in out
    assert summary["summary"] == "nodegroups (dry run): 5 planned; exit 0"
    assert fleet.cloud_writes() == 0


def test_a_real_run_then_a_second_one(fleet: Fleet, tmp_path: Path) -> None:
    code, summary, _ = gpu_jobs(fleet, tmp_path, "--output", "json")
    assert (code, counts(summary)) == (0, ("nodegroups", False, 5, 5, 0, 0))
    code, summary, out = gpu_jobs(fleet, tmp_path)
    assert (code, counts(summary)) == (0, ("nodegroups", False, 0, 0, 0, 0))
    assert "nothing to change" in out
    assert summary["summary"] == "nodegroups: nothing to change; exit 0"


def test_one_failed_group_exits_1_and_the_others_are_done(fleet: Fleet, tmp_path: Path) -> None:
    fleet.aws.faults.inject("UpdateNodegroupConfig", "server_error", times=1000)
    code, summary, out = gpu_jobs(fleet, tmp_path)
    assert (code, counts(summary)) == (1, ("nodegroups", False, 5, 4, 1, 1))
    assert "error:" in out
    # The pod log's last line a person reads: the counts, the failed group and why, the exit code.
    (error,) = [line.split("error: ", 1)[1] for line in out.splitlines() if "error: " in line]
    assert summary["summary"] == f"nodegroups: 5 planned, 4 applied, 1 failed (train: {error}); exit 1"


def test_a_plan_over_the_change_limit_is_refused_with_exit_3(fleet: Fleet, tmp_path: Path) -> None:
    code, summary, out = gpu_jobs(fleet, tmp_path, "--max-changes", "2")
    assert (code, summary["exit_code"], summary["planned"]) == (3, 3, 5)
    assert "REFUSED: the plan changes 5 node groups across 3 clusters, more than the limit of 2" in out
    assert out.count("REFUSED") == 1  # once for the run, above each cluster's plan
    assert summary["summary"].startswith(
        "nodegroups: 5 planned; refused: the plan changes 5 node groups across 3 clusters, more than the limit of 2"
    )
    assert summary["summary"].endswith("; nothing changed; exit 3")
    assert fleet.cloud_writes() == 0
    # The reviewer sees what was refused, not an empty plan.
    code, _, out = gpu_jobs(fleet, tmp_path, "--max-changes", "2", "--output", "json")
    refused = {g["name"]: (g["status"], g["direction"]) for g in items(json.loads(out), "node group", "refused")}
    assert refused == dict.fromkeys(("train", "batch", "research", "finetune", "vision"), ("refused", "down"))


def test_a_held_lease_exits_0_and_changes_nothing_in_that_cluster(fleet: Fleet, tmp_path: Path) -> None:
    # Held now, on the real clock: a run evaluated --at another instant must still respect it.
    with fleet.kubes["aks-ml"].api_client() as api:
        lease = LeaseLock(api, "gpu-jobs", nodegroups_lease("aks-ml"))
        assert lease.acquire("manual-run", datetime.now(UTC), timedelta(hours=1)) is None
    fleet.clear_logs()
    code, summary, out = gpu_jobs(fleet, tmp_path)
    assert (code, counts(summary)) == (0, ("nodegroups", False, 3, 3, 0, 0))
    assert (
        "gpu-jobs nodegroups in cluster aks-ml at 2026-12-01T20:05:00+01:00\n  another run holds the lease (manual-run)"
        in out
    )
    assert len(fleet.azure.log.writes()) == 0  # aks-ml's two pools untouched; the other clusters went down
    assert summary["summary"] == (
        "nodegroups: 3 planned, 3 applied; cluster aks-ml left to the run holding its lease (manual-run); exit 0"
    )


def test_bad_settings_exit_2(fleet: Fleet, tmp_path: Path) -> None:
    code, summary, _ = gpu_jobs(fleet, tmp_path, "--only", "no-such-group")
    assert (code, summary["exit_code"]) == (2, 2)
    code, summary, _ = gpu_jobs(fleet, tmp_path, KUBECONFIG=str(tmp_path / "missing"))
    assert (code, summary["exit_code"]) == (2, 2)


# Every run ends with its run.summary and the documented exit code, whatever went wrong.


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            (),
            {"GPU_JOBS_MAX_CHANGES": "abc"},
            "GPU_JOBS_MAX_CHANGES='abc': a whole number (20) or a percentage of the items considered (25%)",
        ),
        ((), {"GPU_JOBS_WORKERS": "0"}, "GPU_JOBS_WORKERS='0': must be at least 1"),
        ((), {"GPU_JOBS_SCOPES_AT_ONCE": "0"}, "GPU_JOBS_SCOPES_AT_ONCE='0': must be at least 1"),
        (("--scopes-at-once", "two"), {}, "--scopes-at-once='two': not a whole number"),
        ((), {"GPU_JOBS_POLL_INTERVAL": "5s"}, "GPU_JOBS_POLL_INTERVAL='5s': a number of seconds, e.g. 5"),
        ((), {"GPU_JOBS_RETRY_DEADLINE": "abc"}, "GPU_JOBS_RETRY_DEADLINE='abc': a number of seconds"),
        ((), {"GPU_JOBS_OUTPUT": "yaml"}, "GPU_JOBS_OUTPUT='yaml': use one of text, json"),
        ((), {"GPU_JOBS_LOG_LEVEL": "verbose"}, "GPU_JOBS_LOG_LEVEL='verbose': use one of debug, info"),
        (("--max-changes", "-1"), {}, "--max-changes='-1': a whole number (20) or a percentage"),
        (("--max-changes", "0%"), {}, "--max-changes='0%': a percentage must be more than 0% and at most 100%"),
        (("--no-such-flag",), {}, "unrecognized arguments: --no-such-flag"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2_with_a_summary(
    fleet: Fleet, tmp_path: Path, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    code, summary, _ = gpu_jobs(fleet, tmp_path, "--dry-run", *args, **env)
    assert (code, summary["exit_code"], summary["dry_run"]) == (2, 2, True)
    assert message in fleet_stderr[-1]
    assert "Traceback" not in fleet_stderr[-1]
    assert fleet.all_writes() == 0


def test_an_empty_setting_in_a_manifest_means_unset(fleet: Fleet, tmp_path: Path) -> None:
    code, summary, _ = gpu_jobs(fleet, tmp_path, GPU_JOBS_ONLY="", GPU_JOBS_MAX_CHANGES="", GPU_JOBS_DRY_RUN="true")
    assert (code, counts(summary)) == (0, ("nodegroups", True, 5, 0, 0, 0))


def test_a_lease_that_cannot_be_taken_fails_the_run_with_a_summary(fleet: Fleet, tmp_path: Path) -> None:
    for api in fleet.apis:
        api.inject("get leases", "server_error", times=1000)
    code, summary, out = gpu_jobs(fleet, tmp_path)
    assert (code, counts(summary)) == (1, ("nodegroups", False, 5, 0, 5, 1))
    assert "not applied: the Lease could not be taken" in out
    assert fleet.cloud_writes() == 0


def test_a_kubernetes_api_that_is_down_fails_every_group_with_a_summary(fleet: Fleet, tmp_path: Path) -> None:
    for api in fleet.apis:
        api.inject("list nodes", "server_error", times=1000)
    code, summary, out = gpu_jobs(fleet, tmp_path)
    assert (code, counts(summary)) == (1, ("nodegroups", False, 5, 0, 5, 1))
    assert "not judged: cluster ml-prod cannot be read" in out
    assert "Traceback" not in fleet_stderr[-1]
    assert fleet.cloud_writes() == 0


@pytest.mark.parametrize("at", ["9999-12-30T00:00", "0001-01-02T00:00"])
def test_an_instant_out_of_range_is_exit_2_not_an_overflow(fleet: Fleet, tmp_path: Path, at: str) -> None:
    code, summary, _ = gpu_jobs(fleet, tmp_path, "--at", at)
    assert (code, summary["exit_code"]) == (2, 2)
    assert "is outside the years 2000-2100" in fleet_stderr[-1]


def test_sigterm_during_a_drain_ends_with_a_summary_released_lease_and_uncordoned_node(
    fleet: Fleet, tmp_path: Path
) -> None:
    from tests.emulators.kube.seed import disruption_budget, gpu_pod

    # A budget that never allows the eviction: the drain waits (drainTimeout 5m) until the pod is told to stop.
    fleet.kube.identify("ml-prod")  # the run names ml-prod: its API proves it is
    fleet.kube.create(gpu_pod("serve-0", "team-a", node="ip-10-0-1-1", labels={"app": "serve"}))
    fleet.kube.create(disruption_budget("serve", "team-a", {"app": "serve"}, min_available=1))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.replace("  warmUp: 15m\n", "  warmUp: 15m\n  onBusy: drain\n  drainTimeout: 5m\n"))
    environ = {**fleet.cli_env(policy), "GPU_JOBS_POLL_INTERVAL": "0.05"}
    argv = [*GPU_JOBS, "nodegroups", "--at", EVENING.isoformat()]
    argv += ["--cluster", "ml-prod", "--only", "train"]
    job = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (fleet.kube.get("Node", "ip-10-0-1-1") or {}).get("spec", {}).get("unschedulable"):
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the drain never started"
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=30)
    summary = summary_of(err)
    assert (job.returncode, counts(summary)) == (1, ("nodegroups", False, 1, 0, 1, 1))
    assert "drain stopped after evicting 0 of 1 pods (none); nodes uncordoned, the group stays up;" in out
    assert "the next run finishes the shutdown: the run was asked" in out
    assert not fleet.kube.get("Node", "ip-10-0-1-1")["spec"].get("unschedulable")  # uncordoned on the way out
    (lease,) = [item for item in fleet.kube.list("Lease", "gpu-jobs") if item["metadata"]["name"].endswith("ml-prod")]
    assert not lease["spec"].get("holderIdentity")  # released, not held for 30 minutes
    assert fleet.cloud_writes() == 0


def test_a_context_that_reaches_another_clusters_api_fails_that_cluster_only(fleet: Fleet, tmp_path: Path) -> None:
    # The central kubeconfig's aks-ml context was copied from research's: it reaches research's API.
    research = fleet.kubes["research"]
    crossed = {**fleet.kubes, "aks-ml": research}
    kubeconfig = str(write_kubeconfig(tmp_path / "crossed.kubeconfig", crossed, current="ml-prod"))
    code, summary, out = gpu_jobs(fleet, tmp_path, "--output", "json", KUBECONFIG=kubeconfig)
    assert (code, counts(summary)) == (1, ("nodegroups", False, 5, 3, 2, 1))
    refusal = (
        f"not judged: cluster aks-ml: refused before reading anything: the API at {research.url} (kubeconfig context"
        " 'aks-ml') is cluster research (ConfigMap gpu-jobs/gpu-jobs-cluster), not aks-ml"
    )
    acted = [g for g in items(json.loads(out), "node group") if "message" in g]  # an action, or a group not judged
    groups = {g["name"]: (g["cluster"], g["status"], g.get("direction")) for g in acted}
    assert groups == {
        "train": ("ml-prod", "applied", "down"),
        "batch": ("ml-prod", "applied", "down"),
        "research": ("research", "applied", "down"),
        "finetune": ("aks-ml", "failed", None),
        "vision": ("aks-ml", "failed", None),
    }
    assert all(g["message"].startswith(refusal) for g in acted if g["cluster"] == "aks-ml")
    assert fleet.azure.log.writes() == []  # aks-ml's pools untouched
    assert fleet.aws.log.writes()  # the other clusters went down
    assert fleet.gcp.log.writes()
    # Nothing was kept in research's API on aks-ml's behalf, and aks-ml's own API was never asked.
    assert {lease["metadata"]["name"] for lease in research.list("Lease", "gpu-jobs", "coordination.k8s.io/v1")} == {
        nodegroups_lease("research")
    }
    kept = [cm["metadata"].get("labels", {}).get(NODE_GROUP_LABEL) for cm in research.list("ConfigMap", "gpu-jobs")]
    assert {k for k in kept if k} == {"research"}
    assert fleet.kubes["aks-ml"].log.all() == []
    # The next run: the others hold, aks-ml is refused again, in words a person reads.
    code, summary, out = gpu_jobs(fleet, tmp_path, KUBECONFIG=kubeconfig)
    assert (code, counts(summary)) == (1, ("nodegroups", False, 2, 0, 2, 1))
    aks_ml = out[out.index("gpu-jobs nodegroups in cluster aks-ml") :]
    assert [line.split()[:2] for line in aks_ml.splitlines() if refusal in line] == [
        ["finetune", "failed"],
        ["vision", "failed"],
    ]
    assert fleet.azure.log.writes() == []
