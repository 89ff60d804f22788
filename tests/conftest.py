"""Fixtures shared by the whole suite: each emulator's fixtures live beside the emulator."""

pytest_plugins = [
    "tests.emulators.kube.fixtures",
    "tests.emulators.aws.fixtures",
    "tests.emulators.gcp.fixtures",
    "tests.emulators.azure.fixtures",
    "tests.emulators.prometheus.fixtures",
]
