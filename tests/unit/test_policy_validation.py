"""Every class of policy error, with the exact ``FILE:LINE: PATH: message`` a person sees."""

from __future__ import annotations

import textwrap

import pytest

from jobs.policy_file import PolicyError, parse_policy

GOOD_GROUP = """\
  - name: a
    cloud: aws
    aws: {region: eu-west-1, cluster: c, nodegroup: n}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(textwrap.dedent(text), "gitops/policy.yaml")
    return [str(p) for p in caught.value.problems]


HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"

CASES = [
    (
        "bad-day-range",
        HEAD
        + "nodeGroups:\n"
        + GOOD_GROUP
        + "    workingHours:\n      - {days: Mon-Fry, start: '08:00', end: '20:00'}\n",
        'gitops/policy.yaml:8: nodeGroups[0].workingHours[0].days: "Mon-Fry" is not a day range'
        " (use e.g. Mon-Fri, Sat,Sun, Mon-Wed,Fri or daily)",
    ),
    (
        "unknown-timezone",
        HEAD + "defaults:\n  timezone: Europe/Berlim\n",
        'gitops/policy.yaml:4: defaults.timezone: "Europe/Berlim" is not a known IANA timezone (e.g. Europe/Berlin)',
    ),
    (
        "bad-cron",
        HEAD + "defaults:\n  workingHours:\n    - {cron: '0 25 * * *', duration: 8h}\n",
        'gitops/policy.yaml:5: defaults.workingHours[0].cron: "0 25 * * *" is not a 5-field cron expression'
        ' (e.g. "0 22 * * 1-5")',
    ),
    (
        "bad-duration",
        HEAD + "defaults:\n  warmUp: 15 minutes\n",
        'gitops/policy.yaml:4: defaults.warmUp: "15 minutes" is not a duration (use e.g. 15m, 8h, 1h30m, 2d)',
    ),
    (
        "bad-clock",
        HEAD + "defaults:\n  workingHours:\n    - {days: Mon-Fri, start: '8am', end: '20:00'}\n",
        'gitops/policy.yaml:5: defaults.workingHours[0].start: "8am" is not a time of day (use HH:MM, 24-hour clock)',
    ),
    (
        "empty-window",
        HEAD + "defaults:\n  workingHours:\n    - {days: Mon-Fri, start: '08:00', end: '08:00'}\n",
        "gitops/policy.yaml:5: defaults.workingHours[0]: start and end are both 08:00: the window is empty",
    ),
    (
        "mixed-window-forms",
        HEAD + "defaults:\n  workingHours:\n    - {days: Mon-Fri, cron: '0 8 * * *', duration: 1h}\n",
        "gitops/policy.yaml:5: defaults.workingHours[0]: use either days/start/end or cron/duration, not both",
    ),
    (
        "until-without-offset",
        HEAD
        + "nodeGroups:\n"
        + GOOD_GROUP
        + "overrides:\n  - {nodeGroup: a, state: up, until: '2026-12-02T23:00:00', reason: x}\n",
        "gitops/policy.yaml:8: overrides[0].until: needs a UTC offset, e.g. 2026-12-02T23:00:00+01:00",
    ),
    (
        "override-unknown-group",
        HEAD
        + "nodeGroups:\n"
        + GOOD_GROUP
        + "overrides:\n  - {nodeGroup: b, state: up, until: '2026-12-02T23:00:00+01:00', reason: x}\n",
        'gitops/policy.yaml:8: overrides[0].nodeGroup: unknown node group "b"',
    ),
    (
        "override-reason-over-200-characters",  # repeated in Events, reports and logs: a sentence, not a page
        HEAD
        + "nodeGroups:\n"
        + GOOD_GROUP
        + f"overrides:\n  - {{nodeGroup: a, state: up, until: '2026-12-02T23:00:00+01:00', reason: {'x' * 201}}}\n",
        f'gitops/policy.yaml:8: overrides[0].reason: "{"x" * 77}…" (201 characters): String should have at most 200'
        " characters",
    ),
    (
        "unknown-key",
        HEAD + "nodeGroups:\n" + GOOD_GROUP + "    colour: red\n",
        "gitops/policy.yaml:7: nodeGroups[0].colour: unknown key",
    ),
    (
        "missing-key",
        HEAD + "nodeGroups:\n  - name: a\n    aws: {region: eu-west-1, cluster: c, nodegroup: n}\n",
        "gitops/policy.yaml:4: nodeGroups[0].cloud: required",
    ),
    (
        "wrong-locator",
        HEAD + "nodeGroups:\n  - name: a\n    cloud: gcp\n    aws: {region: eu-west-1, cluster: c, nodegroup: n}\n",
        "gitops/policy.yaml:4: nodeGroups[0]: cloud gcp needs exactly one locator `gcp:` (found: ['aws'])",
    ),
    (
        "stop-strategy-where-the-provider-cannot-stop",  # the provider table's can_stop decides, not the cloud
        HEAD
        + "nodeGroups:\n  - name: a\n    cloud: aws\n    aws: {region: eu-west-1, cluster: c, nodegroup: n}\n"
        + "    strategy: stop\n",
        "gitops/policy.yaml:4: nodeGroups[0]: strategy stop is for AKS agent pools only",
    ),
    (
        "incomplete-eks-locator",
        HEAD + "nodeGroups:\n  - name: a\n    cloud: aws\n    aws: {region: eu-west-1, cluster: c}\n",
        "gitops/policy.yaml:6: nodeGroups[0].aws: an EKS node group needs both cluster and nodegroup",
    ),
    (
        "duplicate-name",
        HEAD + "nodeGroups:\n" + GOOD_GROUP + GOOD_GROUP.replace("nodegroup: n", "nodegroup: m"),
        'gitops/policy.yaml:7: nodeGroups[1].name: "a" is already used by nodeGroups[0]',
    ),
    (
        "same-cloud-group-twice",
        HEAD + "nodeGroups:\n" + GOOD_GROUP + GOOD_GROUP.replace("name: a", "name: b"),
        "gitops/policy.yaml:9: nodeGroups[1].aws: same node group as nodeGroups[0]",
    ),
    (
        "bad-name",
        HEAD + "nodeGroups:\n" + GOOD_GROUP.replace("name: a", "name: Training_A100"),
        'gitops/policy.yaml:4: nodeGroups[0].name: "Training_A100" is not a valid name'
        ' (lowercase letters, digits and "-", at most 63)',
    ),
    (
        "unknown-country",
        HEAD + "defaults:\n  holidays: {country: XX}\n",
        'gitops/policy.yaml:4: defaults.holidays: country "XX" is not known to the holidays package',
    ),
    (
        "unknown-subdivision",
        HEAD + "defaults:\n  holidays: {country: DE, subdivision: ZZ}\n",
        'gitops/policy.yaml:4: defaults.holidays: "ZZ" is not a subdivision of DE',
    ),
    (
        "working-size-order",
        HEAD + "nodeGroups:\n" + GOOD_GROUP + "    up: {min: 3, desired: 2, max: 4}\n",
        "gitops/policy.yaml:7: nodeGroups[0].up: needs min <= desired <= max, got 3 <= 2 <= 4",
    ),
    (
        "wrong-enum",
        HEAD + "nodeGroups:\n  - name: a\n    cloud: amazon\n",
        "gitops/policy.yaml:5: nodeGroups[0].cloud: \"amazon\": Input should be 'aws', 'gcp' or 'azure'",
    ),
    (
        "wrong-api-version",
        "apiVersion: gpu-jobs/v2\nkind: GpuPolicy\n",
        "gitops/policy.yaml:1: apiVersion: \"gpu-jobs/v2\": Input should be 'gpu-jobs/v1'",
    ),
    (
        "duplicate-yaml-key",
        HEAD + "defaults:\n  timezone: UTC\n  timezone: Europe/Berlin\n",
        "gitops/policy.yaml:5: defaults.timezone: duplicate key",
    ),
    (
        "invalid-yaml",
        HEAD + "defaults:\n  timezone: [UTC\n",
        "gitops/policy.yaml:5: not valid YAML: expected ',' or ']', but got '<stream end>'",
    ),
    (
        "not-a-mapping",
        "- just\n- a list\n",
        "gitops/policy.yaml:1: a policy is a mapping (apiVersion, kind, ...)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_is_reported_with_file_line_and_path(text: str, expected: str) -> None:
    assert expected in problems(text)


def test_every_problem_is_reported_not_just_the_first() -> None:
    text = HEAD + "defaults:\n  timezone: Mars/Base\n  warmUp: soon\n  colour: red\n"
    assert problems(text) == [
        'gitops/policy.yaml:4: defaults.timezone: "Mars/Base" is not a known IANA timezone (e.g. Europe/Berlin)',
        'gitops/policy.yaml:5: defaults.warmUp: "soon" is not a duration (use e.g. 15m, 8h, 1h30m, 2d)',
        "gitops/policy.yaml:6: defaults.colour: unknown key",
    ]


def test_the_example_policy_is_valid() -> None:
    from jobs.policy_file import load_policy

    policy = load_policy("gitops/policy.yaml")
    assert {g.cloud for g in policy.node_groups} == {"aws", "gcp", "azure"}
