"""What ``validate`` says about ``cloudQuotas``: the issue's example passes; every problem reads
``FILE:LINE: PATH: message`` at the line of the field at fault."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from jobs.core.policy_cloud_quotas import InstancesTarget, NodeGroupsTarget
from jobs.core.policy_fields import percent
from jobs.policy_file import PolicyError, load_policy, parse_policy

SUB = "00000000-0000-0000-0000-000000000001"
# Lines 1-12; the cloudQuotas entries start on line 13.
HEAD = f"""\
apiVersion: gpu-jobs/v1
kind: GpuPolicy
nodeGroups:
  - name: training-a100
    cloud: aws
    aws: {{region: eu-west-1, cluster: ml-prod, nodegroup: gpu-a100}}
    up: {{min: 0, desired: 4, max: 8}}
  - name: batch-g5
    cloud: aws
    aws: {{region: us-east-1, autoScalingGroup: batch-g5}}
    cluster: ml-prod
  - {{name: a100, cloud: azure, azure: {{subscription: {SUB}, resourceGroup: rg, cluster: aks, agentPool: a100}}}}
"""
EXAMPLE = f"""\
cloudQuotas:
  - name: p-spot-eu-west-1
    cloud: aws
    region: eu-west-1
    quota: {{family: P, capacity: spot}}
    target: {{nodeGroups: [training-a100]}}
  - name: h100-europe-west4
    cloud: gcp
    project: ml-research-prod
    region: europe-west4
    quotaId: GPUS-PER-GPU-FAMILY-per-project-region
    dimensions: {{gpu_family: NVIDIA_H100}}
    target: 16
    contactEmail: ml-platform@example.com
  - name: a100-westeurope
    cloud: azure
    subscription: {SUB}
    location: westeurope
    family: standardNCADSA100v4Family
    target: {{instances: 2, vmSize: Standard_NC96ads_A100_v4}}
    headroom: {{whenUsageAbove: 80%, raiseBy: 50%}}
    max: 960
    justification: "GPU capacity for fine-tuning"
"""


def errors(section: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(HEAD + textwrap.dedent(section), "policy.yaml")
    return [str(p) for p in raised.value.problems]


def test_the_issue_example_is_valid_and_reads_as_written() -> None:
    policy = parse_policy(HEAD + EXAMPLE, "policy.yaml")
    aws, gcp, azure = policy.cloud_quotas
    assert (aws.aws_code, aws.aws_kind, aws.scope_name) == ("L-7212CCBC", ("P", "spot"), "eu-west-1")
    assert isinstance(aws.target, NodeGroupsTarget)
    assert aws.target.node_groups == ("training-a100",)
    assert gcp.gcp_dimensions == {"region": "europe-west4", "gpu_family": "NVIDIA_H100"}
    assert (gcp.target, gcp.where) == (16, "ml-research-prod/europe-west4")
    assert isinstance(azure.target, InstancesTarget)
    assert azure.target.shape == "Standard_NC96ads_A100_v4"
    assert azure.headroom is not None
    assert percent(azure.headroom.when_usage_above) == Fraction(4, 5)
    assert azure.max == 960


def test_the_shipped_example_policy_has_the_section_on_all_three_clouds() -> None:
    policy = load_policy(Path(__file__).resolve().parents[2] / "gitops" / "policy.yaml")
    assert {q.cloud for q in policy.cloud_quotas} == {"aws", "gcp", "azure"}
    assert any(isinstance(q.target, NodeGroupsTarget) for q in policy.cloud_quotas)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        pytest.param(
            """\
            cloudQuotas:
              - {name: q, cloud: aws, region: eu-west-1, quota: L-7212CCBC, target: 8, family: P}
            """,
            ["policy.yaml:14: cloudQuotas[0].family: not a field of cloud aws (azure only)"],
            id="a field of another cloud",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - {name: q, cloud: aws, region: eu-west-1, quota: L-7212CCBC, target: 8, colour: red}
            """,
            ["policy.yaml:14: cloudQuotas[0].colour: unknown key"],
            id="an unknown key",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - {name: q, cloud: aws, quota: L-7212CCBC, target: 8}
            """,
            ["policy.yaml:14: cloudQuotas[0].region: required for cloud aws"],
            id="a missing scope",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - name: q
                cloud: gcp
                project: p
                region: europe-west4
                quotaId: GPUS-PER-GPU-FAMILY-per-project-region
                target: 16
            """,
            ["policy.yaml:14: cloudQuotas[0].contactEmail: required: GCP refuses a quota increase without a contact"],
            id="gcp without contactEmail",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - name: q
                cloud: aws
                region: eu-west-1
                quota: L-7212CCBC
                target: 1000
                max: 960
            """,
            ["policy.yaml:18: cloudQuotas[0].target: 1000 is above max 960"],
            id="target above max",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - name: q
                cloud: aws
                region: eu-west-1
                quota: {family: P, capacity: spot}
                target: {nodeGroups: [training-a100, trainnig-h100, batch-g5, a100]}
            """,
            [
                'policy.yaml:18: cloudQuotas[0].target.nodeGroups[1]: unknown node group "trainnig-h100"',
                "policy.yaml:18: cloudQuotas[0].target.nodeGroups[2]: node group batch-g5 is in region us-east-1,"
                " quota q in eu-west-1",
                "policy.yaml:18: cloudQuotas[0].target.nodeGroups[3]: node group a100 is on azure, quota q on aws",
            ],
            id="node groups unknown, of another region, of another cloud",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - {name: a, cloud: aws, region: eu-west-1, quota: {family: P, capacity: spot}, target: 8}
              - {name: b, cloud: aws, region: eu-west-1, quota: L-7212CCBC, target: 16}
              - {name: b, cloud: aws, region: us-east-1, quota: L-7212CCBC, target: 16}
            """,
            [
                "policy.yaml:15: cloudQuotas[1]: same quota and scope as cloudQuotas[0] (a)",
                'policy.yaml:16: cloudQuotas[2].name: "b" is already used by cloudQuotas[1]',
            ],
            id="two entries for one quota, a name twice",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - {name: q, cloud: aws, region: eu-west-1, quota: L-7212cc, target: 8}
            """,
            [
                'policy.yaml:14: cloudQuotas[0].quota: "L-7212cc" is not a Service Quotas code (L- and 8 hex digits,'
                " e.g. L-7212CCBC)"
            ],
            id="a malformed quota code",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - {name: q, cloud: aws, region: eu-west-1, quota: {family: V, capacity: spot}, target: 8}
            """,
            ["policy.yaml:14: cloudQuotas[0].quota: family: Input should be 'G' or 'P'"],
            id="an unknown family",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - name: q
                cloud: azure
                subscription: s
                location: westeurope
                family: standardNCADSA100v4Family
                target: {instances: 2, instanceType: p4d.24xlarge}
                headroom: {whenUsageAbove: eighty, raiseBy: 50%}
            """,
            [
                'policy.yaml:20: cloudQuotas[0].headroom.whenUsageAbove: "eighty" is not a percentage above 0'
                ' (e.g. "80%")',
            ],
            id="a malformed percentage",
        ),
        pytest.param(
            """\
            cloudQuotas:
              - name: q
                cloud: azure
                subscription: s
                location: westeurope
                family: standardNCADSA100v4Family
                target: {instances: 2, instanceType: p4d.24xlarge}
            """,
            ["policy.yaml:19: cloudQuotas[0].target: cloud azure takes vmSize"],
            id="a shape of another cloud",
        ),
    ],
)
def test_problems_name_the_field_and_its_line(section: str, expected: list[str]) -> None:
    assert errors(section) == expected
