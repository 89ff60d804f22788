"""The gpu-jobs process collects no garbage during its start-up and collects as usual once it is over
(jobs/stopping.py). Run in a child process: the collector's state is the whole process's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import gc
from jobs import stopping

stopping.resume_collection()  # never paused: left as it is
assert gc.isenabled() and gc.get_freeze_count() == 0
stopping.install()
stopping.pause_collection()
assert not gc.isenabled()
with stopping.stop_on_signals():  # the runner's start: the start-up is over
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # the start-up's objects: frozen, never walked again
stopping.resume_collection()  # a second call changes nothing
assert gc.isenabled()
print("ok")
"""


def test_collection_is_off_during_start_up_and_on_once_the_run_starts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "ok\n"
