"""GCP emulator: GKE node pools, Cloud Quotas and Compute instances behind one REST endpoint on 127.0.0.1."""

from tests.emulators.gcp.emulator import ENV_VAR, GcpEmulator, start_gcp

__all__ = ["ENV_VAR", "GcpEmulator", "start_gcp"]
