"""``gpu-jobs quotas`` against the Kubernetes API emulator: which rule governs which namespace (globs, selectors,
first match, ``clusters``, the default, exclusions), how the quotas follow namespaces that come, change and go, and
a central run over two clusters, each through its own Kubernetes API."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.emulators.kube.seed import MANAGED, gpu_pod, namespace, resource_quota
from tests.envelope import items
from tests.integration.cli import run_cli
from tests.sandbox.world import write_kubeconfig

pytestmark = pytest.mark.integration

# Tue 2026-12-01, inside the research rule's 08:00-19:00 Berlin working hours.
DAY = "2026-12-01T12:00:00+01:00"
CLUSTERS = """\
    clusters:
      - {name: ml-prod, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}, kubeContext: ml-prod}
      - {name: research, cloud: gcp, gcp: {project: ml-research, location: europe-west4, cluster: research},
         kubeContext: research}
"""
QUOTAS = """\
    namespaceQuotas:
      default: {nvidia.com/gpu: 0}
      exclude: [kube-system, kube-public, kube-node-lease, default, gpu-jobs, "openshift-*"]
      rules:
        # rules[0]: names and a glob, in ml-prod only
        - namespaces: [ml-team, "team-*"]
          clusters: [ml-prod]
          hard: {nvidia.com/gpu: 4}
        # rules[1]: matchLabels and matchExpressions together (NotIn)
        - selector:
            matchLabels: {team: research}
            matchExpressions: [{key: tier, operator: NotIn, values: [dev]}]
          hard: {nvidia.com/gpu: 2, memory: 256Gi}
        # rules[2]: matchExpressions only (In, DoesNotExist)
        - selector:
            matchExpressions:
              - {key: gpu-class, operator: In, values: [a100, h100]}
              - {key: frozen, operator: DoesNotExist}
          hard: {nvidia.com/gpu: 3}
        # rules[3]: Exists, with a glob: both must hold
        - namespaces: ["lab-*"]
          selector: {matchExpressions: [{key: cost-center, operator: Exists}]}
          hard: {nvidia.com/mig-1g.10gb: 7}
"""
POLICY = textwrap.dedent("apiVersion: gpu-jobs/v1\nkind: GpuPolicy\ndefaults: {timezone: Europe/Berlin}\n") + (
    textwrap.dedent(CLUSTERS) + textwrap.dedent(QUOTAS)
)
GPU = "requests.nvidia.com/gpu"


class Run:
    """``gpu-jobs quotas`` as its CronJob runs it: a subprocess, JSON logs on stderr, the report on stdout."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.stderr = ""

    def __call__(
        self, kubeconfig: Path, *args: str, text: str = POLICY, at: str = DAY
    ) -> tuple[int, dict[str, Any], Any]:
        policy = self.tmp / "policy.yaml"
        policy.write_text(text)
        command = ["quotas", "--policy", str(policy), "--at", at, "--output", "json", *args]
        done = run_cli(command, {"KUBECONFIG": str(kubeconfig), "GPU_JOBS_NAMESPACE": "gpu-jobs"})
        self.stderr = done.stderr
        return done.code, done.summary, json.loads(done.stdout) if done.stdout.strip() else None


def seed(kube: KubeHandle, namespaces: dict[str, dict[str, str]], cluster: str = "ml-prod") -> None:
    for name, labels in {"gpu-jobs": {}, **namespaces}.items():
        kube.create(namespace(name, labels))
    kube.identify(cluster)
    kube.log.clear()


def hard(kube: KubeHandle, ns: str) -> dict[str, str] | None:
    quota = kube.get("ResourceQuota", "gpu-quota", ns)
    return None if quota is None else dict(quota["spec"]["hard"])


def quota_items(doc: dict[str, Any], cluster: str | None = None) -> list[dict[str, Any]]:
    """The envelope's namespace quotas, of one cluster's scope or of every one."""
    return [i for i in items(doc, "namespace quota") if cluster in (None, i["scope"])]


def by_namespace(doc: dict[str, Any], cluster: str | None = None) -> dict[str, tuple[str, str, dict[str, str]]]:
    return {n["namespace"]: (n["action"], n["rule"], n["hard"]) for n in quota_items(doc, cluster)}


