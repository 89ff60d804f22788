"""Which adapter serves which provider kind for the nodegroups job: the provider table's (``jobs.core.providers``),
read here because building an adapter is wiring. Modules are imported on first use, so a GKE-only policy never
imports boto3. The shipped cloud permission documents (kustomize/iam/) grant exactly the ``PERMISSIONS`` of these
modules (tests/unit/test_permissions.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.adapters.settings import AdapterSettings
from jobs.commands.reconcile import construct
from jobs.core.providers import PROVIDERS, ProviderKind

if TYPE_CHECKING:
    from jobs.nodegroups.ports import NodeGroupCloud

#: Provider kind -> ``module:Class`` of its adapter.
NODEGROUP_ADAPTERS: dict[ProviderKind, str] = {kind: rules.adapter for kind, rules in PROVIDERS.items()}


def nodegroup_cloud(kind: ProviderKind, settings: AdapterSettings, api: Any = None) -> NodeGroupCloud:
    """The adapter of ``kind``; a kind reached through the cluster's own API (Karpenter) takes that cluster's client
    ``api`` (without one: the current kubeconfig context's, for in-process runs)."""
    in_cluster = PROVIDERS[kind].cloud is None and api is not None
    adapter: NodeGroupCloud = construct(NODEGROUP_ADAPTERS[kind], settings, *([api] if in_cluster else []))
    return adapter
