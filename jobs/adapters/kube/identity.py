"""Which cluster a Kubernetes API belongs to, as the cluster itself says: the identity ConfigMap its install
created (``gpu-jobs/gpu-jobs-cluster``, ``data.cluster``). A name in a kubeconfig is not proof: a copied kubeconfig
or a wrong current context reaches another cluster under the same context name. Read only, never written.
"""

from __future__ import annotations

from urllib.parse import quote

from jobs import errors
from jobs.adapters.kube.client import ApiClient, request
from jobs.adapters.kube.rbac import Grant
from jobs.labels import CLUSTER_IDENTITY_CONFIGMAP, CLUSTER_IDENTITY_KEY
from jobs.runner import Witnessed

RBAC = (Grant("", "configmaps", ("get",), "namespace"),)  # the identity ConfigMap in the job's own namespace


class ClusterWitness:
    """The identity of the cluster behind one API client."""

    def __init__(self, api: ApiClient, namespace: str, context: str | None) -> None:
        self.api, self.namespace, self.context = api, namespace, context

    def witness(self) -> Witnessed:
        """What the API says it is; raises :class:`jobs.errors.CloudError` when it cannot be read."""
        where = f"the API at {self.api.configuration.host}"
        where += f" (kubeconfig context {self.context!r})" if self.context else ""
        path = (
            f"/api/v1/namespaces/{quote(self.namespace, safe='')}/configmaps/"
            f"{quote(CLUSTER_IDENTITY_CONFIGMAP, safe='')}"
        )
        try:
            found = request(self.api, "get configmaps", "GET", path)
        except errors.NotFound:
            return Witnessed(None, where, f"{self.namespace}/{CLUSTER_IDENTITY_CONFIGMAP}")
        name = str(((found or {}).get("data") or {}).get(CLUSTER_IDENTITY_KEY) or "").strip()
        return Witnessed(name or None, where, f"{self.namespace}/{CLUSTER_IDENTITY_CONFIGMAP}")
