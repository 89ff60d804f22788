"""A release a team can pin: a recognised LICENSE, one version (jobs.__version__) that the package metadata, the
CLI, the CHANGELOG, the image tags and every remote reference agree on, and one owner/name for the repository and
the image (a fork replaces it once: docs/release.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import yaml

from jobs import __version__

ROOT = Path(__file__).resolve().parents[2]
#: The repository and image references a release makes real, with the owner/name they name.
REFERENCE = re.compile(r"(?:github\.com/|ghcr\.io/|uses: |default: )(?P<slug>[\w.-]+/gpu-jobs)\b")
#: Every place a release is pinned by its tag.
PINNED = re.compile(r"(?:\?ref=|targetRevision: |tag: |/policy-check\.yaml@)(?P<ref>v[\w.-]+)")


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def test_the_license_is_apache_2_and_the_package_says_so() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (ROOT / "Dockerfile").read_text()


def test_the_wheel_takes_its_version_and_license_from_one_place_without_a_warning(tmp_path: Path) -> None:
    """Built as the image builds it (pyproject, README, LICENSE, jobs/), with build isolation: the setuptools the
    build-system asks for. A deprecated `license = {text=...}` would warn here."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "jobs", source / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jobs.__version__"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stdout + done.stderr.replace("WARNING: Location", ""), done.stdout[-3000:]
    (wheel,) = (tmp_path / "dist").glob("gpu_jobs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"gpu_jobs-{__version__}.dist-info/METADATA").decode()
        assert archive.read(f"gpu_jobs-{__version__}.dist-info/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert f"\nVersion: {__version__}\n" in metadata
    assert "\nLicense-Expression: Apache-2.0\n" in metadata


def test_gpu_jobs_version_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "jobs", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout == f"gpu-jobs {__version__}\n"


def test_the_changelog_has_unreleased_and_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert __version__ in headings
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.MULTILINE)
    for heading in headings:
        assert re.search(rf"^\[{re.escape(heading)}\]: https://github\.com/", text, re.MULTILINE), heading


def test_every_pin_names_this_release_and_every_reference_one_owner() -> None:
    files = tracked("gitops", "kustomize", ".github", "scripts", "Dockerfile", ".ci", "docs", "CHANGELOG.md")
    pins, slugs = set(), set()
    for path in files:
        text = path.read_text()
        pins |= {(m["ref"], path.name) for m in PINNED.finditer(text)}
        slugs |= {m["slug"] for m in REFERENCE.finditer(text)}
    assert pins, "no pinned reference found"
    assert {ref for ref, _ in pins} == {f"v{__version__}"}, pins
    (slug,) = slugs  # the one owner/name a fork replaces (docs/release.md)
    source = re.search(r'org\.opencontainers\.image\.source="https://github\.com/([\w.-]+/gpu-jobs)"',
                       (ROOT / "Dockerfile").read_text())  # fmt: skip
    assert source
    assert source.group(1) == slug
    # The image tags: the base and production pin this release; staging a release candidate of the next.
    for component, expected in [("base", __version__), ("components/production", __version__)]:
        (image,) = yaml.safe_load((ROOT / "kustomize" / component / "kustomization.yaml").read_text())["images"]
        assert (image["name"], image["newTag"]) == (f"ghcr.io/{slug}", expected)


def test_the_release_workflow_pushes_only_a_tag_that_is_the_version(tmp_path: Path) -> None:
    (job,) = yaml.safe_load((ROOT / ".github/workflows/release.yaml").read_text())["jobs"].values()
    step = next(s for s in job["steps"] if s.get("name") == "The tag is the version")
    for tag, code in [(f"v{__version__}", 0), ("v9.9.9", 1)]:
        github_env = tmp_path / f"env-{tag}"
        github_env.write_text("")
        done = subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "GITHUB_REF_NAME": tag, "GITHUB_ENV": str(github_env)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == code, done.stderr
        if code == 0:
            assert github_env.read_text() == f"VERSION={__version__}\n"
        else:
            assert done.stderr == f"::error::tag v9.9.9 is not v{__version__} (jobs/__init__.py): fix one of them\n"


def test_the_fork_rename_and_the_release_tag_as_typed(tmp_path: Path) -> None:
    """docs/release.md's two commands, in a copy of this repository: the owner/name replaced once leaves no
    `example/gpu-jobs` anywhere, and the tag pushed is v<version>."""
    from tests.docs import shell_block

    fork = tmp_path / "fork"
    for path in tracked():
        (fork / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, fork / path.relative_to(ROOT))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=fork, check=True)
    subprocess.run([*git, "add", "-A"], cwd=fork, check=True)
    subprocess.run([*git, "commit", "-qm", "fork"], cwd=fork, check=True)

    rename = shell_block("docs/release.md", "replace it once, everywhere")
    subprocess.run(["bash", "-e", "-c", rename], cwd=fork, check=True, timeout=120)
    left = subprocess.run(
        ["git", "grep", "-l", "example/gpu-jobs"], cwd=fork, capture_output=True, text=True, check=False
    )
    assert (left.returncode, left.stdout) == (1, "")  # nothing left anywhere, tests included
    assert 'image.source="https://github.com/acme/gpu-jobs"' in (fork / "Dockerfile").read_text()
    assert "ghcr.io/acme/gpu-jobs" in (fork / "kustomize/base/kustomization.yaml").read_text()

    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run([*git, "commit", "-qam", "acme"], cwd=fork, check=True)
    subprocess.run(["git", "remote", "add", "origin", str(origin)], cwd=fork, check=True)
    tag = shell_block("docs/release.md", "tag the merge commit and push the tag")
    subprocess.run(["bash", "-e", "-c", tag], cwd=fork, env={**os.environ, "GIT_AUTHOR_NAME": "t",
                   "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                   "GIT_COMMITTER_EMAIL": "t@example.com"}, check=True, capture_output=True)  # fmt: skip
    remote = subprocess.run(["git", "ls-remote", "--tags", str(origin)], capture_output=True, text=True, check=True)
    assert remote.stdout.split()[1::2][0] == f"refs/tags/v{__version__}"
