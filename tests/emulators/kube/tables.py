"""``meta.k8s.io/v1`` Table responses: what ``kubectl get`` asks for (``Accept: ...;as=Table``) and prints."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .quantity import parse
from .resources import ResourceType

Json = dict[str, Any]
Column = tuple[str, str, int, Callable[[Json, datetime], Any]]  # name, type, priority, cell


def age(obj: Json, now: datetime) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    seconds = max(0, int((now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _name(obj: Json, _: datetime) -> str:
    return str(obj["metadata"]["name"])


def _pod_ready(obj: Json, _: datetime) -> str:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    total = len((obj.get("spec") or {}).get("containers") or [])
    if not statuses:
        ready = total if _condition(obj, "Ready") == "True" else 0
    else:
        ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(obj: Json, _: datetime) -> str:
    """The phase, or as kubectl shows a finished pod: its container's termination reason (Completed, Error)."""
    status = obj.get("status") or {}
    if (obj.get("metadata") or {}).get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        return "Terminating"  # printPod: a pod being deleted shows so until it is gone
    for container in status.get("containerStatuses") or []:
        reason = ((container.get("state") or {}).get("terminated") or {}).get("reason")
        if reason:
            return str(reason)
    return str(status.get("phase", ""))


def _condition(obj: Json, kind: str) -> str:
    return next(
        (c.get("status", "") for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), ""
    )


def _node_status(obj: Json, _: datetime) -> str:
    status = {"True": "Ready", "False": "NotReady"}.get(_condition(obj, "Ready"), "Unknown")
    return status + (",SchedulingDisabled" if (obj.get("spec") or {}).get("unschedulable") else "")


def _node_roles(obj: Json, _: datetime) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in (obj["metadata"].get("labels") or {}) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _quota_part(kind: str) -> Callable[[Json, datetime], str]:
    def cell(obj: Json, _: datetime) -> str:
        status = obj.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        keys = sorted(
            k for k in hard if k.startswith(f"{kind}.") or (kind == "requests" and "." not in k.split("/")[0])
        )
        return ", ".join(f"{k}: {used.get(k, '0')}/{hard[k]}" for k in keys)

    return cell


def _job_status(obj: Json, _: datetime) -> str:
    for kind in ("Complete", "Failed", "Suspended"):
        if _condition(obj, kind) == "True":
            return kind
    return "Running"


def _job_completions(obj: Json, _: datetime) -> str:
    succeeded = (obj.get("status") or {}).get("succeeded", 0)
    return f"{succeeded}/{(obj.get('spec') or {}).get('completions', 1)}"


def _job_duration(obj: Json, now: datetime) -> str:
    status = obj.get("status") or {}
    if not status.get("startTime"):
        return ""
    end = status.get("completionTime")
    finished = datetime.fromisoformat(end.replace("Z", "+00:00")) if end else now
    return age({"metadata": {"creationTimestamp": status["startTime"]}}, finished)


_AGE: Column = ("Age", "string", 0, age)


def _status_int(key: str) -> Callable[[Json, datetime], int]:
    return lambda o, _: int((o.get("status") or {}).get(key, 0))


def _ready_of_desired(obj: Json, _: datetime) -> str:
    return f"{(obj.get('status') or {}).get('readyReplicas', 0)}/{(obj.get('spec') or {}).get('replicas', 1)}"


