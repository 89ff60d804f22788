"""The cloud-quotas CronJob as shipped: suspended in every install but the central one, and given its cloud's
workload identity by the same components that give the nodegroups job its own, whichever cloud the central install
runs on. Rendered by the real kubectl, every object validated with ``kubernetes-validate --strict``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import kube_schemas
from tests.integration.test_deploy import (
    CLOUDS,
    K8S_VERSIONS,
    ROOT,
    TARGETS,
    Obj,
    expected_identity,
    identity_settings,
    kubectl,
    named,
    render,
)

pytestmark = pytest.mark.integration

ACCOUNT = "gpu-jobs-cloud-quotas"
#: The one install that runs the cloud-quotas job (account quotas are per account: one filer per account).
CENTRAL = "central"


def suspended(objects: list[Obj]) -> bool:
    value: bool = named(objects, "CronJob", "cloud-quotas")["spec"]["suspend"]
    return value


def render_central_on(cloud: str, tmp_path: Path) -> list[Obj]:
    """The central overlay with the component of the cloud it runs on and its install.yaml, as its comment tells a
    user to write it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "kustomize" / "overlays" / "production" / cloud / "install.yaml", tmp_path / "install.yaml")
    kustomization = {
        "resources": [os.path.relpath(ROOT / "kustomize" / "overlays" / CENTRAL, tmp_path), "install.yaml"],
        "components": [os.path.relpath(ROOT / "kustomize" / "components" / cloud, tmp_path)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    objects = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    for obj in objects:
        for version in K8S_VERSIONS:
            assert kube_schemas.validate(obj, version, strict=True) == version
    return objects


def test_only_the_central_install_runs_cloud_quotas() -> None:
    running = {target for target in TARGETS if not suspended(render(target))}
    assert running == {CENTRAL}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_the_central_install_on_each_cloud_runs_cloud_quotas_with_that_clouds_identity(
    cloud: str, tmp_path: Path
) -> None:
    objects = render_central_on(cloud, tmp_path)

    assert not suspended(objects)
    cron = named(objects, "CronJob", "cloud-quotas")
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == ACCOUNT
    # The whole identity of that cloud, for both cloud-calling jobs, and nothing of another cloud.
    assert identity_settings(objects) == expected_identity(cloud, objects)
    annotations = named(objects, "ServiceAccount", ACCOUNT)["metadata"]["annotations"]
    template = cron["spec"]["jobTemplate"]["spec"]["template"]
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    if cloud == "aws":
        assert annotations["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
        assert annotations["eks.amazonaws.com/role-arn"].endswith(":role/gpu-jobs-cloud-quotas")
        assert env["AWS_REGION"]
    elif cloud == "gcp":
        assert annotations["iam.gke.io/gcp-service-account"].startswith("gpu-jobs-cloud-quotas@")
        assert annotations["iam.gke.io/gcp-service-account"].endswith(".iam.gserviceaccount.com")
    else:
        assert annotations["azure.workload.identity/client-id"]
        # The webhook mutates pods: the label must be on the pod template, as a string.
        assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    # The central install reaches the fleet through its kubeconfig; the records stay in its own namespace.
    assert env["KUBECONFIG"] == "/etc/gpu-jobs-kubeconfig/config"


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "base"])
def test_every_per_cluster_install_keeps_cloud_quotas_suspended_but_ready(target: str) -> None:
    """A per-cluster overlay carries the identity too (the same component), so moving the one install elsewhere is
    one patch; but it never runs there."""
    objects = render(target)
    assert suspended(objects) == (target != CENTRAL)
    assert named(objects, "ServiceAccount", ACCOUNT)
