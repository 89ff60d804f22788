"""``make sandbox``: start the world, print (and write to ``.sandbox/env``) the environment, serve until Ctrl-C."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from tests.sandbox.world import REPO, World, default_env_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default=None, help="policy file (default gitops/policy.yaml)")
    parser.add_argument("--env-file", type=Path, default=default_env_file())
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    workdir = args.env_file.parent
    world = World.start(args.policy, workdir) if args.policy else World.start(workdir=workdir)
    try:
        exports = [f"export {key}={shlex.quote(value)}" for key, value in sorted(world.env().items())]
        args.env_file.parent.mkdir(parents=True, exist_ok=True)
        args.env_file.write_text("\n".join(exports) + "\n")
        print("\n".join(exports))
        env_file = args.env_file.relative_to(REPO) if args.env_file.is_relative_to(REPO) else args.env_file
        print(f"\n# written to {env_file}. In another shell:")
        print(f"#   source {env_file}; .venv/bin/gpu-jobs nodegroups --dry-run      # every cluster (central install)")
        first = world.policy.fleet[0].name
        print(f"#   source {env_file}; .venv/bin/gpu-jobs nodegroups --dry-run --cluster {first} \\")
        print(f"#       # a per-cluster install: export KUBECONFIG={world.kubeconfig_for(first)}")
        labels = "eks.amazonaws.com/nodegroup,cloud.google.com/gke-nodepool,kubernetes.azure.com/agentpool"
        contexts = ", ".join(c.kube_context or c.name for c in world.policy.fleet)
        print(f"#   source {env_file}; .tools/bin/kubectl --context {first} get nodes -L {labels}")
        print(f"#   source {env_file}; .tools/bin/kubectl --context {first} -n gpu-jobs \\")
        print("#       create job --from=cronjob/quotas quotas-manual-$(date +%s)    # a one-off run of the install")
        print(f"#   source {env_file}; .tools/bin/kubectl --context {first} -n gpu-jobs logs job/<name>")
        print(
            f"#   source {env_file}; .venv/bin/gpu-jobs sweep --dry-run      # idle GPU pods (the sandbox's Prometheus)"
        )
        print("#       # and untagged GPU instances. The DCGM series end when the sandbox started: judge a full")
        print(f"#       # window with --at {world.now.replace(microsecond=0).isoformat()} (or earlier, up to 1h)")
        if world.webhook is not None:  # the sandbox's notify section posts there (docs/people.md#notifications)
            print(f"#   curl -s {world.webhook.server.url if world.webhook.server else ''}/received   # notifications")
        print(f"# contexts: {contexts}")
        print("# Ctrl-C stops everything.", flush=True)
        stop.wait()
    finally:
        world.stop()
        args.env_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