def quota_writes(kube: KubeHandle) -> list[str]:
    """The ResourceQuota writes the emulator served, as ``METHOD path`` (Lease and Event writes left out)."""
    return [f"{r.method} {r.path}" for r in kube.log.writes() if "/resourcequotas" in r.path]


def patch_labels(kube: KubeHandle, ns: str, labels: dict[str, str | None]) -> None:
    with kube.api_client() as api:
        client.CoreV1Api(api).patch_namespace(ns, {"metadata": {"labels": labels}})


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


NAMESPACES = {
    "ml-team": {},
    "team-a": {},
    "team-research": {"team": "research"},  # rules[0] (glob) and rules[1] (selector): the first wins
    "research": {"team": "research", "tier": "prod"},
    "research-dev": {"team": "research", "tier": "dev"},  # NotIn dev: rules[1] does not match
    "vision": {"gpu-class": "h100"},
    "vision-frozen": {"gpu-class": "h100", "frozen": "yes"},  # DoesNotExist: rules[2] does not match
    "vision-t4": {"gpu-class": "t4"},  # In: no
    "lab-x": {"cost-center": "cc-7"},
    "lab-y": {},  # the glob alone is not enough: rules[3] needs the label too
    "openshift-monitoring": {"team": "research"},  # excluded by a glob, whatever its labels say
    "misc": {},
}


def test_globs_selectors_first_match_default_and_exclusions(kube: KubeHandle, run: Run) -> None:
    seed(kube, NAMESPACES)
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert (code, summary["applied"], summary["failed"]) == (0, 11, 0)
    expected = {
        "ml-team": ("create", "rules[0]", {GPU: "4"}),
        "team-a": ("create", "rules[0]", {GPU: "4"}),
        "team-research": ("create", "rules[0]", {GPU: "4"}),
        "research": ("create", "rules[1]", {GPU: "2", "memory": "256Gi"}),
        "research-dev": ("create", "default", {GPU: "0"}),
        "vision": ("create", "rules[2]", {GPU: "3"}),
        "vision-frozen": ("create", "default", {GPU: "0"}),
        "vision-t4": ("create", "default", {GPU: "0"}),
        "lab-x": ("create", "rules[3]", {"requests.nvidia.com/mig-1g.10gb": "7"}),
        "lab-y": ("create", "default", {GPU: "0"}),
        "misc": ("create", "default", {GPU: "0"}),
    }
    assert by_namespace(doc) == expected
    # What the report says is what the cluster holds, as the enforced keys.
    assert {ns: hard(kube, ns) for ns in expected} == {ns: h for ns, (_, _, h) in expected.items()}
    for excluded in ("openshift-monitoring", "kube-system", "gpu-jobs", "default"):
        assert hard(kube, excluded) is None


def test_a_rule_limited_to_other_clusters_leaves_its_namespaces_to_the_next_rule_or_the_default(
    kube: KubeHandle, run: Run
) -> None:
    seed(kube, {n: NAMESPACES[n] for n in ("ml-team", "team-a", "team-research")}, "research")
    code, _, doc = run(kube.kubeconfig, "--cluster", "research")
    assert code == 0
    assert [s["name"] for s in doc["scopes"]] == ["research"]
    assert by_namespace(doc) == {
        "ml-team": ("create", "default", {GPU: "0"}),
        "team-a": ("create", "default", {GPU: "0"}),
        "team-research": ("create", "rules[1]", {GPU: "2", "memory": "256Gi"}),
    }


def test_a_new_namespace_gets_the_default_on_the_next_run_and_nothing_else_is_written(
    kube: KubeHandle, run: Run
) -> None:
    seed(kube, {"team-a": {}, "misc": {}})
    assert run(kube.kubeconfig, "--cluster", "ml-prod")[0] == 0
    kube.create(namespace("newcomer"))
    kube.log.clear()
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert (code, summary["planned"], summary["applied"]) == (0, 1, 1)
    assert by_namespace(doc)["newcomer"] == ("create", "default", {GPU: "0"})
    assert quota_writes(kube) == ["PATCH /api/v1/namespaces/newcomer/resourcequotas/gpu-quota"]
    assert hard(kube, "newcomer") == {GPU: "0"}


