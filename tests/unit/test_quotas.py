"""Namespace GPU quotas, pure: validation of `namespaceQuotas`, which rule governs a namespace, the plan."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from jobs.core.policy import Policy
from jobs.core.quantity import parse_quantity
from jobs.core.quotas import (
    NamespaceInfo,
    QuotaEntry,
    QuotaInfo,
    compile_quotas,
    node_capacity,
    over_commit,
    plan_quotas,
    policy_capacity,
    same_hard,
    unwritten_status,
)
from jobs.core.schedule import in_working_hours
from jobs.policy_file import PolicyError, parse_policy

GROUPS = """\
nodeGroups:
  - {name: train, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu}}
  - {name: research, cloud: gcp, gcp: {project: p, location: europe-west4, cluster: research, nodePool: h100}}
"""
QUOTAS = """\
namespaceQuotas:
  quotaName: gpu-quota
  default: {nvidia.com/gpu: 0}
  exclude: [kube-system, gpu-operator, "openshift-*"]
  rules:
    - namespaces: [ml-team, "team-*"]
      clusters: [ml-prod]
      hard: {nvidia.com/gpu: 4}
    - selector: {matchLabels: {team: research}, matchExpressions: [{key: tier, operator: NotIn, values: [dev]}]}
      hard: {nvidia.com/gpu: 2, nvidia.com/mig-1g.10gb: 4, cpu: "64", memory: 256Gi}
      offHours:
        workingHours: [{days: Mon-Fri, start: "08:00", end: "19:00"}]
        hard: {nvidia.com/gpu: 8}
