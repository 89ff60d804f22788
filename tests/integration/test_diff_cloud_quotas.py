"""``gpu-jobs diff --cloud-quotas``: a pull request that raises a node group's up.max shows the cloud quota request it
raises, in the quota's unit, read through boto3 from the AWS emulator (read-only: nothing is filed)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobs.cli import main
from tests.integration.cloud_quotas.test_aws import REGION, policy

if TYPE_CHECKING:
    from tests.emulators.aws.emulator import AwsEmulator

pytestmark = pytest.mark.integration

HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"


def test_raising_up_max_shows_the_quota_target_in_vcpu(
    aws: AwsEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in aws.env(REGION).items():
        monkeypatch.setenv(key, value)
    aws.add_eks_nodegroup(REGION, "ml-prod", "gpu-a100-spot", 0, 0, 8, ["p4d.24xlarge"], capacity_type="SPOT")
    base, change = tmp_path / "base.yaml", tmp_path / "change.yaml"
    base.write_text(HEAD + textwrap.dedent(policy(8)))
    change.write_text(HEAD + textwrap.dedent(policy(12)))
    assert main(["diff", str(base), str(change), "--cloud-quotas", "--output", "json"]) == 0
    (target,) = json.loads(capsys.readouterr().out)["cloudQuotaTargets"]
    assert (target["before"]["value"], target["after"]["value"], target["after"]["unit"]) == (768, 1152, "vCPU")
    assert target["after"]["demand"] == "training-a100: 12 x p4d.24xlarge x 96 vCPU = 1152"
    assert main(["diff", str(base), str(change), "--cloud-quotas"]) == 0
    assert "p-spot  aws eu-west-1  768 vCPU  1,152 vCPU  +384 vCPU" in capsys.readouterr().out
    assert list(aws.quotas.requests()) == []  # read-only
