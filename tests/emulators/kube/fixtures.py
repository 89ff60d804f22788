"""pytest fixtures for the kube emulator (filled in by its owner)."""
