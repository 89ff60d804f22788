"""What every emulator shares: a threaded HTTP server on 127.0.0.1, a request log, injected faults, latency.

Each cloud emulator is a WSGI app built on top of :class:`Emulator`. The app calls
:meth:`Emulator.begin` at the start of every request with the operation name it recognised (e.g.
``UpdateNodegroupConfig``, ``nodePools.setSize``, ``agentPools.createOrUpdate``); ``begin`` records the request,
sleeps the injected latency, and returns the fault to simulate, if one is armed (``"lost"``: carry the request
out, then answer as the ``"timeout"`` fault does). How a fault looks on the wire
(status, error body) is the cloud's own business, so each emulator renders it itself.

Time: an emulated operation started at ``t`` finishes at ``t + duration`` on the emulator's :meth:`Emulator.clock`,
whether or not anyone polls it, as on the real cloud. Each emulator applies what is due in :meth:`Emulator.tick`,
which runs at the start of every request and, through :meth:`Emulator.wake_at`, when a deadline passes with no
request at all: a person who changes a resource and never looks again still sees the change land.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

# "lost": the request is carried out, then its answer is lost (the front end answers 504 as if it had timed out):
# the client cannot tell whether it happened, which is why a write must not be resent blindly.
FaultKind = Literal["throttle", "server_error", "busy", "timeout", "conflict", "lost"]
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# AWS query and JSON protocols send every call as a POST: their reads are told apart by the operation name.
READ_OPERATION_PREFIXES = ("Describe", "List", "Get")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    operation: str
    query: str = ""
    body: bytes = b""
    at: float = 0.0

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS and not self.operation.startswith(READ_OPERATION_PREFIXES)


@dataclass
class RequestLog:
    """Every request an emulator served, in order. Thread-safe."""

    _entries: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: RecordedRequest) -> None:
        with self._lock:
            self._entries.append(request)

    def all(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._entries)

    def operations(self) -> list[str]:
        return [r.operation for r in self.all()]

    def writes(self) -> list[RecordedRequest]:
        return [r for r in self.all() if r.is_write]

    def reads(self) -> list[RecordedRequest]:
        return [r for r in self.all() if not r.is_write]

    def count(self, operation: str) -> int:
        return sum(1 for r in self.all() if r.operation == operation)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass
class _ArmedFault:
    kind: FaultKind
    remaining: int


class Faults:
    """The next N calls of an operation fail with a given kind. ``"*"`` matches every operation."""

    def __init__(self) -> None:
        self._armed: dict[str, list[_ArmedFault]] = {}
        self._lock = threading.Lock()

    def inject(self, operation: str, kind: FaultKind, times: int = 1) -> None:
        with self._lock:
            self._armed.setdefault(operation, []).append(_ArmedFault(kind, times))

    def take(self, operation: str) -> FaultKind | None:
        with self._lock:
            for key in (operation, "*"):
                queue = self._armed.get(key, [])
                while queue and queue[0].remaining <= 0:
                    queue.pop(0)
                if queue:
                    queue[0].remaining -= 1
                    return queue[0].kind
            return None

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()


@dataclass
class Gate:
    """Holds the next request of one operation until the test opens it: a known moment of the client's run (for a
    test that signals a process while it waits on that request). ``arrived`` is set when the request is held."""

    operation: str
    arrived: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)

    def open(self) -> None:
        self.opened.set()


class Emulator:
    """Request log, faults and latency for one emulated service; serve it with :func:`serve`."""

    #: A held request is let through after this long whatever the test does, so that no server thread hangs.
    gate_limit_s: float = 60.0

    #: How long a ``timeout`` fault holds the request before answering 504: longer than any client timeout
    #: the tests configure, so the client gives up first.
    timeout_hold_s: float = 3.0

    def __init__(self) -> None:
        self.log = RequestLog()
        self.faults = Faults()
        self.latency_s = 0.0
        self.gates: dict[str, Gate] = {}
        self._gates_lock = threading.Lock()

    def hold(self, operation: str) -> Gate:
        """Hold the next request of ``operation`` (e.g. ``"patch resourcequotas"``) until ``gate.open()``."""
        gate = Gate(operation)
        with self._gates_lock:
            self.gates[operation] = gate
        return gate

    def open_gates(self) -> None:
        with self._gates_lock:
            gates, self.gates = list(self.gates.values()), {}
        for gate in gates:
            gate.open()

    def clock(self) -> float:
        """The emulator's time in seconds (monotonic): operations are due when it reaches their deadline."""
        return time.monotonic()

    def tick(self) -> None:
        """Apply everything due on :meth:`clock` (operations whose time is up). Emulators with operations override
        it; it must be cheap and idempotent."""

    def wake_at(self, deadline: float) -> None:
        """Run :meth:`tick` once :meth:`clock` reaches ``deadline``, even if no request ever comes."""

        def wait() -> None:
            while (left := deadline - self.clock()) > 0:
                time.sleep(left)
            self.tick()

        threading.Thread(target=wait, name=f"emulator-deadline:{deadline:.3f}", daemon=True).start()

    def begin(self, method: str, path: str, operation: str, query: str = "", body: bytes = b"") -> FaultKind | None:
        self.tick()
        self.log.add(RecordedRequest(method, path, operation, query, body, time.monotonic()))
        with self._gates_lock:
            gate = self.gates.pop(operation, None)
        if gate is not None:
            gate.arrived.set()
            gate.opened.wait(self.gate_limit_s)
        if self.latency_s:
            time.sleep(self.latency_s)
        fault = self.faults.take(operation)
        if fault == "timeout":
            time.sleep(self.timeout_hold_s)
        return fault


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


#: How often a server's loop looks for a shutdown request (seconds).
SHUTDOWN_POLL_S = 0.05


@dataclass
class RunningServer:
    url: str
    port: int
    server: BaseWSGIServer
    thread: threading.Thread

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _QuietHandler(WSGIRequestHandler):
    """The request log is the record; werkzeug's access log on stderr would only drown test output."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def start(app: WsgiApp, port: int = 0) -> RunningServer:
    """Serve a WSGI app on 127.0.0.1 (an ephemeral port by default) in a daemon thread."""
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=_QuietHandler)
    # The loop looks for a shutdown request every poll interval: socketserver's 0.5 s default made each stop wait
    # 0.25 s on average, and a sandbox world stops nine servers one after the other.
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": SHUTDOWN_POLL_S},
        name=f"emulator:{server.port}",
        daemon=True,
    )
    thread.start()
    return RunningServer(f"http://127.0.0.1:{server.port}", server.port, server, thread)


@contextmanager
def serve(app: WsgiApp, port: int = 0) -> Iterator[RunningServer]:
    running = start(app, port)
    try:
        yield running
    finally:
        running.stop()
