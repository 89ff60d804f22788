"""pytest fixtures for the kube emulator, and :func:`start_kube` for the demo sandbox.

The ``kube`` fixture gives each test an empty cluster (namespaces default, kube-system, kube-public,
kube-node-lease) behind one session-wide server, so startup costs nothing per test. Point the official client at it
with ``kubernetes.config.new_client_from_config(config_file=str(kube.kubeconfig))`` (or ``kube.api_client()``),
kubectl with ``--kubeconfig``, or anything else with ``KUBECONFIG``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.emulators.base import FaultKind, Faults, RequestLog, RunningServer, start

from . import karpenter as karpenter_model
from . import workloads
from .cluster import Cluster
from .server import KubeEmulator

Json = dict[str, Any]
CONTEXT = "gpu-jobs-emulator"


def write_kubeconfig(path: Path, url: str, token: str, namespace: str = "default") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": "gpu-jobs", "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "gpu-jobs", "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class KubeHandle:
    """A running emulator: where it is, what it was asked, how to seed it and read it back."""

    emulator: KubeEmulator
    server: RunningServer
    kubeconfig: Path

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log(self) -> RequestLog:
        return self.emulator.log

    @property
    def faults(self) -> Faults:
        return self.emulator.faults

    @property
    def cluster(self) -> Cluster:
        return self.emulator.cluster

    def inject(self, operation: str, kind: FaultKind, times: int = 1) -> None:
        """Fail the next ``times`` calls of e.g. ``"patch nodes"`` (``"*"`` for any) with a fault."""
        self.emulator.faults.inject(operation, kind, times)

    def allow_only(self, *rules: tuple[str, str]) -> None:
        """RBAC: permit only these ``(verb, resource)`` pairs, e.g. ``("list", "pods")``; the rest is 403."""
        self.emulator.allowed = set(rules)

    def create(self, obj: Json, manager: str | None = None) -> Json:
        """Seed an object without HTTP or admission (status kept), optionally owned by an Update ``manager``."""
        return self.cluster.create(obj, manager)

    def put(self, obj: Json) -> Json:
        return self.cluster.put(obj)

    def get(self, kind: str, name: str, namespace: str = "", api_version: str | None = None) -> Json | None:
        return self.cluster.get(kind, name, namespace, api_version)

    def list(self, kind: str, namespace: str | None = None, api_version: str | None = None) -> list[Json]:
        return self.cluster.list(kind, namespace, api_version)

    def seed_deployment(self, name: str, namespace: str = "default", **options: Any) -> workloads.Seeded:
        """A Deployment, its ReplicaSet and its Running GPU pods on ``nodes`` (:func:`.workloads.deployment`)."""
        return workloads.deployment(self.cluster, name, namespace, **options)

    def seed_statefulset(self, name: str, namespace: str = "default", **options: Any) -> workloads.Seeded:
        """A StatefulSet and its Running GPU pods ``<name>-<i>`` on ``nodes`` (:func:`.workloads.statefulset`)."""
        return workloads.statefulset(self.cluster, name, namespace, **options)

    def seed_job(self, name: str, namespace: str = "default", **options: Any) -> workloads.Seeded:
        """A batch/v1 Job and its Running GPU pods, one per node (:func:`.workloads.job`)."""
        return workloads.job(self.cluster, name, namespace, **options)

    def identify(self, cluster: str, namespace: str = "gpu-jobs") -> Json:
        """What a per-cluster install of gpu-jobs creates: the ConfigMap naming the cluster this API belongs to
        (kustomize/base/cluster-identity.yaml), in ``namespace`` (created if missing)."""
        if self.get("Namespace", namespace) is None:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        identity = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpu-jobs-cluster", "namespace": namespace},
            "data": {"cluster": cluster},
        }
        return self.put(identity) if self.get("ConfigMap", "gpu-jobs-cluster", namespace) else self.create(identity)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` loaded from the kubeconfig (close it, or use it as a context manager)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    def reset(self) -> None:
        self.emulator.reset()

    def stop(self) -> None:
        self.emulator.stopping.set()  # open watches end
        self.server.stop()


def start_kube(kubeconfig: Path | str, port: int = 0, token: str = "gpu-jobs-test-token") -> KubeHandle:
    """Start a standalone emulator on 127.0.0.1 (ephemeral port by default) and write its kubeconfig.

    For the demo sandbox: ``handle = start_kube(".sandbox/kubeconfig")`` ... ``handle.stop()``.
    """
    emulator = KubeEmulator(token=token)
    server = start(emulator, port)
    emulator.server_address = f"127.0.0.1:{server.port}"
    return KubeHandle(emulator, server, write_kubeconfig(Path(kubeconfig), server.url, token))


@pytest.fixture(scope="session")
def _kube_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    handle = start_kube(tmp_path_factory.mktemp("kube") / "kubeconfig")
    yield handle
    handle.stop()


@pytest.fixture
def kube(_kube_server: KubeHandle) -> KubeHandle:
    """A fresh, nearly empty cluster (default namespaces only), an empty request log, no faults, no RBAC limits."""
    _kube_server.reset()
    return _kube_server


@pytest.fixture
def karpenter(kube: KubeHandle) -> karpenter_model.Karpenter:
    """The Karpenter model on the ``kube`` cluster, on emulated time (``karpenter.advance(s)``) starting at
    2026-03-02 19:00 UTC; nodes boot in 60 s. Gone with the next test's reset."""
    return karpenter_model.Karpenter(kube.cluster, start=datetime(2026, 3, 2, 19, 0, tzinfo=UTC))


@pytest.fixture
def kube_client(kube: KubeHandle) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` for the ``kube`` cluster, loaded from its kubeconfig."""
    with kube.api_client() as client:
        yield client
