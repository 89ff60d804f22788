"""The ``gpu-jobs`` process (the console script and ``python -m jobs``): its signal handlers come first, before the
command line and the ~0.3 s of imports behind it, so that a SIGTERM at any moment ends with one ``run.summary``."""

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
    from jobs.cli import main  # noqa: PLC0415 - after the handlers: a signal during these imports is handled

    sys.exit(main())


if __name__ == "__main__":
    run()
