"""A project-written Kubernetes API server for tests and the demo sandbox (no kube-apiserver can be installed here).

The official ``kubernetes`` client and kubectl talk to it over real HTTP through a kubeconfig it writes
(``http://127.0.0.1:PORT``, a token user). What it does like the real server, and where it stops:

- core/v1 namespaces, nodes, pods (+ ``status``, ``eviction``), resourcequotas (+ ``status``), events, configmaps, secrets,
  limitranges (stored, not enforced); coordination.k8s.io/v1 leases; policy/v1 poddisruptionbudgets; events.k8s.io/v1 events (stored apart from core
  events: the real server converts between the two, the emulator does not);
- uid, creationTimestamp, one global resourceVersion; stale PUT/PATCH is 409 Conflict; Status bodies for 400, 401,
  403, 404, 405, 406, 409, 415, 422, 429, 500, 504; label and field selectors; limit/continue paging;
- bodies in JSON, YAML, or protobuf (what kubectl's ``create namespace|configmap|quota|pdb`` send; other kinds in
  protobuf are 415 as for a custom resource, see :mod:`.protobuf`); answers only in JSON (406 if not accepted);
- strategic merge, JSON merge, JSON patch and server-side apply with managedFields and conflicts;
- decoding against the official OpenAPI schemas of ``kubernetes-validate`` (type errors and strict unknown fields:
  400; unknown fields otherwise dropped with a Warning header) and semantic validation (422);
- ResourceQuota admission and status for pods (GPUs only as ``requests.<name>``), PDB status and eviction;
- quantities stored and returned in apimachinery's canonical form (``4000m`` -> ``4``, ``1024Mi`` -> ``1Gi``);
- quota scopes for pods (``scopes`` and ``scopeSelector``: Terminating, NotTerminating, BestEffort, NotBestEffort,
  PriorityClass, CrossNamespacePodAffinity); VolumeAttributesClass is refused with 422; scheduling.k8s.io/v1 PriorityClass
  objects are served and validated, but a pod's ``priorityClassName`` is not checked against them (no Priority
  admission, no preemption);
- apps/v1 deployments, replicasets, statefulsets (+ ``status``, ``scale`` as ``autoscaling/v1`` Scale) with minimal
  controllers (a Deployment's one ReplicaSet follows its replicas; ReplicaSets and StatefulSets create and gracefully
  delete pods to match, see :mod:`.apps`), and seeding of whole GPU workloads (:mod:`.workloads`);
- core/v1 serviceaccounts, pods/log (what whoever runs the pod wrote: the sandbox's job executor); batch/v1
  cronjobs and jobs (defaulted and validated; no controllers: nothing schedules or runs them by itself);
  rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles, clusterrolebindings, enforced for ServiceAccount
  tokens (:meth:`.server.KubeEmulator.issue_token`, :mod:`.rbac`); the kubeconfig's own token is the admin
  (limited only by ``allowed``);
- watches of a collection as JSON lines, found by polling the store (what ``kubectl wait`` and ``get -w`` need);
  no watch-list (``sendInitialEvents``: client-go falls back to list + watch), no watch of one named object;
- graceful deletion of pods: a DELETE or an eviction sets ``deletionTimestamp`` (now + grace) and
  ``deletionGracePeriodSeconds`` (the request's ``gracePeriodSeconds``, else the pod's
  ``terminationGracePeriodSeconds``, 30 when a seeded pod lacks it); the pod stays listed, Terminating and charged
  to quota until that time has passed on the emulator's clock, then it is gone; ``Cluster.pod_stop_s`` makes the
  containers exit sooner once told to stop, as real ones that handle SIGTERM do (tests set it short);
  grace 0, a pod on no node and a finished pod go at once; a second DELETE may only shorten the deadline;
  DeleteOptions preconditions (uid, resourceVersion) are 409 on a mismatch, on a DELETE and on an eviction's
  ``deleteOptions`` (after its budget check, as the real server orders them), ``metadata.uid`` in a patch is 422. The
  seeding API's ``Cluster.delete`` removes at once (a force delete);
- karpenter.sh/v1 NodePool and NodeClaim served from Karpenter's own CRD files (:mod:`.crd_schema`: pruning,
  defaults, schema and CEL rules, quantities kept as sent, no strategic merge patch), finalizers on every kind but
  pods and namespaces (``deletionTimestamp`` until the last one is removed), and a Karpenter model on the emulator's
  clock (:mod:`.karpenter`, the ``karpenter`` fixture);
- no garbage collection (deleting an owner leaves its dependents).

Entry points: the ``kube`` / ``kube_client`` fixtures (:mod:`.fixtures`), :func:`.fixtures.start_kube` for a
standalone server, the builders in :mod:`.seed`.
"""
