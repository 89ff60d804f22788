"""Provider rules are data in one place (jobs/core/providers.py); the planner, the job and the adapters read them
there, and the emulators, which keep their own copy from the providers' documentation, agree with them."""

from __future__ import annotations

from typing import get_args

from jobs.adapters.azure import nodegroups as azure_nodegroups
from jobs.adapters.gcp import nodegroups as gcp_nodegroups
from jobs.core.nodegroups import GroupConfig, SetSize, down_config, steps_between
from jobs.core.providers import CLUSTER_SERIAL_KINDS, PROVIDERS, ProviderKind
from jobs.labels import AKS_AGENTPOOL_LABEL, EKS_NODEGROUP_LABEL, GKE_NODEPOOL_LABEL
from tests.emulators.azure import aks_rules
from tests.emulators.gcp import gke


def test_every_provider_kind_has_its_rules() -> None:
    assert set(PROVIDERS) == set(get_args(ProviderKind))
    assert all(kind == rules.kind for kind, rules in PROVIDERS.items())


def test_the_rules_the_code_reads() -> None:
    assert {k: r.node_label for k, r in PROVIDERS.items()} == {
        "eks": EKS_NODEGROUP_LABEL,
        "asg": None,  # a plain ASG's nodes carry no provider label: the policy's nodeSelector says
        "gke": GKE_NODEPOOL_LABEL,
        "aks": AKS_AGENTPOOL_LABEL,
    }
    assert {"aks"} == CLUSTER_SERIAL_KINDS  # GKE runs one operation per node pool, not per cluster
    assert [k for k, r in PROVIDERS.items() if r.per_zone] == ["gke"]
    assert [k for k, r in PROVIDERS.items() if r.never_down] == ["aks"]
    assert PROVIDERS["gke"].max_nodes == gcp_nodegroups.MAX_NODES_PER_ZONE
    assert PROVIDERS["aks"].max_nodes == azure_nodegroups.MAX_COUNT


def test_an_eks_group_at_rest_keeps_the_max_size_floor() -> None:
    up = GroupConfig(1, 3, 8)
    assert down_config("eks", up).max == PROVIDERS["eks"].min_max_size == 1
    assert steps_between("eks", up, down_config("eks", up)) == [SetSize(0, 0, 1)]
    assert down_config("asg", up).max == PROVIDERS["asg"].min_max_size == 0


def test_the_emulators_own_copies_agree() -> None:
    # Written from the providers' documentation, separately: a wrong rule here is caught, not shared.
    assert PROVIDERS["gke"].node_limit == gke.MAX_NODES_PER_ZONE
    assert PROVIDERS["aks"].node_limit == aks_rules.MAX_COUNT
