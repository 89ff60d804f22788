"""The week's workload: pure data from a seeded RNG (same seed, same week, same pods), no I/O.

What runs where (the sandbox fleet's scheduled groups, :mod:`tests.sandbox.fleet`; its always-on serving group is the
same under every strategy and left out): 8-GPU training on the A100 and H100 groups and the Karpenter pool (by day,
some submitted in the evening, the A100 ones on spot with checkpoints), notebooks in working hours on the 1-GPU
groups (with idle stretches, as people think and type), the nightly batch in its window, and the odd cases: a stray
job at night, a pod that starts and does nothing, one that crashes and keeps its VRAM, and a person who needs a GPU
at 21:00 (what a wake is for).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

Kind = Literal["training", "notebook", "batch", "stray", "idle", "leaked", "wake"]
#: What its GPUs do while it runs (the DCGM profile): a leaked pod holds memory and computes nothing.
Profile = Literal["busy", "idle", "leaked"]
NAMESPACE = "week"
NEW_YORK = ZoneInfo("America/New_York")


@dataclass(frozen=True)
class Job:
    """One GPU pod to run: submitted at ``submit``, done after ``work`` of running (``None``: runs until the week
    ends). ``checkpoint``: on an interruption it resumes from its last checkpoint; without one it starts over."""

    name: str
    kind: Kind
    group: str
    gpus: int
    submit: datetime
    work: timedelta | None
    checkpoint: timedelta | None = None
    profile: Profile = "busy"


def _at(day: datetime, hour: float) -> datetime:
    return day + timedelta(minutes=round(hour * 60))


def _same_day(day: datetime, tz: ZoneInfo) -> datetime:
    """Midnight of ``day``'s calendar date in ``tz`` (converting ``day`` would give the day before, west of it)."""
    return datetime(day.year, day.month, day.day, tzinfo=tz)


#: The A100 trainings run on spot and checkpoint this often (an interruption loses at most this much).
SPOT_CHECKPOINT = timedelta(minutes=30)


def _training(name: str, group: str, submit: datetime, hours: float, checkpoint: timedelta | None = None) -> Job:
    """An 8-GPU training of ``hours``."""
    return Job(name, "training", group, 8, submit, timedelta(hours=hours), checkpoint=checkpoint)


def generate(start: datetime, days: int, seed: int = 26) -> tuple[Job, ...]:
    """The workload of ``days`` days from ``start`` (a Monday 00:00 in the policy's timezone)."""
    rng = random.Random(seed)
    # The Karpenter pool's own draws: the other groups' pods stay the same pods as before it was modelled.
    pool_rng = random.Random(f"{seed}-karpenter")
    jobs: list[Job] = []
    tz = start.tzinfo
    for n in range(days):
        day = start + timedelta(days=n)
        weekday = day.weekday() < 5
        tag = day.strftime("%a").lower()
        if weekday:
            for i in range(2):  # daytime training, 8 GPUs each, spot with 30-minute checkpoints
                hours = rng.uniform(3, 8)
                submit = _at(day, rng.uniform(8.5, 11))
                jobs.append(_training(f"train-a100-{tag}-{i}", "training-a100", submit, hours, SPOT_CHECKPOINT))
            jobs.append(
                _training(f"train-h100-{tag}", "research-h100", _at(day, rng.uniform(9, 11)), rng.uniform(4, 7))
            )
            # A training a day in the Karpenter pool: its nodes come with it and go 5 minutes after it.
            submit = _at(day, pool_rng.uniform(8.5, 12))
            jobs.append(_training(f"pool-h100-{tag}", "train-h100", submit, pool_rng.uniform(3, 6)))
            for group, people in (("notebooks-t4", 3), ("vision-t4", 2), ("finetune-a100", 2)):
                # vision-t4 works New York hours: its people open notebooks on the same weekday in New York
                local_day = _same_day(day, NEW_YORK) if group == "vision-t4" else day
                for i in range(people):
                    opens = rng.uniform(9, 15)
                    jobs.append(
                        Job(
                            f"nb-{group.split('-')[0]}-{tag}-{i}",
                            "notebook",
                            group,
                            1,
                            _at(local_day, opens).astimezone(tz),
                            timedelta(hours=rng.uniform(1, min(4, 19 - opens))),
                        )
                    )
            # The nightly batch, in its window (22:00 New York, 8 h), on the batch group's 4-GPU nodes.
            local = _same_day(day, NEW_YORK) + timedelta(hours=22, minutes=30)
            for i in range(4):
                jobs.append(
                    Job(
                        f"batch-{tag}-{i}",
                        "batch",
                        "batch-nightly-g5",
                        4,
                        local.astimezone(tz),
                        timedelta(hours=rng.uniform(3, 5)),
                    )
                )
        if n in (1, 3):  # Tue and Thu evenings: training submitted before going home, running into the night
            submit = _at(day, rng.uniform(19, 20.5))
            jobs.append(
                _training(f"train-a100-{tag}-evening", "training-a100", submit, rng.uniform(6, 9), SPOT_CHECKPOINT)
            )
            jobs.append(_training(f"train-h100-{tag}-evening", "research-h100", _at(day, 19.5), rng.uniform(5, 8)))
    specials = [
        Job("stray-night", "stray", "finetune-a100", 1, _at(start, 2 * 24 + 2), timedelta(hours=3)),  # Wed 02:00
        Job("does-nothing", "idle", "notebooks-t4", 1, _at(start, 24 + 10), None, profile="idle"),  # Tue 10:00
        Job("crashed-leak", "leaked", "vision-t4", 1, _at(start, 3 * 24 + 11), None, profile="leaked"),  # Thu 11:00
        Job("needs-gpu-21h", "wake", "notebooks-t4", 1, _at(start, 24 + 21), timedelta(hours=1)),  # Tue 21:00
    ]
    end = start + timedelta(days=days)
    return tuple(sorted((j for j in (*jobs, *specials) if j.submit < end), key=lambda j: (j.submit, j.name)))