def test_a_namespace_that_loses_its_rule_gets_the_default_and_then_stays_put(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"research": {"team": "research"}})
    run(kube.kubeconfig, "--cluster", "ml-prod")
    assert hard(kube, "research") == {GPU: "2", "memory": "256Gi"}
    patch_labels(kube, "research", {"team": None})
    kube.log.clear()
    code, _, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert code == 0
    assert by_namespace(doc)["research"] == ("update", "default", {GPU: "0"})
    # Server-side apply drops the field the job no longer gives (memory): the quota is exactly the default.
    assert hard(kube, "research") == {GPU: "0"}
    kube.log.clear()
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert (code, summary["planned"]) == (0, 0)
    assert by_namespace(doc)["research"] == ("unchanged", "default", {GPU: "0"})
    assert kube.log.writes() == []
    # Labelled back into the rule, it gets the rule's limits again.
    patch_labels(kube, "research", {"team": "research"})
    run(kube.kubeconfig, "--cluster", "ml-prod")
    assert hard(kube, "research") == {GPU: "2", "memory": "256Gi"}


def test_a_namespace_that_becomes_excluded_loses_only_the_managed_quota(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"openshift-ai": {}})
    kube.create(resource_quota("compute", "openshift-ai", {"pods": "50"}))
    # Before the exclusion was added, the default applied.
    before = POLICY.replace(', "openshift-*"]', "]")
    assert run(kube.kubeconfig, "--cluster", "ml-prod", text=before)[0] == 0
    assert hard(kube, "openshift-ai") == {GPU: "0"}
    kube.log.clear()
    code, _, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert code == 0
    assert by_namespace(doc)["openshift-ai"] == ("delete", "excluded", {})
    assert quota_writes(kube) == ["DELETE /api/v1/namespaces/openshift-ai/resourcequotas/gpu-quota"]
    assert hard(kube, "openshift-ai") is None
    assert kube.get("ResourceQuota", "compute", "openshift-ai") is not None


def test_a_terminating_namespace_is_left_alone(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"misc": {}, "team-gone": {}})
    # Not what rules[0] says (4): a live namespace would be updated.
    kube.create(resource_quota("gpu-quota", "team-gone", {GPU: "1"}, MANAGED))
    kube.cluster.namespace_termination_s = 3600.0  # deleted, and Terminating while its content goes
    with kube.api_client() as api:
        client.CoreV1Api(api).delete_namespace("team-gone")
    assert kube.get("Namespace", "team-gone")["status"] == {"phase": "Terminating"}  # type: ignore[index]
    kube.log.clear()
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert (code, summary["applied"]) == (0, 1)
    assert set(by_namespace(doc)) == {"misc"}
    assert quota_writes(kube) == ["PATCH /api/v1/namespaces/misc/resourcequotas/gpu-quota"]
    assert hard(kube, "team-gone") == {GPU: "1"}


def test_a_pod_over_a_rules_quota_is_refused_and_one_within_it_admitted(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"vision": {"gpu-class": "a100"}})
    run(kube.kubeconfig, "--cluster", "ml-prod")
    assert hard(kube, "vision") == {GPU: "3"}
    with kube.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("vision", gpu_pod("two", "vision", gpus=2))
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod("vision", gpu_pod("two-more", "vision", gpus=2))
        assert refused.value.status == 403
        assert "exceeded quota: gpu-quota" in str(refused.value.body)
        core.create_namespaced_pod("vision", gpu_pod("one", "vision", gpus=1))  # 3 of 3: still within it
    used = kube.get("ResourceQuota", "gpu-quota", "vision")["status"]["used"]  # type: ignore[index]
    assert used[GPU] == "3"


# A central run over two clusters, each with its own Kubernetes API ----------------------------------------------


@pytest.fixture(scope="module")
def _second_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    handle = start_kube(tmp_path_factory.mktemp("research") / "kubeconfig")
    yield handle
    handle.stop()


