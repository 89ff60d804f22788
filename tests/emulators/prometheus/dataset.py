"""The fixed, representative DCGM dataset the session-scoped ``prometheus`` fixture serves.

One of every case a GPU-idleness sweep must get right; each entry says which trap it sets. Hosts and GPU
indexes are distinct (a whole GPU belongs to one pod), except MIG slices and time-sliced copies, which share a GPU
by design. Three clusters, as a shared Thanos holds them (label ``cluster``):

- ``ml-prod``: the everyday shapes (plain and ``exported_*`` labels, MIG, no PROF metrics, multi-GPU, time-slicing,
  leaked memory, a young pod, and GPUs no pod holds);
- ``research``: the old label names ``pod_name``/``pod_namespace``/``container_name`` and a lowercase ``hostname``;
- ``notebooks``: a broken profiling metric (DCGM_FI_PROF_GR_ENGINE_ACTIVE exactly 0 on every GPU).

``NODES`` maps each host to its cluster, for tests that build the matching Kubernetes nodes and pods.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.emulators.prometheus.dcgm import Workload

A100 = "NVIDIA A100-SXM4-80GB"
A100_MIB = 81920
A10G = "NVIDIA A10G"
A10G_MIB = 23028
L4 = "NVIDIA L4"
L4_MIB = 23034
MIG_1G_10GB_MIB = 9728
T4 = "Tesla T4"
T4_MIB = 15360

ML_PROD = "ml-prod"
RESEARCH = "research"
NOTEBOOKS = "notebooks"

# The original dataset (one cluster's shapes); REPRESENTATIVE_WORKLOADS labels it `cluster: ml-prod`.
_ML_PROD_CORE: tuple[Workload, ...] = (
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

_ML_PROD_MORE: tuple[Workload, ...] = (
    # GPUs no pod holds: no pod labels at all (plain target labels), and the exporter's own pod labels (a
    # ServiceMonitor): neither is an idle pod, both are capacity paid for.
    Workload("", "", "", 3, "gpu-a10g-2", A10G, profile="idle", memory_total_mib=A10G_MIB),
    Workload("", "", "", 1, "gpu-l4-1", L4, profile="idle", memory_total_mib=L4_MIB, exporter_pod_labels=True),
    # Crashed and leaked its memory: utilisation ~0, ~95 % of the framebuffer used.
    Workload("llm-crashed-0", "ml-research", "trainer", 2, "gpu-l4-1", L4, profile="leaked", memory_total_mib=L4_MIB),
    # A 2-GPU pod idle on both GPUs, and one busy on one GPU only (not idle: all its GPUs must be).
    Workload("ddp-idle-0", "ml-research", "trainer", 0, "gpu-a100-3", A100, profile="idle", memory_total_mib=A100_MIB),
    Workload("ddp-idle-0", "ml-research", "trainer", 1, "gpu-a100-3", A100, profile="idle", memory_total_mib=A100_MIB),
    Workload("ddp-half-0", "ml-research", "trainer", 2, "gpu-a100-3", A100, memory_total_mib=A100_MIB),
    Workload("ddp-half-0", "ml-research", "trainer", 3, "gpu-a100-3", A100, profile="idle", memory_total_mib=A100_MIB),
    # Time-slicing: two pods share T4 0 (idle), two share T4 1 (busy); each pod gets a copy of the device's series.
    Workload(
        "share-nb-a", "data-science", "notebook", 0, "gpu-t4-1", T4, profile="idle", memory_total_mib=T4_MIB, vgpu=0
    ),
    Workload(
        "share-nb-b", "data-science", "notebook", 0, "gpu-t4-1", T4, profile="idle", memory_total_mib=T4_MIB, vgpu=1
    ),
    Workload("share-api-a", "inference", "server", 1, "gpu-t4-1", T4, memory_total_mib=T4_MIB, vgpu=0),
    Workload("share-api-b", "inference", "server", 1, "gpu-t4-1", T4, memory_total_mib=T4_MIB, vgpu=1),
    # Started 30 min ago and idle since: too little data for a 1 h or 2 h window.
    Workload(
        "notebook-new",
        "data-science",
        "notebook",
        0,
        "gpu-a10g-3",
        A10G,
        profile="idle",
        memory_total_mib=A10G_MIB,
        started_ago=timedelta(minutes=30),
    ),
)

_RESEARCH: tuple[Workload, ...] = (
    # The old attribution labels and a relabelled lowercase `hostname`.
    Workload("legacy-train-0", "research", "trainer", 0, "gpu-v100-1", "Tesla V100-SXM2-32GB", memory_total_mib=32768),
    Workload(
        "legacy-nb-0",
        "research",
        "notebook",
        1,
        "gpu-v100-1",
        "Tesla V100-SXM2-32GB",
        profile="idle",
        memory_total_mib=32768,
    ),
)

_NOTEBOOKS: tuple[Workload, ...] = (
    # Profiling is broken on this cluster: GR_ENGINE_ACTIVE reads 0 everywhere, even on the busy GPU.
    Workload("nb-busy-0", "data-science", "notebook", 0, "gpu-t4-9", T4, memory_total_mib=T4_MIB, broken_prof=True),
    Workload(
        "nb-idle-0",
        "data-science",
        "notebook",
        1,
        "gpu-t4-9",
        T4,
        profile="idle",
        memory_total_mib=T4_MIB,
        broken_prof=True,
    ),
)

REPRESENTATIVE_WORKLOADS: tuple[Workload, ...] = (
    *(replace(w, cluster=ML_PROD) for w in (*_ML_PROD_CORE, *_ML_PROD_MORE)),
    *(replace(w, cluster=RESEARCH, old_labels=True, hostname_label="hostname") for w in _RESEARCH),
    *(replace(w, cluster=NOTEBOOKS) for w in _NOTEBOOKS),
)

#: host -> cluster, every host of the dataset.
NODES: dict[str, str] = {w.hostname: w.cluster or "" for w in REPRESENTATIVE_WORKLOADS}
