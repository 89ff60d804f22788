"""The pull-request check in a repository that holds only a policy file: the reusable workflow
(.github/workflows/policy-check.yaml) run as GitHub would, step by step: the caller's checkout (a Git repository
with nothing but ``policies/gpu.yaml``, a base branch and a change), the release's scripts/ checked out at
``.gpu-jobs``, then its ``run:`` lines by bash, with ``gh`` replaced by a recorder. The install is real: pip installs
gpu-jobs into a fresh venv, from this checkout instead of the release tag (GPU_JOBS_SOURCE, the documented
override), with the dependencies this venv already has (so nothing is downloaded). The checkout is built into a wheel
once for the module (pip's build of a source tree, ~4 s, would otherwise be paid by each of the three installs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs import __version__
from tests.integration.test_policy_workflow import EXAMPLE, FAKE_GH, git

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github/workflows/policy-check.yaml"
POLICY = "policies/gpu.yaml"
#: What the caller passes and what the runner gives (pull request 23).
EXPRESSIONS = {
    "inputs.policy": POLICY,
    "inputs.gpu-jobs-version": __version__,
    "inputs.gpu-jobs-repository": "example/gpu-jobs",
    "inputs.comment": "true",
    "github.token": "t0ken",
    "github.event.pull_request.number": "23",
}


def workflow() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return doc


def expand(value: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        assert name in EXPRESSIONS, f"the test does not know the expression ${{{{ {name} }}}}"
        return EXPRESSIONS[name]

    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def test_it_is_a_reusable_workflow_with_the_policy_path_and_the_release_as_inputs() -> None:
    doc = workflow()
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads a bare `on` as true
    inputs = on["workflow_call"]["inputs"]
    assert inputs["policy"]["type"] == inputs["gpu-jobs-version"]["type"] == "string"
    assert inputs["gpu-jobs-version"]["required"] is True
    (job,) = doc["jobs"].values()
    uses = [s for s in job["steps"] if "uses" in s]
    # The release's own script: the checkout of the gpu-jobs repository at the tag it installs.
    release = next(s for s in uses if s.get("with", {}).get("path") == ".gpu-jobs")
    assert release["with"]["ref"] == "v${{ inputs.gpu-jobs-version }}"
    assert release["with"]["repository"] == "${{ inputs.gpu-jobs-repository }}"
    assert [s["name"] for s in job["steps"] if "run" in s] == ["Check the policy", "Comment"]


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no gpu-jobs in it) that sees this venv's dependencies, but not this venv's gpu-jobs. Without
    a pip of its own (ensurepip takes ~4 s): ``python -m pip`` is this venv's, which installs into the fresh one."""
    base = tmp_path_factory.mktemp("venv")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    deps = base / "deps"
    deps.mkdir()
    site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
    for entry in site.iterdir():
        if not re.match(r"(__editable__.*gpu_jobs|gpu_jobs)", entry.name):
            (deps / entry.name).symlink_to(entry)
    purelib = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "deps.pth").write_text(f"{deps}\n")
    return venv / "bin/python"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, python: Path) -> Path:
    """What pip installs instead of the tag: this checkout's package, as the release's tag holds it, built by pip."""
    source = tmp_path_factory.mktemp("gpu-jobs-source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "jobs", source / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [str(python), "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("gpu_jobs-*.whl")
    return built


@pytest.fixture
def world(tmp_path: Path, python: Path, wheel: Path) -> dict[str, Any]:
    repo = tmp_path / "policy-repo"
    (repo / "policies").mkdir(parents=True)
    (repo / POLICY).write_text(EXAMPLE)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-qb", "change")
    # actions/checkout of the release into .gpu-jobs (sparse: scripts/).
    shutil.copytree(ROOT / "scripts", repo / ".gpu-jobs/scripts")
    bin_dir, state, temp = tmp_path / "bin", tmp_path / "gh", tmp_path / "runner-temp"
    for d in (bin_dir, state, temp):
        d.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != Path(sys.executable).parent]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GPU_JOBS_", "VIRTUAL_ENV"))},
        "PATH": os.pathsep.join([str(bin_dir), *path]),  # no gpu-jobs on PATH: the step must install it
        "PYTHON": str(python),
        "GPU_JOBS_SOURCE": str(wheel),
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_BASE_REF": "main",
        "RUNNER_TEMP": str(temp),
        "GH_STATE": str(state),
        "GPU_JOBS_LOG_FORMAT": "json",
    }
    return {"repo": repo, "env": env, "state": state, "temp": temp, "python": python}