"""
DAY = datetime.fromisoformat("2026-12-01T12:00:00+01:00")  # Tue, inside 08:00-19:00 Berlin
NIGHT = datetime.fromisoformat("2026-12-01T19:00:00+01:00")  # the window's end: off-hours begin


def policy(quotas: str = QUOTAS) -> Policy:
    head = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\ndefaults: {timezone: Europe/Berlin}\n"
    return parse_policy(head + GROUPS + quotas, "policy.yaml")


def problems(quotas: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        policy(quotas)
    return [str(p) for p in raised.value.problems]


def ns(name: str, **labels: str) -> NamespaceInfo:
    return NamespaceInfo(name, labels)


def plan(
    namespaces: list[NamespaceInfo], quotas: tuple[QuotaInfo, ...] | list[QuotaInfo] = (), **kw: Any
) -> dict[str, QuotaEntry]:
    cluster, at = kw.get("cluster", "ml-prod"), kw.get("at", DAY)
    return {e.namespace: e for e in plan_quotas(policy(), cluster, namespaces, list(quotas), at)}


def test_first_match_wins_globs_clusters_selectors_default_and_exclusions() -> None:
    research = [ns("lab", team="research"), ns("lab-dev", team="research", tier="dev")]
    found = plan([ns("ml-team"), ns("team-a"), *research, ns("kube-system"), ns("openshift-x"), ns("misc")])
    assert {n: (e.rule, dict(e.hard)) for n, e in found.items()} == {
        "ml-team": ("rules[0]", {"requests.nvidia.com/gpu": "4"}),
        "team-a": ("rules[0]", {"requests.nvidia.com/gpu": "4"}),
        "lab": (
            "rules[1]",
            {
                "cpu": "64",
                "memory": "256Gi",
                "requests.nvidia.com/gpu": "2",
                "requests.nvidia.com/mig-1g.10gb": "4",
            },
        ),
        "lab-dev": ("default", {"requests.nvidia.com/gpu": "0"}),  # NotIn dev: the selector does not match
        "misc": ("default", {"requests.nvidia.com/gpu": "0"}),
    }
    assert {e.action for e in found.values()} == {"create"}
    # In another cluster, rules[0] does not apply: its namespaces get the default.
    assert plan([ns("team-a")], cluster="research")["team-a"].rule == "default"


def test_off_hours_switch_at_the_window_boundary() -> None:
    lab = ns("lab", team="research")
    assert plan([lab], at=DAY)["lab"].hard["requests.nvidia.com/gpu"] == "2"
    night = plan([lab], at=NIGHT)["lab"]
    assert (night.rule, dict(night.hard)) == ("rules[1].offHours", {"requests.nvidia.com/gpu": "8"})


def test_quantities_compare_by_value_so_a_canonicalised_quota_is_unchanged() -> None:
    current = QuotaInfo(
        "lab",
        "gpu-quota",
        {"cpu": "64000m", "memory": "262144Mi", "requests.nvidia.com/gpu": "2", "requests.nvidia.com/mig-1g.10gb": "4"},
        {},
        managed=True,
    )
    assert plan([ns("lab", team="research")], [current])["lab"].action == "unchanged"
    assert same_hard({"memory": "1Gi"}, {"memory": "1024Mi"})
    assert not same_hard({"memory": "1Gi"}, {"memory": "1G"})
    assert parse_quantity("500m") == parse_quantity("0.5") == parse_quantity("5e-1")


def test_updates_deletions_foreign_quotas_and_terminating_namespaces() -> None:
    quotas = [
        QuotaInfo("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "2"}, {"requests.nvidia.com/gpu": "3"}, True),
        QuotaInfo("kube-system", "gpu-quota", {"requests.nvidia.com/gpu": "0"}, {}, True),  # now excluded
        QuotaInfo("misc", "gpu-quota", {"requests.nvidia.com/gpu": "9"}, {}, managed=False),  # someone else's
    ]
    found = plan([ns("team-a"), ns("kube-system"), ns("misc"), NamespaceInfo("old", {}, terminating=True)], quotas)
    assert found["team-a"].action == "update"
    assert found["kube-system"].action == "delete"
    assert (found["misc"].action, found["misc"].writes) == ("conflict", False)  # someone else's: reported, not taken
    assert "old" not in found
    # The new limit (4) is above usage (3): no warning; below it, a warning.
    assert found["team-a"].warnings == ()
    low = [QuotaInfo("misc", "gpu-quota", {"requests.nvidia.com/gpu": "2"}, {"requests.nvidia.com/gpu": "1"}, True)]
    assert "below current usage 1" in plan([ns("misc")], low)["misc"].warnings[0]


def test_a_change_says_old_and_new_limits_compared_by_value() -> None:
    lab = QuotaInfo(
        "lab", "gpu-quota", {"cpu": "64000m", "memory": "262144Mi", "requests.nvidia.com/gpu": "4"}, {}, True
    )
    team = QuotaInfo("team-a", "gpu-quota", {"requests.nvidia.com/gpu": "2"}, {}, True)
    gone = QuotaInfo("kube-system", "gpu-quota", {"requests.nvidia.com/gpu": "1"}, {}, True)
    found = plan([ns("lab", team="research"), ns("team-a"), ns("kube-system"), ns("new")], [lab, team, gone])
    assert found["team-a"].change() == "requests.nvidia.com/gpu 2 -> 4"
    # 64000m is 64 (kept, said once); the MIG limit is new; the GPU limit changes.
    assert found["lab"].change() == (
        "cpu=64, memory=256Gi, requests.nvidia.com/gpu 4 -> 2, requests.nvidia.com/mig-1g.10gb none -> 4"
    )
    assert found["kube-system"].change() == "requests.nvidia.com/gpu 1 -> removed"
    assert found["new"].change() == "requests.nvidia.com/gpu=0"
    night = plan([ns("lab", team="research")], [lab], at=NIGHT)["lab"]
    assert night.change() == "requests.nvidia.com/gpu 4 -> 8, cpu 64000m -> removed, memory 262144Mi -> removed"


def test_over_commit_is_shown_with_where_the_capacity_comes_from() -> None:
    entries = list(plan([ns("team-a"), ns("team-b"), ns("ml-team")]).values())
    assert over_commit(entries, node_capacity({"nvidia.com/gpu": 8})) == (
        "requests.nvidia.com/gpu: quotas add up to 12 but its nodes have 8 allocatable now: over-committed",
    )
    assert over_commit(entries, node_capacity({"nvidia.com/gpu": 12})) == ()


@pytest.mark.parametrize(
    ("quotas", "problem"),
    [
        (
            "namespaceQuotas:\n  rules: [{namespaces: [a], hard: {limits.nvidia.com/gpu: 1}}]\n",
            "give the resource name",
        ),
        ("namespaceQuotas:\n  rules: [{namespaces: [a], hard: {requests.nvidia.com/gpu: 1}}]\n", "requests.<name>"),
        ("namespaceQuotas:\n  rules: [{namespaces: [a], hard: {nvidia.com/gpu: 1.5}}]\n", "not a whole number"),
        ("namespaceQuotas:\n  rules: [{namespaces: [a], hard: {memory: 12XB}}]\n", "is not a quantity"),
        ("namespaceQuotas:\n  rules: [{namespaces: [a], hard: {gpus: 1}}]\n", "is not a resource name"),
        ("namespaceQuotas:\n  rules: [{hard: {nvidia.com/gpu: 1}}]\n", "needs namespaces or a selector"),
        (
            "namespaceQuotas:\n  rules: [{selector: {matchExpressions: [{key: t, operator: In}]}, hard: {cpu: 1}}]\n",
            "operator In needs values",
        ),
        ("namespaceQuotas:\n  rules: [{selector: {}, hard: {cpu: 1}}]\n", "an empty selector would match every"),
        (
            "namespaceQuotas:\n  rules: [{namespaces: [a], clusters: [staging], hard: {cpu: 1}}]\n",
            'namespaceQuotas.rules[0].clusters[0]: unknown cluster "staging"',
        ),
        (
            'namespaceQuotas:\n  rules:\n    - {namespaces: ["team-*"], hard: {cpu: 1}}\n'
            "    - {namespaces: [team-a], hard: {cpu: 2}}\n",
            "policy.yaml:10: namespaceQuotas.rules[1]: never matches: rules[0] comes first",
        ),
    ],
)
def test_validation_says_file_line_path_and_why(quotas: str, problem: str) -> None:
    assert any(problem in p for p in problems(quotas)), problems(quotas)


def test_a_later_rule_in_other_clusters_or_narrower_selectors_is_not_shadowed() -> None:
    quotas = textwrap.dedent("""\
        namespaceQuotas:
          rules:
            - {namespaces: ["team-*"], clusters: [ml-prod], hard: {cpu: 1}}
            - {namespaces: [team-a], hard: {cpu: 2}}
            - {selector: {matchLabels: {a: b}}, hard: {cpu: 3}}
            - {selector: {matchLabels: {a: c}}, hard: {cpu: 4}}
        """)
    assert policy(quotas) is not None


def test_the_json_schema_describes_namespace_quotas() -> None:
    schema = Path("gitops/policy.schema.json").read_text()
    assert '"namespaceQuotas"' in schema
    assert '"offHours"' in schema


def test_capacity_comes_from_the_node_groups_when_the_policy_gives_every_size() -> None:
    groups = GROUPS.replace("nodegroup: gpu}}", "nodegroup: gpu}, gpusPerNode: 8, up: {min: 0, desired: 2, max: 3}}")
    head = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\ndefaults: {timezone: Europe/Berlin}\n"
    with_sizes = parse_policy(head + groups + QUOTAS, "policy.yaml")
    capacity = policy_capacity(with_sizes, "ml-prod")
    assert capacity is not None
    assert capacity.limits == {"requests.nvidia.com/gpu": 24}
    assert capacity.source.format(24) == "its node groups bring at most 24 (up.max x gpusPerNode)"
    # A group without gpusPerNode/up: the policy cannot say, so the job counts the nodes' allocatable GPUs instead.
    assert policy_capacity(with_sizes, "research") is None


def test_a_managed_quota_under_a_former_quota_name_is_removed_after_the_new_one_is_written() -> None:
    quotas = [
        QuotaInfo("team-a", "gpu-limits", {"requests.nvidia.com/gpu": "4"}, {}, managed=True),  # the old quotaName
        QuotaInfo("team-a", "compute", {"pods": "10"}, {}, managed=False),  # someone else's: never touched
        QuotaInfo("gone", "gpu-limits", {"requests.nvidia.com/gpu": "0"}, {}, managed=True),  # terminating: left
    ]
    namespaces = [ns("team-a"), NamespaceInfo("gone", {}, terminating=True)]
    entries = plan_quotas(policy(), "ml-prod", namespaces, quotas, DAY)
    assert [(e.namespace, e.quota, e.action, e.rule) for e in entries] == [
        ("team-a", "gpu-quota", "create", "rules[0]"),
        ("team-a", "gpu-limits", "delete", "rules[0]"),
    ]
    assert entries[1].warnings == ("managed by gpu-jobs under a former quotaName: gpu-quota replaces it",)


def test_a_foreign_quota_where_the_policy_wants_none_is_neither_changed_nor_reported() -> None:
    foreign = [QuotaInfo("kube-system", "gpu-quota", {"requests.nvidia.com/gpu": "9"}, {}, managed=False)]
    assert plan([ns("kube-system")], foreign) == {}


# A foreign quota in the way, scopes on a managed quota, values that are not quantities --------------------------

GPU = "requests.nvidia.com/gpu"


def test_a_same_named_quota_the_job_does_not_own_is_a_conflict_that_says_how_to_resolve_it() -> None:
    """Issue 18 item 1: someone else's gpu-quota with 7 GPUs where the policy says 0 is not "unchanged"."""
    foreign = QuotaInfo("misc", "gpu-quota", {GPU: "7"}, {}, managed=False, managers=("someone-else",))
    entry = plan([ns("misc")], [foreign])["misc"]
    assert (entry.action, entry.writes, unwritten_status(entry), dict(entry.hard)) == (
        "conflict",
        False,
        "conflict",
        {GPU: "0"},
    )
    assert entry.reason.startswith(
        "a ResourceQuota gpu-quota that gpu-jobs does not manage (field managers someone-else; it says"
        " requests.nvidia.com/gpu=7) is where the policy wants requests.nvidia.com/gpu=0: left as it is."
    )
    for how in (
        "kubectl -n misc delete resourcequota gpu-quota",
        "label it app.kubernetes.io/managed-by=gpu-jobs",
        "another quotaName",
    ):
        assert how in entry.reason
    # Even when it says what the policy says: the job does not own it, so it cannot keep it so.
    same = QuotaInfo("misc", "gpu-quota", {GPU: "0"}, {}, managed=False)
    assert plan([ns("misc")], [same])["misc"].action == "conflict"


