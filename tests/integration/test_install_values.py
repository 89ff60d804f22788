"""Identities from one place per install: each overlay's install.yaml holds its account values, the cloud components
put them in place (kustomize replacements), the base and components hold none, and ``gpu-jobs check-install`` flags
the example values left in a rendered install, one line each."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from jobs.core.placeholders import PLACEHOLDERS
from tests import forkserver, kube_schemas
from tests.integration.cli import run_cli
from tests.integration.test_deploy import CLOUDS, K8S_VERSION, OVERLAYS, Obj, kubectl, named, target_dir

ROOT = Path(__file__).resolve().parents[2]

#: Real-looking values an install would carry, per cloud (install.yaml data).
VALUES = {
    "aws": {"AWS_ACCOUNT_ID": "444455556666", "AWS_REGION": "us-east-2"},
    "gcp": {"GCP_PROJECT": "acme-ml-prod"},
    "azure": {
        "AZURE_TENANT_ID": "7f3c1a52-1b0e-4c1d-9a55-3c2b8d1e0f11",
        "AZURE_CLIENT_ID_NODEGROUPS": "0b1e2d3c-4a5b-4c6d-8e7f-901234567801",
        "AZURE_CLIENT_ID_CLOUD_QUOTAS": "0b1e2d3c-4a5b-4c6d-8e7f-901234567802",
        "AZURE_CLIENT_ID_SWEEP_INSTANCES": "0b1e2d3c-4a5b-4c6d-8e7f-901234567803",
    },
}
OWN_IMAGE = "registry.acme.internal/platform/gpu-jobs"


def render_install(cloud: str, values: dict[str, str], image: str | None = None) -> list[Obj]:
    """An install of its own, as a team writes it: the base, its cloud's and production's components, its
    install.yaml, and optionally its own image name."""
    with tempfile.TemporaryDirectory(dir=ROOT / "kustomize" / "overlays") as tmp:
        install = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpu-jobs-install", "annotations": {"config.kubernetes.io/local-config": "true"}},
            "data": values,
        }
        (Path(tmp) / "install.yaml").write_text(yaml.safe_dump(install))
        kustomization: Obj = {
            "resources": ["../../base", "install.yaml"],
            "components": [f"../../components/{cloud}", "../../components/production"],
        }
        if image:
            kustomization["images"] = [{"name": "ghcr.io/example/gpu-jobs", "newName": image}]
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        done = subprocess.run([str(kubectl()), "kustomize", tmp], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]


def annotations(objects: list[Obj], account: str) -> dict[str, str]:
    found: dict[str, str] = named(objects, "ServiceAccount", account)["metadata"]["annotations"]
    return found


ACCOUNTS = ("gpu-jobs-nodegroups", "gpu-jobs-cloud-quotas", "gpu-jobs-sweep-instances")


def test_the_base_and_components_hold_no_account_values() -> None:
    for folder in ("base", "components"):
        for path in sorted((ROOT / "kustomize" / folder).rglob("*.yaml")):
            text = path.read_text()
            for pattern, what in PLACEHOLDERS[:3]:  # accounts, projects, client ids (the image is named in docs)
                assert not pattern.search(text), f"{path.relative_to(ROOT)} holds {what}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_one_install_file_sets_every_identity_of_its_cloud(cloud: str, tmp_path: Path) -> None:
    objects = render_install(cloud, VALUES[cloud], OWN_IMAGE)
    for obj in objects:
        assert kube_schemas.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION
    assert not [o for o in objects if o["metadata"]["name"] == "gpu-jobs-install"]  # local-config: never applied
    for account in ACCOUNTS:
        job = account.removeprefix("gpu-jobs-")
        found = annotations(objects, account)
        if cloud == "aws":
            assert found["eks.amazonaws.com/role-arn"] == f"arn:aws:iam::444455556666:role/{account}"
        elif cloud == "gcp":
            assert found["iam.gke.io/gcp-service-account"] == f"{account}@acme-ml-prod.iam.gserviceaccount.com"
        else:
            key = "AZURE_CLIENT_ID_" + job.upper().replace("-", "_")
            assert found["azure.workload.identity/client-id"] == VALUES["azure"][key]
            assert found["azure.workload.identity/tenant-id"] == VALUES["azure"]["AZURE_TENANT_ID"]
    if cloud == "aws":
        for job in ("nodegroups", "cloud-quotas", "sweep-instances"):
            (container,) = named(objects, "CronJob", job)["spec"]["jobTemplate"]["spec"]["template"]["spec"][
                "containers"
            ]
            assert {e["name"]: e.get("value") for e in container["env"]}["AWS_REGION"] == "us-east-2"

    rendered = tmp_path / "install.yaml"
    rendered.write_text(yaml.safe_dump_all(objects))
    done = run_cli(["check-install", str(rendered)], {})
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout == f"{rendered}: no placeholders in {len(objects)} objects\n"


def test_a_missing_value_fails_the_render_rather_than_leaving_a_token() -> None:
    with pytest.raises(AssertionError, match="AWS_REGION"):
        render_install("aws", {"AWS_ACCOUNT_ID": "444455556666"})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_check_install_flags_every_example_value_of_a_shipped_overlay_one_line_each(overlay: str) -> None:
    """The shipped overlays carry example values on purpose (a team replaces them): each is one line naming the
    object, the field and what the value is; exit 2, and the fix said once on stderr."""
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(target_dir(overlay))], capture_output=True, text=True, check=True
    )
    checked = forkserver.run(
        [sys.executable, "-m", "jobs", "--log-format", "json", "check-install"],
        input=done.stdout,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    cloud = overlay.rsplit("/", 1)[-1]
    expected = {
        f"stdin: CronJob/{job} spec.jobTemplate.spec.template.spec.containers[0].image: "
        f"'ghcr.io/example/gpu-jobs:{'0.2.0-rc.1' if overlay.startswith('staging/') else '0.1.0'}' holds"
        " ghcr.io/example/, the example image registry"
        for job in ("nodegroups", "quotas", "cloud-quotas", "sweep-pods", "sweep-instances")
    }
    for account in ACCOUNTS if cloud in CLOUDS else ():
        if cloud == "aws":
            expected.add(
                f"stdin: ServiceAccount/{account} metadata.annotations[eks.amazonaws.com/role-arn]: "
                f"'arn:aws:iam::111122223333:role/{account}' holds 111122223333, an example AWS account id"
            )
        elif cloud == "gcp":
            expected.add(
                f"stdin: ServiceAccount/{account} metadata.annotations[iam.gke.io/gcp-service-account]: "
                f"'{account}@PROJECT_ID.iam.gserviceaccount.com' holds PROJECT_ID, the GCP project placeholder"
            )
        else:
            for key in ("client-id", "tenant-id"):
                expected.add(
                    f"stdin: ServiceAccount/{account} metadata.annotations[azure.workload.identity/{key}]: "
                    "'00000000-0000-0000-0000-000000000000' holds 00000000-0000-0000-0000-000000000000,"
                    " an all-zero Azure id"
                )
    lines = checked.stdout.splitlines()
    assert checked.returncode == 2, checked.stderr
    assert len(lines) == len(set(lines))
    assert set(lines) == expected
    assert '"event": "install.placeholders"' in checked.stderr


def test_check_install_refuses_what_is_not_a_rendered_install(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    done = run_cli(["check-install", str(bad)], {})
    assert done.code == 2
    missing = run_cli(["check-install", str(tmp_path / "none.yaml")], {})
    assert missing.code == 2
    assert "cannot read a rendered install" in missing.stderr


def test_the_docs_command_as_typed() -> None:
    """docs/install-values.md's pipeline, run from the repository with kubectl and gpu-jobs on PATH, prints the lines
    the page shows among its own, and exits 2."""
    import os

    from tests.docs import shell_block

    block = shell_block("docs/install-values.md", "A shipped overlay, with its example values:")
    path = os.pathsep.join([str(ROOT / ".tools/bin"), str(Path(sys.executable).parent), os.environ["PATH"]])
    done = subprocess.run(
        ["bash", "-c", block], cwd=ROOT, env={**os.environ, "PATH": path}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    page = (ROOT / "docs/install-values.md").read_text()
    shown = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert set(shown) <= set(done.stdout.splitlines())
    assert len(done.stdout.splitlines()) == 8  # three role ARNs, five CronJobs' image
