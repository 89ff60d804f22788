"""The central world's extra Kubernetes APIs: research's and aks-ml's, one server each per session (ml-prod's is the
session's ``kube``), reset for every test that uses them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulators.aws.emulator import AwsEmulator
from tests.emulators.azure.emulator import AzureEmulator
from tests.emulators.gcp.emulator import GcpEmulator
from tests.emulators.kube.fixtures import KubeHandle, start_kube
from tests.integration.nodegroups.world import Fleet, make_central_fleet


@pytest.fixture(scope="session")
def _research_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    handle = start_kube(tmp_path_factory.mktemp("research") / "kubeconfig")
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def _aks_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeHandle]:
    handle = start_kube(tmp_path_factory.mktemp("aks-ml") / "kubeconfig")
    yield handle
    handle.stop()


@pytest.fixture
def central(
    kube: KubeHandle,
    _research_api: KubeHandle,
    _aks_api: KubeHandle,
    aws: AwsEmulator,
    gcp: GcpEmulator,
    azure: AzureEmulator,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Fleet:
    """The fleet as a central install reaches it: one API per cluster (tests/integration/nodegroups/world.py)."""
    for api in (_research_api, _aks_api):
        api.reset()
    kubes = {"ml-prod": kube, "research": _research_api, "aks-ml": _aks_api}
    return make_central_fleet(kubes, aws, gcp, azure, monkeypatch, tmp_path)
