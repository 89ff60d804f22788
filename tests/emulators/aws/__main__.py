"""Run the AWS emulator standalone (demo sandbox): ``python -m tests.emulators.aws [--port N] [--seed-demo]``.

Prints the environment a ``gpu-jobs`` process needs, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import threading

from tests.emulators.aws.emulator import start_aws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--seed-demo", action="store_true", help="one GPU node group, one GPU ASG, GPU quotas")
    args = parser.parse_args()
    aws = start_aws(args.port, args.region)
    if args.seed_demo:
        aws.add_eks_nodegroup(args.region, "demo", "gpu-a10g", 0, 2, 4, ["g5.xlarge"], tags={"team": "ml"})
        aws.add_asg(args.region, "gpu-batch", 0, 1, 2, "g6.12xlarge", tags={"team": "research"})
        aws.set_quota(args.region, "L-DB2E81BA", 64)
    for key, value in sorted(aws.env().items()):
        print(f"export {key}={value}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        aws.stop()


if __name__ == "__main__":
    main()
