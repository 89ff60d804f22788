"""Fixtures shared by the whole suite: each emulator's fixtures live beside the emulator."""

import os

pytest_plugins = [
    "tests.emulators.kube.fixtures",
    "tests.emulators.aws.fixtures",
    "tests.emulators.gcp.fixtures",
    "tests.emulators.azure.fixtures",
    "tests.emulators.prometheus.fixtures",
    "tests.emulators.webhook.fixtures",
]

# Under `make test` the suite inherits make's own variables: a `make` the tests start would then be a sub-make and
# print "Entering directory" around its output (and share the outer make's flags). Tests run make as a person does.
for _name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
    os.environ.pop(_name, None)
