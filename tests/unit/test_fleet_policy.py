"""The fleet in the policy: declared or implied clusters, each node group's cluster, and the errors people see."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jobs.core.policy import DEFAULT_CLUSTER
from jobs.policy_file import PolicyError, load_policy, parse_policy, policy_paths

HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"
SUB = "00000000-0000-0000-0000-000000000001"

EKS = "  - {name: train, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod, nodegroup: gpu}}\n"
GKE = "  - {name: research, cloud: gcp, gcp: {project: p, location: europe-west4, cluster: research, nodePool: h100}}\n"
AKS = f"  - {{name: tune, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg, cluster: aks, agentPool: a100}}}}\n"
ASG = "  - {name: batch, cloud: aws, aws: {region: eu-west-1, autoScalingGroup: batch-g5}}\n"

CLUSTERS = f"""\
clusters:
  - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}, kubeContext: ml-prod}}
  - {{name: research, cloud: gcp, gcp: {{project: p, location: europe-west4, cluster: research}}}}
  - {{name: aks, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg, cluster: aks}}}}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "gitops/policy.yaml")
    return [str(p) for p in caught.value.problems]


def test_the_example_policy_declares_five_clusters_and_places_every_group() -> None:
    policy = load_policy("gitops/policy.yaml")
    assert [c.name for c in policy.fleet] == ["ml-prod", "batch", "research", "notebooks", "aks-ml"]
    assert {g.name: policy.cluster_of(g).name for g in policy.node_groups} == {
        "training-a100": "ml-prod",
        "inference-l4": "ml-prod",
        "batch-nightly-g5": "batch",
        "research-h100": "research",
        "notebooks-t4": "notebooks",
        "finetune-a100": "aks-ml",
        "vision-t4": "aks-ml",
        "train-h100": "ml-prod",
    }
    assert all(c.kube_context == c.name for c in policy.fleet)
    assert [g.name for g in policy.groups_in("aks-ml")] == ["finetune-a100", "vision-t4"]


def test_clusters_may_be_omitted_and_are_implied_by_the_locators() -> None:
    policy = parse_policy(HEAD + "nodeGroups:\n" + EKS + GKE + AKS, "p.yaml")
    assert [(c.name, c.cloud, c.kube_context) for c in policy.fleet] == [
        ("ml-prod", "aws", None),
        ("research", "gcp", None),
        ("aks", "azure", None),
    ]
    assert policy.cluster_of(policy.group("research")).gcp is not None


def test_two_groups_of_one_implied_cluster_share_it() -> None:
    second = EKS.replace("name: train", "name: infer").replace("nodegroup: gpu", "nodegroup: l4")
    policy = parse_policy(HEAD + "nodeGroups:\n" + EKS + second, "p.yaml")
    assert [c.name for c in policy.fleet] == ["ml-prod"]
    assert policy.groups_in("ml-prod") == policy.node_groups


def test_a_plain_asg_joins_the_only_cluster() -> None:
    policy = parse_policy(HEAD + "nodeGroups:\n" + EKS + ASG, "p.yaml")
    assert policy.cluster_of(policy.group("batch")).name == "ml-prod"


def test_a_policy_of_plain_asgs_only_has_one_default_cluster() -> None:
    policy = parse_policy(HEAD + "nodeGroups:\n" + ASG, "p.yaml")
    assert [c.name for c in policy.fleet] == [DEFAULT_CLUSTER]
    assert policy.cluster_of(policy.group("batch")).name == DEFAULT_CLUSTER


def test_a_plain_asg_names_its_cluster_among_several() -> None:
    named = ASG.replace("}}\n", "}, cluster: research}\n")
    policy = parse_policy(HEAD + CLUSTERS + "nodeGroups:\n" + EKS + named, "p.yaml")
    assert policy.cluster_of(policy.group("batch")).name == "research"


def test_a_policy_without_groups_or_clusters_has_an_empty_fleet() -> None:
    assert parse_policy(HEAD, "p.yaml").fleet == ()


