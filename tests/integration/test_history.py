"""The history as the CronJobs write it and ``gpu-jobs report`` reads it, against the emulated clusters of a central
install (tests/integration/nodegroups/world.py): a night and a morning of ``gpu-jobs nodegroups`` leave each group's
shutdown, nodes gone and return in its own cluster; concurrent writers and a lost answer leave every entry once; old
weeks are pruned; a history that cannot be written is a warning, never a failed item."""

from __future__ import annotations

import json
import shlex
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.adapters.kube.history import ConfigMapHistory, object_name
from jobs.history import Entry, decode
from jobs.labels import RECORD_KIND_LABEL
from tests.docs import shell_block
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.prometheus.fixtures import PrometheusFactory
from tests.integration.cli import CliRun, run_cli
from tests.integration.nodegroups import conftest as nodegroups_fixtures
from tests.integration.nodegroups.world import EVENING, MORNING, POLICY, Fleet
from tests.integration.sweep.test_pods_actions import idle_series, seeded, sweep
from tests.integration.test_deploy import rendered_allow_list

pytestmark = pytest.mark.integration
# The central world of the nodegroups tests (one API per cluster, one server each per session) and its fixture.
_research_api, _aks_api = nodegroups_fixtures._research_api, nodegroups_fixtures._aks_api
central = nodegroups_fixtures.central


# train: 8 GPUs per node, priced from the shipped list (p4d.24xlarge); research per GPU-hour in the policy.
PRICED = (
    POLICY.replace(
        "aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}\n",
        "aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}\n    gpusPerNode: 8\n",
    ).replace(
        "gcp: {project: ml-research, location: europe-west4, cluster: research, nodePool: h100}\n",
        "gcp: {project: ml-research, location: europe-west4, cluster: research, nodePool: h100}\n    gpusPerNode: 8\n",
    )
    + "history: {retention: 4w}\n"
    + "pricing:\n  currency: EUR\n  nodeGroups:\n    train: {instanceType: p4d.24xlarge}\n    research: {gpuHour: 2.5}\n"
)
GONE = EVENING + timedelta(minutes=10)  # the next run: the first to see no node


def gpu_jobs(fleet: Fleet, tmp_path: Path, *args: str, **env: str) -> CliRun:
    policy = tmp_path / "policy.yaml"
    policy.write_text(PRICED)
    environ = {**fleet.cli_env(policy), "GPU_JOBS_POLL_INTERVAL": "0.01", "GPU_JOBS_RETRY_DEADLINE": "1", **env}
    return run_cli(list(args), environ)


def history(api: KubeHandle) -> dict[str, list[Entry]]:
    """The history ConfigMaps of one cluster's API: name -> entries."""
    found = {}
    for cm in api.list("ConfigMap", "gpu-jobs"):
        if (cm["metadata"].get("labels") or {}).get(RECORD_KIND_LABEL) == "history":
            entries, problems = decode(cm["data"]["entries"])
            assert problems == []
            found[cm["metadata"]["name"]] = entries
    return found


def kinds(api: KubeHandle, group: str) -> list[tuple[str, str]]:
    return [(e.kind, e.at.isoformat()) for entries in history(api).values() for e in entries if e.subject == group]


def night_and_morning(fleet: Fleet, tmp_path: Path) -> None:
    for at in (EVENING, GONE, MORNING):
        done = gpu_jobs(fleet, tmp_path, "nodegroups", "--at", at.isoformat())
        assert done.code == 0, done.stdout + done.stderr
        fleet.sync_nodes()  # what the clouds do: a group at zero takes its nodes with it, one back brings them


