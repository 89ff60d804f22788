"""pytest fixtures for the prometheus emulator (filled in by its owner)."""