def test_scopes_the_jobs_own_apply_set_are_removed_by_its_next_apply() -> None:
    mine = QuotaInfo("misc", "gpu-quota", {GPU: "0"}, {}, True, scopes=("Terminating",), scopes_mine=True)
    entry = plan([ns("misc")], [mine])["misc"]
    assert (entry.action, dict(entry.hard)) == ("update", {GPU: "0"})
    assert entry.warnings == ("scopes Terminating (not in the policy) removed: the quota limits every pod",)


@pytest.mark.parametrize(
    ("mine", "owners", "said"),
    [
        (False, ("someone-else",), "set on gpu-quota by someone-else:"),
        (True, ("someone-else",), "set on gpu-quota by someone-else:"),  # shared: the job's apply cannot drop it
        (False, (), "set on gpu-quota by no field manager:"),
    ],
)
def test_scopes_another_manager_owns_are_a_conflict(mine: bool, owners: tuple[str, ...], said: str) -> None:
    """Issue 18 item 2: a managed quota scoped by hand limits only the pods in its scopes, whatever spec.hard says."""
    scoped = QuotaInfo(
        "misc", "gpu-quota", {GPU: "0"}, {}, True, ("Terminating", "PriorityClass In (high)"), mine, owners
    )
    entry = plan([ns("misc")], [scoped])["misc"]
    assert (entry.action, entry.writes) == ("conflict", False)
    assert f"scopes Terminating, PriorityClass In (high) {said}" in entry.reason
    assert '\'[{"op":"remove","path":"/spec/scopes"}]\'' in entry.reason


