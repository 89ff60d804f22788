"""The commands that restore a group the policy no longer names, per provider, from its record."""

from __future__ import annotations

from datetime import datetime

import pytest

from jobs.core.group_config import GroupConfig
from jobs.core.group_identity import GroupIdentity
from jobs.core.group_record import Record
from jobs.core.orphan_records import LEFT_DOWN, OrphanRecord, restore_commands

AT = datetime.fromisoformat("2026-12-01T20:05:00+01:00")  # the evening it went down
CA = {"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/ml-prod": "owned"}
EKS = GroupIdentity.of("ml-prod", "aws", {"region": "eu-west-1", "cluster": "ml-prod", "nodegroup": "gpu-a100"})


@pytest.mark.parametrize(
    ("cloud", "locator", "config", "expected"),
    [
        (
            "aws",
            {"region": "eu-west-1", "cluster": "ml-prod", "nodegroup": "gpu-a100"},
            GroupConfig(1, 3, 8, True, CA, frozenset({"k8s.io/cluster-autoscaler/enabled"})),
            (
                "aws eks update-nodegroup-config --region eu-west-1 --cluster-name ml-prod --nodegroup-name gpu-a100"
                " --scaling-config minSize=1,maxSize=8,desiredSize=3",
                "ASG=$(aws eks describe-nodegroup --region eu-west-1 --cluster-name ml-prod --nodegroup-name gpu-a100"
                " --query 'nodegroup.resources.autoScalingGroups[0].name' --output text)",
                'aws autoscaling create-or-update-tags --region eu-west-1 --tags "ResourceId=$ASG,'
                'ResourceType=auto-scaling-group,Key=k8s.io/cluster-autoscaler/enabled,Value=true,PropagateAtLaunch=true"'
                ' "ResourceId=$ASG,ResourceType=auto-scaling-group,Key=k8s.io/cluster-autoscaler/ml-prod,Value=owned,'
                'PropagateAtLaunch=false"',
            ),
        ),
        (
            "aws",
            {"region": "eu-west-1", "autoScalingGroup": "batch-g5"},
            GroupConfig(2, 2, 4),
            (
                "aws autoscaling update-auto-scaling-group --region eu-west-1 --auto-scaling-group-name batch-g5"
                " --min-size 2 --desired-capacity 2 --max-size 4",
            ),
        ),
        (
            "gcp",
            {"project": "ml-research", "location": "europe-west4", "cluster": "research", "nodePool": "h100"},
            GroupConfig(1, 2, 4, True, autoscaler_profile="BALANCED", zones=2),
            (
                "gcloud container clusters resize research --node-pool h100 --num-nodes 2 --location europe-west4"
                " --project ml-research --quiet",
                "gcloud container node-pools update h100 --cluster research --location europe-west4 --project"
                " ml-research --enable-autoscaling --min-nodes 1 --max-nodes 4 --location-policy BALANCED",
            ),
        ),
        (
            "azure",
            {"subscription": "s1", "resourceGroup": "rg-ml", "cluster": "aks-ml", "agentPool": "t4"},
            GroupConfig(0, 3, 0),
            (
                "az aks nodepool start --subscription s1 --resource-group rg-ml --cluster-name aks-ml --name t4"
                "  # only if the pool is Stopped (strategy: stop)",
                "az aks nodepool scale --subscription s1 --resource-group rg-ml --cluster-name aks-ml --name t4"
                " --node-count 3",
            ),
        ),
    ],
)
def test_restore_commands(cloud: str, locator: dict[str, str], config: GroupConfig, expected: tuple[str, ...]) -> None:
    assert restore_commands(GroupIdentity.of("ml-prod", cloud, locator), config) == expected


def test_only_a_record_that_left_the_group_changed_fails() -> None:
    down = OrphanRecord(
        "gpu-jobs-nodegroup-gpu-a100-x", "gpu-jobs", Record(GroupConfig(1, 3, 8), "down", AT, describes=EKS)
    )
    up = OrphanRecord(
        "gpu-jobs-nodegroup-gpu-a100-x", "gpu-jobs", Record(GroupConfig(1, 3, 8), "up", AT, describes=EKS)
    )
    unreadable = OrphanRecord("gpu-jobs-nodegroup-x", "gpu-jobs", None, error="JSONDecodeError: ...")
    assert [(o.failed, bool(o.restore)) for o in (down, up, unreadable)] == [
        (True, True),
        (False, False),
        (True, False),
    ]
    assert down.reason == LEFT_DOWN
    assert "cannot be read" in unreadable.reason
    assert OrphanRecord("r", "gpu-jobs", None, context="prod ctx").delete == (
        "kubectl --context 'prod ctx' -n gpu-jobs delete configmap r"
    )


def test_every_provider_of_the_table_has_restore_commands() -> None:
    from jobs.core.orphan_records import RESTORE_COMMANDS
    from jobs.core.providers import PROVIDERS

    assert set(RESTORE_COMMANDS) == set(PROVIDERS)


@pytest.mark.parametrize(
    ("cloud", "limits", "replicas", "expected"),
    [
        (
            "aws",
            {"cpu": "1000", "nvidia.com/gpu": "64"},
            None,
            "kubectl patch nodepool gpu-h100 --type json -p"
            ' \'[{"op":"add","path":"/spec/limits","value":{"cpu":"1000","nvidia.com/gpu":"64"}}]\'',
        ),
        (
            "azure",
            {},
            2,
            "kubectl patch nodepool gpu-h100 --type json -p"
            ' \'[{"op":"remove","path":"/spec/limits"},{"op":"add","path":"/spec/replicas","value":2}]\'',
        ),
    ],
)
def test_a_karpenter_pool_gets_its_limits_back_whole(
    cloud: str, limits: dict[str, str], replicas: int | None, expected: str
) -> None:
    # A pool's locator is its cluster and nodePool (a GKE pool's has a project too): the table tells them apart.
    identity = GroupIdentity.of("ml-prod", cloud, {"cluster": "ml-prod", "nodePool": "gpu-h100"})
    config = GroupConfig(0, 2, 0, limits=limits, replicas=replicas)
    assert restore_commands(identity, config) == (expected,)
