"""pytest fixtures for the aws emulator (filled in by its owner)."""