def test_a_value_that_is_not_a_quantity_fails_its_namespace_only() -> None:
    """Issue 18 item 4: one bad value made the whole cluster's plan raise; now its namespace fails, with why."""
    quotas = [
        QuotaInfo("misc", "gpu-quota", {GPU: "0"}, {GPU: "lots"}, True),
        QuotaInfo("team-a", "gpu-quota", {GPU: "2"}, {GPU: "1", "cpu": "100u"}, True),  # 100u is a quantity
    ]
    found = plan([ns("misc"), ns("team-a")], quotas)
    assert (found["misc"].action, found["misc"].writes, unwritten_status(found["misc"])) == ("failed", False, "failed")
    assert found["misc"].reason == (
        'status.used[requests.nvidia.com/gpu] "lots": not a quantity, so it cannot be compared with the policy:'
        " nothing written"
    )
    assert found["team-a"].action == "update"


def test_apimachinery_spellings_compare_by_value() -> None:
    """``status.used`` as the API server writes it (``100u``, ``2E``, ``1Ei``) is read, not a crash."""
    current = QuotaInfo("team-a", "gpu-quota", {GPU: "4000m"}, {GPU: "4", "cpu": "100u"}, True)
    assert plan([ns("team-a")], [current])["team-a"].action == "unchanged"
    assert same_hard({"memory": "1Ei"}, {"memory": "1024Pi"})
    assert same_hard({"memory": "2E"}, {"memory": "2e18"})


