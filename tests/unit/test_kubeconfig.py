"""``Kubeconfig``: the run's kubeconfig read once, every context's client built from that one read, and a missing
or broken configuration the same ``SettingsError`` from every command (issue 23 items 2 and 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.adapters.kube.client import Kubeconfig
from jobs.settings import SettingsError


def kubeconfig(path: Path, contexts: int) -> Path:
    names = [f"c{i}" for i in range(contexts)]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": names[0],
                "clusters": [{"name": n, "cluster": {"server": f"https://{n}.example:6443"}} for n in names],
                "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in names],
                "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
            }
        )
    )
    return path


@pytest.fixture(autouse=True)
def _outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_each_context_gets_its_own_client_from_one_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", 3)
    monkeypatch.setenv("KUBECONFIG", str(path))
    kube = Kubeconfig(timeout_s=5.0)

    first = kube.client("c0", cluster="a")
    path.write_text("not: [a kubeconfig")  # read once: what the run read first is what it keeps using
    others = [kube.client(f"c{i}", cluster=f"c{i}") for i in (1, 2)]
    current = kube.client(None)

    assert [c.configuration.host for c in (first, *others)] == [f"https://c{i}.example:6443" for i in range(3)]
    assert others[1].configuration.api_key == {"BearerToken": "Bearer token-c2"}
    assert current.configuration.host == "https://c0.example:6443"  # the current context
    assert len({id(c.configuration) for c in (first, *others, current)}) == 4  # never the shared default


def test_an_unknown_context_names_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", 1)))

    with pytest.raises(SettingsError, match=r"no Kubernetes configuration \(context 'gone' for cluster ml-prod\)"):
        Kubeconfig().client("gone", cluster="ml-prod")


def test_no_kubeconfig_at_all_is_a_settings_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))

    with pytest.raises(SettingsError, match=r"no Kubernetes configuration \(in-cluster or KUBECONFIG\)"):
        Kubeconfig().client()
