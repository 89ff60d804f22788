"""What one unit of a job's work is about: a **cluster** (its own Kubernetes API) or a cloud **account** (an AWS
region of the install's account, a GCP project, an Azure subscription). Both come from the policy, never listed
twice: clusters from ``clusters:`` (or the node groups' locators), accounts from those clusters' locators plus what
a job's own section names (``extra``).

Where a scope's state lives (records, the Lease, Events):
- a cluster scope: in that cluster, reached through its ``kubeContext`` (central install) or the in-cluster config
  / current context (``--cluster``, a per-cluster install);
- an account scope: in the cluster of the install that runs it (``GPU_JOBS_NAMESPACE``, the in-cluster config or
  current context). An account has no Kubernetes API of its own, so account-level jobs run in one install only.

Which clusters a run acts on:
- ``--cluster NAME`` (``GPU_JOBS_CLUSTER``): that cluster only, through the in-cluster config or current context.
- no flag: every cluster that has a ``kubeContext``, each through its own context.
- no flag and no contexts: only a fleet of one cluster can be reached (the current config); anything else is a
  configuration error that says what to set, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from jobs.core.policy import Policy
from jobs.settings import SettingsError

ScopeKind = Literal["cluster", "account"]
Cloud = Literal["aws", "gcp", "azure"]


@dataclass(frozen=True, order=True)
class Scope:
    kind: ScopeKind
    name: str  # a cluster's name; an account's "aws/eu-west-1", "gcp/ml-research", "azure/<subscription>"
    context: str | None = None  # the kubeconfig context of the cluster holding its state; None: in-cluster/current
    cloud: Cloud | None = None  # an account's cloud
    account: str | None = None  # an account's region (AWS), project (GCP) or subscription (Azure)

    @property
    def slug(self) -> str:
        """The scope in an object name (a Lease, a record): lowercase letters, digits and dashes."""
        return self.name.replace("/", "-").lower()

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def cluster(name: str, context: str | None = None) -> Scope:
    return Scope("cluster", name, context)


def account(cloud: Cloud, name: str) -> Scope:
    """An account scope; its state lives in the install's own cluster (context None)."""
    return Scope("account", f"{cloud}/{name}", None, cloud, name)


@dataclass(frozen=True)
class Selection:
    scopes: tuple[Scope, ...]
    unreachable: tuple[str, ...] = ()  # clusters without a kubeContext that a central run cannot reach


def select_clusters(policy: Policy, name: str | None) -> Selection:
    names = [c.name for c in policy.fleet]
    if name is not None:
        if name not in names:
            known = ", ".join(names) or "none: the policy has no node groups or clusters"
            raise SettingsError(f"--cluster / GPU_JOBS_CLUSTER {name!r} is not a cluster of the policy ({known})")
        return Selection((cluster(name),))
    reachable = tuple(cluster(c.name, c.kube_context) for c in policy.fleet if c.kube_context)
    if reachable:
        return Selection(reachable, tuple(c.name for c in policy.fleet if not c.kube_context))
    if len(names) <= 1:
        return Selection(tuple(cluster(n) for n in names))
    raise SettingsError(
        f"the policy's fleet has {len(names)} clusters ({', '.join(names)}) and none has a kubeContext: set"
        " --cluster NAME (GPU_JOBS_CLUSTER) for a per-cluster install, or give every cluster a kubeContext for a"
        " central install"
    )


def cluster_scopes(policy: Policy, name: str | None, log: Any) -> tuple[Scope, ...]:
    """The clusters a run acts on; a central run says which clusters it leaves out (no kubeContext)."""
    selection = select_clusters(policy, name)
    if selection.unreachable:
        log.warning(
            "fleet.clusters_without_context",
            clusters=list(selection.unreachable),
            message="a run without --cluster acts only on clusters that have a kubeContext",
        )
    return selection.scopes


def account_scopes(policy: Policy, extra: Iterable[Scope] = ()) -> tuple[Scope, ...]:
    """Every cloud account the policy's clusters live in (AWS regions, GCP projects, Azure subscriptions), plus the
    ``extra`` ones a job's own section names; each once, in a stable order."""
    found: set[Scope] = set(extra)
    for c in policy.fleet:
        if c.aws is not None:
            found.add(account("aws", c.aws.region))
        if c.gcp is not None:
            found.add(account("gcp", c.gcp.project))
        if c.azure is not None:
            found.add(account("azure", c.azure.subscription))
    for g in policy.node_groups:  # a plain ASG's cluster has no locator; its group still names the region
        loc = g.locator.model_dump(exclude_none=True)
        key = {"aws": "region", "gcp": "project", "azure": "subscription"}[g.cloud]
        if key in loc:  # a Karpenter pool's account is its cluster's, found above
            found.add(account(g.cloud, str(loc[key])))
    return tuple(sorted(found))
