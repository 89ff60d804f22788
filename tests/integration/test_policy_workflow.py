"""The pull-request check as written: the ``run:`` lines of ``.github/workflows/policy.yaml`` (scripts/policy-check.sh,
with this venv's gpu-jobs) and the commands of docs/commands.md, run by bash in a Git repository with a base branch
and a change, with ``gh`` replaced by a recorder. tests/integration/test_policy_repo.py runs the same script from the
reusable workflow, installing gpu-jobs, in a repository that holds only a policy file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs import shell_block
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace
from tests.integration.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github/workflows/policy.yaml"
EXAMPLE = (ROOT / "gitops/policy.yaml").read_text()
#: The GitHub expressions the workflow may use and what the runner would put there for pull request 17.
EXPRESSIONS = {"github.token": "t0ken", "github.event.pull_request.number": "17", "github.workspace": "."}

# A gh that keeps the comment in a file: `--edit-last` fails while there is none, as the real one does.
FAKE_GH = """#!/bin/sh
[ "$1 $2" = "pr comment" ] || { echo "fake gh: unexpected $*" >&2; exit 64; }
[ "$GH_TOKEN" = t0ken ] || { echo "fake gh: no GH_TOKEN" >&2; exit 4; }
pr=$3; shift 3; edit=no; body=
while [ $# -gt 0 ]; do
  case "$1" in --edit-last) edit=yes;; --body-file) body=$2; shift;; *) echo "fake gh: unknown $1" >&2; exit 64;; esac
  shift
