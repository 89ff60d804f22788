"""The sweep's integration tests: the real Prometheus (backfilled DCGM series), the Kubernetes API emulator and the
cloud emulators, each through its real client; the fixtures live beside each emulator (tests/conftest.py)."""
