"""The shipped cloud permission documents grant exactly what the adapters declare they call: no more, no less.

Each cloud adapter module declares its permissions next to the code that needs them, in one shape
(``PERMISSIONS: jobs.adapters.permissions.Permissions``); the documents in kustomize/iam/ are what operators attach
to the job's cloud identity, one per cloud, and grant the union of the modules the commands are wired with.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.adapters.permissions import Cloud, Permissions, union
from jobs.commands.cloud_quotas import QUOTA_ADAPTERS
from jobs.commands.nodegroup_clouds import NODEGROUP_ADAPTERS
from jobs.commands.sweep import INSTANCE_ADAPTERS
from jobs.core.providers import PROVIDERS
from jobs.labels import SWEEP_MARK_TAG

IAM = Path(__file__).resolve().parents[2] / "kustomize" / "iam"


def wired() -> dict[Cloud, frozenset[str]]:
    """Cloud -> the permissions of every cloud adapter module a command is wired with."""
    declared: list[Permissions] = []
    # Node-group adapters are keyed by provider kind (jobs.core.providers), the others by cloud.
    # A kind reached through the cluster's own API (Karpenter) needs RBAC, no cloud permission (test_deploy.py).
    nodegroups = {
        f"{cloud} ({kind})": path
        for kind, path in NODEGROUP_ADAPTERS.items()
        if (cloud := PROVIDERS[kind].cloud) is not None
    }
    for adapters in (nodegroups, QUOTA_ADAPTERS, INSTANCE_ADAPTERS):
        for key, path in adapters.items():
            permissions = importlib.import_module(path.partition(":")[0]).PERMISSIONS
            assert permissions.cloud == key.split(" ")[0]  # each module declares its own cloud's
            declared.append(permissions)
    return union(declared)


DECLARED = wired()


def aws_policy() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((IAM / "aws-iam-policy.json").read_text())
    return document


def aws_actions(document: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for statement in document["Statement"]:
        actions = statement["Action"]
        out.extend([actions] if isinstance(actions, str) else actions)
    return out


def test_aws_policy_grants_exactly_the_adapter_actions() -> None:
    actions = aws_actions(aws_policy())

    assert sorted(actions) == sorted(DECLARED["aws"])
    assert [a for a, n in Counter(actions).items() if n > 1] == []  # each action granted once


def test_aws_policy_is_allow_only_without_wildcard_actions() -> None:
    document = aws_policy()

    assert document["Version"] == "2012-10-17"
    assert {s["Effect"] for s in document["Statement"]} == {"Allow"}
    assert all("*" not in action for action in aws_actions(document))
    assert all(not ({"NotAction", "NotResource", "Principal"} & s.keys()) for s in document["Statement"])
    assert len({s["Sid"] for s in document["Statement"]}) == len(document["Statement"])


def test_aws_policy_scopes_every_write_to_its_resource_type() -> None:
    # Writes are limited to node groups, Auto Scaling groups and instances; only reads (which mostly lack
    # resource-level permissions in IAM) are granted on "*".
    writes = {
        (s["Resource"], frozenset(s["Action"]))
        for s in aws_policy()["Statement"]
        if any(not a.split(":")[1].startswith(("Describe", "List", "Get")) for a in s["Action"])
    }

    assert writes == {
        ("arn:aws:eks:*:*:nodegroup/*/*/*", frozenset({"eks:UpdateNodegroupConfig"})),
        (
            "arn:aws:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/*",
            frozenset(
                {"autoscaling:UpdateAutoScalingGroup", "autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"}
            ),
        ),
        ("arn:aws:servicequotas:*:*:ec2/*", frozenset({"servicequotas:RequestServiceQuotaIncrease"})),
        ("arn:aws:ec2:*:*:instance/*", frozenset({"ec2:CreateTags", "ec2:DeleteTags"})),
        ("arn:aws:ec2:*:*:instance/*", frozenset({"ec2:StopInstances", "ec2:TerminateInstances"})),
    }


def test_the_sweep_may_write_only_its_mark_and_stop_only_what_it_marked() -> None:
    # Defence in depth behind the grace period: the instance tag writes are allowed for the mark's key alone (and
    # never without a key, which would remove every tag), and stop/terminate only on an instance carrying the mark.
    by_sid = {s["Sid"]: s for s in aws_policy()["Statement"]}

    assert by_sid["GpuJobsSweepMarkInstances"]["Condition"] == {
        "ForAllValues:StringEquals": {"aws:TagKeys": [SWEEP_MARK_TAG]},
        "Null": {"aws:TagKeys": "false"},
    }
    assert by_sid["GpuJobsSweepStopInstances"]["Condition"] == {"Null": {f"ec2:ResourceTag/{SWEEP_MARK_TAG}": "false"}}


def test_gcp_custom_role_has_exactly_the_adapter_permissions() -> None:
    role = yaml.safe_load((IAM / "gcp-custom-role.yaml").read_text())

    assert sorted(role["includedPermissions"]) == sorted(DECLARED["gcp"])
    assert len(set(role["includedPermissions"])) == len(role["includedPermissions"])
    assert role.keys() == {"title", "description", "stage", "includedPermissions"}  # gcloud's role file format
    assert role["stage"] == "GA"


def test_azure_role_definition_has_exactly_the_adapter_actions() -> None:
    role = json.loads((IAM / "azure-role-definition.json").read_text())

    assert sorted(role["Actions"]) == sorted(DECLARED["azure"])
    assert len(set(role["Actions"])) == len(role["Actions"])
    assert role["IsCustom"] is True
    assert role["NotActions"] == role["DataActions"] == role["NotDataActions"] == []
    assert role["AssignableScopes"]
    assert all(scope.startswith("/subscriptions/") for scope in role["AssignableScopes"])


def test_permissions_are_merged_per_cloud_and_never_listed_twice() -> None:
    nodegroups = Permissions("aws", ("eks:DescribeNodegroup", "eks:UpdateNodegroupConfig"))
    quotas = Permissions("aws", ("servicequotas:GetServiceQuota", "eks:DescribeNodegroup"))
    pools = Permissions("gcp", ("container.clusters.get",))

    assert union([nodegroups, quotas, pools]) == {
        "aws": {"eks:DescribeNodegroup", "eks:UpdateNodegroupConfig", "servicequotas:GetServiceQuota"},
        "gcp": {"container.clusters.get"},
    }
    with pytest.raises(ValueError, match="listed twice"):
        Permissions("azure", ("Microsoft.Compute/read", "Microsoft.Compute/read"))
