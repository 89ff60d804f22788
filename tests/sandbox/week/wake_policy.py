"""The week's policy for the gpu-jobs column: the sandbox's, plus a ``wake:`` on the group the 21:00 person needs
(their namespace may wake it), used only where ``gpu-jobs validate`` accepts it. Until wake on demand exists, validate
rejects the unknown key and the column runs the plain policy: the person waits for the morning, and the bench says
why."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from tests import forkserver
from tests.sandbox.week.workload import NAMESPACE

#: The 21:00 person's group (tests.sandbox.week.workload) and the wake it is given.
WAKE_GROUP = "notebooks-t4"
WAKE = {"namespaces": [NAMESPACE], "for": "2h", "maxNodes": 1}


def without_karpenter(policy: Path, workdir: Path) -> tuple[Path, tuple[str, ...]]:
    """(the policy the week runs, the Karpenter pools left out): the week's model sizes groups within [min, max], and
    a Karpenter pool has no size (its nodes follow its pods within its limits): it is not modelled, and says so."""
    doc: dict[str, Any] = yaml.safe_load(policy.read_text())
    pools = tuple(str(g.get("name")) for g in doc.get("nodeGroups", []) if "karpenter" in g)
    if not pools:
        return policy, ()
    doc["nodeGroups"] = [g for g in doc["nodeGroups"] if "karpenter" not in g]
    pricing = doc.get("pricing") or {}
    for name in pools:  # a price for a group the policy no longer has is an error
        (pricing.get("nodeGroups") or {}).pop(name, None)
    workdir.mkdir(parents=True, exist_ok=True)
    sized = workdir / "policy-without-karpenter.yaml"
    sized.write_text(yaml.safe_dump(doc, sort_keys=False))
    return sized, pools


def with_wake(policy: Path, workdir: Path) -> tuple[Path, str]:
    """(the policy to run, what was decided): a copy with the wake where validate accepts it, else ``policy``."""
    doc: dict[str, Any] = yaml.safe_load(policy.read_text())
    group = next((g for g in doc.get("nodeGroups", []) if g.get("name") == WAKE_GROUP), None)
    if group is None:
        return policy, f"no {WAKE_GROUP} in the policy: no wake"
    if "wake" in group:
        return policy, f"{WAKE_GROUP} wakes as the policy says"
    group["wake"] = WAKE
    workdir.mkdir(parents=True, exist_ok=True)
    woken = workdir / "policy-with-wake.yaml"
    woken.write_text(yaml.safe_dump(doc, sort_keys=False))
    argv = [sys.executable, "-m", "jobs", "validate", str(woken)]
    done = forkserver.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        why = next((line for line in said if "wake" in line), said[-1] if said else "")
        return policy, f"wake not used: validate refuses it on this branch (exit {done.returncode}): {why[:160]}"
    return woken, f"{WAKE_GROUP} wakes for namespace {NAMESPACE} (validate accepts wake:)"