ERRORS = [
    (
        "asg-without-cluster-among-several",
        HEAD + CLUSTERS + "nodeGroups:\n" + ASG,
        "gitops/policy.yaml:8: nodeGroups[0].cluster: required: a plain Auto Scaling group names the cluster its"
        " nodes join (one of aks, ml-prod, research)",
    ),
    (
        "undeclared-cluster",
        HEAD + CLUSTERS + "nodeGroups:\n" + EKS.replace("cluster: ml-prod", "cluster: ml-staging"),
        'gitops/policy.yaml:8: nodeGroups[0].aws: cluster "ml-staging" (region eu-west-1) is not declared in'
        " `clusters`",
    ),
    (
        "unknown-cluster-name",
        HEAD + CLUSTERS + "nodeGroups:\n" + ASG.replace("}}\n", "}, cluster: nope}\n"),
        'gitops/policy.yaml:8: nodeGroups[0].cluster: unknown cluster "nope"',
    ),
    (
        "cluster-contradicts-locator",
        HEAD + CLUSTERS + "nodeGroups:\n" + EKS.replace("}}\n", "}, cluster: research}\n"),
        'gitops/policy.yaml:8: nodeGroups[0].cluster: "research": the locator says cluster "ml-prod"',
    ),
    (
        "duplicate-cluster-name",
        HEAD + CLUSTERS + "  - {name: aks, cloud: aws}\n",
        'gitops/policy.yaml:7: clusters[3].name: "aks" is already used by clusters[2]',
    ),
    (
        "duplicate-cluster-locator",
        HEAD + CLUSTERS + "  - {name: prod2, cloud: aws, aws: {region: eu-west-1, cluster: ml-prod}}\n",
        "gitops/policy.yaml:7: clusters[3].aws: same cluster as clusters[0]",
    ),
    (
        "implied-clusters-with-one-name",
        HEAD + "nodeGroups:\n" + EKS + EKS.replace("name: train", "name: t2").replace("eu-west-1", "us-east-1"),
        'gitops/policy.yaml:5: nodeGroups[1].aws: cluster "ml-prod" (region us-east-1) has the same name as the'
        " cluster of nodeGroups[0] (train): declare `clusters:` with distinct names",
    ),
    (
        "locator-of-another-cloud",
        HEAD + "clusters:\n  - {name: x, cloud: gcp, aws: {region: r, cluster: x}}\n",
        "gitops/policy.yaml:4: clusters[0]: cloud gcp takes only the locator `gcp:` (found: ['aws'])",
    ),
    (
        "malformed-context",
        HEAD + "clusters:\n  - {name: x, cloud: aws, kubeContext: 'ml prod'}\n",
        "gitops/policy.yaml:4: clusters[0].kubeContext: 'ml prod' is not a kubeconfig context name (no spaces or"
        " control characters, at most 253)",
    ),
    (
        "malformed-prometheus-url",
        HEAD + "clusters:\n  - {name: x, cloud: aws, prometheus: {url: 'thanos:9090'}}\n",
        'gitops/policy.yaml:4: clusters[0].prometheus.url: "thanos:9090" is not an http(s) URL without query or'
        " fragment (e.g. http://prometheus:9090)",
    ),
    (
        "credentials-in-prometheus-url",
        HEAD + "clusters:\n  - {name: x, cloud: aws, prometheus: {url: 'http://u:p@thanos:9090'}}\n",
        "gitops/policy.yaml:4: clusters[0].prometheus.url: credentials do not belong in a URL in Git: use the job's"
        " identity or a Secret",
    ),
    (
        "bad-prometheus-port",
        HEAD + "clusters:\n  - {name: x, cloud: aws, prometheus: {url: 'http://thanos:99999'}}\n",
        'gitops/policy.yaml:4: clusters[0].prometheus.url: "http://thanos:99999" has a malformed port',
    ),
    (
        "bad-matcher-label",
        HEAD + "clusters:\n  - {name: x, cloud: aws, prometheus: {url: 'http://t:9090', matchers: {k8s-cluster: x}}}\n",
        'gitops/policy.yaml:4: clusters[0].prometheus.matchers: "k8s-cluster" is not a Prometheus label name'
        " ([a-zA-Z_][a-zA-Z0-9_]*)",
    ),
    (
        "bad-cluster-name",
        HEAD + "clusters:\n  - {name: ML_Prod, cloud: aws}\n",
        'gitops/policy.yaml:4: clusters[0].name: "ML_Prod" is not a valid name (lowercase letters, digits and "-",'
        " at most 63)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_fleet_errors_name_file_line_and_path(text: str, expected: str) -> None:
    assert expected in problems(textwrap.dedent(text))


def test_validate_of_a_directory_skips_other_manifests_but_not_a_policy_without_header(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
    (tmp_path / "app.yaml").write_text("apiVersion: argoproj.io/v1alpha1\nkind: Application\n")
    (tmp_path / "policy.yaml").write_text(HEAD)
    (tmp_path / "team.yaml").write_text("kind: GpuPolicy\napiVersion: v1\n")  # says it is a policy: checked
    (tmp_path / "headless.yaml").write_text("nodeGroups: []\n")  # says nothing: checked, and reported
    assert [p.name for p in policy_paths([tmp_path])] == ["headless.yaml", "policy.yaml", "team.yaml"]
    assert policy_paths([tmp_path / "kustomization.yaml"]) == [tmp_path / "kustomization.yaml"]  # named: checked
