"""Issue 22: drains wait only for the pods they evicted, followed by uid.

A StatefulSet recreates an evicted pod under the same name (new uid) once it is gone: the drain must take that as
"the evicted pod is gone", never wait for (or evict, or name) the replacement, and a drain that gave up must not be
restarted because a controller recreated a blocker elsewhere. A run stopped mid-drain (SIGTERM) leaves a record the
next run finishes or rolls back. The emulated pods' containers stop shortly after SIGTERM (``pod_stop_s``), so no
test waits a real 30 s grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.core.group_record import Record
from jobs.core.policy import Policy
from jobs.labels import NODE_GROUP_LABEL, RECORD_KEY
from tests.docs import shell_block
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube import seed, workloads
from tests.emulators.kube.fixtures import KubeHandle
from tests.integration.cli import GPU_JOBS, run_cli, summary_of
from tests.integration.nodegroups.world import EVENING, MORNING, POLICY, Fleet, make_fleet, tally

pytestmark = pytest.mark.integration

TRAIN_NODE = "ip-10-0-1-1"
KUBECTL = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "kubectl"
STOP_S = 0.3  # how long the emulated containers take to exit once evicted (their grace period is 30 s)


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    fleet = make_fleet(kube, aws, gcp, azure, monkeypatch)
    kube.cluster.pod_stop_s = STOP_S
    kube.identify("ml-prod")  # what its install creates: runs with --cluster ml-prod prove the API is ml-prod's
    for name in ("genai", "team-a"):
        kube.create(seed.namespace(name))
    return fleet


def draining(fleet: Fleet, timeout: str) -> Policy:
    groups = tuple(
        g.model_copy(update={"on_busy": "drain", "drain_timeout": timeout}) for g in fleet.policy.node_groups
    )
    return fleet.policy.model_copy(update={"node_groups": groups})


def sweep_set(fleet: Fleet, *, pinned: bool) -> str:
    """``genai/diffusion-sweep``: one GPU pod on the train group's node. Pinned (the template names the node), its
    replacement lands on that node, cordoned or not (a pod bound by name skips the scheduler); otherwise the
    emulated scheduler puts it on the first schedulable node with room: another group's. Returns the pod's uid."""
    seeded = workloads.statefulset(fleet.kube.cluster, "diffusion-sweep", "genai", nodes=(TRAIN_NODE,), grace_s=30)
    if pinned:
        owner = fleet.kube.get("StatefulSet", "diffusion-sweep", "genai", "apps/v1")
        assert owner is not None
        owner["spec"]["template"]["spec"]["nodeName"] = TRAIN_NODE
        fleet.kube.put(owner)
    return str(seeded.pods[0]["metadata"]["uid"])


def pod(fleet: Fleet, name: str, namespace: str) -> dict[str, Any]:
    found = fleet.kube.get("Pod", name, namespace)
    assert found is not None, f"{namespace}/{name} is gone"
    return found


def train_record(fleet: Fleet) -> Record:
    (cm,) = [
        c
        for c in fleet.kube.list("ConfigMap", "gpu-jobs")
        if c["metadata"].get("labels", {}).get(NODE_GROUP_LABEL) == "train"
    ]
    return Record.from_json(json.loads(cm["data"][RECORD_KEY]))


def evictions(fleet: Fleet) -> list[dict[str, Any]]:
    """The Eviction bodies the Kubernetes API received."""
    return [json.loads(r.body) for r in fleet.kube.log.all() if r.operation == "create pods/eviction"]


def drains(fleet: Fleet) -> list[str]:
    """The cordons and evictions the Kubernetes API received."""
    return [op for op in fleet.kube.log.operations() if op in ("patch nodes", "create pods/eviction")]


@pytest.mark.parametrize("pinned", [False, True], ids=["replaced-elsewhere", "replaced-on-the-cordoned-node"])
def test_a_statefulset_replacement_does_not_hold_the_drain(fleet: Fleet, pinned: bool) -> None:
    old_uid = sweep_set(fleet, pinned=pinned)
    report = fleet.run(EVENING, policy=draining(fleet, "60s"), only="train")

    (result,) = report.results  # applied: the drain did not wait its 60 s for the replacement and time out
    assert (result.status, tally(report).failed) == ("applied", 0), result.message
    assert fleet.configs()["train"].desired == 0  # the group went down, as the schedule says
    # The StatefulSet recreated its pod under the same name once the evicted one was gone: another object.
    replacement = pod(fleet, "diffusion-sweep-0", "genai")
    assert replacement["metadata"]["uid"] != old_uid
    assert (replacement["spec"]["nodeName"] == TRAIN_NODE) is pinned
    assert not replacement["metadata"].get("deletionTimestamp")  # never evicted in the old one's place
    # One eviction, carrying the evicted pod's uid as a precondition.
    assert [e["deleteOptions"] for e in evictions(fleet)] == [{"preconditions": {"uid": old_uid}}]


def test_a_timeout_names_only_the_pods_that_truly_remain(fleet: Fleet) -> None:
    """A budget keeps ``team-a/serve-0``; ``diffusion-sweep-0`` is evicted and replaced during the drain. The
    timeout names serve-0 alone, and the record's blockers are serve-0 by its uid."""
    sweep_uid = sweep_set(fleet, pinned=True)
    serve = fleet.kube.create(seed.gpu_pod("serve-0", "team-a", node=TRAIN_NODE, labels={"app": "serve"}))
    fleet.kube.create(seed.disruption_budget("serve", "team-a", {"app": "serve"}, min_available=1))

    report = fleet.run(EVENING, policy=draining(fleet, "2s"), only="train")

    (result,) = report.results
    assert result.status == "failed"
    assert result.message.startswith("drain timed out after 0:00:02: still running team-a/serve-0;")
    assert "diffusion-sweep" not in result.message
    block = train_record(fleet).drain_blocked
    assert block is not None
    assert block.pods == (f"team-a/serve-0/{serve['metadata']['uid']}",)
    assert fleet.configs()["train"].desired == 3  # nothing scaled while protected work runs
    replacement = pod(fleet, "diffusion-sweep-0", "genai")["metadata"]
    assert (replacement["uid"] != sweep_uid, replacement.get("deletionTimestamp")) == (True, None)

    # What docs/drains.md tells a person to type to see it, run as typed with the real kubectl.
    command = shell_block("docs/drains.md", "## A drain that gave up is not restarted for nothing")
    env = {**os.environ, "KUBECONFIG": str(fleet.kube.kubeconfig), "PATH": f"{KUBECTL.parent}:{os.environ['PATH']}"}
    shown = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, check=True, timeout=60)
    stored = json.loads(shown.stdout)  # the one record: only train was run
    assert stored["drainBlocked"]["pods"] == [f"team-a/serve-0/{serve['metadata']['uid']}"]


