"""A small Karpenter (kubernetes-sigs/karpenter v1.14.1) inside the kube emulator, moved by the emulator's clock.

It runs as one of :attr:`.cluster.Cluster.controllers`, so whatever is due has happened before any request is
answered: a person who deletes a NodeClaim and never polls still sees it drained and gone when its time comes.
What it follows, by source file (all under ``pkg/`` of kubernetes-sigs/karpenter at v1.14.1):

- provisioning (``controllers/provisioning/provisioner.go`` ``Create``, ``scheduling/scheduler.go``
  ``filterByRemainingResources``/``subtractMax``): a pending pod that fits a NodePool's requirements and tolerates
  its taints (not its ``startupTaints``) gets a NodeClaim of the smallest instance type that holds it. The pool's
  ``spec.limits`` filter instance types: one is viable only if, for every limited resource, its capacity (0 when it
  has none) is at most what remains, so ``cpu: "0"`` blocks every type but ``nvidia.com/gpu: "0"`` alone leaves the
  types without GPUs; ``nodes`` remaining at zero blocks the pool (``resources.Node``, enforced since v1.11); and a
  pool whose usage already exceeds a limit launches nothing (``Limits.ExceededBy``). Pending pods go first to
  in-flight claims that have room, as the scheduler packs them;
- registration (``controllers/nodeclaim/lifecycle/registration.go``, ``liveness.go``): the claim's Node appears
  ``boot_s`` after launch, Ready, labelled ``karpenter.sh/nodepool`` and with the termination finalizer, and the
  pods nominated to it are bound (what kube-scheduler does); a claim listed in ``never_register`` keeps
  ``Registered`` Unknown, and is deleted after ``registrationTimeout`` (15 min) as Karpenter's liveness does;
- termination (``controllers/nodeclaim/lifecycle/termination.go``, ``controllers/node/termination/controller.go``,
  ``terminator/terminator.go``, ``utils/pod/scheduling.go``): a NodeClaim or its Node deleted through the API keeps
  ``karpenter.sh/termination`` until the model has tainted the node ``karpenter.sh/disrupted:NoSchedule`` and
  drained it through the Eviction API (a PDB's 429 is retried on the next pass). A pod annotated
  ``karpenter.sh/do-not-disrupt: "true"`` is never evicted and stalls the drain. With
  ``spec.terminationGracePeriod`` on the claim, each pod is deleted at ``deadline - its
  terminationGracePeriodSeconds`` with the grace that remains (at least 1 s), PDBs and do-not-disrupt bypassed.
  Drained (or never registered), the instance takes ``instance_stop_s`` to stop (``awaitInstanceTermination``),
  then the Node and the claim lose their finalizers and are gone;
- the NodePool counter (``controllers/nodepool/counter/controller.go``, ``controllers/state/cluster.go``
  ``updateNodePoolResources``): ``status.resources`` is cpu, memory, pods, ephemeral-storage and nodes at 0 plus
  the capacity of the pool's claims not being deleted, ``status.nodes`` their count.

Not modelled: consolidation, drift, expiry (``expireAfter``), disruption budgets (validated, not applied: the
budgets gate Karpenter's own disruption, not a user's delete), static pools' provisioning (``spec.replicas`` is
validated, no claims are made for it), DaemonSet pods evicted after the others (all go together), topology,
affinity beyond ``nodeSelector`` and required node affinity ``In``, volume detachment, the cloud provider's capacity
errors, Events.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from . import seed
from .cluster import Cluster, resource_type, timestamp
from .errors import ApiError
from .quantity import BINARY_SI, DECIMAL_SI, format_quantity, parse
from .verbs import Api, WriteOptions

Json = dict[str, Any]
GROUP = "karpenter.sh"
API_VERSION = f"{GROUP}/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
TERMINATION_FINALIZER = "karpenter.sh/termination"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
TERMINATION_TIME = "karpenter.sh/nodeclaim-termination-timestamp"
DISRUPTED_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
#: liveness.go: a launched claim whose node has not registered by then is deleted.
REGISTRATION_TIMEOUT = timedelta(minutes=15)
#: counter/controller.go BaseResources: always reported, 0 when the pool has nothing.
BASE_RESOURCES = ("cpu", "ephemeral-storage", "memory", "nodes", "pods")
#: The model's resolution when it catches up on time nobody looked at (Karpenter requeues within seconds).
STEP = timedelta(seconds=1)
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})


@dataclass(frozen=True)
class InstanceType:
    name: str
    cpu: int
    memory_gi: int
    gpus: int = 0
    gpu_resource: str = seed.GPU

    @property
    def capacity(self) -> dict[str, Fraction]:
        found = {
            "cpu": Fraction(self.cpu),
            "memory": Fraction(self.memory_gi * 2**30),
            "pods": Fraction(110),
            "ephemeral-storage": Fraction(100 * 2**30),
        }
        if self.gpus:
            found[self.gpu_resource] = Fraction(self.gpus)
        return found


#: A few EC2 types, smallest first (the model launches the first that fits: Karpenter's cheapest offering).
CATALOGUE: tuple[InstanceType, ...] = (
    InstanceType("m7i.xlarge", 4, 16),
    InstanceType("m7i.4xlarge", 16, 64),
    InstanceType("g6e.xlarge", 4, 32, 1),
    InstanceType("g6e.12xlarge", 48, 384, 4),
    InstanceType("p5.48xlarge", 192, 2048, 8),
)


def _duration(text: str) -> timedelta:
    """A Go duration of the CRD's pattern (``1h30m``, ``90s``)."""
    seconds = sum(
        int(amount) * {"h": 3600, "m": 60, "s": 1}[unit] for amount, unit in re.findall(r"([0-9]+)(h|m|s)", text)
    )
    return timedelta(seconds=seconds)


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _requests(pod: Json) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Fraction(0)) + parse(value)
    return total


