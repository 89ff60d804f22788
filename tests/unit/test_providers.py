"""Provider rules are data in one place (jobs/core/providers.py): the resolved policy and the step sequences read
them there, and the emulators, which keep their own copy from the providers' documentation, agree with them."""

from __future__ import annotations

from typing import get_args

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.nodegroups import SetAutoscaling, SetPower, SetSize, down_config, steps_between
from jobs.core.providers import PROVIDERS, ProviderKind
from jobs.core.resolved import view_of
from tests.emulators.azure import aks_rules
from tests.emulators.gcp import gke
from tests.unit.policies import policy_from

CA = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/ml": "owned"}
GROUPS = """
nodeGroups:
  - name: eks
    cloud: aws
    aws: {region: eu-west-1, cluster: ml, nodegroup: gpu-a}
  - name: asg
    cloud: aws
    cluster: ml
    aws: {region: eu-west-1, autoScalingGroup: gpu-asg}
    nodeSelector: {pool: gpu-asg, tier: gpu}
  - name: gke
    cloud: gcp
    cluster: vision
    gcp: {project: p, location: europe-west4, cluster: vision, nodePool: gpu-b}
  - name: aks
    cloud: azure
    azure: {subscription: s, resourceGroup: rg, cluster: speech, agentPool: gpuc}
clusters:
  - {name: ml, cloud: aws, aws: {region: eu-west-1, cluster: ml}}
  - {name: vision, cloud: gcp, gcp: {project: p, location: europe-west4, cluster: vision}}
  - {name: speech, cloud: azure, azure: {subscription: s, resourceGroup: rg, cluster: speech}}
"""


def test_every_provider_kind_has_its_rules() -> None:
    assert set(PROVIDERS) == set(get_args(ProviderKind))
    assert all(kind == rules.kind for kind, rules in PROVIDERS.items())


def test_the_locator_says_the_provider_its_node_label_and_cluster() -> None:
    resolved = view_of(policy_from(GROUPS))
    seen = {
        g.name: (g.kind, g.node_label, g.cluster, g.cloud_cluster, dict(g.node_selector or {})) for g in resolved.groups
    }
    assert seen == {
        "eks": ("eks", ("eks.amazonaws.com/nodegroup", "gpu-a"), "ml", "ml", {"eks.amazonaws.com/nodegroup": "gpu-a"}),
        # A plain ASG's nodes carry no provider label: the policy's nodeSelector, every key of it, picks them.
        "asg": ("asg", None, "ml", None, {"pool": "gpu-asg", "tier": "gpu"}),
        "gke": (
            "gke",
            ("cloud.google.com/gke-nodepool", "gpu-b"),
            "vision",
            "vision",
            {"cloud.google.com/gke-nodepool": "gpu-b"},
        ),
        "aks": (
            "aks",
            ("kubernetes.azure.com/agentpool", "gpuc"),
            "speech",
            "speech",
            {"kubernetes.azure.com/agentpool": "gpuc"},
        ),
    }
    assert resolved.group("gke").identity.describe() == "gcp p/europe-west4/vision/gpu-b in cluster vision"


def test_an_eks_group_at_rest_keeps_the_max_size_floor() -> None:
    up = GroupConfig(1, 3, 8)
    assert down_config("eks", up).max == PROVIDERS["eks"].min_max_size == 1
    assert steps_between("eks", up, down_config("eks", up)) == [SetSize(0, 0, 1)]
    assert down_config("asg", up).max == PROVIDERS["asg"].min_max_size == 0


@pytest.mark.parametrize(("kind", "keeps_tags"), [("eks", True), ("asg", False)])
def test_only_eks_keeps_the_discovery_tags_to_wake_up(kind: ProviderKind, keeps_tags: bool) -> None:
    up = GroupConfig(1, 3, 8, autoscaling=True, autoscaler_tags=CA)
    down = down_config(kind, up, wake_up=True)
    assert down.autoscaling is keeps_tags
    assert (SetAutoscaling(False) in steps_between(kind, up, down)) is not keeps_tags


@pytest.mark.parametrize(
    ("kind", "steps"), [("aks", [SetPower(True)]), ("gke", [SetAutoscaling(False), SetSize(1, 0, 5)])]
)
def test_only_aks_pools_can_be_stopped(kind: ProviderKind, steps: list[object]) -> None:
    up = GroupConfig(1, 2, 5, autoscaling=True)
    assert steps_between(kind, up, down_config(kind, up, stop=True)) == steps


def test_the_emulators_own_copies_agree() -> None:
    # Written from the providers' documentation, separately: a wrong rule here is caught, not shared.
    assert PROVIDERS["gke"].node_limit == gke.MAX_NODES_PER_ZONE
    assert PROVIDERS["aks"].node_limit == aks_rules.MAX_COUNT