def test_a_night_and_a_morning_are_kept_in_each_cluster_and_reported(central: Fleet, tmp_path: Path) -> None:
    night_and_morning(central, tmp_path)

    ml_prod, research = central.kubes["ml-prod"], central.kubes["research"]
    assert kinds(ml_prod, "train") == [
        ("down", EVENING.isoformat()),
        ("gone", GONE.isoformat()),
        ("up", MORNING.isoformat()),
    ]
    (down,) = [e for entries in history(ml_prod).values() for e in entries if e.kind == "down" and e.subject == "train"]
    assert (down.nodes, down.gpus, down.gpus_per_node) == (3, 24, 8)  # the size recorded before the shutdown
    assert down.floor == 1  # its Cluster Autoscaler's min: the nodes it keeps when they are empty
    assert list(history(ml_prod)) == [object_name("ml-prod", "2026-W49")]
    assert {k for k, _ in kinds(research, "research")} == {"down", "gone", "up"}  # in its own cluster's API
    assert kinds(ml_prod, "research") == []

    done = gpu_jobs(
        central, tmp_path, "report", "--week", "2026-W49", "--at", "2026-12-02T12:00:00+01:00", "--output", "json"
    )
    assert done.code == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1
    report = json.loads(done.stdout)
    groups = {g["group"]: g for g in report["groups"]}
    hours = (MORNING - GONE).total_seconds() / 3600  # 20:15 to 07:55: 11 h 40 min
    assert groups["train"]["goneHours"] == round(hours, 2)
    # 3 nodes went, but the Cluster Autoscaler (min 1) would have removed two of them by itself: 1 node x 8 GPUs.
    assert groups["train"]["avoidedGpuHours"] == round(hours * 1 * 8, 2)
    assert groups["train"]["price"]["currency"] == "USD"
    assert "aws list price p4d.24xlarge as of" in groups["train"]["price"]["source"]
    research_gpus = 1 * 2 * 8  # 2 nodes per zone went; its autoscaler keeps 1 per zone: 1 x 2 zones x 8 GPUs
    assert groups["research"]["avoidedGpuHours"] == round(hours * research_gpus, 2)
    assert groups["research"]["money"] == round(hours * research_gpus * 2.5, 2)
    assert report["total"]["money"]["EUR"] == groups["research"]["money"]
    assert groups["batch"]["avoidedGpuHours"] is None  # no gpusPerNode: node-hours only, never a made-up figure
    assert (groups["train"]["autoscalerFloorNodes"], groups["batch"]["autoscalerFloorNodes"]) == (1, None)
    assert [s["state"] for s in report["scopes"]] == ["read", "read", "read"]

    text = gpu_jobs(central, tmp_path, "report", "--since", "7d", "--at", "2026-12-02T12:00:00+01:00").stdout
    assert text.startswith("gpu-jobs report since 7d: ")
    assert "ml-prod/train" in text
    assert "93.3*" in text  # capped by train's autoscaler floor, and said so under the table
    assert "  * no more nodes than the group's autoscaler keeps once they are empty" in text
    assert "[1] aws list price p4d.24xlarge as of 2026-07-20" in text

    # The docs' weekly post, as typed there.
    (command,) = [shlex.split(line) for line in shell_block("docs/report.md", "## A weekly post").splitlines()]
    assert command[0] == "gpu-jobs"
    markdown = gpu_jobs(central, tmp_path, *command[1:])
    assert markdown.code == 0
    assert markdown.stdout.startswith("### GPU savings 2026-W49\n")
    assert "| ml-prod | train | 11.7 | 93.3\\* |" in markdown.stdout
    assert "\\* no more nodes than the group's autoscaler keeps once they are empty" in markdown.stdout
    assert "ml-prod/train (1 node), research/research (2 nodes)" in markdown.stdout


def test_a_cluster_whose_history_cannot_be_read_is_a_failed_item(central: Fleet, tmp_path: Path) -> None:
    central.kubes["research"].inject("list configmaps", "server_error", times=100)
    done = gpu_jobs(central, tmp_path, "report", "--week", "2026-W49", "--output", "json")
    report = json.loads(done.stdout)
    assert done.code == 1
    assert [(s["name"], s["state"]) for s in report["scopes"]] == [
        ("ml-prod", "read"),
        ("research", "failed"),
        ("aks-ml", "read"),
    ]
    assert done.summary["summary"].startswith("report: history not read: research: its history cannot be read")


def test_a_history_that_cannot_be_kept_is_a_warning_not_a_failure(central: Fleet, tmp_path: Path) -> None:
    """An install whose Role predates the history's pruning (no delete on ConfigMaps): the night happens, its
    entries are written, and what could not be done is the cluster's warning, under exit 0."""
    api = central.kubes["ml-prod"]
    ConfigMapHistory(api.api_client(), "gpu-jobs", "ml-prod").append(
        [Entry(EVENING - timedelta(weeks=10), "nodegroups", "ml-prod", "up", "train")]  # past the 4 weeks kept
    )
    api.allow_only(*(rendered_allow_list("production/aws") - {("delete", "configmaps")}))
    done = gpu_jobs(central, tmp_path, "nodegroups", "--at", EVENING.isoformat(), "--output", "json")
    report = json.loads(done.stdout)
    assert (done.code, done.summary["applied"], done.summary["failed"]) == (0, 5, 0)  # every group went down
    (ml_prod,) = [s for s in report["scopes"] if s["name"] == "ml-prod"]
    (warning,) = ml_prod["warnings"]
    assert warning.startswith("history weeks past the retention not deleted (delete configmaps: 403")
    assert [s["warnings"] for s in report["scopes"] if s["name"] != "ml-prod"] == [[], []]
    assert ("down", EVENING.isoformat()) in kinds(api, "train")  # written all the same
    assert kinds(central.kubes["research"], "research") == [("down", EVENING.isoformat())]


