"""pytest fixtures for the azure emulator (filled in by its owner)."""
