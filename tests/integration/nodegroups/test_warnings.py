"""``warnBefore`` end to end: the nodegroups job puts one Warning Event on each running GPU pod before its group goes
down, through the real adapters to the emulated Kubernetes API; later runs add none."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from jobs.core.policy import Policy
from jobs.policy_file import parse_policy
from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.integration.nodegroups.world import POLICY, Fleet, document, gpu_pod, make_fleet, tally, text

pytestmark = pytest.mark.integration

# Tue 2026-12-01, Europe/Berlin: the working window ends at 20:00 CET.
BEFORE_END = datetime.fromisoformat("2026-12-01T19:40:00+01:00")
WARNED = POLICY.replace("  warmUp: 15m\n", "  warmUp: 15m\n  warnBefore: 30m\n")


@pytest.fixture
def fleet(
    kube: KubeHandle, aws: AwsEmulator, gcp: GcpEmulator, azure: AzureEmulator, monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    world = make_fleet(kube, aws, gcp, azure, monkeypatch)
    for ns in ("team-a", "team-b"):
        world.kube.create(namespace(ns))
    world.kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1", gpus=8))  # on train (EKS)
    world.kube.create(gpu_pod("nb-0", "team-b", node="gke-research-h100-1"))  # on research (GKE)
    world.kube.create(gpu_pod("idle-0", "team-b", node=None, phase="Pending"))  # on no node: nobody to warn
    world.clear_logs()
    return world


@pytest.fixture
def warned() -> Policy:
    return parse_policy(WARNED, "policy.yaml")


def warnings(fleet: Fleet) -> list[dict[str, Any]]:
    return [e for ns in ("team-a", "team-b") for e in fleet.kube.list("Event", ns) if e["reason"] == "ShutdownWarning"]


def test_two_runs_leave_exactly_one_event_on_each_running_gpu_pod(fleet: Fleet, warned: Policy) -> None:
    first = fleet.run(BEFORE_END, policy=warned)
    assert fleet.cloud_writes() == 0  # a warning changes no group
    fleet.clear_logs()
    second = fleet.run(BEFORE_END.replace(minute=50), policy=warned)  # the next run, 10 min later

    events = warnings(fleet)
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"]["uid"] for p in fleet.kube.list("Pod")}
    assert sorted((e["involvedObject"]["namespace"], e["involvedObject"]["name"]) for e in events) == [
        ("team-a", "train-0"),
        ("team-b", "nb-0"),
    ]
    for e in events:  # under the pod in `kubectl describe pod`: its uid, a Warning
        obj = e["involvedObject"]
        assert (obj["kind"], obj["uid"], e["type"]) == ("Pod", pods[(obj["namespace"], obj["name"])], "Warning")
    by_pod = {e["involvedObject"]["name"]: e["message"] for e in events}
    assert by_pod["train-0"].startswith("Node group train goes down at Tue 2026-12-01 20:00 CET: onBusy wait:")
    assert by_pod["nb-0"].startswith("Node group research goes down at Tue 2026-12-01 20:00 CET")

    # The second run found both Events: nothing to write, no Lease taken, no warning in its report.
    assert (second.warnings, fleet.all_writes()) == ((), 0)
    assert [(w.pod.name, status) for w, status in first.warnings] == [("train-0", "applied"), ("nb-0", "applied")]
    assert "warned before shutdown (a Warning Event on each pod):" in text(first)
    assert "    team-a/train-0 on ip-10-0-1-1  applied  train goes down at Tue 20:00 CET" in text(first)
    items = [i for i in document(first)["items"] if i["kind"] == "warning"]
    assert [(i["name"], i["status"], i["nodeGroup"]) for i in items] == [
        ("team-a/train-0", "applied", "train"),
        ("team-b/nb-0", "applied", "research"),
    ]
    assert items[0]["shutdownAt"] == "2026-12-01T20:00:00+01:00"
    assert (document(first)["exitCode"], tally(first).failed) == (0, 0)


@pytest.mark.parametrize("at", ["2026-12-01T12:00:00+01:00", "2026-12-01T19:25:00+01:00"])
def test_no_event_outside_the_warn_before(fleet: Fleet, warned: Policy, at: str) -> None:
    report = fleet.run(datetime.fromisoformat(at), policy=warned)
    assert (report.warnings, warnings(fleet), fleet.all_writes()) == ((), [], 0)


def test_no_event_without_warn_before(fleet: Fleet) -> None:
    fleet.run(BEFORE_END)
    assert warnings(fleet) == []


def test_a_dry_run_reports_what_would_be_warned_and_writes_nothing(fleet: Fleet, warned: Policy) -> None:
    report = fleet.run(BEFORE_END, policy=warned, dry_run=True)
    assert sorted((w.pod.name, status) for w, status in report.warnings) == [
        ("nb-0", "planned"),
        ("train-0", "planned"),
    ]
    assert (warnings(fleet), fleet.all_writes()) == ([], 0)
    assert document(report)["exitCode"] == 0


def test_the_shipped_rbac_is_enough_to_warn_once(fleet: Fleet, warned: Policy) -> None:
    from tests.integration.test_deploy import rendered_allow_list

    fleet.kube.allow_only(*rendered_allow_list("production/aws"))
    fleet.run(BEFORE_END, policy=warned)
    second = fleet.run(BEFORE_END.replace(minute=50), policy=warned)
    assert len(warnings(fleet)) == 2
    assert second.warnings == ()  # it could list the Events the first run created


def test_kubectl_describe_pod_shows_the_warning(fleet: Fleet, warned: Policy) -> None:
    import subprocess

    from tests.integration.emulators.test_kube_batch import KUBECTL

    fleet.run(BEFORE_END, policy=warned)
    described = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(fleet.kube.kubeconfig), "-n", "team-a", "describe", "pod", "train-0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert described.returncode == 0, described.stderr
    events = described.stdout.split("Events:", 1)[1]
    print(events)  # what a person sees (pytest -s)
    assert "Warning  ShutdownWarning" in events
    assert "Node group train goes down at Tue 2026-12-01 20:00 CET" in " ".join(events.split())


def test_a_warning_whose_event_cannot_be_written_is_not_reported_done_and_the_next_run_gives_it(
    fleet: Fleet, warned: Policy
) -> None:
    """A 5xx on the Event: the person is not told, so the warning is skipped (not applied) and says why; it fails
    no group and the run exits 0; the next run, finding no Event of that name, writes it."""
    fleet.kube.inject("create events", "server_error", times=2)  # both pods' Events (an Event is not retried)

    first = fleet.run(BEFORE_END, policy=warned)

    assert sorted((w.pod.name, status) for w, status in first.warnings) == [("nb-0", "skipped"), ("train-0", "skipped")]
    assert warnings(fleet) == []
    skipped = [i for i in document(first)["items"] if i["kind"] == "warning" and i["status"] == "skipped"]
    assert len(skipped) == 2
    assert all(i["reason"].startswith("not warned yet: its Event could not be written") for i in skipped)
    assert "not warned yet" in text(first)
    assert (document(first)["exitCode"], tally(first).failed) == (0, 0)
    missed = {i["pod"] for i in skipped}

    second = fleet.run(BEFORE_END.replace(minute=50), policy=warned)

    assert {w.pod.name for w, status in second.warnings if status == "applied"} == missed
    assert sorted(e["involvedObject"]["name"] for e in warnings(fleet)) == ["nb-0", "train-0"]