done
if [ $edit = yes ] && [ ! -f "$GH_STATE/comment-$pr.md" ]; then echo "no comments found for current user" >&2; exit 1; fi
cp "$body" "$GH_STATE/comment-$pr.md"; echo "$edit" >> "$GH_STATE/calls-$pr"
"""


def steps() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    return {s["name"]: s for s in job["steps"] if "run" in s}


def _expand(value: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        assert name in EXPRESSIONS, f"the test does not know the expression ${{{{ {name} }}}}"
        return EXPRESSIONS[name]

    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    """A repository whose ``main`` (fetched as ``origin/main``) holds the example policy, a checkout of the change,
    and the environment a runner gives the steps."""
    repo = tmp_path / "repo"
    (repo / "gitops").mkdir(parents=True)
    (repo / "gitops/kustomization.yaml").write_text((ROOT / "gitops/kustomization.yaml").read_text())
    (repo / "gitops/policy.yaml").write_text(EXAMPLE)
    (repo / "scripts").mkdir()
    (repo / "scripts/policy-check.sh").write_text((ROOT / "scripts/policy-check.sh").read_text())
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-qb", "change")
    bin_dir, state, temp = tmp_path / "bin", tmp_path / "gh", tmp_path / "runner-temp"
    for d in (bin_dir, state, temp):
        d.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),  # this checkout's gpu-jobs, as `pip install .` would give
        "GITHUB_BASE_REF": "main",
        "RUNNER_TEMP": str(temp),
        "TMPDIR": str(temp),
        "GH_STATE": str(state),
        "GPU_JOBS_LOG_FORMAT": "json",
        "GITHUB_ACTIONS": "true",
        "GPU_JOBS_INSTALL": "no",  # this venv's gpu-jobs is on PATH (test_policy_repo.py runs the install)
    }
    return {"repo": repo, "env": env, "state": state, "temp": temp}


def run_step(world: dict[str, Any], name: str) -> subprocess.CompletedProcess[str]:
    step = steps()[name]
    env = {**world["env"], **{k: _expand(str(v)) for k, v in (step.get("env") or {}).items()}}
    # As the runner does: bash -e, in the checkout.
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _expand(step["run"])],
        cwd=world["repo"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def change_policy(world: dict[str, Any], *replacements: tuple[str, str]) -> None:
    path = world["repo"] / "gitops/policy.yaml"
    text = path.read_text()
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    git(world["repo"], "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "change")


def test_the_workflow_runs_every_step_it_declares() -> None:
    assert set(steps()) == {"Check the policy", "Comment"}


QUOTA = ("default: {nvidia.com/gpu: 0}", "default: {nvidia.com/gpu: 4}")
LONGER = ('start: "07:30", end: "19:30"', 'start: "07:30", end: "21:30"')


def test_a_pull_request_gets_one_comment_with_what_it_changes(world: dict[str, Any]) -> None:
    change_policy(world, QUOTA, LONGER)
    for name in ("Check the policy", "Comment"):
        done = run_step(world, name)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    comment = (world["state"] / "comment-17.md").read_text()
    assert comment == (world["temp"] / "policy-diff.md").read_text()
    assert "### What this change to `gitops/policy.yaml` does (`gpu-jobs diff`)" in comment
    assert "reference week 2026-W24" in comment
    assert "| default (every namespace no rule matches) | nvidia.com/gpu: 0 | nvidia.com/gpu: 4 |" in comment
    assert "| `notebooks-t4` | 61.25 | 71.25 | +10 | n/a (no up size) | n/a (no up size) | n/a | notebooks |" in comment
    assert "`training-a100`" not in comment  # unchanged groups do not appear
    # A second push edits the same comment instead of adding one.
    change_policy(world, ("default: {nvidia.com/gpu: 4}", "default: {nvidia.com/gpu: 2}"))
    for name in ("Check the policy", "Comment"):
        assert run_step(world, name).returncode == 0
    assert (world["state"] / "calls-17").read_text().split() == ["no", "yes"]
    assert "nvidia.com/gpu: 2 |" in (world["state"] / "comment-17.md").read_text()


def test_a_bad_policy_fails_with_annotations_on_its_lines(world: dict[str, Any]) -> None:
    change_policy(world, ('days: Mon-Fri, start: "07:30"', 'days: Mon-Fry, start: "07:30"'))
    line = next(i for i, text in enumerate(EXAMPLE.splitlines(), 1) if 'start: "07:30"' in text)
    done = run_step(world, "Check the policy")
    assert done.returncode == 2
    assert not (world["temp"] / "policy-diff.md").exists()  # a bad policy stops the check before the diff
    assert done.stdout.splitlines() == [
        f"::error file=gitops/policy.yaml,line={line},title=gpu-jobs validate%3A nodeGroups[4].workingHours[0].days"
        '::nodeGroups[4].workingHours[0].days: "Mon-Fry" is not a day range (use e.g. Mon-Fri, Sat,Sun, Mon-Wed,Fri'
        " or daily)"
    ]


def documented_commands() -> list[str]:
    block = shell_block("docs/commands.md", "## Validating a change in a pull request")
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_documented_commands_as_written(world: dict[str, Any]) -> None:
    change_policy(world, QUOTA)
    outputs = []
    for command in documented_commands():
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command],
            cwd=world["repo"],
            env=world["env"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    text, markdown = outputs[-2], outputs[-1]
    assert "namespace quotas:" in text
    assert "nvidia.com/gpu: 0  nvidia.com/gpu: 4" in text
    assert "| default (every namespace no rule matches) | nvidia.com/gpu: 0 | nvidia.com/gpu: 4 |" in markdown
    assert "#### Node groups: 0 of 8 change their hours" in markdown


def test_diff_with_namespaces_reads_the_cluster_and_lists_those_whose_quota_changes(
    kube: KubeHandle, tmp_path: Path
) -> None:
    for name, labels in [("misc", {}), ("fraud", {}), ("nlp", {"team": "nlp"}), ("scratch", {})]:
        kube.create(namespace(name, labels))
    kube.identify("ml-prod")
    kube.log.clear()
    base, change = tmp_path / "base.yaml", tmp_path / "change.yaml"
    base.write_text(EXAMPLE)
    change.write_text(EXAMPLE.replace(*QUOTA))
    args = ["diff", str(base), str(change), "--namespaces", "--cluster", "ml-prod", "--output", "json"]
    done = run_cli(args, {"KUBECONFIG": str(kube.kubeconfig)})
    assert done.code == 0, done.stderr
    doc = json.loads(done.stdout)
    # The emulator's own default namespace is excluded; fraud and nlp keep their rules; misc and scratch get 4.
    assert doc["namespaces"] == [
        {
            "cluster": "ml-prod",
            "before": "default: nvidia.com/gpu: 0",
            "after": "default: nvidia.com/gpu: 4",
            "namespaces": ["misc", "scratch"],
        }
    ]
    assert doc["namespacesRead"]["ml-prod"] >= 4
    assert kube.log.writes() == []  # read-only
    # A cluster that cannot be read (here: no right to list namespaces) is a failed item, said so, and the rest of
    # the diff is still printed.
    kube.allow_only(("list", "resourcequotas"))
    denied = run_cli(args, {"KUBECONFIG": str(kube.kubeconfig)})
    assert (denied.code, denied.summary["failed"]) == (1, 1)
    assert json.loads(denied.stdout)["namespaceQuotas"][0]["after"] == "nvidia.com/gpu: 4"
    assert '"event": "diff.namespaces_unreadable"' in denied.stderr
    # An API that says it is another cluster is not read: its namespaces would be listed under the wrong name.
    kube.emulator.allowed = None  # every right again
    kube.identify("batch")
    kube.log.clear()
    wrong = run_cli(args, {"KUBECONFIG": str(kube.kubeconfig)})
    assert (wrong.code, wrong.summary["failed"]) == (1, 1)
    assert json.loads(wrong.stdout)["namespaces"] == []
    assert '"event": "diff.wrong_cluster"' in wrong.stderr
    assert "is cluster batch (ConfigMap gpu-jobs/gpu-jobs-cluster), not ml-prod" in wrong.stderr
    assert kube.log.operations() == ["get configmaps"]
