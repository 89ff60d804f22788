"""The text parts every job shares: an Event's message made a sentence without touching the names in it."""

from __future__ import annotations

import pytest

from jobs.report_text import fit, sentence


@pytest.mark.parametrize(
    ("fragment", "said"),
    [
        ("shutdown postponed until 20:00: GPU pods running", "Shutdown postponed until 20:00: GPU pods running."),
        ("Created the GPU quota: requests.nvidia.com/gpu=2 (rule rules[0])", None),
        ("p-spot: asked for 768 vCPU", "p-spot: asked for 768 vCPU."),  # a name stays as it is
        ("gpu-jobs.io/keep-alive-until='x' is not a time", "gpu-jobs.io/keep-alive-until='x' is not a time."),
        ("deleted ml/train-0: idle below 1% for 2h.", "Deleted ml/train-0: idle below 1% for 2h."),
        ("  ", ""),
    ],
)
def test_a_fragment_becomes_a_sentence(fragment: str, said: str | None) -> None:
    assert sentence(fragment) == (said if said is not None else fragment + ".")


def test_a_wrapped_line_never_splits_the_command_a_person_copies() -> None:
    line = (
        "  FAILED: cluster ml-prod: refused before reading anything: the API at https://10.0.0.9 has no cluster"
        " identity, so nothing proves it is ml-prod; if it is ml-prod's, create it: kubectl -n gpu-jobs create"
        " configmap gpu-jobs-cluster --from-literal=cluster=ml-prod. Nothing changed."
    )
    lines = fit(line)
    assert " ".join(" ".join(lines).split()) == " ".join(line.split())  # every word, in order
    assert all(len(part) <= 120 for part in lines)
    assert any(
        "kubectl -n gpu-jobs create configmap gpu-jobs-cluster --from-literal=cluster=ml-prod." in p for p in lines
    )
    assert all(part.startswith("    ") for part in lines[1:])  # the rest indented under the line
    assert fit("  short") == ["  short"]
