"""The one-off runs of docs/deploying.md, as a user types them: its ``bash`` blocks run as written, through bash and the real
kubectl, against the sandbox (its first cluster, the kubeconfig's current context), twice: names never clash."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docs import shell_block
from tests.envelope import items
from tests.integration.test_install import NAMESPACE, conditions, exit_code, summary
from tests.sandbox.world import World

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World.start(prometheus=False, sync=False) as started:
        yield started


def bash(world: World, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **world.env(), "PATH": f"{ROOT / '.tools' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_one_off_runs_work_as_written_and_their_names_never_clash(world: World) -> None:
    block = shell_block("docs/deploying.md", "## One-off runs")
    assert "kubectl set env --local -f - GPU_JOBS_DRY_RUN=true" in block
    cluster = world.policy.fleet[0].name  # the kubeconfig's current context
    assert world.executor is not None

    for _ in range(2):
        done = bash(world, block)
        assert done.returncode == 0, done.stdout + done.stderr
        assert re.search(r"job.batch/nodegroups-manual-\d+ condition met", done.stdout), done.stdout
        # `kubectl logs job/$name`: the run's report, one JSON line
        assert '{"apiVersion": "gpu-jobs/v1", "job": "nodegroups"' in done.stdout

    jobs = {j["metadata"]["name"]: j for j in world.kubes[cluster].list("Job", NAMESPACE)}
    by_kind: dict[str, list[str]] = {}
    for name in jobs:
        by_kind.setdefault(name.rsplit("-", 1)[0], []).append(name)
    expected = {"nodegroups-manual", "nodegroups-dry-run", "nodegroups-only", "quotas-manual"}
    assert {kind: len(names) for kind, names in by_kind.items()} == dict.fromkeys(expected, 2)

    finished = {name: world.executor.wait(cluster, NAMESPACE, name) for name in jobs}
    pods = {
        p["metadata"]["labels"]["batch.kubernetes.io/job-name"]: p for p in world.kubes[cluster].list("Pod", NAMESPACE)
    }
    for name, job in finished.items():
        assert conditions(job) == {"SuccessCriteriaMet", "Complete"}, name
        assert exit_code(pods[name]) == 0, name
        log = world.kubes[cluster].cluster.pod_log(NAMESPACE, pods[name]["metadata"]["name"])
        run = summary(log)
        assert run["dry_run"] is name.startswith("nodegroups-dry-run"), name
        if name.startswith("nodegroups-only"):
            groups = {g.name for g in world.policy.node_groups if world.policy.cluster_of(g).name == cluster}
            assert {"training-a100", "inference-l4"} <= groups
            assert "inference-l4" not in log  # only the group asked for was looked at
    quotas = world.kubes[cluster].list("ResourceQuota")
    assert len(quotas) >= 20  # the quotas runs made every team namespace's quota

    # The docs' way to read a failed run's exit code, here of a run that succeeded.
    manual = sorted(by_kind["nodegroups-manual"])[0]
    code = bash(
        world,
        f"name={manual}; kubectl -n gpu-jobs get pods -l batch.kubernetes.io/job-name=$name -o jsonpath='{{..exitCode}}'",
    )
    assert (code.returncode, code.stdout) == (0, "0"), code.stderr


def test_the_first_install_path_onboards_a_cluster_with_many_namespaces(world: World) -> None:
    from tests.emulators.kube.seed import namespace

    cluster = world.policy.fleet[0].name
    kube = world.kubes[cluster]
    for i in range(60):  # more namespaces than the default limit of 50 changes
        kube.create(namespace(f"team-onboard-{i:02d}"))
    assert world.executor is not None

    def cronjob_run(name: str) -> Any:
        done = bash(world, f"kubectl -n gpu-jobs create job --from=cronjob/quotas {name}")
        assert done.returncode == 0, done.stderr
        return world.executor.wait(cluster, NAMESPACE, name)  # type: ignore[union-attr]

    refused = cronjob_run("quotas-before")
    assert conditions(refused) >= {"Failed"}
    assert kube.list("ResourceQuota", "team-onboard-00") == []

    done = bash(world, shell_block("docs/deploying.md", "## First install of `quotas`"))
    assert done.returncode == 0, done.stdout + done.stderr
    plan = next(json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"apiVersion"'))
    assert (plan["job"], plan["dryRun"], [s["state"] for s in plan["scopes"]]) == ("quotas", True, ["planned"])
    assert len(items(plan, "namespace quota", "planned")) >= 60
    assert len(kube.list("ResourceQuota", "team-onboard-59")) == 1  # the onboarding run wrote them

    after = cronjob_run("quotas-after")
    assert conditions(after) == {"SuccessCriteriaMet", "Complete"}  # and the CronJob succeeds from then on
