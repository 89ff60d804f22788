"""jobs.core.placeholders: which values are placeholders, and where each is said to be."""

from __future__ import annotations

import pytest

from jobs.core.placeholders import find_placeholders


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("arn:aws:iam::111122223333:role/x", ["111122223333"]),
        ("arn:aws:iam::123456789012:role/x", ["123456789012"]),
        ("arn:aws:iam::1111222233334:role/x", []),  # a longer number that merely contains it
        ("x@PROJECT_ID.iam.gserviceaccount.com", ["PROJECT_ID"]),
        ("x@MY_PROJECT_ID_2.iam.gserviceaccount.com", []),
        ("00000000-0000-0000-0000-000000000000", ["00000000-0000-0000-0000-000000000000"]),
        ("00000000-0000-0000-0000-000000000001", []),  # a real-looking id (the sandbox's subscription)
        ("ghcr.io/example/gpu-jobs:0.1.0", ["ghcr.io/example/"]),
        ("ghcr.io/examples/gpu-jobs:0.1.0", []),
        ("https://github.com/example/gpu-jobs", ["github.com/example/"]),
        ("ml-platform@example.com", []),  # an address at example.com is the policy's business, not the install's
    ],
)
def test_what_is_a_placeholder(value: str, found: list[str]) -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"v": value}}
    assert [p.found for p in find_placeholders([obj])] == found


def test_each_is_said_once_per_field_with_its_object_and_path() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nodegroups", "annotations": {"a.io/x": "111122223333 and 111122223333"}},
        "spec": {"containers": [{"image": "ghcr.io/example/gpu-jobs"}]},
    }
    assert [str(p) for p in find_placeholders([cron])] == [
        "CronJob/nodegroups metadata.annotations[a.io/x]: '111122223333 and 111122223333' holds 111122223333,"
        " an example AWS account id",
        "CronJob/nodegroups spec.containers[0].image: 'ghcr.io/example/gpu-jobs' holds ghcr.io/example/,"
        " the example image registry",
    ]
