"""Compute's accelerator types as the GPU families their quotas count (the ``gpu_family`` dimension and the
``NVIDIA_<family>_GPUS`` metrics), and the family and capacity of a GCP GPU quota entry."""

from __future__ import annotations

import pytest

from jobs.adapters.gcp.quotas import compute_metric, gpu_family


@pytest.mark.parametrize(
    ("accelerator", "family"),
    [
        ("nvidia-tesla-t4", "NVIDIA_T4"),
        ("nvidia-tesla-a100", "NVIDIA_A100"),
        ("nvidia-a100-80gb", "NVIDIA_A100_80GB"),  # the A100's two sizes are two families
        ("nvidia-h100-80gb", "NVIDIA_H100"),
        ("nvidia-h100-mega-80gb", "NVIDIA_H100_MEGA"),
        ("nvidia-h200-141gb", "NVIDIA_H200"),
        ("nvidia-l4", "NVIDIA_L4"),
        ("nvidia-tesla-v100", "NVIDIA_V100"),
    ],
)
def test_an_accelerator_type_is_counted_in_its_family(accelerator: str, family: str) -> None:
    assert gpu_family(accelerator) == family
    # The same family the region quota metric of that family names.
    assert compute_metric("GPUS-PER-GPU-FAMILY-per-project-region", {"gpu_family": family}) == f"{family}_GPUS"