COLUMNS: dict[str, list[Column]] = {
    "pods": [
        ("Name", "string", 0, _name),
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        (
            "Restarts",
            "string",
            0,
            lambda o, _: str(
                sum(s.get("restartCount", 0) for s in (o.get("status") or {}).get("containerStatuses") or [])
            ),
        ),
        _AGE,
        ("IP", "string", 1, lambda o, _: (o.get("status") or {}).get("podIP", "<none>")),
        ("Node", "string", 1, lambda o, _: (o.get("spec") or {}).get("nodeName", "<none>")),
    ],
    "nodes": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        (
            "Version",
            "string",
            0,
            lambda o, _: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
        ),
        (
            "GPU",
            "string",
            1,
            lambda o, _: str(parse(((o.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))),
        ),
    ],
    "namespaces": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, lambda o, _: (o.get("status") or {}).get("phase", "")),
        _AGE,
    ],
    "resourcequotas": [
        ("Name", "string", 0, _name),
        _AGE,
        ("Request", "string", 0, _quota_part("requests")),
        ("Limit", "string", 0, _quota_part("limits")),
    ],
    "jobs": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, _job_status),
        ("Completions", "string", 0, _job_completions),
        ("Duration", "string", 0, _job_duration),
        _AGE,
    ],
    "cronjobs": [
        ("Name", "string", 0, _name),
        ("Schedule", "string", 0, lambda o, _: (o.get("spec") or {}).get("schedule", "")),
        ("Timezone", "string", 0, lambda o, _: (o.get("spec") or {}).get("timeZone", "<none>")),
        ("Suspend", "boolean", 0, lambda o, _: bool((o.get("spec") or {}).get("suspend"))),
        ("Active", "integer", 0, lambda o, _: len((o.get("status") or {}).get("active") or [])),
        _AGE,
    ],
    "deployments": [
        ("Name", "string", 0, _name),
        ("Ready", "string", 0, _ready_of_desired),
        ("Up-to-date", "integer", 0, _status_int("updatedReplicas")),
        ("Available", "integer", 0, _status_int("availableReplicas")),
        _AGE,
    ],
    "replicasets": [
        ("Name", "string", 0, _name),
        ("Desired", "integer", 0, lambda o, _: int((o.get("spec") or {}).get("replicas", 1))),
        ("Current", "integer", 0, _status_int("replicas")),
        ("Ready", "integer", 0, _status_int("readyReplicas")),
        _AGE,
    ],
    "statefulsets": [("Name", "string", 0, _name), ("Ready", "string", 0, _ready_of_desired), _AGE],
    # The CRDs' additionalPrinterColumns (karpenter.sh_nodepools.yaml, karpenter.sh_nodeclaims.yaml, v1.14.1).
    "nodepools": [
        ("Name", "string", 0, _name),
        ("NodeClass", "string", 0, lambda o, _: o["spec"]["template"]["spec"]["nodeClassRef"]["name"]),
        ("Nodes", "string", 0, lambda o, _: str((o.get("status") or {}).get("nodes", ""))),
        ("Ready", "string", 0, lambda o, _: _condition(o, "Ready")),
        _AGE,
        ("Weight", "integer", 1, lambda o, _: (o.get("spec") or {}).get("weight")),
        ("CPU", "string", 1, lambda o, _: ((o.get("status") or {}).get("resources") or {}).get("cpu", "")),
        ("Memory", "string", 1, lambda o, _: ((o.get("status") or {}).get("resources") or {}).get("memory", "")),
    ],
    "nodeclaims": [
        ("Name", "string", 0, _name),
        (
            "Type",
            "string",
            0,
            lambda o, _: (o["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type", ""),
        ),
        (
            "Capacity",
            "string",
            0,
            lambda o, _: (o["metadata"].get("labels") or {}).get("karpenter.sh/capacity-type", ""),
        ),
        ("Zone", "string", 0, lambda o, _: (o["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone", "")),
        ("Node", "string", 0, lambda o, _: (o.get("status") or {}).get("nodeName", "")),
        ("Ready", "string", 0, lambda o, _: _condition(o, "Ready")),
        _AGE,
        ("NodePool", "string", 1, lambda o, _: (o["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")),
    ],
    "configmaps": [
        ("Name", "string", 0, _name),
        ("Data", "string", 0, lambda o, _: str(len(o.get("data") or {}))),
        _AGE,
    ],
}


def table(rt: ResourceType, objects: list[Json], list_meta: Json, include: str, now: datetime) -> Json:
    columns = COLUMNS.get(rt.plural, [("Name", "string", 0, _name), _AGE])
    rows = []
    for obj in objects:
        row: Json = {"cells": [cell(obj, now) for _, _, _, cell in columns]}
        if include == "Object":
            row["object"] = {"kind": rt.kind, "apiVersion": rt.api_version, **copy.deepcopy(obj)}
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": copy.deepcopy(obj["metadata"]),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, kind, priority, _ in columns
        ],
        "rows": rows,
    }
