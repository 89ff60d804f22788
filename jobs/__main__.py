"""The ``gpu-jobs`` process (the console script and ``python -m jobs``): its signal handlers come first, before the
command line and the ~0.3 s of imports behind it, so that a SIGTERM at any moment ends with one ``run.summary``."""

import sys

from jobs import stopping


def run() -> None:
    stopping.install()
    from jobs.cli import main  # noqa: PLC0415 - after the handlers: a signal during these imports is handled

    sys.exit(main())


if __name__ == "__main__":
    run()
