"""The text parts every job shares: an Event's message made a sentence without touching the names in it."""

from __future__ import annotations

import pytest

from jobs.report_text import sentence


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
