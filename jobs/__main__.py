"""The ``gpu-jobs`` process (the console script and ``python -m jobs``): its signal handlers come first, before the
command line and the ~0.3 s of imports behind it, so that a SIGTERM at any moment ends with one ``run.summary``."""

import gc
import os
import sys

from jobs import stopping


def _without_pydantic_plugins() -> None:
    """gpu-jobs uses no pydantic plugin. Looking for them (at the first model) imports importlib.metadata and reads
    every installed distribution's entry points: a tenth of a ``validate`` run. ``PYDANTIC_DISABLE_PLUGINS`` is
    pydantic's own switch for that; a value set by the operator is kept."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def run() -> None:
    stopping.install()
    _without_pydantic_plugins()
    stopping.pause_collection()  # until the start-up is over: a job's runner starts, another command runs
    from jobs.cli import main  # noqa: PLC0415 - after the handlers: a signal during these imports is handled

    code = main()
    # The process ends: its objects need no collection. Without this, the interpreter's last collections walk every
    # object left (a fifth of a nodegroups dry run's CPU, a tenth of a validate's); atexit handlers and the flush of
    # the output still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
