"""The ``gpu-jobs`` process (the console script and ``python -m jobs``): its signal handlers come first, before the
command line and the ~0.3 s of imports behind it, so that a SIGTERM at any moment ends with one ``run.summary``."""

import sys
import types

from jobs import stopping


def _without_pydantic_plugins() -> None:
    """gpu-jobs uses no pydantic plugin. Looking for them (at the first model) imports importlib.metadata, and with
    it the email package, and reads every installed distribution's entry points: a tenth of a ``validate`` run.
    pydantic asks ``pydantic.plugin._loader.get_plugins`` alone; in this process an empty one answers."""
    if "pydantic.plugin._loader" not in sys.modules:
        loader = types.ModuleType("pydantic.plugin._loader", "gpu-jobs: no pydantic plugins (jobs/__main__.py)")
        setattr(loader, "get_plugins", tuple)  # noqa: B010 - a module built here, not an object with that attribute
        sys.modules[loader.__name__] = loader


def run() -> None:
    stopping.install()
    _without_pydantic_plugins()
    from jobs.cli import main  # noqa: PLC0415 - after the handlers: a signal during these imports is handled

    sys.exit(main())


if __name__ == "__main__":
    run()
