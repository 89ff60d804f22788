"""The fixed, representative DCGM dataset the session-scoped ``prometheus`` fixture serves.

One of every case a GPU-idleness sweep must get right; each entry says which trap it sets. Hosts and GPU
indexes are distinct (a whole GPU belongs to one pod), except MIG slices, which share a GPU by design.
"""

from __future__ import annotations

from datetime import timedelta

from tests.emulators.prometheus.dcgm import Workload

A100 = "NVIDIA A100-SXM4-80GB"
A100_MIB = 81920
A10G = "NVIDIA A10G"
A10G_MIB = 23028
L4 = "NVIDIA L4"
L4_MIB = 23034
MIG_1G_10GB_MIB = 9728

REPRESENTATIVE_WORKLOADS: tuple[Workload, ...] = (
    # A busy 2-GPU training pod: one pod, two series per metric.
    Workload("train-llm-0", "ml-research", "trainer", 0, "gpu-a100-1", A100, memory_total_mib=A100_MIB),
    Workload("train-llm-0", "ml-research", "trainer", 1, "gpu-a100-1", A100, memory_total_mib=A100_MIB),
    # Busy, but attributed through exported_* labels: plain `pod` names the dcgm-exporter here.
    Workload(
        "batch-infer-7f9c",
        "inference",
        "server",
        0,
        "gpu-l4-1",
        L4,
        memory_total_mib=L4_MIB,
        exported_labels=True,
    ),
    # Idle notebook holding a model in memory: memory says "in use", utilisation says idle.
    Workload(
        "jupyter-alice",
        "data-science",
        "notebook",
        0,
        "gpu-a10g-1",
        A10G,
        profile="idle",
        memory_total_mib=A10G_MIB,
    ),
    # Idle and attributed through exported_* labels.
    Workload(
        "jupyter-bob",
        "data-science",
        "notebook",
        1,
        "gpu-a10g-1",
        A10G,
        profile="idle",
        exported_labels=True,
        memory_total_mib=A10G_MIB,
    ),
    # Worked until 3 h ago, idle since: busy over 6 h on average, idle over the last hour.
    Workload(
        "finetune-bert-0",
        "ml-research",
        "trainer",
        2,
        "gpu-a100-1",
        A100,
        profile="idle_after_busy",
        idle_for=timedelta(hours=3),
        memory_total_mib=A100_MIB,
    ),
    # Went idle only 20 min ago: still "busy" over the last hour, idle over the last 15 minutes.
    Workload(
        "eval-run-42",
        "ml-research",
        "eval",
        3,
        "gpu-a100-1",
        A100,
        profile="idle_after_busy",
        idle_for=timedelta(minutes=20),
        memory_total_mib=A100_MIB,
    ),
    # Two MIG slices of one A100: no DCGM_FI_DEV_GPU_UTIL, only DCGM_FI_PROF_GR_ENGINE_ACTIVE.
    Workload(
        "mig-infer-a",
        "inference",
        "server",
        0,
        "gpu-a100-2",
        A100,
        mig_profile="1g.10gb",
        mig_instance_id=7,
        memory_total_mib=MIG_1G_10GB_MIB,
    ),
    Workload(
        "mig-notebook-b",
        "data-science",
        "notebook",
        0,
        "gpu-a100-2",
        A100,
        profile="idle",
        mig_profile="1g.10gb",
        mig_instance_id=8,
        memory_total_mib=MIG_1G_10GB_MIB,
    ),
    # No PROF metrics (profiling off on this node): a busy and an idle pod only GPU_UTIL can judge.
    Workload(
        "render-farm-3",
        "graphics",
        "renderer",
        0,
        "gpu-a10g-2",
        A10G,
        prof_metrics=False,
        memory_total_mib=A10G_MIB,
    ),
    Workload(
        "jupyter-carol",
        "data-science",
        "notebook",
        1,
        "gpu-a10g-2",
        A10G,
        profile="idle",
        prof_metrics=False,
        memory_total_mib=A10G_MIB,
    ),
)
