"""Run the GCP emulator standalone (demo sandbox): ``python -m tests.emulators.gcp [--port N] [--seed-demo]``.

Prints the environment a ``gpu-jobs`` process needs, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import threading

from tests.emulators.gcp.emulator import start_gcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--project", default="demo-project")
    parser.add_argument("--operation-seconds", type=float, default=0.1, help="how long an operation runs")
    parser.add_argument("--seed-demo", action="store_true", help="a GPU node pool, GPU instances, GPU quotas")
    args = parser.parse_args()
    gcp = start_gcp(args.port, operation_seconds=args.operation_seconds)
    if args.seed_demo:
        zones = ["us-central1-a", "us-central1-b"]
        gcp.add_node_pool(args.project, "us-central1", "ml", "l4-pool", zones=zones, per_zone_count=2)
        gcp.add_node_pool(
            args.project,
            "us-central1",
            "ml",
            "a100-spot",
            zones=zones,
            per_zone_count=1,
            machine_type="a2-highgpu-1g",
            accelerator_type="nvidia-tesla-a100",
            autoscaling=(0, 4),
            spot=True,
        )
        gcp.add_instance(args.project, "us-central1-a", "trainer-1", labels={"owner": "vision"})
        gcp.add_instance(args.project, "us-central1-a", "forgotten-gpu-box", labels={})
        gcp.set_quota(args.project, "NVIDIA-L4-GPUS-per-project-region", "us-central1", 8)
        gcp.set_quota(args.project, "NVIDIA-A100-GPUS-per-project-region", "us-central1", 4)
        gcp.set_quota(args.project, "GPUS-ALL-REGIONS-per-project", None, 16)
    for key, value in sorted(gcp.env().items()):
        print(f"export {key}={value}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        gcp.stop()


if __name__ == "__main__":
    main()
