"""The install, as a fleet's GitOps tool would sync it to each cluster of the sandbox, applied with the real kubectl.

Each cluster gets the overlay of its cloud (``kustomize/overlays/production/<cloud>``), rendered by ``kubectl kustomize`` and
told its cluster's name the way the Argo CD ApplicationSet and the Flux per-cluster Kustomization tell it: their patch
sets the identity ConfigMap ``gpu-jobs-cluster`` to the cluster's name. Then ``kubectl --context <cluster> apply -f -``.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
IDENTITY = "gpu-jobs-cluster"  # the cluster's identity ConfigMap (kustomize/base/cluster-identity.yaml)

Json = dict[str, Any]


class InstallError(Exception):
    pass


def overlay_for(cloud: str) -> Path:
    """What the Argo CD ApplicationSet and the Flux per-cluster Kustomization sync for a cluster on ``cloud``:
    ``kustomize/overlays/production/<cloud>`` (gitops/argocd/applicationset.yaml, gitops/flux/gpu-jobs.yaml)."""
    overlay = REPO / "kustomize" / "overlays" / "production" / cloud
    if not (overlay / "kustomization.yaml").is_file():
        raise InstallError(f"no kustomize overlay for {cloud}: {overlay}")
    return overlay


@functools.cache
def render(overlay: Path) -> str:
    """``kubectl kustomize <overlay>`` with kustomize's defaults (as Argo CD and Flux build it)."""
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise InstallError(f"kubectl kustomize {overlay} failed: {done.stderr.strip()}")
    return done.stdout


def for_cluster(rendered: str, cluster: str) -> str:
    """The render told its cluster, as the ApplicationSet's and Flux's patch tell it: the identity ConfigMap's
    ``data.cluster`` (which the cluster-scoped CronJobs read as GPU_JOBS_CLUSTER)."""
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    identities = [d for d in documents if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == IDENTITY]
    if len(identities) != 1:
        raise InstallError(f"the render has {len(identities)} ConfigMaps {IDENTITY}, not one")
    identities[0]["data"] = {"cluster": cluster}
    return yaml.safe_dump_all(documents, sort_keys=False)


def apply(manifests: str, context: str, env: Mapping[str, str]) -> str:
    """``kubectl --context <context> apply -f -``; returns kubectl's output (one line per object)."""
    done = subprocess.run(
        [str(KUBECTL), "--context", context, "apply", "-f", "-"],
        input=manifests,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise InstallError(f"kubectl --context {context} apply failed: {done.stderr.strip()}")
    return done.stdout


def install(cluster: str, cloud: str, context: str, env: Mapping[str, str]) -> str:
    return apply(for_cluster(render(overlay_for(cloud)), cluster), context, env)
