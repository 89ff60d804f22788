"""What ``validate`` says about the resources and quantities of ``namespaceQuotas``: known GPU names and
Kubernetes' own resources pass, other extended resources pass with a warning, and a quantity an extended resource
cannot have is an error. Every line reads ``FILE:LINE: PATH: [warning: ]message``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jobs.cli import main
from jobs.core.timespec import quoted
from jobs.policy_file import PolicyError, check_policy

HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"  # the quotas below start on line 3


def checked(quotas: str) -> list[str]:
    """The warnings of a valid policy, as ``validate`` prints them."""
    return [str(w) for w in check_policy(HEAD + textwrap.dedent(quotas), "policy.yaml").warnings]


def errors(quotas: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        check_policy(HEAD + textwrap.dedent(quotas), "policy.yaml")
    return [str(p) for p in raised.value.problems]


@pytest.mark.parametrize(
    "name",
    [
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb",
        "amd.com/gpu",
        "cpu",
        "memory",
        "pods",
        "ephemeral-storage",
    ],
)
def test_known_gpu_names_and_kubernetes_resources_pass_without_a_warning(name: str) -> None:
    assert checked(f"namespaceQuotas:\n  default: {{{name}: 2}}\n") == []


def test_an_unknown_extended_resource_passes_with_a_warning_at_its_line_wherever_it_is() -> None:
    warnings = checked("""\
        namespaceQuotas:
          default: {example.com/fpga: 1}
          rules:
            - namespaces: [lab]
              hard:
                nvidia.com/gpu: 2
                nvidia.com/gpus: 2
              offHours:
                workingHours: [{days: Mon-Fri, start: "08:00", end: "19:00"}]
                hard: {xilinx.com/fpga-u250: 4}
        """)
    known = (
        "is not a known GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<n>g.<m>gb, amd.com/gpu)"
    )
    assert warnings == [
        f'policy.yaml:4: namespaceQuotas.default.example.com/fpga: warning: "example.com/fpga" {known}: it is written'
        " as requests.example.com/fpga, which limits only pods that request exactly this name",
        f'policy.yaml:9: namespaceQuotas.rules[0].hard.nvidia.com/gpus: warning: "nvidia.com/gpus" {known}: it is'
        " written as requests.nvidia.com/gpus, which limits only pods that request exactly this name",
        f'policy.yaml:12: namespaceQuotas.rules[0].offHours.hard.xilinx.com/fpga-u250: warning: "xilinx.com/fpga-u250"'
        f" {known}: it is written as requests.xilinx.com/fpga-u250, which limits only pods that request exactly this"
        " name",
    ]


@pytest.mark.parametrize("amount", ['"1.5"', "1.5", '"500m"', '"1500m"', '"0.1"', '"1e-1"'])
@pytest.mark.parametrize("name", ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "example.com/fpga"])
def test_a_fractional_quantity_of_an_extended_resource_is_an_error_that_says_why(name: str, amount: str) -> None:
    found = errors(f"namespaceQuotas:\n  rules: [{{namespaces: [a], hard: {{{name}: {amount}}}}}]\n")
    shown = amount.strip('"')
    assert found == [
        f"policy.yaml:4: namespaceQuotas.rules[0].hard: {name}: {shown} is not a whole number (extended resources"
        " are counted in units)"
    ]


@pytest.mark.parametrize("amount", ['"2"', "2", '"2000m"', '"1e1"', "0"])
def test_whole_quantities_of_gpus_pass_in_any_notation(amount: str) -> None:
    assert checked(f"namespaceQuotas:\n  default: {{nvidia.com/gpu: {amount}}}\n") == []


def test_fractions_of_kubernetes_own_resources_are_quantities_as_usual() -> None:
    assert checked('namespaceQuotas:\n  default: {cpu: "1.5", memory: 512Mi}\n') == []


@pytest.mark.parametrize(
    ("hard", "message"),
    [
        ('{nvidia.com/gpu: "-1"}', "nvidia.com/gpu: -1 is negative"),
        ('{nvidia.com/gpu: "four"}', "'four' is not a quantity"),
        # YAML reads true, yes and on as booleans: never 1 GPU.
        ("{nvidia.com/gpu: true}", "nvidia.com/gpu: true is not a quantity"),
        ("{nvidia.com/gpu: no}", "nvidia.com/gpu: false is not a quantity"),
        (
            "{count/deployments.apps: 10}",
            '"count/deployments.apps": object counts (count/<resource>) are not managed by the quotas job',
        ),
    ],
)
def test_quantities_and_names_the_api_server_would_not_enforce_are_errors(hard: str, message: str) -> None:
    found = errors(f"namespaceQuotas:\n  default: {hard}\n")
    assert len(found) == 1
    assert found[0].startswith("policy.yaml:4: namespaceQuotas.default: ")
    assert message in found[0]


def test_validate_prints_warnings_and_still_exits_0_while_an_error_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warned = tmp_path / "warned.yaml"
    warned.write_text(HEAD + "namespaceQuotas:\n  default: {nvidia.com/gpu: 0, example.com/fpga: 1}\n")
    assert main(["validate", str(warned)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f'{warned}:4: namespaceQuotas.default.example.com/fpga: warning: "example.com/fpga" is not a known GPU'
        " resource (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<n>g.<m>gb, amd.com/gpu): it is written as"
        " requests.example.com/fpga, which limits only pods that request exactly this name",
        f"{warned}: valid: 0 node groups in 0 clusters, 0 overrides, 0 namespace quota rules, 0 cloud quotas",
    ]
    broken = tmp_path / "broken.yaml"
    broken.write_text(HEAD + 'namespaceQuotas:\n  default: {nvidia.com/gpu: "1.5"}\n')
    assert main(["validate", str(broken)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{broken}:4: namespaceQuotas.default: nvidia.com/gpu: 1.5 is not a whole number (extended resources are"
        " counted in units)"
    ]


@pytest.mark.parametrize(
    ("selector", "path", "value"),
    [
        ('{matchLabels: {team: "research team"}}', "selector.matchLabels.team", "research team"),
        (
            "{matchExpressions: [{key: tier, operator: In, values: [a/b]}]}",
            "selector.matchExpressions[0].values[0]",
            "a/b",
        ),
        ("{matchLabels: {team: -ml}}", "selector.matchLabels.team", "-ml"),
        ("{matchLabels: {team: " + "x" * 64 + "}}", "selector.matchLabels.team", "x" * 64),
    ],
)
def test_a_selector_asking_for_a_label_value_no_namespace_can_carry_is_malformed(
    selector: str, path: str, value: str
) -> None:
    found = errors(f"namespaceQuotas:\n  rules: [{{selector: {selector}, hard: {{cpu: 1}}}}]\n")
    assert found == [
        f"policy.yaml:4: namespaceQuotas.rules[0].{path}: {quoted(value)} is not a label value (at most 63 letters, digits,"
        " '-', '_' or '.', starting and ending with a letter or digit): no namespace can carry it"
    ]


def test_label_values_kubernetes_accepts_pass_the_empty_one_included() -> None:
    selector = (
        '{matchLabels: {team: ml_research.v2, tier: ""}, matchExpressions: [{key: a, operator: NotIn, values: [A-1]}]}'
    )
    assert checked(f"namespaceQuotas:\n  rules: [{{selector: {selector}, hard: {{cpu: 1}}}}]\n") == []