def test_a_blocker_recreated_elsewhere_does_not_restart_the_drain(fleet: Fleet) -> None:
    """Two pods a budget protects (minAvailable 2) block the drain. A controller then recreates one of them on
    another node (new uid): the other still blocks and the budget allows what it allowed, so the next run
    within the back-off neither cordons nor evicts. Once the last blocker is off the group's nodes it drains."""
    workloads.statefulset(fleet.kube.cluster, "serve", "team-a", nodes=(TRAIN_NODE,), replicas=2, grace_s=30)
    fleet.kube.create(seed.disruption_budget("serve", "team-a", {"app": "serve"}, min_available=2))
    policy = draining(fleet, "1s")
    first = fleet.run(EVENING, policy=policy, only="train")
    assert [r.status for r in first.results] == ["failed"]
    block = train_record(fleet).drain_blocked
    assert block is not None
    assert [p.rsplit("/", 1)[0] for p in block.pods] == ["team-a/serve-0", "team-a/serve-1"]

    fleet.kube.cluster.delete("Pod", "serve-1", "team-a")  # its process died; the StatefulSet recreates it
    again = pod(fleet, "serve-1", "team-a")
    assert again["spec"]["nodeName"] != TRAIN_NODE  # elsewhere: the group's node was uncordoned, not chosen
    fleet.clear_logs()
    second = fleet.run(EVENING + timedelta(minutes=10), policy=policy, only="train")
    assert second.results == ()
    (skip,) = second.skips
    assert skip.reason.startswith("shutdown blocked:")
    assert (drains(fleet), fleet.all_writes()) == ([], 0)

    fleet.kube.cluster.delete("Pod", "serve-0", "team-a")  # the last blocker leaves the group's nodes too
    assert pod(fleet, "serve-0", "team-a")["spec"]["nodeName"] != TRAIN_NODE
    third = fleet.run(EVENING + timedelta(minutes=20), policy=policy, only="train")
    assert [r.status for r in third.results] == ["applied"]  # no GPU pod left on the group: down, no drain
    assert fleet.configs()["train"].desired == 0


