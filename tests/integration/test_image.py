"""`make image` as a person runs it: the Dockerfile built with whichever builder works here (docker with a daemon,
podman, buildah), the image's size, and the job run in it as its CronJob runs it (read-only root filesystem, uid
65532, the policy mounted at /etc/gpu-jobs). Where no builder works, `make image` must say so in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jobs import __version__

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".ci" / "build-image"
IMAGE = "ghcr.io/example/gpu-jobs"
#: The ceiling docs/release.md promises.
MAX_BYTES = 300 * 1000 * 1000
BUILDERS = ("docker", "podman", "buildah")


def working_builder() -> str | None:
    for builder in BUILDERS:
        if shutil.which(builder) is None:
            continue
        if builder != "docker":
            return builder
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30, check=False)
        if info.returncode == 0:
            return builder
    return None


def test_make_image_names_what_it_found_when_no_builder_works(tmp_path: Path) -> None:
    """A docker client whose daemon does not answer (this machine's case) is not a builder: the one line says what
    was found and what to do, and nothing is attempted."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "docker").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\necho "Cannot connect to the Docker daemon" >&2\nexit 1\n'
    )
    (bin_dir / "docker").chmod(0o755)
    tools = {name: shutil.which(name) for name in ("bash", "sed", "dirname", "cat")}
    for name, path in tools.items():
        assert path, name
        (bin_dir / name).symlink_to(path)
    done = subprocess.run(
        [str(BUILD)], env={**os.environ, "PATH": str(bin_dir)}, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "make image: no image builder works here (docker needs a running daemon; podman or buildah need none);"
        " found: docker. Install podman or buildah, or start the docker daemon."
    ]
    assert calls.read_text().split("\n")[:-1] == ["info"]  # asked, never told to build


def test_the_docs_make_image_command_as_typed_where_no_builder_works(tmp_path: Path) -> None:
    """docs/release.md's `make image || echo ...`: here, with a docker client whose daemon does not answer."""
    from tests.docs import shell_block

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "docker").chmod(0o755)
    for name in ("bash", "sh", "sed", "dirname", "cat", "make", "echo"):
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    block = shell_block("docs/release.md", "When none works it says so in one line")
    done = subprocess.run(
        ["bash", "-c", block], cwd=ROOT, env={**os.environ, "PATH": str(bin_dir)}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "no image built on this machine"
    assert "make image: no image builder works here" in done.stderr


def test_make_image_is_the_build_script() -> None:
    done = subprocess.run(["make", "-n", "image"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["bash", ".ci/build-image"]


def test_the_image_builds_small_and_runs_the_job_as_the_cronjob_does(tmp_path: Path) -> None:
    builder = working_builder()
    if builder is None:
        pytest.skip("no image builder works here: no podman or buildah, and docker has no daemon (docker info fails)")
    done = subprocess.run([str(BUILD)], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    ref = f"{IMAGE}:{__version__}"
    last = done.stdout.splitlines()[-1]
    assert last.startswith(f"built {ref} with {builder}: ")
    size = int(last.rsplit(": ", 1)[1].removesuffix(" bytes"))
    print(f"image {ref}: {size / 1e6:.0f} MB")  # the figure docs/release.md reports
    assert size <= MAX_BYTES
    if builder == "buildah":
        pytest.skip("buildah builds but does not run containers; the run is checked with docker or podman")

    policy = tmp_path / "policy"
    policy.mkdir()
    shutil.copy(ROOT / "gitops" / "policy.yaml", policy / "policy.yaml")
    # As the CronJob runs it: read-only root, a writable /tmp, uid 65532, the policy ConfigMap mounted read-only.
    run = [
        builder, "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--user", "65532:65532",
        "-v", f"{policy}:/etc/gpu-jobs:ro", "-e", "GPU_JOBS_POLICY=/etc/gpu-jobs/policy.yaml",
        "-e", "GPU_JOBS_LOG_FORMAT=json",
    ]  # fmt: skip
    version = subprocess.run([*run, ref, "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert version.stdout.strip() == f"gpu-jobs {__version__}"
    valid = subprocess.run(
        [*run, ref, "validate", "/etc/gpu-jobs/policy.yaml"], capture_output=True, text=True, timeout=120, check=False
    )
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("/etc/gpu-jobs/policy.yaml: valid: ")
    no_pip = subprocess.run(
        [*run, "--entrypoint", "python", ref, "-c", "import pip"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert no_pip.returncode != 0  # nothing in the image installs anything
