"""The week's policies: the sandbox's without its Karpenter pool (every strategy), and for the gpu-jobs column two
choices a team that runs this workload makes, each checked by ``gpu-jobs validate``: a ``wake:`` on the group the
21:00 person needs (their namespace may wake it), and ``maxDelay: 10h`` on the training groups, so that a training
submitted before going home finishes in the night (the shipped 2 h drains it: the week's figures say what that
costs)."""

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
#: The groups the evening trainings run on, and how long their busy nights may be postponed (the longest evening
#: training, submitted by 20:30 for up to 9 h, ends before 06:00; the groups' days end at 20:00 and 22:00).
TRAINING_GROUPS = ("training-a100", "research-h100")
OVERNIGHT = "10h"


def for_the_week(policy: Path, workdir: Path, *, overnight: bool = True) -> tuple[Path, str]:
    """(the policy the gpu-jobs column runs, what was decided): a copy with the wake and, with ``overnight``, the
    training groups' ``maxDelay``; ``policy`` itself where validate refuses the copy (the note says why)."""
    doc: dict[str, Any] = yaml.safe_load(policy.read_text())
    groups = {str(g.get("name")): g for g in doc.get("nodeGroups", [])}
    notes: list[str] = []
    group = groups.get(WAKE_GROUP)
    if group is None:
        notes.append(f"no {WAKE_GROUP} in the policy: no wake")
    elif "wake" in group:
        notes.append(f"{WAKE_GROUP} wakes as the policy says")
    else:
        group["wake"] = WAKE
        notes.append(f"{WAKE_GROUP} wakes for namespace {NAMESPACE}")
    if overnight:
        trained = [name for name in TRAINING_GROUPS if name in groups and "maxDelay" not in groups[name]]
        for name in trained:
            groups[name]["maxDelay"] = OVERNIGHT
        if trained:
            notes.append(f"{', '.join(trained)} postpone a busy night up to maxDelay {OVERNIGHT}")
    workdir.mkdir(parents=True, exist_ok=True)
    week = workdir / "policy-for-the-week.yaml"
    week.write_text(yaml.safe_dump(doc, sort_keys=False))
    argv = [sys.executable, "-m", "jobs", "validate", str(week)]
    done = forkserver.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        return policy, f"the week's policy refused by validate (exit {done.returncode}): {(said or [''])[-1][:160]}"
    return week, "; ".join(notes)
