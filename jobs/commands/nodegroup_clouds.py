"""Which adapter serves which cloud for the nodegroups job (wiring, so it lives with the command). Modules are
imported on first use, so a GKE-only policy never imports boto3. The shipped cloud permission documents
(kustomize/iam/) grant exactly the ``PERMISSIONS`` of these modules (tests/unit/test_permissions.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.adapters.settings import AdapterSettings
from jobs.commands.reconcile import construct

if TYPE_CHECKING:
    from jobs.nodegroups.ports import NodeGroupCloud

NODEGROUP_ADAPTERS = {
    "aws": "jobs.adapters.aws.nodegroups:AwsNodeGroups",
    "gcp": "jobs.adapters.gcp.nodegroups:GkeNodePools",
    "azure": "jobs.adapters.azure.nodegroups:AksAgentPools",
}


def nodegroup_cloud(cloud: str, settings: AdapterSettings) -> NodeGroupCloud:
    adapter: NodeGroupCloud = construct(NODEGROUP_ADAPTERS[cloud], settings)
    return adapter