def entry(at: datetime, subject: str, kind: Any = "down") -> Entry:
    return Entry(at, "nodegroups", "ml-prod", kind, subject, nodes=1, gpus=8)


def test_concurrent_writers_leave_every_entry_once(kube: KubeHandle) -> None:
    stores = [ConfigMapHistory(kube.api_client(), "gpu-jobs", "ml-prod") for _ in range(4)]
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-jobs"}})
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def write(n: int) -> None:
        barrier.wait()
        try:
            stores[n].append([entry(EVENING, f"group-{n}")])
        except BaseException as exc:  # the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    (entries,) = history(kube).values()
    assert sorted(e.subject for e in entries) == [f"group-{n}" for n in range(4)]
    assert "create configmaps" in kube.log.operations()  # the first made the week's object, the others updated it


def test_a_lost_answer_is_read_again_never_resent(kube: KubeHandle) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-jobs"}})
    store = ConfigMapHistory(kube.api_client(), "gpu-jobs", "ml-prod")
    store.append([entry(EVENING, "train")])
    kube.log.clear()
    kube.inject("update configmaps", "lost")  # written, then its answer lost (a 504)
    store.append([entry(GONE, "train", "gone")])
    assert kube.log.operations().count("update configmaps") == 1  # read again, found written: not sent twice
    (entries,) = history(kube).values()
    assert [e.kind for e in entries] == ["down", "gone"]
    store.append([entry(GONE, "train", "gone")])  # the same entry again (a run retried): still once
    assert [e.kind for e in next(iter(history(kube).values()))] == ["down", "gone"]


def test_weeks_past_the_retention_are_deleted(kube: KubeHandle) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-jobs"}})
    store = ConfigMapHistory(kube.api_client(), "gpu-jobs", "ml-prod")
    store.append([entry(EVENING - timedelta(weeks=6), "train"), entry(EVENING, "train")])
    assert sorted(history(kube)) == [object_name("ml-prod", "2026-W43"), object_name("ml-prod", "2026-W49")]
    assert store.prune(EVENING, timedelta(weeks=4)) == ["2026-W43"]
    assert sorted(history(kube)) == [object_name("ml-prod", "2026-W49")]
    assert [e.at for e in store.read()] == [EVENING]


def test_the_sweeps_deleted_pods_are_kept_with_their_idle_gpu_hours(
    kube: KubeHandle, prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    names = seeded(kube, now)  # three idle GPU pods, marked an hour ago: due
    prometheus = prometheus_factory(idle_series(names), now)

    done, document = sweep(kube, tmp_path, prometheus.url, "delete", now)

    assert done.code == 0, done.stderr
    assert [s["warnings"] for s in document["scopes"]] == [[]]
    pods = sorted((e.subject, e.gpus, e.idle_gpu_hours) for es in history(kube).values() for e in es)
    deleted = sorted(f"ml/{pod}" for group in names.values() for pod in group)
    assert pods == [(pod, 1, 2.5) for pod in deleted]  # 1 GPU x (the 2h window + the 30m grace period)
    again, _ = sweep(kube, tmp_path, prometheus.url, "delete", now + timedelta(minutes=10))
    assert again.code == 0
    assert len([e for es in history(kube).values() for e in es]) == 3  # nothing new: nothing acted on again


def test_a_run_replayed_at_a_past_instant_keeps_its_week(central: Fleet, tmp_path: Path) -> None:
    """Retention counts back from the run's own instant: a night replayed with ``--at`` 20 weeks ago (past the 4
    weeks kept, counted from the wall clock) keeps what it wrote, as the simulated week and a replay need."""
    past = EVENING - timedelta(weeks=20)
    done = gpu_jobs(central, tmp_path, "nodegroups", "--at", past.isoformat())
    assert done.code == 0, done.stdout + done.stderr
    kept = [(kind, datetime.fromisoformat(at)) for kind, at in kinds(central.kubes["ml-prod"], "train")]
    assert ("down", past) in kept  # the same instant (written in the summer's offset)