# A SIGTERM mid-drain, then the run that finishes it.


def _environ(fleet: Fleet, policy: Path) -> dict[str, str]:
    return {
        **fleet.aws.env(),
        "KUBECONFIG": str(fleet.kube.kubeconfig),
        "GPU_JOBS_GCP_ENDPOINT": fleet.gcp.url,
        "GPU_JOBS_INSECURE_EMULATOR_CREDENTIALS": "true",
        "GPU_JOBS_AZURE_ENDPOINT": fleet.azure.url,
        "GPU_JOBS_NAMESPACE": "gpu-jobs",
        "GPU_JOBS_POLL_INTERVAL": "0.05",
        "GPU_JOBS_RETRY_DEADLINE": "1",
        "GPU_JOBS_POLICY": str(policy),
    }


def _stopped_mid_drain(fleet: Fleet, tmp_path: Path) -> dict[str, str]:
    """The night of the issue: the evening postpones (a GPU pod runs), maxDelay (2 h) passes, afterDelay drains;
    the evicted pod takes its whole grace period (its containers ignore SIGTERM) and the run is told to stop."""
    fleet.kube.cluster.pod_stop_s = None
    fleet.kube.create(seed.gpu_pod("train-0", "team-a", node=TRAIN_NODE, grace_s=600))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    environ = _environ(fleet, policy)
    args = ["nodegroups", "--cluster", "ml-prod", "--only", "train"]
    evening = run_cli([*args, "--at", EVENING.isoformat()], environ)
    assert (evening.code, train_record(fleet).busy_since) == (0, EVENING)  # postponed

    late = EVENING + timedelta(hours=2, minutes=5)
    job = subprocess.Popen(
        [*GPU_JOBS, *args, "--at", late.isoformat()],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not pod(fleet, "train-0", "team-a")["metadata"].get("deletionTimestamp"):  # evicted: the drain waits
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the drain never evicted"
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=30)
    assert (job.returncode, summary_of(err)["exit_code"]) == (1, 1)
    assert "drain stopped after evicting 1 of 1 pods (team-a/train-0)" in out
    assert "the next run finishes the shutdown" in out
    record = train_record(fleet)
    # What is left: the sizes to restore (phase stopping) and when the wait began; the node uncordoned.
    assert (record.phase, record.config.desired, record.busy_since) == ("stopping", 3, EVENING)
    assert not fleet.kube.get("Node", TRAIN_NODE)["spec"].get("unschedulable")  # type: ignore[index]
    assert fleet.configs()["train"].desired == 3
    return environ


def test_a_sigterm_mid_drain_then_a_run_that_finishes_it(fleet: Fleet, tmp_path: Path) -> None:
    environ = _stopped_mid_drain(fleet, tmp_path)
    # By the next run the evicted pod is gone, and another GPU pod landed on the uncordoned node.
    fleet.kube.cluster.delete("Pod", "train-0", "team-a")
    fleet.kube.create(seed.gpu_pod("notebook-0", "team-a", node=TRAIN_NODE, grace_s=0))
    later = (EVENING + timedelta(hours=2, minutes=15)).isoformat()
    done = run_cli(["nodegroups", "--cluster", "ml-prod", "--only", "train", "--at", later], environ)
    # maxDelay is not started over: the wait began in the evening, so the run drains and finishes the shutdown.
    assert (done.code, done.summary["applied"], done.summary["failed"]) == (0, 1, 0), done.stdout
    assert fleet.kube.get("Pod", "notebook-0", "team-a") is None
    record = train_record(fleet)
    assert (record.phase, record.config.desired) == ("down", 3)
    assert fleet.configs()["train"].desired == 0


def test_a_sigterm_mid_drain_then_working_hours_roll_it_back(fleet: Fleet, tmp_path: Path) -> None:
    _stopped_mid_drain(fleet, tmp_path)
    fleet.clear_logs()
    morning = fleet.run(MORNING, only="train")
    assert [(r.status, r.action.steps if r.action else None) for r in morning.results] == [("applied", ())]
    record = train_record(fleet)
    assert (record.phase, record.busy_since, record.drain_blocked) == ("up", None, None)
    assert fleet.configs()["train"].desired == 3
    assert fleet.cloud_writes() == 0  # nothing to undo in the cloud: only the record is marked up
    assert fleet.run(MORNING + timedelta(minutes=5), only="train").results == ()  # converged
