"""The resource types the emulator serves, as discovery and the REST paths name them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core (legacy) group
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    #: Field selectors this resource accepts beyond metadata.name / metadata.namespace (the real server's set).
    field_labels: tuple[str, ...] = ()
    #: Whether DELETE answers with the deleted object (pods, namespaces) or with a success ``Status``.
    delete_returns_object: bool = False
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def custom(self) -> bool:
        """A custom resource: served from a CRD (pruned, defaulted, validated by its schema), not a built-in type."""
        return self.group == KARPENTER_GROUP

    @property
    def key(self) -> str:
        """Storage key: the group-qualified plural (``pods``, ``leases.coordination.k8s.io``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RBAC_GROUP = "rbac.authorization.k8s.io"
KARPENTER_GROUP = "karpenter.sh"
_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update")

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "Namespace", "namespaces", False, ("ns",), ("status",), ("status.phase",), True),
    ResourceType("", "v1", "Node", "nodes", False, ("no",), ("status",), ("spec.unschedulable",)),
    ResourceType(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        ("po",),
        ("status", "eviction", "log"),
        (
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
        True,
        ("all",),
    ),
    ResourceType("", "v1", "ResourceQuota", "resourcequotas", True, ("quota",), ("status",)),
    ResourceType(
        "",
        "v1",
        "Event",
        "events",
        True,
        ("ev",),
        (),
        (
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ),
    ),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    ResourceType("", "v1", "Secret", "secrets", True),  # the notifications' webhook URL (stored as sent: no stringData)
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
    ResourceType("", "v1", "LimitRange", "limitranges", True, ("limits",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)),
    ResourceType("events.k8s.io", "v1", "Event", "events", True, ("ev",)),
    # What an install is made of (kubectl apply -k), and the Jobs a CronJob or `kubectl create job` starts.
    ResourceType("batch", "v1", "CronJob", "cronjobs", True, ("cj",), ("status",), (), False, ("all",)),
    ResourceType("batch", "v1", "Job", "jobs", True, (), ("status",), ("status.successful",), False, ("all",)),
    # Workloads whose pods the sweep scales away (apps/v1, with the autoscaling/v1 scale subresource).
    ResourceType(
        "apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status", "scale"), (), False, ("all",)
    ),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status", "scale"), (), False, ("all",)),
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", True, ("sts",), ("status", "scale"), (), False, ("all",)),
    # What placeholder pods (prewarm) name in priorityClassName; pods are not admitted against it (see __init__).
    ResourceType("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    # Karpenter's custom resources (cluster-scoped), validated from their CRD files (see crd_schema).
    ResourceType(KARPENTER_GROUP, "v1", "NodePool", "nodepools", False, (), ("status",), (), False, ("karpenter",)),
    ResourceType(KARPENTER_GROUP, "v1", "NodeClaim", "nodeclaims", False, (), ("status",), (), False, ("karpenter",)),
    ResourceType(RBAC_GROUP, "v1", "Role", "roles", True),
    ResourceType(RBAC_GROUP, "v1", "RoleBinding", "rolebindings", True),
    ResourceType(RBAC_GROUP, "v1", "ClusterRole", "clusterroles", False),
    ResourceType(RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
)

VERBS = _VERBS


def find(group: str, version: str, plural: str) -> ResourceType | None:
    for rt in RESOURCE_TYPES:
        if (rt.group, rt.version, rt.plural) == (group, version, plural):
            return rt
    return None


def by_kind(api_version: str, kind: str) -> ResourceType:
    for rt in RESOURCE_TYPES:
        if (rt.api_version, rt.kind) == (api_version, kind):
            return rt
    raise KeyError(f"the emulator does not serve {kind} {api_version}")


def groups() -> dict[str, list[str]]:
    """Named API groups and their versions (the core group is served under /api, not /apis)."""
    found: dict[str, list[str]] = {}
    for rt in RESOURCE_TYPES:
        if rt.group and rt.version not in found.setdefault(rt.group, []):
            found[rt.group].append(rt.version)
    return found