def test_a_rules_working_hours_are_asked_once_per_instant_not_once_per_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """5,000 namespaces under one offHours rule: one schedule question per plan (it was one per namespace)."""
    asked: list[datetime] = []

    def counting(*args: Any) -> bool:
        asked.append(args[-1])
        return in_working_hours(*args)

    monkeypatch.setattr("jobs.core.quotas.in_working_hours", counting)
    research = [ns(f"lab-{i}", team="research") for i in range(200)]
    entries = plan(research, at=NIGHT)
    assert {e.rule for e in entries.values()} == {"rules[1].offHours"}
    assert asked == [NIGHT]
    # Compiled once for a run, the rules answer each instant once: the plan under the Lease asks nothing again.
    rules = compile_quotas(policy(), policy().namespace_quotas, "ml-prod")  # type: ignore[arg-type]
    for _ in range(2):
        plan_quotas(policy(), "ml-prod", research, [], DAY, rules)
    assert asked == [NIGHT, DAY]


def _listed(spec: dict[str, Any], managed_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A ResourceQuota as the API server lists it."""
    meta = {"name": "gpu-quota", "namespace": "misc", "labels": {"app.kubernetes.io/managed-by": "gpu-jobs"}}
    return {"metadata": {**meta, "managedFields": managed_fields}, "spec": spec, "status": {"used": {GPU: "0"}}}


def _owns(manager: str, operation: str, *fields: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"f:hard": {f"f:{GPU}": {}}} if manager == "gpu-jobs-quotas" else {}
    spec |= {f"f:{name}": {} for name in fields}
    return {"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": spec}}


@pytest.mark.parametrize(
    ("fields", "mine", "owners"),
    [
        ([_owns("gpu-jobs-quotas", "Apply", "scopes", "scopeSelector")], True, ()),
        # The job's apply owns scopes, nobody owns the selector: its apply would leave the selector.
        ([_owns("gpu-jobs-quotas", "Apply", "scopes")], False, ()),
        # Shared with another manager: the job's apply would only drop its own share.
        (
            [_owns("gpu-jobs-quotas", "Apply", "scopes", "scopeSelector"), _owns("argocd", "Apply", "scopes")],
            True,
            ("argocd",),
        ),
        # The job's manager name in an update (kubectl edit --field-manager ...) is not its apply.
        (
            [_owns("gpu-jobs-quotas", "Apply"), _owns("gpu-jobs-quotas", "Update", "scopes", "scopeSelector")],
            False,
            ("gpu-jobs-quotas (Update)",),
        ),
    ],
)
def test_the_adapter_reads_scopes_and_who_owns_them(
    fields: list[dict[str, Any]], mine: bool, owners: tuple[str, ...]
) -> None:
    from jobs.adapters.kube.quotas import _quota  # the listing read as the adapter reads it, without an API

    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high", "low"]}]}
    listed = _quota(_listed({"hard": {GPU: "0"}, "scopes": ["Terminating"], "scopeSelector": selector}, fields))
    assert listed.scopes == ("Terminating", "PriorityClass In (high, low)")
    assert (listed.scopes_mine, listed.scope_owners) == (mine, owners)
    assert listed.managers == tuple(dict.fromkeys(f["manager"] for f in fields))
    assert plan([ns("misc")], [listed])["misc"].action == ("update" if mine and not owners else "conflict")
    unscoped = _quota(_listed({"hard": {GPU: "0"}}, fields[:1]))
    assert (unscoped.scopes, unscoped.scopes_mine, unscoped.scope_owners) == ((), False, ())
