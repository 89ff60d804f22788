"""Which clusters a run acts on, and through which kubeconfig context: shared by every per-cluster job.

What a Kubernetes API shows is true of that cluster only, so every run names the clusters it looks at:
- ``--cluster NAME`` (``GPU_JOBS_CLUSTER``): a per-cluster install (Argo CD ApplicationSet, Flux per-cluster
  Kustomization). It acts on that cluster only, through the in-cluster config or the current context.
- no flag: a central install. It acts on every cluster that has a ``kubeContext``, each through its own context.
- no flag and no contexts: only a fleet of one cluster can be reached (the current config); anything else is a
  configuration error that says what to set, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.core.policy import Policy
from jobs.settings import SettingsError


@dataclass(frozen=True)
class Target:
    cluster: str
    context: str | None  # None: the in-cluster service account, or the kubeconfig's current context


@dataclass(frozen=True)
class Selection:
    targets: tuple[Target, ...]
    unreachable: tuple[str, ...] = ()  # clusters without a kubeContext that a central run cannot reach


def select_clusters(policy: Policy, cluster: str | None) -> Selection:
    names = [c.name for c in policy.fleet]
    if cluster is not None:
        if cluster not in names:
            known = ", ".join(names) or "none: the policy has no node groups or clusters"
            raise SettingsError(f"--cluster / GPU_JOBS_CLUSTER {cluster!r} is not a cluster of the policy ({known})")
        return Selection((Target(cluster, None),))
    reachable = tuple(Target(c.name, c.kube_context) for c in policy.fleet if c.kube_context)
    if reachable:
        return Selection(reachable, tuple(c.name for c in policy.fleet if not c.kube_context))
    if len(names) <= 1:
        return Selection(tuple(Target(name, None) for name in names))
    raise SettingsError(
        f"the policy's fleet has {len(names)} clusters ({', '.join(names)}) and none has a kubeContext: set"
        " --cluster NAME (GPU_JOBS_CLUSTER) for a per-cluster install, or give every cluster a kubeContext for a"
        " central install"
    )


def run_targets(policy: Policy, cluster: str | None, log: Any) -> tuple[Target, ...]:
    """The clusters a run acts on; a central run says which clusters it leaves out (no kubeContext)."""
    selection = select_clusters(policy, cluster)
    if selection.unreachable:
        log.warning(
            "fleet.clusters_without_context",
            clusters=list(selection.unreachable),
            message="a run without --cluster acts only on clusters that have a kubeContext",
        )
    return selection.targets
