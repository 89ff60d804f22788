"""Namespace globs in the policy (``namespaceQuotas`` rules and exclude, ``sweep.idlePods.exempt.namespaces``): a
glob fnmatch would read as a literal ``[`` or ``]``, which no namespace name contains, is refused at load with
``FILE:LINE: PATH: message``, and the JSON Schema says the same."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest

from jobs.core.idle_pods import PodInfo, exemption
from jobs.core.policy_sweep import Exempt
from jobs.core.timespec import quoted
from jobs.policy_file import PolicyError, check_policy

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "gitops" / "policy.schema.json").read_text())
HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"
QUOTAS = """\
    namespaceQuotas:
      default: {{nvidia.com/gpu: 0}}
      exclude: [kube-system]
      rules:
        - namespaces: [lab, "{glob}"]
          hard: {{nvidia.com/gpu: 2}}
    """
EXEMPT = """\
    clusters:
      - {{name: ml-prod, cloud: aws, aws: {{region: eu-west-1, cluster: ml-prod}}}}
    sweep:
      idlePods: {{below: 5, window: 2h, gracePeriod: 30m, action: delete, exempt: {{namespaces: ["{glob}"]}}}}
    """
WHERE = {
    QUOTAS: "policy.yaml:7: namespaceQuotas.rules[0].namespaces[1]",
    EXEMPT: "policy.yaml:6: sweep.idlePods.exempt.namespaces[0]",
}
BAD = ["[", "team-[", "team-[ab", "team-]", "[]", "[!]", "Team-*", "team_a", "a" * 64]
GOOD = ["lab", "team-*", "team-?", "team-[ab]", "team-[a-c]*", "[!k]*", "*"]


def problems(section: str, glob: str) -> list[str]:
    text = HEAD + textwrap.dedent(section.format(glob=glob))
    with pytest.raises(PolicyError) as raised:
        check_policy(text, "policy.yaml")
    return [str(p) for p in raised.value.problems]


def schema_accepts(section: str, glob: str) -> bool:
    import yaml

    document = yaml.safe_load(HEAD + textwrap.dedent(section.format(glob=glob)))
    try:
        jsonschema.validate(document, SCHEMA)
    except jsonschema.ValidationError:
        return False
    return True


@pytest.mark.parametrize("section", [QUOTAS, EXEMPT], ids=["namespaceQuotas", "sweep-exempt"])
@pytest.mark.parametrize("glob", BAD)
def test_a_glob_that_matches_no_namespace_name_is_refused_at_its_line(section: str, glob: str) -> None:
    (problem,) = problems(section, glob)
    assert problem.startswith(f"{WHERE[section]}: {quoted(glob)} is not a namespace name or glob"), problem
    assert not schema_accepts(section, glob)


@pytest.mark.parametrize("section", [QUOTAS, EXEMPT], ids=["namespaceQuotas", "sweep-exempt"])
@pytest.mark.parametrize("glob", GOOD)
def test_names_and_closed_globs_pass_in_the_policy_and_the_schema(section: str, glob: str) -> None:
    check_policy(HEAD + textwrap.dedent(section.format(glob=glob)), "policy.yaml")
    assert schema_accepts(section, glob)


def test_a_backwards_range_is_refused_for_matching_nothing() -> None:
    (problem,) = problems(QUOTAS, "team-[c-a]")
    assert problem == f'{WHERE[QUOTAS]}: "team-[c-a]": the range c-a is backwards, so it matches nothing'


@pytest.mark.parametrize(("namespace", "exempt"), [("serving", True), ("serving-eu", True), ("ml", False)])
def test_sweep_exemptions_match_names_and_globs(namespace: str, exempt: bool) -> None:
    pod = PodInfo(namespace, "p-0", "uid", "gpu-1", "Running", 1, None, deleting=False)
    rules = Exempt.model_validate({"namespaces": ["serving", "serving-[a-z]*"]})
    assert (exemption(pod, rules) is not None) == exempt
