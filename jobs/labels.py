"""Every label, annotation, tag key and resource name the jobs read or write, in one place."""

from __future__ import annotations

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-jobs"
RECORD_KIND_LABEL = "gpu-jobs.dev/record"
NODE_GROUP_LABEL = "gpu-jobs.dev/node-group"
RECORD_KEY = "record.json"
# The history ConfigMaps (kube/history.py): whose history, and which ISO week.
HISTORY_SCOPE_LABEL = "gpu-jobs.dev/history-scope"
HISTORY_WEEK_LABEL = "gpu-jobs.dev/week"

SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KEEP_ALIVE_ANNOTATION = "gpu-jobs/keep-alive"
# On a node the nodegroups job cordoned for a drain: the mark says the cordon is the job's to undo (never a person's).
CORDONED_BY_ANNOTATION = "gpu-jobs.dev/cordoned-by"

# Extended resources that mean "this pod uses a GPU": whole GPUs, MIG slices (nvidia.com/mig-1g.10gb),
# time-sliced shared GPUs (nvidia.com/gpu.shared).
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "amd.com/gpu")

# Provider node labels: how the cluster's nodes say which group they belong to.
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
GKE_NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
AKS_AGENTPOOL_LABEL = "kubernetes.azure.com/agentpool"
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"  # on a Karpenter NodePool's NodeClaims and their Nodes

# Cluster Autoscaler discovery tags on Auto Scaling groups.
CA_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
CA_ENABLED_TAG = CA_TAG_PREFIX + "enabled"
CA_CLUSTER_TAG = CA_TAG_PREFIX + "{cluster}"

NODEGROUPS_LEASE = "gpu-jobs-nodegroups"


def nodegroups_lease(cluster: str) -> str:
    """The Lease that serialises runs acting on ``cluster`` (a per-cluster and a central install exclude each
    other in that cluster's API; clusters of one central run never wait for each other)."""
    return f"{NODEGROUPS_LEASE}-{cluster}"


# The cloud-quotas job's records of what it asked, one ConfigMap per policy entry in the install's namespace.
CLOUD_QUOTA_RECORD_KIND = "cloud-quota-request"
CLOUD_QUOTA_LABEL = "gpu-jobs.dev/cloud-quota"
CLOUD_QUOTA_KEY = "request.json"
CLOUD_QUOTAS_LEASE = "gpu-jobs-cloud-quotas"


def cloud_quota_record(entry: str) -> str:
    """The ConfigMap that remembers what was asked for one ``cloudQuotas`` entry (names are unique in the policy)."""
    return f"gpu-jobs-cloud-quota-{entry}"


# The sweep job's marks. On a pod: when it was first seen idle (RFC 3339) and why; a person's snooze. On a Deployment
# or StatefulSet it scaled to zero: the replicas it had. On a cloud instance: the planned action and when it is due
# (a key and value every cloud accepts, GCP's lowercase label syntax included).
IDLE_SINCE_ANNOTATION = "gpu-jobs/idle-since"
IDLE_REASON_ANNOTATION = "gpu-jobs/idle-reason"
KEEP_ALIVE_UNTIL_ANNOTATION = "gpu-jobs/keep-alive-until"
# A snooze beyond sweep.idlePods.maxSnooze: the cap the sweep set when it first saw that keep-alive-until value, and
# the value it caps. The durable anchor that makes the snooze end (a cap recomputed from each run's now never would).
KEEP_ALIVE_CAPPED_UNTIL_ANNOTATION = "gpu-jobs/keep-alive-capped-until"
KEEP_ALIVE_CAPPED_ASKED_ANNOTATION = "gpu-jobs/keep-alive-capped-asked"
SCALED_FROM_ANNOTATION = "gpu-jobs/scaled-from-replicas"
SWEEP_MARK_TAG = "gpu-jobs-sweep"
SWEEP_PODS_LEASE = "gpu-jobs-sweep-pods"
SWEEP_INSTANCES_LEASE = "gpu-jobs-sweep-instances"

# The cluster's identity: a ConfigMap in the install's namespace naming the cluster whose API holds it. The
# per-cluster install creates it (kustomize/base, told the cluster's name by the ApplicationSet or Flux); every
# cluster-scoped run reads it before anything that decides or writes, and never writes it.
CLUSTER_IDENTITY_CONFIGMAP = "gpu-jobs-cluster"
CLUSTER_IDENTITY_KEY = "cluster"
