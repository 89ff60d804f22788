"""The ``notify:`` section: what is accepted, FILE:LINE errors for what is not, the JSON Schema, and ``validate``
saying where notifications go."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from jobs.commands import validate
from jobs.commands.schema import policy_schema
from jobs.policy_file import PolicyError, parse_policy
from tests.fakes import RecordingLog

HEAD = "apiVersion: gpu-jobs/v1\nkind: GpuPolicy\n"
NOTIFY = "notify:\n  webhook: {secretRef: {name: gpu-jobs-notify, key: url}}\n  owner: {namespaceLabel: owner}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "gitops/policy.yaml")
    return [str(p) for p in caught.value.problems]


def test_the_section_as_the_issue_writes_it() -> None:
    notify = parse_policy(HEAD + NOTIFY, "policy.yaml").notify
    assert notify is not None
    assert (notify.webhook.secret_ref.name, notify.webhook.secret_ref.key) == ("gpu-jobs-notify", "url")
    assert notify.owner.namespace_label == "owner"
    assert parse_policy(HEAD, "policy.yaml").notify is None  # optional: nothing is sent without it


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "notify:\n  webhook: {secretRef: {name: Gpu_Notify, key: url}}\n  owner: {namespaceLabel: owner}\n",
            'gitops/policy.yaml:4: notify.webhook.secretRef.name: "Gpu_Notify" is not a Secret name',
        ),
        (
            "notify:\n  webhook: {secretRef: {name: n, key: 'a b'}}\n  owner: {namespaceLabel: owner}\n",
            'gitops/policy.yaml:4: notify.webhook.secretRef.key: "a b" is not a Secret key',
        ),
        (
            "notify:\n  webhook: {secretRef: {name: n, key: url}}\n  owner: {namespaceLabel: 'bad key!'}\n",
            'gitops/policy.yaml:5: notify.owner.namespaceLabel: "bad key!" is not a label key',
        ),
        (
            "notify:\n  webhook: {url: 'https://hooks.slack.com/services/T/B/x'}\n  owner: {namespaceLabel: owner}\n",
            "gitops/policy.yaml:4: notify.webhook.url: unknown key",  # a URL is a credential: never in Git
        ),
        ("notify:\n  webhook: {secretRef: {name: n, key: url}}\n", "gitops/policy.yaml:3: notify.owner: required"),
    ],
)
def test_errors_name_file_line_and_path(section: str, expected: str) -> None:
    found = problems(HEAD + section)
    assert any(p.startswith(expected) for p in found), found


def test_the_json_schema_has_the_section() -> None:
    notify = policy_schema()["properties"]["notify"]
    assert "anyOf" in notify or "$ref" in notify
    shipped = json.loads(Path("gitops/policy.schema.json").read_text())
    assert shipped == policy_schema(), "run `make schema`"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("gpu-jobs-notify", "to the webhook in Secret gpu-jobs-notify key url\n"),
        ("team-hook", "to the webhook in Secret team-hook key url (the shipped RBAC reads only gpu-jobs-notify"),
    ],
)
def test_validate_says_where_notifications_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(HEAD + NOTIFY.replace("gpu-jobs-notify", name))
    outcome = validate.run(argparse.Namespace(paths=[str(path)], output="text", deadline=None), RecordingLog())
    out = capsys.readouterr().out
    assert outcome.exit_code == 0
    assert "\n  notify: one message per owner (namespace label owner) " + said in out