@pytest.fixture
def fleet(kube: KubeHandle, _second_api: KubeHandle, tmp_path: Path) -> tuple[KubeHandle, KubeHandle, Path]:
    _second_api.reset()
    for api, name in ((kube, "ml-prod"), (_second_api, "research")):
        seed(api, {"team-a": {}, "lab": {"team": "research"}}, name)
    _second_api.create(namespace("only-in-research"))
    _second_api.log.clear()
    kubeconfig = write_kubeconfig(tmp_path / "fleet.kubeconfig", {"ml-prod": kube, "research": _second_api}, None)
    return kube, _second_api, kubeconfig


def test_a_central_run_reconciles_each_cluster_through_its_own_api(
    fleet: tuple[KubeHandle, KubeHandle, Path], run: Run
) -> None:
    ml_prod, research, kubeconfig = fleet
    code, summary, doc = run(kubeconfig)
    assert (code, summary["applied"], summary["failed"]) == (0, 5, 0)
    assert [c["name"] for c in doc["scopes"]] == ["ml-prod", "research"]
    assert (doc["at"], doc["dryRun"]) == ("2026-12-01T12:00:00+01:00", False)
    for entry in quota_items(doc):
        assert {"namespace", "quota", "action", "hard", "rule", "warnings"} <= set(entry)
        assert (entry["quota"], entry["warnings"]) == ("gpu-quota", [])
    assert by_namespace(doc, "ml-prod") == {
        "team-a": ("create", "rules[0]", {GPU: "4"}),
        "lab": ("create", "rules[1]", {GPU: "2", "memory": "256Gi"}),
    }
    # rules[0] says clusters: [ml-prod]: in research its namespaces get the default.
    assert by_namespace(doc, "research") == {
        "team-a": ("create", "default", {GPU: "0"}),
        "lab": ("create", "rules[1]", {GPU: "2", "memory": "256Gi"}),
        "only-in-research": ("create", "default", {GPU: "0"}),
    }
    assert (hard(ml_prod, "team-a"), hard(research, "team-a")) == ({GPU: "4"}, {GPU: "0"})
    assert hard(ml_prod, "only-in-research") is None  # the namespace is not there: nothing is written there
    # Each cluster's Lease lives in that cluster.
    leases = [
        {x["metadata"]["name"] for x in api.list("Lease", "gpu-jobs", "coordination.k8s.io/v1")} for api in fleet[:2]
    ]
    assert leases == [{"gpu-jobs-quotas-ml-prod"}, {"gpu-jobs-quotas-research"}]
    # The second central run writes nothing in either cluster.
    ml_prod.log.clear()
    research.log.clear()
    code, summary, doc = run(kubeconfig)
    assert (code, summary["planned"]) == (0, 0)
    assert {n["action"] for n in quota_items(doc)} == {"unchanged"}
    assert (ml_prod.log.writes(), research.log.writes()) == ([], [])


def test_a_central_dry_run_reports_every_cluster_and_writes_nowhere(
    fleet: tuple[KubeHandle, KubeHandle, Path], run: Run
) -> None:
    ml_prod, research, kubeconfig = fleet
    code, summary, doc = run(kubeconfig, "--dry-run")
    assert (code, summary["planned"], summary["dry_run"]) == (0, 5, True)
    assert [(c["name"], doc["dryRun"], len(quota_items(doc, c["name"]))) for c in doc["scopes"]] == [
        ("ml-prod", True, 2),
        ("research", True, 3),
    ]
    assert (ml_prod.log.writes(), research.log.writes()) == ([], [])


def test_a_per_cluster_run_acts_on_its_own_cluster_only(fleet: tuple[KubeHandle, KubeHandle, Path], run: Run) -> None:
    ml_prod, research, _ = fleet
    own = write_kubeconfig(run.tmp / "research-only.kubeconfig", {"research": research}, "research")
    code, _, doc = run(own, "--cluster", "research")
    assert code == 0
    assert [s["name"] for s in doc["scopes"]] == ["research"]  # one cluster: one scope, the same envelope
    assert by_namespace(doc)["team-a"] == ("create", "default", {GPU: "0"})
    assert ml_prod.log.all() == []


