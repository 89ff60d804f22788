"""GCP emulator: GKE node pools, Cloud Quotas and Compute instances behind one REST endpoint on 127.0.0.1.

Attributes resolve lazily: the fixtures module lives in this package and is loaded by every pytest session,
which should not pay for importing the Google SDK types unless a test asks for the emulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.emulators.gcp.emulator import ENV_VAR, GcpEmulator, start_gcp

__all__ = ["ENV_VAR", "GcpEmulator", "start_gcp"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tests.emulators.gcp import emulator

        return getattr(emulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
