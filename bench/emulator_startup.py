"""How long the local world takes to start: each emulator cold (in this process, imports included) and warm.

Issue 3's target: starting the Kubernetes emulator and one cloud emulator for a test takes well under a second.
The test fixtures start each server once per session and reset it per test; this prints both figures.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(label: str, fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = fn()
    print(f"  {label:<52} {time.perf_counter() - started:7.3f} s")
    return value


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gpu-jobs-emulators-"))
    print("emulator start-up: module import, first start, another start, per-test reset")
    start_kube = timed("kube: import", lambda: importlib.import_module("tests.emulators.kube.fixtures")).start_kube
    kube = timed("kube: first start", lambda: start_kube(tmp / "k1"))
    kube2 = timed("kube: another start", lambda: start_kube(tmp / "k2"))
    timed("kube: reset between tests", kube.reset)
    start_aws = timed("aws: import (moto)", lambda: importlib.import_module("tests.emulators.aws.emulator")).start_aws
    aws = timed("aws: first start (warm-up)", start_aws)
    aws2 = timed("aws: another start", start_aws)
    timed("aws: reset between tests", aws.reset)
    start_gcp = timed("gcp: import", lambda: importlib.import_module("tests.emulators.gcp.emulator")).start_gcp
    gcp = timed("gcp: first start", start_gcp)
    azure_module = timed("azure: import", lambda: importlib.import_module("tests.emulators.azure.emulator"))
    azure = timed("azure: first start", azure_module.start_azure_emulator)
    for emulator in (kube, kube2, aws, aws2, gcp, azure):
        emulator.stop()


if __name__ == "__main__":
    main()
