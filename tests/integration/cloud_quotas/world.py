"""Running ``gpu-jobs cloud-quotas`` in this process against the emulators, as its CronJob would (same argv, same
environment variables), and reading back what it printed and logged."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from tests.emulators.kube.fixtures import KubeHandle
from tests.emulators.kube.seed import namespace

SUB = "00000000-0000-0000-0000-000000000001"
HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"


@dataclass(frozen=True)
class Ran:
    code: int
    report: dict[str, Any]
    logs: list[dict[str, Any]]
    text: str

    def quota(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(q for q in self.report["items"] if (q["kind"], q["name"]) == ("cloud quota", name))
        return found

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.logs if e.get("event") == name]

    @property
    def summary(self) -> dict[str, Any]:
        return self.events("run.summary")[0]


class Job:
    """One install's cloud-quotas runs: the policy file, the install's cluster, the clouds' endpoints."""

    def __init__(
        self, tmp_path: Path, kube: KubeHandle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.policy = tmp_path / "policy.yaml"
        self.kube, self.monkeypatch, self.capsys = kube, monkeypatch, capsys
        if kube.get("Namespace", "gpu-jobs") is None:
            kube.create(namespace("gpu-jobs"))
        for key, value in {
            "KUBECONFIG": str(kube.kubeconfig),
            "GPU_JOBS_NAMESPACE": "gpu-jobs",
            "GPU_JOBS_RETRY_DEADLINE": "3",
            "GPU_JOBS_REQUEST_TIMEOUT": "2",
        }.items():
            monkeypatch.setenv(key, value)

    def env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self.monkeypatch.setenv(key, value)

    def write(self, body: str) -> None:
        self.policy.write_text(HEAD + textwrap.dedent(body))

    def run(self, *args: str, text: bool = False) -> Ran:
        self.capsys.readouterr()
        output = [] if text else ["--output", "json"]
        code = main(["--log-format", "json", "cloud-quotas", "--policy", str(self.policy), *output, *args])
        out, err = self.capsys.readouterr()
        logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        problems = "".join(line + "\n" for line in err.splitlines() if not line.startswith("{"))
        return Ran(code, {} if text or not out.startswith("{") else json.loads(out), logs, out + problems)

    def record(self, entry: str) -> dict[str, Any] | None:
        cm = self.kube.get("ConfigMap", f"gpu-jobs-cloud-quota-{entry}", "gpu-jobs")
        return None if cm is None else dict(json.loads(cm["data"]["request.json"]))

    def kube_events(self) -> list[tuple[str, str, str]]:
        return [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in self.kube.list("Event", "gpu-jobs")]
