"""The shipped cloud permission documents grant exactly what the adapters declare they call: no more, no less.

Each adapter declares its permissions next to the code that needs them (``IAM_ACTIONS``, ``GCP_PERMISSIONS``,
``AZURE_ACTIONS``); the documents in kustomize/iam/ are what operators attach to the job's cloud identity.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from jobs.adapters.aws import quotas as aws_quotas
from jobs.adapters.aws_nodegroups import IAM_ACTIONS as NODEGROUP_IAM_ACTIONS
from jobs.adapters.azure import quotas as azure_quotas
from jobs.adapters.azure_nodegroups import AZURE_ACTIONS as NODEGROUP_AZURE_ACTIONS
from jobs.adapters.gcp import quotas as gcp_quotas
from jobs.adapters.gcp_nodegroups import GCP_PERMISSIONS as NODEGROUP_GCP_PERMISSIONS

# One identity document per cloud for every job that calls it: the union of the adapters' declarations.
IAM_ACTIONS = tuple(sorted(set(NODEGROUP_IAM_ACTIONS) | set(aws_quotas.IAM_ACTIONS)))
GCP_PERMISSIONS = tuple(sorted(set(NODEGROUP_GCP_PERMISSIONS) | set(gcp_quotas.GCP_PERMISSIONS)))
AZURE_ACTIONS = tuple(sorted(set(NODEGROUP_AZURE_ACTIONS) | set(azure_quotas.AZURE_ACTIONS)))
IAM = Path(__file__).resolve().parents[2] / "kustomize" / "iam"


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

    assert sorted(actions) == sorted(IAM_ACTIONS)
    assert [a for a, n in Counter(actions).items() if n > 1] == []  # each action granted once


def test_aws_policy_is_allow_only_without_wildcard_actions() -> None:
    document = aws_policy()

    assert document["Version"] == "2012-10-17"
    assert {s["Effect"] for s in document["Statement"]} == {"Allow"}
    assert all("*" not in action for action in aws_actions(document))
    assert all(not ({"NotAction", "NotResource", "Principal"} & s.keys()) for s in document["Statement"])
    assert len({s["Sid"] for s in document["Statement"]}) == len(document["Statement"])


def test_aws_policy_scopes_every_write_to_its_resource_type() -> None:
    # Writes are limited to node groups and Auto Scaling groups; only reads (which mostly lack resource-level
    # permissions in IAM) are granted on "*".
    writes = {
        s["Resource"]: set(s["Action"])
        for s in aws_policy()["Statement"]
        if any(not a.split(":")[1].startswith(("Describe", "List", "Get")) for a in s["Action"])
    }

    assert writes == {
        "arn:aws:eks:*:*:nodegroup/*/*/*": {"eks:UpdateNodegroupConfig"},
        "arn:aws:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/*": {
            "autoscaling:UpdateAutoScalingGroup",
            "autoscaling:CreateOrUpdateTags",
            "autoscaling:DeleteTags",
        },
        "arn:aws:servicequotas:*:*:ec2/*": {"servicequotas:RequestServiceQuotaIncrease"},
    }


def test_gcp_custom_role_has_exactly_the_adapter_permissions() -> None:
    role = yaml.safe_load((IAM / "gcp-custom-role.yaml").read_text())

    assert sorted(role["includedPermissions"]) == sorted(GCP_PERMISSIONS)
    assert len(set(role["includedPermissions"])) == len(role["includedPermissions"])
    assert role.keys() == {"title", "description", "stage", "includedPermissions"}  # gcloud's role file format
    assert role["stage"] == "GA"


def test_azure_role_definition_has_exactly_the_adapter_actions() -> None:
    role = json.loads((IAM / "azure-role-definition.json").read_text())

    assert sorted(role["Actions"]) == sorted(AZURE_ACTIONS)
    assert len(set(role["Actions"])) == len(role["Actions"])
    assert role["IsCustom"] is True
    assert role["NotActions"] == role["DataActions"] == role["NotDataActions"] == []
    assert role["AssignableScopes"]
    assert all(scope.startswith("/subscriptions/") for scope in role["AssignableScopes"])
