"""What the real server's admission plugins and controllers do to pods, quotas and disruption budgets:

- pod defaulting: a limit without a request defaults the request (this is how extended resources get requests);
- ResourceQuota admission: a pod that would push ``used`` over ``hard`` is refused with 403 ``exceeded quota``;
  extended resources are enforced only as ``requests.<name>``, a bare ``nvidia.com/gpu`` or ``limits.nvidia.com/gpu``
  key is stored and never enforced; lowering ``hard`` never touches running pods; a scoped quota counts and
  constrains only the pods matching all its scopes;
- quota ``status`` (``hard`` mirrors ``spec.hard``, ``used`` from the non-terminal pods in the namespace);
- PodDisruptionBudget ``status`` and the eviction decision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from .errors import forbidden, internal_error, too_many_requests
from .quantity import DECIMAL_SI, format_quantity, parse, parse_quantity
from .selectors import labels_match, match_expressions
from .validation import is_extended_resource

Json = dict[str, Any]
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def default_pod(pod: Json) -> None:
    """API defaulting on create: requests default to limits, the pod starts Pending (status is the kubelet's)."""
    spec = pod.setdefault("spec", {})
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            resources = container.get("resources") or {}
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)
                container["resources"] = resources
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")


def pod_grace(pod: Json, delete_options: Json) -> int | None:
    """The pod strategy's CheckGracefulDelete: the request's ``gracePeriodSeconds``, else the pod's
    ``terminationGracePeriodSeconds`` (30 when a seeded pod lacks it, as API defaulting would have set it); a
    negative value is 1. None (delete at once) for a pod on no node or one that has finished."""
    spec, phase = pod.get("spec") or {}, (pod.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in TERMINAL_PHASES:
        return None
    requested = delete_options.get("gracePeriodSeconds")
    grace = int(requested) if requested is not None else int(spec.get("terminationGracePeriodSeconds", 30))
    return 1 if grace < 0 else grace


Amount = tuple[Fraction, str]  # a quantity's value and its format family, which decides how it prints


def _add(totals: dict[str, Amount], name: str, value: object) -> None:
    """``Quantity.Add``: a zero quantity takes the format of what is added to it."""
    amount, fmt, _ = parse_quantity(value)
    current, current_fmt = totals.get(name, (Fraction(0), DECIMAL_SI))
    totals[name] = (current + amount, fmt if current == 0 else current_fmt)


def _container_totals(pod: Json, kind: str) -> dict[str, Amount]:
    """Effective pod requests/limits: sum over containers, at least the largest init container (as the scheduler
    and quota count them)."""
    spec = pod.get("spec") or {}
    totals: dict[str, Amount] = {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get(kind) or {}).items():
            _add(totals, name, value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get(kind) or {}).items():
            amount, fmt, _ = parse_quantity(value)
            if amount > totals.get(name, (Fraction(0), DECIMAL_SI))[0]:
                totals[name] = (amount, fmt)
    return totals


def is_terminal(pod: Json) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def pod_usage(pod: Json) -> dict[str, Amount]:
    """The quota resource names a pod counts against, as the real pod evaluator reports them."""
    if is_terminal(pod):
        return {}
    one = (Fraction(1), DECIMAL_SI)
    usage: dict[str, Amount] = {"pods": one, "count/pods": one}
    requests, limits = _container_totals(pod, "requests"), _container_totals(pod, "limits")
    for name, value in requests.items():
        if name in _COMPUTE:
            usage[name] = usage[f"requests.{name}"] = value
        elif is_extended_resource(name) or name.startswith("hugepages-"):
            usage[f"requests.{name}"] = value
    for name, value in limits.items():
        if name in _COMPUTE:
            usage[f"limits.{name}"] = value
    return usage


def is_enforced(key: str) -> bool:
    """Whether the pod evaluator tracks a quota key at all: never a bare or ``limits.`` extended resource."""
    if key in ("pods", "count/pods", *_COMPUTE) or key in {
        f"{p}.{c}" for p in ("requests", "limits") for c in _COMPUTE
    }:
        return True
    return key.startswith("requests.") and (is_extended_resource(key[len("requests.") :]) or "hugepages-" in key)


def _format(amount: Amount | None) -> str:
    return format_quantity(*(amount or (Fraction(0), DECIMAL_SI)))


def namespace_usage(pods: Iterable[Json]) -> dict[str, Amount]:
    used: dict[str, Amount] = {}
    for pod in pods:
        for key, (value, fmt) in pod_usage(pod).items():
            current, current_fmt = used.get(key, (Fraction(0), DECIMAL_SI))
            used[key] = (current + value, fmt if current == 0 else current_fmt)
    return used


# Quota scopes (pkg/quota/v1/evaluator/core/pods.go podMatchesScopeFunc) ---------------------------------------


def qos_class(pod: Json) -> str:
    """qos.ComputePodQOS: only cpu and memory count, so a pod asking for GPUs alone is BestEffort."""
    spec = pod.get("spec") or {}
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for kind, totals in (("requests", requests), ("limits", limits)):
            for name, value in (resources.get(kind) or {}).items():
                if name in ("cpu", "memory") and parse(value) > 0:
                    totals[name] = totals.get(name, Fraction(0)) + parse(value)
        found = {n for n, v in (resources.get("limits") or {}).items() if n in ("cpu", "memory") and parse(v) > 0}
        guaranteed = guaranteed and found == {"cpu", "memory"}
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(n) == v for n, v in requests.items()) and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def scope_selectors(quota: Json) -> list[Json]:
    """getScopeSelectorsFromQuota: each of ``scopes`` as an ``Exists`` requirement, then ``scopeSelector``'s."""
    spec = quota.get("spec") or {}
    selectors: list[Json] = [{"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []]
    return selectors + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def _cross_namespace_affinity(spec: Json) -> bool:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [
            (t or {}).get("podAffinityTerm") or {}
            for t in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def _scope_matches(selector: Json, pod: Json) -> bool:
    spec = pod.get("spec") or {}
    scope = str(selector.get("scopeName"))
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = deadline is not None and int(deadline) >= 0
        return terminating == (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        return (qos_class(pod) == "BestEffort") == (scope == "BestEffort")
    if scope == "PriorityClass":
        # A label selector over {"PriorityClass": <name>}: the key is always there, even for an empty name, so
        # NotIn matches a pod without a class and DoesNotExist matches no pod; Exists means a non-empty name.
        name, operator, values = spec.get("priorityClassName") or "", selector.get("operator"), selector.get("values")
        if operator == "Exists":
            return bool(name)
        if operator == "In":
            return name in (values or [])
        if operator == "NotIn":
            return name not in (values or [])
        return False
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec)
    return False


def quota_matches(quota: Json, pod: Json) -> bool:
    """A scoped quota counts (and constrains) only the pods matching every one of its scopes."""
    return all(_scope_matches(selector, pod) for selector in scope_selectors(quota))


#: Object-count evaluators registered under a legacy name besides ``count/<resource>`` (core/registry.go).
_LEGACY_COUNTS = {
    "configmaps": "configmaps",
    "resourcequotas": "resourcequotas",
    "replicationcontrollers": "replicationcontrollers",
    "secrets": "secrets",
    "services": "services",
    "persistentvolumeclaims": "persistentvolumeclaims",
}
#: Keys of the service and claim evaluators; the emulator serves neither, so their usage is always zero.
_ALWAYS_ZERO = frozenset({"services.nodeports", "services.loadbalancers", "requests.storage"})


def _counted(key: str) -> str | None:
    """The storage key (``pods``, ``leases.coordination.k8s.io``) an object-count quota key counts, if any."""
    if key.startswith("count/"):
        return key[len("count/") :]
    return _LEGACY_COUNTS.get(key)


def quota_status(quota: Json, pods: Iterable[Json], counts: Mapping[str, int] | None = None) -> Json:
    """What the quota controller writes: ``used`` only for the keys an evaluator matches (``quota.Mask`` of the
    evaluators' usage by ``hard``), so a bare or ``limits.`` extended resource never appears in ``used``."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    usage = namespace_usage(p for p in pods if quota_matches(quota, p))
    scoped = bool(scope_selectors(quota))
    used: Json = {}
    for key in hard:
        if is_enforced(key):
            used[key] = _format(usage.get(key))
        elif key in _ALWAYS_ZERO:
            used[key] = "0"
        elif (counted := _counted(key)) is not None:
            # The generic object-count evaluator matches no scope, so a scoped quota counts no such object.
            used[key] = "0" if scoped else str((counts or {}).get(counted, 0))
    # Empty maps are omitted (omitempty), as in the controller's JSON.
    return {part: values for part, values in (("hard", hard), ("used", used)) if values}


def admit_pod(pod: Json, quotas: Iterable[Json], pods: Iterable[Json]) -> None:
    """Refuse a new pod that would exceed any quota of its namespace (403, the real message)."""
    name = (pod.get("metadata") or {}).get("name", "")
    requested = pod_usage(pod)
    pods = list(pods)
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        if not quota_matches(quota, pod):
            continue  # evaluator.Matches: neither counted nor constrained (no "must specify") by this quota
        used = namespace_usage(p for p in pods if quota_matches(quota, p))
        hard = (quota.get("spec") or {}).get("hard") or {}
        enforced = sorted(k for k in hard if is_enforced(k))
        missing = _missing_requests(pod, enforced)
        if missing:
            raise forbidden("pods", "", name, f"failed quota: {quota['metadata']['name']}: must specify {missing}")
        exceeded = [
            k
            for k in enforced
            if k in requested and used.get(k, (Fraction(0), ""))[0] + requested[k][0] > parse(hard[k])
        ]
        if exceeded:

            def listing(values: dict[str, Amount], keys: list[str] = exceeded) -> str:
                return ",".join(f"{k}={_format(values.get(k))}" for k in keys)

            limited = ",".join(f"{k}={hard[k]}" for k in exceeded)
            why = (
                f"exceeded quota: {quota['metadata']['name']}, requested: {listing(requested)}, "
                f"used: {listing(used)}, limited: {limited}"
            )
            raise forbidden("pods", "", name, why)


def _missing_requests(pod: Json, enforced: list[str]) -> str:
    """Compute quotas (cpu, memory) require every container to state the constrained value."""
    missing = []
    for key in enforced:
        kind, _, resource = key.rpartition(".")
        if resource not in ("cpu", "memory") or (kind or "requests") not in ("requests", "limits"):
            continue
        section = kind or "requests"
        lacking = [
            c.get("name", "")
            for c in (pod.get("spec") or {}).get("containers") or []
            if resource not in ((c.get("resources") or {}).get(section) or {})
        ]
        if lacking:
            missing.append(f"{section}.{resource} for: {','.join(lacking)}")
    return "; ".join(sorted(set(missing)))


# Disruption budgets and eviction -------------------------------------------------------------------------------


def is_healthy(pod: Json) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _selects(pdb: Json, pod: Json) -> bool:
    """policy/v1: a missing selector matches no pod, an empty one every pod of the namespace."""
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return labels_match(match_expressions(selector), (pod.get("metadata") or {}).get("labels"))


def _matching(pdb: Json, pods: Iterable[Json]) -> list[Json]:
    return [p for p in pods if _selects(pdb, p) and not is_terminal(p)]


def _resolve(value: Any, expected: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = Fraction(int(value[:-1]), 100) * expected
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def pdb_status(pdb: Json, pods: Iterable[Json]) -> Json:
    matching = _matching(pdb, pods)
    spec = pdb.get("spec") or {}
    expected = len(matching)
    healthy = sum(1 for p in matching if is_healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _resolve(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = _resolve(spec.get("minAvailable", 1), expected, round_up=True)
    return {
        "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }


def matching_pdbs(pod: Json, pdbs: Iterable[Json]) -> list[Json]:
    return [b for b in pdbs if _selects(b, pod)]


def check_eviction(pod: Json, pdbs: Iterable[Json], pods: Iterable[Json]) -> None:
    """Raise the real eviction refusals; return when the pod may be deleted."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed", "Pending") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return  # pods that are not running are never protected by a budget
    budgets = matching_pdbs(pod, pdbs)
    if len(budgets) > 1:
        raise internal_error(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    if not budgets:
        return
    budget = budgets[0]
    status = pdb_status(budget, pods)
    # An unhealthy pod may go as long as the budget is met (unhealthyPodEvictionPolicy IfHealthyBudget).
    if not is_healthy(pod) and status["currentHealthy"] >= status["desiredHealthy"]:
        return
    if status["disruptionsAllowed"] > 0:
        return
    cause = {
        "reason": "DisruptionBudget",
        "message": f"The disruption budget {budget['metadata']['name']} needs {status['desiredHealthy']} healthy pods "
        f"and has {status['currentHealthy']} currently",
    }
    raise too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.", 0, [cause])
