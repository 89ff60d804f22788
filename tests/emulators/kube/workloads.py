"""Seeding whole workloads without waiting for controllers: a Deployment (with its ReplicaSet), a StatefulSet or a
Job, and its N Running GPU pods on the given nodes (round robin), each pod owned by its controller exactly as the
real controllers own theirs (``ownerReferences`` with ``controller: true``, the labels they add, ``startTime``).

The trees are consistent as stored (the ReplicaSet's template is the Deployment's plus ``pod-template-hash``; as
many live pods as ``replicas``), so the emulator's controllers (:mod:`.apps`) find nothing to change until someone
scales or deletes something. For tests and the demo sandbox: idle GPU workloads to sweep.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import apps, batch
from .cluster import timestamp
from .seed import GPU, gpu_pod

if TYPE_CHECKING:
    from .cluster import Cluster

Json = dict[str, Any]
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Seeded:
    """What was stored: the owner (Deployment, StatefulSet, Job), the ReplicaSet between (Deployments only), the
    pods. Copies: read the live state back with ``kube.get``."""

    owner: Json
    replica_set: Json | None
    pods: tuple[Json, ...]


def _template(name: str, labels: dict[str, str], gpus: int, resource: str, grace_s: int, restart: str) -> Json:
    quantity = {resource: str(gpus)} if gpus else {}
    return {
        "metadata": {"labels": {"app": name, **labels}},
        "spec": {
            "containers": [
                {"name": "main", "image": IMAGE, "resources": {"limits": dict(quantity), "requests": dict(quantity)}}
            ],
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": grace_s,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        },
    }


def _pods(
    cluster: Cluster,
    owner: Json,
    names: Sequence[str],
    nodes: Sequence[str],
    template: Json,
    started: datetime | None,
    extra_labels: Sequence[dict[str, str]],
    annotations: dict[str, str] | None,
) -> list[Json]:
    stored = []
    spec = template["spec"]
    for index, name in enumerate(names):
        pod = gpu_pod(
            name,
            owner["metadata"]["namespace"],
            node=nodes[index % len(nodes)] if nodes else None,
            gpus=0,
            labels={**template["metadata"]["labels"], **extra_labels[index]},
            annotations=annotations,
            phase="Running" if nodes else "Pending",
            grace_s=spec["terminationGracePeriodSeconds"],
            started=started or cluster.now(),
            owner=apps.owner_reference(owner),
        )
        pod["spec"]["containers"] = copy.deepcopy(spec["containers"])
        pod["spec"]["restartPolicy"] = spec["restartPolicy"]
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        stored.append(cluster.create(pod))
    return stored


def deployment(
    cluster: Cluster,
    name: str,
    namespace: str = "default",
    nodes: Sequence[str] = ("gpu-1",),
    replicas: int | None = None,
    gpus: int = 1,
    resource: str = GPU,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    started: datetime | None = None,
    grace_s: int = 30,
) -> Seeded:
    """A Deployment of ``replicas`` (default: one per node) GPU pods, its ReplicaSet ``<name>-<hash>``, and the pods
    (``<replicaset>-<5 characters>``) on ``nodes`` round robin (no nodes: Pending on none)."""
    count = len(nodes) if replicas is None else replicas
    template = _template(name, dict(labels or {}), gpus, resource, grace_s, "Always")
    selector = {"matchLabels": {"app": name}}
    with cluster.lock:
        owner = cluster.create(
            {
                "apiVersion": apps.APPS,
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
                "spec": {
                    "replicas": count,
                    "selector": selector,
                    "template": template,
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                    },
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600,
                },
            }
        )
        pod_hash = apps.template_hash(owner["spec"]["template"])
        rs_template = copy.deepcopy(owner["spec"]["template"])
        rs_template["metadata"]["labels"][apps.POD_TEMPLATE_HASH] = pod_hash
        replica_set = cluster.create(
            {
                "apiVersion": apps.APPS,
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{pod_hash}",
                    "namespace": namespace,
                    "labels": dict(rs_template["metadata"]["labels"]),
                    "annotations": {"deployment.kubernetes.io/desired-replicas": str(count)},
                    "ownerReferences": [apps.owner_reference(owner)],
                },
                "spec": {
                    "replicas": count,
                    "selector": {"matchLabels": {**selector["matchLabels"], apps.POD_TEMPLATE_HASH: pod_hash}},
                    "template": rs_template,
                },
            }
        )
        names = [f"{replica_set['metadata']['name']}-{''.join(random.choices(_ALPHABET, k=5))}" for _ in range(count)]
        pods = _pods(cluster, replica_set, names, nodes, rs_template, started, [{}] * count, pod_annotations)
        cluster.reconcile_workloads()  # statuses, as the controllers would have written them
        stored = cluster.get("Deployment", name, namespace, apps.APPS)
        assert stored is not None
        return Seeded(stored, cluster.get("ReplicaSet", replica_set["metadata"]["name"], namespace), tuple(pods))


def statefulset(
    cluster: Cluster,
    name: str,
    namespace: str = "default",
    nodes: Sequence[str] = ("gpu-1",),
    replicas: int | None = None,
    gpus: int = 1,
    resource: str = GPU,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    started: datetime | None = None,
    grace_s: int = 30,
) -> Seeded:
    """A StatefulSet of ``replicas`` (default: one per node) GPU pods ``<name>-0``, ``<name>-1``... on ``nodes``."""
    count = len(nodes) if replicas is None else replicas
    template = _template(name, dict(labels or {}), gpus, resource, grace_s, "Always")
    with cluster.lock:
        owner = cluster.create(
            {
                "apiVersion": apps.APPS,
                "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
                "spec": {
                    "replicas": count,
                    "serviceName": name,
                    "selector": {"matchLabels": {"app": name}},
                    "template": template,
                    "podManagementPolicy": "OrderedReady",
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                    "revisionHistoryLimit": 10,
                },
            }
        )
        revision = f"{name}-{apps.template_hash(owner['spec']['template'])}"
        names = [f"{name}-{i}" for i in range(count)]
        extra = [
            {apps.STS_POD_NAME: n, apps.STS_POD_INDEX: str(i), apps.CONTROLLER_REVISION_HASH: revision}
            for i, n in enumerate(names)
        ]
        pods = _pods(cluster, owner, names, nodes, owner["spec"]["template"], started, extra, pod_annotations)
        cluster.reconcile_workloads()
        stored = cluster.get("StatefulSet", name, namespace, apps.APPS)
        assert stored is not None
        return Seeded(stored, None, tuple(pods))


def job(
    cluster: Cluster,
    name: str,
    namespace: str = "default",
    nodes: Sequence[str] = ("gpu-1",),
    gpus: int = 1,
    resource: str = GPU,
    started: datetime | None = None,
    grace_s: int = 30,
    pod_annotations: dict[str, str] | None = None,
) -> Seeded:
    """A batch/v1 Job running one GPU pod per node (``parallelism`` = ``completions`` = that count), its pods
    ``<job>-<5 characters>`` labelled and owned as the Job controller does it. Nothing runs them further."""
    count = len(nodes)
    with cluster.lock:
        owner = cluster.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "parallelism": count,
                    "completions": count,
                    "backoffLimit": 6,
                    "template": _template(name, {}, gpus, resource, grace_s, "Never"),
                },
            }
        )
        uid = owner["metadata"]["uid"]
        job_labels = {
            batch.CONTROLLER_UID_LABEL: uid,
            batch.JOB_NAME_LABEL: name,
            batch.LEGACY_CONTROLLER_UID_LABEL: uid,
            batch.LEGACY_JOB_NAME_LABEL: name,
        }
        owner["spec"]["selector"] = {"matchLabels": {batch.CONTROLLER_UID_LABEL: uid}}
        owner["spec"]["template"]["metadata"]["labels"].update(job_labels)
        owner["status"] = {"active": count, "startTime": timestamp(started or cluster.now())}
        owner = cluster.put(owner)
        template = owner["spec"]["template"]
        names = [f"{name}-{''.join(random.choices(_ALPHABET, k=5))}" for _ in range(count)]
        pods = _pods(cluster, owner, names, nodes, template, started, [{}] * count, pod_annotations)
        return Seeded(owner, None, tuple(pods))
