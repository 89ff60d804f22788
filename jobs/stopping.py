"""How a run is asked to stop (SIGTERM from the kubelet, Ctrl-C on a laptop), at every moment of the process.

The process installs its handlers first thing (:func:`install`, from ``gpu-jobs`` / ``python -m jobs``) and keeps
them until it exits. What a signal does depends on the moment:

- **start-up** (imports, settings, the policy, wiring; ``validate``, ``calendar``, ``diff``, ``schema`` throughout):
  nothing has been written, so the run ends now: the handler raises :class:`Interrupted` in the main thread and the
  command line logs the run's summary (exit 1, the reason says it was stopped);
- **the runner and after** (:func:`stop_on_signals` until the summary): the signal is a request (:data:`STOP`):
  nothing new starts, what is temporary is undone, the Lease is released, the report and the summary are written;
- **from the summary on** (:func:`ignore`): signals are ignored (``SIG_IGN``, which the interpreter keeps while it
  shuts down, where a Python handler would be reset to the default and kill the process with 143), so the process
  exits with the code its summary states.

A second signal during the first's unwinding is only recorded: the run is already ending.

The same moments bound the start-up for the garbage collector: off from the entry point (:func:`pause_collection`)
until the runner starts or another command runs (:func:`resume_collection`).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Set by SIGTERM / SIGINT: start nothing new, undo what is temporary, release, report and exit.
STOP = threading.Event()


class Interrupted(BaseException):
    """A stop during start-up: nothing was written, the run ends now. A BaseException, so that no ``except
    Exception`` on the way (a scope's or an item's isolation) turns it into one item's failure."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class _Process:
    """The process-wide state the handler reads; changed only from the main thread."""

    installed = False  # by install(): the process's own handlers are in place until it exits
    raising = True  # start-up: a signal interrupts; False once the run may have written (or is unwinding)
    received: str | None = None  # the first signal that asked this run to stop
    collecting = True  # False from pause_collection() until the start-up is over


def _handle(signum: int, frame: FrameType | None) -> None:
    if _Process.received is None:
        _Process.received = signal.Signals(signum).name
    STOP.set()
    if _Process.raising:
        _Process.raising = False  # once: the unwinding itself is not interrupted again
        raise Interrupted(_Process.received)


def install() -> None:
    """Take SIGTERM and SIGINT for the whole process (the main thread only may). Called first by the process's
    entry point, before the command line and its imports: from here on a run always ends with its summary."""
    if threading.current_thread() is not threading.main_thread():
        return
    STOP.clear()
    _Process.installed, _Process.raising, _Process.received = True, True, None
    for sig in SIGNALS:
        signal.signal(sig, _handle)


def settle() -> None:
    """From now on a signal is a request to stop (:data:`STOP`), not an interruption: the run may have written,
    or has finished and is about to report. The start-up is over: garbage is collected again."""
    _Process.raising = False
    resume_collection()


def pause_collection() -> None:
    """No garbage collection during the start-up (the process's entry point, after :func:`install`). Its imports,
    policy and wiring (the SDKs' clients) build tens of thousands of objects that live as long as the process: the
    collector would walk them again and again and free none (a tenth of a nodegroups dry run's CPU)."""
    gc.disable()
    _Process.collecting = False


def resume_collection() -> None:
    """The start-up's objects are frozen (kept, never walked by a collection again) and the run's own garbage is
    collected as usual. Only after :func:`pause_collection`: a process that never paused is left as it is."""
    if not _Process.collecting:
        _Process.collecting = True
        gc.freeze()
        gc.enable()


def ignore() -> None:
    """The run's summary is being written: the process now exits with the code it states, whatever arrives."""
    if _Process.installed and threading.current_thread() is threading.main_thread():
        _Process.raising = False
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def received() -> str | None:
    """The signal that asked this run to stop (``"SIGTERM"``, ``"SIGINT"``), if one did."""
    return _Process.received


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While a command may write, SIGTERM and SIGINT are a request to stop, not an interruption: the run finishes
    its report, summary and exit code. In the ``gpu-jobs`` process that lasts until the summary (a request already
    made is kept). Driven from elsewhere (a test, a library), the previous handlers come back afterwards."""
    if _Process.installed:
        settle()
        yield
        return

    def request(signum: int, frame: FrameType | None) -> None:
        STOP.set()

    STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers; a run driven from elsewhere is stopped by its driver
        return
    previous = {sig: signal.signal(sig, request) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
