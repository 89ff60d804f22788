"""pytest fixtures for the gcp emulator (filled in by its owner)."""