def run_step(world: dict[str, Any], name: str) -> subprocess.CompletedProcess[str]:
    (job,) = workflow()["jobs"].values()
    step = next(s for s in job["steps"] if s.get("name") == name)
    env = {**world["env"], **{k: expand(str(v)) for k, v in (step.get("env") or {}).items()}}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(step["run"])],
        cwd=world["repo"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def commit_change(world: dict[str, Any], old: str, new: str) -> None:
    path = world["repo"] / POLICY
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    git(world["repo"], "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "change")


def test_a_policy_only_repository_gets_the_install_the_annotations_and_the_comment(world: dict[str, Any]) -> None:
    # A bad policy first: annotations on its lines, exit 2, no diff to post.
    commit_change(world, 'days: Mon-Fri, start: "07:30"', 'days: Mon-Fry, start: "07:30"')
    bad = run_step(world, "Check the policy")
    assert bad.returncode == 2, bad.stderr
    (line,) = bad.stdout.splitlines()
    assert line.startswith(f"::error file={POLICY},line=")
    assert '"Mon-Fry" is not a day range' in line
    assert f"policy-check: installing {world['env']['GPU_JOBS_SOURCE']}" in bad.stderr
    assert f"policy-check: gpu-jobs {__version__}" in bad.stderr  # installed, and the version the caller pinned
    installed = Path(world["python"]).parent / "gpu-jobs"
    assert installed.is_file()
    assert not (world["temp"] / "policy-diff.md").exists()

    # Fixed, and a quota raised: valid, and the comment says what the change does against main.
    commit_change(world, 'days: Mon-Fry, start: "07:30"', 'days: Mon-Fri, start: "07:30"')
    commit_change(world, "default: {nvidia.com/gpu: 0}", "default: {nvidia.com/gpu: 4}")
    good = run_step(world, "Check the policy")
    assert good.returncode == 0, good.stderr
    assert good.stdout == ""  # a valid policy under GitHub Actions: no annotation
    assert run_step(world, "Comment").returncode == 0
    comment = (world["state"] / "comment-23.md").read_text()
    assert f"### What this change to `{POLICY}` does (`gpu-jobs diff`)" in comment
    assert "| default (every namespace no rule matches) | nvidia.com/gpu: 0 | nvidia.com/gpu: 4 |" in comment


def test_the_script_says_what_is_missing(world: dict[str, Any]) -> None:
    env = {k: v for k, v in world["env"].items() if k != "GPU_JOBS_SOURCE"}
    script = world["repo"] / ".gpu-jobs/scripts/policy-check.sh"
    for args, extra, message in [
        ([POLICY], {}, "policy-check: set GPU_JOBS_VERSION to the release to install (e.g. 0.1.0), or GPU_JOBS_SOURCE"),
        (["nope.yaml"], {}, "policy-check: no policy file at nope.yaml (give its path in the repository as the first argument)"),
        ([POLICY], {"GPU_JOBS_INSTALL": "no"}, "policy-check: GPU_JOBS_INSTALL=no, but no gpu-jobs on PATH"),
    ]:  # fmt: skip
        done = subprocess.run(
            ["bash", str(script), *args],
            cwd=world["repo"],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert (done.returncode, done.stderr.strip()) == (2, message)


def test_the_docs_command_for_other_ci_systems_as_typed(world: dict[str, Any], tmp_path: Path) -> None:
    """docs/policy-repo.md's command, in a policy-only repository with the script copied next to the policy, outside
    GitHub Actions: plain validate lines (none: the policy is valid) and the diff in $TMPDIR."""
    from tests.docs import shell_block

    repo = tmp_path / "plain"
    repo.mkdir()
    (repo / "policy.yaml").write_text(EXAMPLE)
    shutil.copy(ROOT / "scripts/policy-check.sh", repo / "policy-check.sh")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "policy.yaml").write_text(EXAMPLE.replace("default: {nvidia.com/gpu: 0}", "default: {nvidia.com/gpu: 2}"))
    out = tmp_path / "ci-temp"
    out.mkdir()
    env = {k: v for k, v in world["env"].items() if k not in ("GITHUB_ACTIONS", "RUNNER_TEMP", "GITHUB_BASE_REF")}
    done = subprocess.run(
        ["bash", "-e", "-c", shell_block("docs/policy-repo.md", "with the base branch fetched:")],
        cwd=repo, env={**env, "TMPDIR": str(out)}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("policy.yaml: valid: 8 node groups")
    assert (
        "| default (every namespace no rule matches) | nvidia.com/gpu: 0 | nvidia.com/gpu: 2 |"
        in (out / "policy-diff.md").read_text()
    )


def test_the_script_refuses_a_gpu_jobs_other_than_the_one_pinned(world: dict[str, Any]) -> None:
    """A tag that holds another version (or a stale gpu-jobs on PATH) would check with rules nobody pinned."""
    env = {**world["env"], "GPU_JOBS_INSTALL": "no", "GPU_JOBS_VERSION": "9.9.9"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])  # this venv's gpu-jobs
    done = subprocess.run(
        ["bash", str(world["repo"] / ".gpu-jobs/scripts/policy-check.sh"), POLICY],
        cwd=world["repo"], env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"policy-check: asked for gpu-jobs 9.9.9, got gpu-jobs {__version__}: the check would not be the one pinned"
    )
    assert done.stdout == ""  # nothing validated with the wrong version