def test_a_new_quota_name_replaces_the_managed_quota_under_the_old_one(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"team-a": {}})
    old = POLICY.replace("namespaceQuotas:\n", "namespaceQuotas:\n  quotaName: gpu-limits\n")
    assert run(kube.kubeconfig, "--cluster", "ml-prod", text=old)[0] == 0
    assert kube.get("ResourceQuota", "gpu-limits", "team-a") is not None
    kube.log.clear()
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")
    assert (code, summary["applied"]) == (0, 2)
    assert [(n["quota"], n["action"]) for n in quota_items(doc)] == [("gpu-quota", "create"), ("gpu-limits", "delete")]
    # Created first, deleted second: the namespace is never without a quota.
    assert quota_writes(kube) == [
        "PATCH /api/v1/namespaces/team-a/resourcequotas/gpu-quota",
        "DELETE /api/v1/namespaces/team-a/resourcequotas/gpu-limits",
    ]
    assert ({q["metadata"]["name"] for q in kube.list("ResourceQuota", "team-a")}) == {"gpu-quota"}
    kube.log.clear()
    assert run(kube.kubeconfig, "--cluster", "ml-prod")[1]["planned"] == 0
    assert kube.log.writes() == []


def test_a_former_quota_is_kept_while_its_replacement_cannot_be_written(kube: KubeHandle, run: Run) -> None:
    """Namespaces are written at once, but one namespace's entries in order: when the new quota fails, the former
    one stays (and is reported not attempted), so the namespace is never left without a GPU quota."""
    seed(kube, {"team-a": {}})
    old = POLICY.replace("namespaceQuotas:\n", "namespaceQuotas:\n  quotaName: gpu-limits\n")
    assert run(kube.kubeconfig, "--cluster", "ml-prod", text=old)[0] == 0
    kube.inject("patch resourcequotas", "conflict")
    code, summary, doc = run(kube.kubeconfig, "--cluster", "ml-prod")

    assert (code, summary["failed"], summary["applied"]) == (1, 2, 0)
    assert [(n["quota"], n["status"], n["action"]) for n in quota_items(doc)] == [
        ("gpu-quota", "failed", "conflict"),
        ("gpu-limits", "failed", "delete"),
    ]
    assert {q["metadata"]["name"] for q in kube.list("ResourceQuota", "team-a")} == {"gpu-limits"}
    assert run(kube.kubeconfig, "--cluster", "ml-prod")[0] == 0  # the next run finishes the move
    assert {q["metadata"]["name"] for q in kube.list("ResourceQuota", "team-a")} == {"gpu-quota"}


OFF_HOURS = POLICY.replace(
    "      hard: {nvidia.com/gpu: 2, memory: 256Gi}\n",
    "      hard: {nvidia.com/gpu: 2, memory: 256Gi}\n"
    '      offHours: {workingHours: [{days: Mon-Fri, start: "08:00", end: "19:00"}], hard: {nvidia.com/gpu: 8}}\n',
)
assert OFF_HOURS != POLICY


def test_off_hours_limits_switch_at_each_boundary_of_the_window(kube: KubeHandle, run: Run) -> None:
    seed(kube, {"research": {"team": "research"}})
    steps = [
        ("2026-12-01T18:59:59+01:00", "rules[1]", {GPU: "2", "memory": "256Gi"}),  # the last second of the day
        ("2026-12-01T19:00:00+01:00", "rules[1].offHours", {GPU: "8"}),  # end exclusive
        ("2026-12-02T07:59:59+01:00", "rules[1].offHours", {GPU: "8"}),
        ("2026-12-02T08:00:00+01:00", "rules[1]", {GPU: "2", "memory": "256Gi"}),  # start inclusive
        ("2026-12-05T12:00:00+01:00", "rules[1].offHours", {GPU: "8"}),  # Saturday
    ]
    for at, rule, limits in steps:
        code, _, doc = run(kube.kubeconfig, "--cluster", "ml-prod", text=OFF_HOURS, at=at)
        assert code == 0
        assert (quota_items(doc)[0]["rule"], hard(kube, "research")) == (rule, limits), at