def _tolerates(pod: Json, taint: Json) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists" and (not toleration.get("key") or toleration["key"] == taint["key"]):
            return True
        if toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _allows(requirement: Json, value: str | None) -> bool:
    operator, values = requirement["operator"], requirement.get("values") or []
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound = int(values[0])
    return {"Gt": int(value) > bound, "Lt": int(value) < bound, "Gte": int(value) >= bound, "Lte": int(value) <= bound}[
        operator
    ]


def _pod_terms(pod: Json) -> list[tuple[str, list[str]]]:
    """What a pod demands of its node's labels: its nodeSelector and the ``In`` terms of its first required node
    affinity term, as (key, allowed values)."""
    spec = pod.get("spec") or {}
    terms = [(key, [value]) for key, value in (spec.get("nodeSelector") or {}).items()]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for expression in ((required.get("nodeSelectorTerms") or [{}])[0] or {}).get("matchExpressions") or []:
        if expression.get("operator") == "In":
            terms.append((expression["key"], list(expression.get("values") or [])))
    return terms


@dataclass
class Karpenter:
    """The model, attached to one cluster. ``boot_s``: from launch to a Ready, registered Node."""

    cluster: Cluster
    boot_s: float = 60.0
    #: From a drained node to its instance gone (EC2 shutting-down): the Node and claim stay until then.
    instance_stop_s: float = 30.0
    catalogue: tuple[InstanceType, ...] = CATALOGUE
    #: Claims whose node never registers (kubelet never joins): they stay NotReady until liveness deletes them.
    never_register: set[str] = field(default_factory=set)
    #: Emulated time: with a start, the cluster's clock is the model's and moves only by :meth:`advance`.
    start: datetime | None = None
    #: Pods (namespace, name) -> the claim they wait for, as Karpenter's cluster state nominates them.
    _nominated: dict[tuple[str, str], str] = field(default_factory=dict)
    _busy: bool = False
    #: When the model last looked (its catch-up starts there).
    _last: datetime | None = None
    #: Claims whose drain is done (or that had no node): when their instance was told to terminate.
    _stopping: dict[str, datetime] = field(default_factory=dict)
    #: Claims being drained: when the last of their terminating pods will be gone.
    _drain_ends: dict[str, datetime] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.api = Api(self.cluster)
        self.cluster.controllers.append(self.reconcile)
        if self.start is not None:
            self._now = self.start
            self.cluster.now = lambda: self._now

    def advance(self, seconds: float) -> None:
        """Move emulated time on (only with ``start``); what falls due happens before the next answer."""
        assert self.start is not None, "advance needs a Karpenter made with start="
        self.cluster.settle()  # what is due now happens now, not at the later time
        self._now += timedelta(seconds=seconds)
        self.cluster.settle()

    def claims(self, pool: str) -> list[Json]:
        """The pool's NodeClaims, as stored now (after everything due)."""
        self.cluster.settle()
        return [
            c
            for c in self.cluster.list("nodeclaims", api_version=API_VERSION)
            if (c["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) == pool
        ]

    def detach(self) -> None:
        if self.reconcile in self.cluster.controllers:
            self.cluster.controllers.remove(self.reconcile)

    # The loop -------------------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """Everything due at the cluster's ``now``: called by ``Cluster.settle`` before every answer.

        While work is under way (a claim launching or being deleted, a pod waiting), the model catches up on the
        time since it last looked in steps of :data:`STEP`, with the cluster's clock set to each: a drain nobody
        watched has still evicted, waited and finished at the times it would have, to the second."""
        if self._busy:
            return  # the model's own writes settle the cluster again
        self._busy = True
        clock = self.cluster.now
        try:
            with self.cluster.lock:
                target = clock()
                moment = self._last or target
                try:
                    while moment + STEP < target and self._under_way():
                        moment += STEP
                        self.cluster.now = lambda at=moment: at
                        self.cluster.expire_pods()
                        self._pass(moment)
                finally:
                    self.cluster.now = clock
                self.cluster.expire_pods()
                self._pass(target)
                self._last = target
        finally:
            self._busy = False

    def _under_way(self) -> bool:
        return bool(self._nominated) or any(
            c["metadata"].get("deletionTimestamp") or not (c.get("status") or {}).get("nodeName")
            for c in self._claims()
        )

    def _pass(self, now: datetime) -> None:
        pods = resource_type("pods")
        for key in list(self._nominated):  # a nominated pod deleted or placed another way waits for nothing
            pod = self.cluster.stored(pods, *key)
            if pod is None or (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                del self._nominated[key]
        self._terminate(now)
        self._liveness(now)
        self._register(now)
        self._provision(now)
        self._count()

    def _claims(self) -> list[Json]:
        return list(self.cluster.ordered(resource_type("nodeclaims", API_VERSION)))

    def _pools(self) -> list[Json]:
        return list(self.cluster.ordered(resource_type("nodepools", API_VERSION)))

    def seed_claim(self, pool: str, instance_type: str = "p5.48xlarge", *, registered: bool = True) -> Json:
        """A claim of ``pool`` launched now, its Node already registered and Ready (as if it booted long ago), or
        never registering: for seeding a world without waiting for a pending pod. Limits are not checked (the
        claim predates them). Returns the stored claim."""
        with self.cluster.lock:
            stored = self.cluster.get("nodepools", pool, api_version=API_VERSION)
            if stored is None:
                raise KeyError(f"no NodePool {pool!r}")
            it = next(t for t in self.catalogue if t.name == instance_type)
            now = self.cluster.now()
            claim = self._launch(stored, it, now)
            name = claim["metadata"]["name"]
            if not registered:
                self.never_register.add(name)
                return claim
            node = self._node_for(claim, now)
            self.cluster.create(node, manager="kubelet")
            claim = self._registered(claim, node["metadata"]["name"], now)
            self.cluster.settle()
            return claim

    def register(self, claim: Json, node_name: str) -> Json:
        """The claim's node ``node_name`` (made by the caller) has registered: for a model that plays Karpenter
        itself with this one detached (the simulated week)."""
        self.never_register.discard(claim["metadata"]["name"])
        return self._registered(claim, node_name, self.cluster.now())

    def _registered(self, claim: Json, node_name: str, now: datetime) -> Json:
        status, stamp = claim.get("status") or {}, timestamp(now)
        updated = {**claim, "status": {**status, "nodeName": node_name}}
        updated["status"]["conditions"] = [
            _condition("Launched", "True", "Launched", status["conditions"][0]["lastTransitionTime"]),
            _condition("Registered", "True", "Registered", stamp),
            _condition("Initialized", "True", "Initialized", stamp),
            _condition("Ready", "True", "Ready", stamp),
        ]
        return self.cluster.put(updated)

    # Provisioning ---------------------------------------------------------------------------------------------

    def _usage(self, pool: str) -> dict[str, Fraction]:
        """state/cluster.go updateNodePoolResources: claims not marked for deletion, with ``nodes`` 1 each."""
        used: dict[str, Fraction] = {}
        for claim in self._claims():
            meta = claim["metadata"]
            if (meta.get("labels") or {}).get(NODEPOOL_LABEL) != pool or meta.get("deletionTimestamp"):
                continue
            capacity = (claim.get("status") or {}).get("capacity") or {}
            for name, value in {**capacity, "nodes": 1}.items():
                used[name] = used.get(name, Fraction(0)) + parse(value)
        return used

    def _viable(self, pool: Json) -> list[InstanceType]:
        spec = pool["spec"]
        requirements = spec["template"]["spec"].get("requirements") or []
        allowed = [
            it
            for it in self.catalogue
            if all(
                _allows(r, it.name if r["key"] == INSTANCE_TYPE_LABEL else str(it.gpus))
                for r in requirements
                if r["key"] in (INSTANCE_TYPE_LABEL, "karpenter.k8s.aws/instance-gpu-count")
            )
        ]
        limits = {name: parse(value) for name, value in (spec.get("limits") or {}).items()}
        used = self._usage(pool["metadata"]["name"])
        if any(used.get(name, Fraction(0)) > limit for name, limit in limits.items()):
            return []  # provisioner.go Create: Limits.ExceededBy
        remaining = {name: limit - used.get(name, Fraction(0)) for name, limit in limits.items()}
        if "nodes" in remaining and remaining["nodes"] <= 0:
            return []  # scheduler.go: node limits exhausted
        return [
            it
            for it in allowed
            if all(it.capacity.get(name, Fraction(0)) <= left for name, left in remaining.items() if name != "nodes")
        ]

    def _pool_admits(self, pool: Json, pod: Json) -> bool:
        template = pool["spec"]["template"]
        labels = {**((template.get("metadata") or {}).get("labels") or {}), NODEPOOL_LABEL: pool["metadata"]["name"]}
        requirements = {r["key"]: r for r in template["spec"].get("requirements") or []}
        for key, values in _pod_terms(pod):
            if key in labels:
                if labels[key] not in values:
                    return False
            elif key in requirements:
                if not any(_allows(requirements[key], value) for value in values):
                    return False
            elif key not in (INSTANCE_TYPE_LABEL, CAPACITY_TYPE_LABEL, "kubernetes.io/arch", "kubernetes.io/os"):
                return False  # a label no node of this pool will carry
        taints = [t for t in template["spec"].get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
        return all(_tolerates(pod, taint) for taint in taints)

    def _pending(self) -> Iterator[Json]:
        """Pods the scheduler has no node for (utils/pod IsProvisionable: not DaemonSet pods, not mirror pods)."""
        for pod in self.cluster.ordered(resource_type("pods")):
            spec, meta = pod.get("spec") or {}, pod["metadata"]
            if spec.get("nodeName") or meta.get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
                continue
            if any(o.get("kind") in ("DaemonSet", "Node") for o in meta.get("ownerReferences") or []):
                continue
            yield pod

    def _schedule(self, pod: Json) -> bool:
        """kube-scheduler's part, minimally: bind a pending pod to a Ready, schedulable node that carries the labels
        it selects, whose NoSchedule/NoExecute taints it tolerates, and whose allocatable its requests still fit.
        Otherwise it is marked Unschedulable (``PodScheduled`` False), which is what Karpenter reacts to."""
        pods_rt, wanted = resource_type("pods"), _requests(pod)
        for node in self.cluster.ordered(resource_type("nodes")):
            meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
            if meta.get("deletionTimestamp") or spec.get("unschedulable"):
                continue
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
                continue
            labels = meta.get("labels") or {}
            if not all(labels.get(key) in values for key, values in _pod_terms(pod)):
                continue
            taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
            if not all(_tolerates(pod, taint) for taint in taints):
                continue
            free = {k: parse(v) for k, v in (status.get("allocatable") or {}).items()}
            for other in self.cluster.ordered(pods_rt):
                if (other.get("spec") or {}).get("nodeName") != meta["name"]:
                    continue
                if (other.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                for k, v in _requests(other).items():
                    free[k] = free.get(k, Fraction(0)) - v
            if all(free.get(k, Fraction(0)) >= v for k, v in wanted.items()):
                self._bind_pod(pod, meta["name"])
                return True
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions):
            unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            kept = [c for c in conditions if c.get("type") != "PodScheduled"]
            self.cluster.put({**pod, "status": {**pod.get("status", {}), "conditions": [*kept, unschedulable]}})
        return False

    def _bind_pod(self, pod: Json, node_name: str) -> None:
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        running = [
            *conditions,
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ]
        bound = {
            **pod,
            "spec": {**pod["spec"], "nodeName": node_name},
            "status": {**pod.get("status", {}), "phase": "Running", "conditions": running},
        }
        self.cluster.put(bound)

    def _provision(self, now: datetime) -> None:
        claims = {c["metadata"]["name"]: c for c in self._claims()}
        pools = sorted(self._pools(), key=lambda p: (-(p["spec"].get("weight") or 0), p["metadata"]["name"]))
        for pod in list(self._pending()):
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            nominated = claims.get(self._nominated.get(key, ""))
            if nominated is not None and not nominated["metadata"].get("deletionTimestamp"):
                continue
            self._nominated.pop(key, None)
            if self._schedule(pod):
                continue
            wanted = _requests(pod)
            for pool in pools:
                if "replicas" in pool["spec"] or pool["metadata"].get("deletionTimestamp"):
                    continue  # static pools are not provisioned by the model
                if not self._pool_admits(pool, pod):
                    continue
                name = self._room_in_flight(pool, wanted, claims, pod)
                if name is None:
                    fitting = [t for t in self._viable(pool) if self._holds(t, wanted, pod)]
                    if not fitting:
                        continue
                    claim = self._launch(pool, fitting[0], now)
                    name = claim["metadata"]["name"]
                    claims[name] = claim
                self._nominated[key] = name
                break

    def _holds(self, it: InstanceType, wanted: dict[str, Fraction], pod: Json) -> bool:
        capacity = it.capacity
        if any(capacity.get(name, Fraction(0)) < amount for name, amount in wanted.items()):
            return False
        gpu_terms = [values for key, values in _pod_terms(pod) if key == INSTANCE_TYPE_LABEL]
        return all(it.name in values for values in gpu_terms)

    def _room_in_flight(
        self, pool: Json, wanted: dict[str, Fraction], claims: dict[str, Json], pod: Json
    ) -> str | None:
        """An unregistered claim of this pool with room left for the pod (the scheduler's in-flight nodes)."""
        for name, claim in claims.items():
            meta, status = claim["metadata"], claim.get("status") or {}
            if (meta.get("labels") or {}).get(NODEPOOL_LABEL) != pool["metadata"]["name"]:
                continue
            if meta.get("deletionTimestamp") or status.get("nodeName"):
                continue
            capacity = {k: parse(v) for k, v in (status.get("capacity") or {}).items()}
            taken: dict[str, Fraction] = {}
            for (namespace, pod_name), target in self._nominated.items():
                other = self.cluster.stored(resource_type("pods"), namespace, pod_name)
                if target == name and other is not None:
                    for k, v in _requests(other).items():
                        taken[k] = taken.get(k, Fraction(0)) + v
            if all(capacity.get(k, Fraction(0)) - taken.get(k, Fraction(0)) >= v for k, v in wanted.items()):
                instance = (meta.get("labels") or {}).get(INSTANCE_TYPE_LABEL, "")
                if all(instance in values for key, values in _pod_terms(pod) if key == INSTANCE_TYPE_LABEL):
                    return name
        return None

    def _launch(self, pool: Json, it: InstanceType, now: datetime) -> Json:
        """provisioner.go Create, then lifecycle/launch.go: the claim, Launched, with its instance's capacity."""
        template, pool_name = pool["spec"]["template"], pool["metadata"]["name"]
        spec = dict(template["spec"])
        capacity = {k: _format(k, v) for k, v in it.capacity.items()}
        stamp = timestamp(now)
        claim: Json = {
            "apiVersion": API_VERSION,
            "kind": "NodeClaim",
            "metadata": {
                "name": f"{pool_name}-{''.join(secrets.choice('bcdfghjklmnpqrstvwxz2456789') for _ in range(5))}",
                "labels": {
                    **((template.get("metadata") or {}).get("labels") or {}),
                    NODEPOOL_LABEL: pool_name,
                    INSTANCE_TYPE_LABEL: it.name,
                    CAPACITY_TYPE_LABEL: "on-demand",
                },
                "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                "finalizers": [TERMINATION_FINALIZER],
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": "NodePool",
                        "name": pool_name,
                        "uid": pool["metadata"]["uid"],
                        "blockOwnerDeletion": True,
                    }
                ],
                "creationTimestamp": stamp,
            },
            "spec": {**spec, "resources": {"requests": {}}},
            "status": {
                "providerID": f"aws:///us-east-1a/i-{secrets.token_hex(8)}",
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    _condition("Launched", "True", "Launched", stamp),
                    _condition("Registered", "Unknown", "AwaitingReconciliation", stamp),
                    _condition("Initialized", "Unknown", "AwaitingReconciliation", stamp),
                    _condition("Ready", "Unknown", "AwaitingReconciliation", stamp),
                ],
            },
        }
        return self.cluster.create(claim, manager="karpenter")

    # Registration and liveness ----------------------------------------------------------------------------------

    def _register(self, now: datetime) -> None:
        nodes = resource_type("nodes")
        for claim in self._claims():
            meta, status = claim["metadata"], claim.get("status") or {}
            if meta.get("deletionTimestamp") or meta["name"] in self.never_register:
                continue
            if not status.get("nodeName"):
                launched = _when(meta["creationTimestamp"])
                if now < launched + timedelta(seconds=self.boot_s):
                    continue
                node = self._node_for(claim, now)
                self.cluster.create(node, manager="kubelet")
                status = self._registered(claim, node["metadata"]["name"], now)["status"]
            if self.cluster.stored(nodes, "", status["nodeName"]) is not None:
                self._bind(meta["name"], status["nodeName"])

    def _node_for(self, claim: Json, now: datetime) -> Json:
        meta, spec = claim["metadata"], claim["spec"]
        capacity = claim["status"]["capacity"]
        name = f"ip-10-0-{secrets.randbelow(250)}-{secrets.randbelow(250)}.ec2.internal"
        node = seed.gpu_node(
            name, labels={**meta["labels"], "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
        )
        node["metadata"]["finalizers"] = [TERMINATION_FINALIZER]
        node["metadata"]["creationTimestamp"] = timestamp(now)
        node["spec"] = {"providerID": claim["status"]["providerID"]}
        taints = [dict(t) for t in spec.get("taints") or []]
        if taints:
            node["spec"]["taints"] = taints
        node["status"]["capacity"] = dict(capacity)
        node["status"]["allocatable"] = dict(capacity)
        return node

    def _bind(self, claim_name: str, node_name: str) -> None:
        """kube-scheduler's part: the pods nominated to the claim run on its node once it is Ready."""
        pods = resource_type("pods")
        for key, target in list(self._nominated.items()):
            if target != claim_name:
                continue
            del self._nominated[key]
            pod = self.cluster.stored(pods, *key)
            if pod is None or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            self._bind_pod(pod, node_name)

    def _liveness(self, now: datetime) -> None:
        for claim in self._claims():
            meta, status = claim["metadata"], claim.get("status") or {}
            if meta.get("deletionTimestamp") or status.get("nodeName"):
                continue
            if now >= _when(meta["creationTimestamp"]) + REGISTRATION_TIMEOUT:
                self._delete("nodeclaims", meta["name"])

    # Termination ------------------------------------------------------------------------------------------------

    def _delete(self, plural: str, name: str) -> None:
        rt = resource_type(plural, API_VERSION if plural == "nodeclaims" else None)
        try:
            self.api.delete(rt, "", name, None, WriteOptions(manager="karpenter"))
        except ApiError as error:
            if error.code != 404:
                raise

    def _terminate(self, now: datetime) -> None:
        nodes, claim_rt = resource_type("nodes"), resource_type("nodeclaims", API_VERSION)
        claims_by_node = {
            (c.get("status") or {}).get("nodeName"): c
            for c in self._claims()
            if (c.get("status") or {}).get("nodeName")
        }
        # node/termination/controller.go: a Node deleted through the API deletes its claim first.
        for node in list(self.cluster.ordered(nodes)):
            claim = claims_by_node.get(node["metadata"]["name"])
            if node["metadata"].get("deletionTimestamp") and claim and not claim["metadata"].get("deletionTimestamp"):
                self._delete("nodeclaims", claim["metadata"]["name"])
        for listed in self._claims():
            claim, meta = listed, listed["metadata"]
            if not meta.get("deletionTimestamp") or TERMINATION_FINALIZER not in (meta.get("finalizers") or []):
                continue
            grace = claim["spec"].get("terminationGracePeriod")
            if grace and TERMINATION_TIME not in (meta.get("annotations") or {}):
                # lifecycle/controller.go: the deadline the drain works to, on the claim for all to see.
                deadline = _when(meta["deletionTimestamp"]) + _duration(grace)
                annotations = {**(meta.get("annotations") or {}), TERMINATION_TIME: timestamp(deadline)}
                claim = self.cluster.put({**claim, "metadata": {**meta, "annotations": annotations}})
                meta = claim["metadata"]
            node_name = (claim.get("status") or {}).get("nodeName")
            node = self.cluster.stored(nodes, "", node_name) if node_name else None
            if node is not None and meta["name"] not in self._stopping and not self._drained(claim, node, now):
                continue
            # awaitInstanceTermination: the instance is told to stop once, the finalizers come off when it is gone.
            # The drain ended when its last pod went, even if nobody looked then: time, not polls, moves it.
            if meta["name"] not in self._stopping:
                stopping = min(now, self._drain_ends.pop(meta["name"], now))
                self._stopping[meta["name"]] = stopping
                conditions = [
                    *(claim.get("status") or {}).get("conditions", []),
                    _condition("InstanceTerminating", "True", "InstanceTerminating", timestamp(stopping)),
                ]
                self.cluster.put({**claim, "status": {**claim.get("status", {}), "conditions": conditions}})
            stopping = self._stopping[meta["name"]]
            if now < stopping + timedelta(seconds=self.instance_stop_s):
                continue
            del self._stopping[meta["name"]]
            if node is not None:
                self._finish(nodes, self.cluster.require(nodes, "", node["metadata"]["name"]))
            self._finish(claim_rt, self.cluster.require(claim_rt, "", meta["name"]))

    def _finish(self, rt: Any, obj: Json) -> None:
        """The finalizer comes off: the deletion the API server held completes."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            self._delete(rt.plural, meta["name"])
            obj = self.cluster.require(rt, "", meta["name"])
            meta = obj["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != TERMINATION_FINALIZER]
        if finalizers:
            self.cluster.put({**obj, "metadata": {**meta, "finalizers": finalizers}})
            return
        if rt.plural == "nodes":
            for pod in list(self.cluster.ordered(resource_type("pods"))):  # pod GC: pods of a gone node go with it
                if (pod.get("spec") or {}).get("nodeName") == meta["name"]:
                    self.cluster.remove(resource_type("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.cluster.remove(rt, "", meta["name"])

    def _drained(self, claim: Json, node: Json, now: datetime) -> bool:
        """terminator.go Drain: taint, delete pods due under terminationGracePeriod, evict the rest in groups."""
        taints = (node.get("spec") or {}).get("taints") or []
        if not any(t.get("key") == DISRUPTED_TAINT["key"] for t in taints):
            node = self.cluster.put(
                {**node, "spec": {**node.get("spec", {}), "taints": [*taints, dict(DISRUPTED_TAINT)]}}
            )
        if not node["metadata"].get("deletionTimestamp"):
            self._delete("nodes", node["metadata"]["name"])
        grace = claim["spec"].get("terminationGracePeriod")
        deadline = _when(claim["metadata"]["deletionTimestamp"]) + _duration(grace) if grace else None
        pods_rt = resource_type("pods")
        waiting = [
            p
            for p in self.cluster.ordered(pods_rt)
            if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not _tolerates(p, DISRUPTED_TAINT)
            and "kubernetes.io/config.mirror" not in (p["metadata"].get("annotations") or {})
        ]
        for pod in waiting if deadline else []:
            meta = pod["metadata"]
            delete_at = deadline - timedelta(seconds=int(pod["spec"].get("terminationGracePeriodSeconds", 30)))
            if now >= delete_at and (not meta.get("deletionTimestamp") or _when(meta["deletionTimestamp"]) > deadline):
                seconds = max(int((deadline - now).total_seconds()), 1)
                self.api.delete(
                    pods_rt,
                    meta["namespace"],
                    meta["name"],
                    {"gracePeriodSeconds": seconds},
                    WriteOptions(manager="karpenter"),
                )
        # terminator.go evicts non-daemon pods before DaemonSet pods; the model evicts both together (not modelled).
        if waiting:
            for pod in waiting:
                meta = pod["metadata"]
                if meta.get("deletionTimestamp") or (meta.get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
                    continue  # evicted already, or Karpenter will not evict it (utils/pod IsEvictable)
                eviction = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                }
                try:
                    self.api.evict(meta["namespace"], meta["name"], eviction, WriteOptions(manager="karpenter"))
                except ApiError as error:
                    if error.code not in (404, 429):
                        raise  # a PDB's 429 is retried on the next pass, as the eviction queue does
            ends = [self.cluster.pod_gone_at(p["metadata"]["namespace"], p["metadata"]["name"]) for p in waiting]
            if all(end is not None for end in ends):  # every pod on its way out: the drain ends with the last
                self._drain_ends[claim["metadata"]["name"]] = max(end for end in ends if end is not None)
            return False
        return True

    # The NodePool counter ---------------------------------------------------------------------------------------

    def _count(self) -> None:
        for pool in self._pools():
            used = self._usage(pool["metadata"]["name"])
            resources = {name: _format(name, used.get(name, Fraction(0))) for name in BASE_RESOURCES}
            resources.update({name: _format(name, value) for name, value in used.items() if name not in resources})
            status = {**(pool.get("status") or {}), "resources": resources, "nodes": int(used.get("nodes", 0))}
            if "conditions" not in status:  # nodepool/readiness: Ready once its NodeClass is (always, here)
                stamp = pool["metadata"]["creationTimestamp"]
                status["conditions"] = [
                    _condition(kind, "True", kind, stamp) for kind in ("NodeClassReady", "ValidationSucceeded", "Ready")
                ]
            if status != pool.get("status"):
                self.cluster.put({**pool, "status": status})


def _format(name: str, amount: Fraction) -> str:
    return format_quantity(amount, BINARY_SI if name in _BINARY_RESOURCES else DECIMAL_SI)


def _condition(kind: str, status: str, reason: str, stamp: str) -> Json:
    return {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": stamp}


def nodepool(
    name: str,
    *,
    limits: dict[str, Any] | None = None,
    taints: list[Json] | None = None,
    instance_types: list[str] | None = None,
    termination_grace: str | None = None,
    labels: dict[str, str] | None = None,
) -> Json:
    """A NodePool as its users write one for GPUs: EC2NodeClass ``default``, on-demand, the pool's taints."""
    requirements: list[Json] = [{"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]}]
    if instance_types:
        requirements.append({"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(instance_types)})
    template_spec: Json = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements,
    }
    if taints:
        template_spec["taints"] = taints
    if termination_grace:
        template_spec["terminationGracePeriod"] = termination_grace
    pool: Json = {
        "apiVersion": API_VERSION,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"metadata": {"labels": dict(labels or {})}, "spec": template_spec},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
        },
    }
    if limits is not None:
        pool["spec"]["limits"] = dict(limits)
    return pool


GPU_TAINT: Json = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def pending_gpu_pod(name: str, gpus: int = 1, namespace: str = "default", **options: Any) -> Json:
    """A GPU pod the scheduler could not place (Pending, no node), tolerating :data:`GPU_TAINT`."""
    pod = seed.gpu_pod(name, namespace, gpus=gpus, phase="Pending", **options)
    pod["spec"]["tolerations"] = [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    pod["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    return pod
