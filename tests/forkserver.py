"""``gpu-jobs`` runs for the tests without paying its imports each time: a fork server.

A real ``gpu-jobs`` process spends 0.6-1.1 s importing (the Kubernetes, AWS, GCP and Azure clients) before it does
anything, and the suite runs it hundreds of times. The server is a Python process that has imported every ``jobs``
module once; for each run it forks a child that takes the caller's stdin/stdout/stderr (passed as file descriptors
over a Unix socket), argv, environment and working directory, and runs the console script's entry
(``jobs.__main__.run``) as the process would. The child is a process of its own: its own pid (signals go to it), its
own signal handlers, its own environment; its exit status is the real one (``waitpid``), reported by a small waiter
process between the server and the child. One server per test process (per xdist worker), started on first use.

What a fork cannot give is what Python reads at start-up: a run whose environment changes a ``PYTHON*`` or locale
variable runs as a real process instead (:func:`needs_real_process`). Tests of start-up itself (signals during
imports, the README's commands, the console script) run the real ``gpu-jobs`` on purpose.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
_HEADER = struct.Struct("!I")


def _startup_variable(name: str) -> bool:
    """Variables Python (or the C library's locale) reads once at start-up, not when the job reads them."""
    return name.startswith(("PYTHON", "LC_")) or name in ("LANG", "LANGUAGE")


# ---------------------------------------------------------------------------------------------------------------------
# The server side (``python -m tests.forkserver SOCKET``).


def _preimport() -> None:
    """Every module of the ``jobs`` package (whatever its layout today), and with them the cloud clients."""
    import importlib
    import pkgutil

    import jobs

    for module in pkgutil.walk_packages(jobs.__path__, "jobs."):
        if module.name == "jobs.__main__":
            continue
        with contextlib.suppress(Exception):  # a module that cannot import alone is imported by the run, if at all
            importlib.import_module(module.name)
    import jobs.__main__


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise ValueError("the caller left before its request ended")
        data += chunk
    (size,) = _HEADER.unpack_from(data)
    return json.loads(data[_HEADER.size : _HEADER.size + size]), list(fds)


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of ``sys.exit(x)``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """The ``gpu-jobs`` process: the caller's stdio, argv, environment and directory, then the console script."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # TZ as the run's environment says
    _refresh_import_time_settings()
    sys.argv = [request["argv0"], *request["args"]]
    code = 0
    try:
        from jobs.__main__ import run

        run()
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # what the interpreter does with an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    # The interpreter's own shutdown: non-daemon threads joined, atexit handlers run, stdio flushed.
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code)


def _refresh_import_time_settings() -> None:
    """Library constants computed from the environment at import (the server's), recomputed from the run's."""
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = os.environ.get("KUBECONFIG", "~/.kube/config")  # type: ignore[attr-defined]


def _waiter(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """Between the server and the run: forks the run, tells the caller its pid, then how it ended."""
    try:
        pid = os.fork()
        if pid == 0:
            conn.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def serve(path: str) -> None:
    parent = os.getppid()
    _preimport()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    import gc

    gc.collect()
    gc.freeze()  # what the children share stays shared: no collector pass writes to those pages
    listener.settimeout(1.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone without stopping us (killed): so are we
                return
            continue
        try:
            request, fds = _recv_request(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            _waiter(conn, request, fds)
        conn.close()
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(ChildProcessError):  # the waiters that have finished
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


# ---------------------------------------------------------------------------------------------------------------------
# The caller's side.


class _Server:
    """This process's fork server, started on first use, stopped when this process ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._path = ""
        self.environ: dict[str, str] = {}

    def started(self) -> _Server:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        return self

    def connect(self) -> socket.socket:
        self.started()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self._path)
        return conn

    def _start(self) -> None:
        directory = tempfile.mkdtemp(prefix="gpu-jobs-forkserver-")
        self._path = os.path.join(directory, "socket")
        # The server's own environment is what Python and the libraries read at import: the caller's, minus the
        # variables a run sets itself.
        self.environ = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_JOBS_", "KUBECONFIG"))}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver", self._path],
            cwd=ROOT,
            env=self.environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a signal a test sends its process group does not reach the server
        )
        with self._process.stdout or open(os.devnull) as said:
            line = said.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the gpu-jobs fork server did not start (said {line!r})")
        atexit.register(self.stop)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


SERVER = _Server()


def needs_real_process(env: Mapping[str, str]) -> bool:
    """A run whose environment changes what Python reads at start-up cannot be a fork of the server."""
    server = SERVER.started()  # its environment is known once it runs
    names = {n for n in (*env, *server.environ) if _startup_variable(n)}
    return any(env.get(n) != server.environ.get(n) for n in names)


@dataclass
class ForkedProcess:
    """A ``gpu-jobs`` run forked by the server, with the part of ``subprocess.Popen``'s interface the tests use."""

    args: list[str]
    pid: int
    _conn: socket.socket
    stdin: IO[Any] | None
    stdout: IO[Any] | None
    stderr: IO[Any] | None
    returncode: int | None = None
    _buffer: bytes = field(default=b"", repr=False)
    _chunks: dict[int, list[bytes]] | None = field(default=None, repr=False)

    def _read_status(self, timeout: float | None) -> None:
        self._conn.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                chunk = self._conn.recv(4096)
                if not chunk:
                    raise RuntimeError(f"the fork server lost the run {self.args}")
                self._buffer += chunk
        except (TimeoutError, BlockingIOError):  # not ended yet (a timeout of 0 is a non-blocking read)
            return
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.returncode = int(json.loads(line)["returncode"])
        self._conn.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read_status(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: str | bytes | None = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Write ``input``, read stdout and stderr to their ends, then wait; as ``Popen.communicate`` (called again
        after a timeout, it goes on where it stopped)."""
        if self.stdin is not None and not self.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                if input:
                    self.stdin.write(input)
                self.stdin.close()
        # As Popen.communicate: the file descriptors read to their ends (not what the file objects buffered).
        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        if self._chunks is None:
            self._chunks = {id(s): [] for s in streams}
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for stream in streams:
                if not stream.closed:
                    selector.register(stream.fileno(), selectors.EVENT_READ, stream)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    out, err = self._outputs()
                    raise subprocess.TimeoutExpired(self.args, timeout or 0, out, err)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        self._chunks[id(key.data)].append(data)
                    else:
                        selector.unregister(key.fd)
                        key.data.close()
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.001))
        return self._outputs()

    def _outputs(self) -> tuple[Any, Any]:
        chunks = self._chunks or {}
        out, err = (
            None if s is None else self._decoded(s, b"".join(chunks.get(id(s), []))) for s in (self.stdout, self.stderr)
        )
        return out, err

    @staticmethod
    def _decoded(stream: IO[Any], data: bytes) -> str | bytes:
        if "b" in stream.mode:
            return data
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # universal newlines


def _pipe_or(choice: Any, mode: str, text: bool) -> tuple[int, IO[Any] | None, bool]:
    """The fd the child gets for one stream, the caller's end of it (a pipe) and whether the fd is ours to close."""
    if choice == subprocess.PIPE:
        read, write = os.pipe()
        child, ours = (read, write) if mode == "w" else (write, read)
        opened: IO[Any] = open(ours, mode, encoding="utf-8") if text else open(ours, mode + "b")  # noqa: SIM115
        return child, opened, True
    if choice in (subprocess.DEVNULL, None):
        return os.open(os.devnull, os.O_RDWR), None, True
    return (choice if isinstance(choice, int) else choice.fileno()), None, False


def _command_line(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``sys.argv`` of the run: ``python -m jobs ARGS`` has the package's ``__main__.py`` first, as Python sets it."""
    parts = [os.fspath(a) for a in argv]
    if parts[1:3] == ["-m", "jobs"]:
        return str(ROOT / "jobs" / "__main__.py"), parts[3:]
    return parts[0], parts[1:]


def is_gpu_jobs(argv: Sequence[Any]) -> bool:
    """``python -m jobs ...`` with this interpreter, or the console script."""
    parts = [os.fspath(a) for a in argv]
    return parts[:3] == [sys.executable, "-m", "jobs"] or Path(parts[0]).name == "gpu-jobs"


def popen(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
) -> ForkedProcess:
    """A ``gpu-jobs`` command line (:func:`is_gpu_jobs`) forked by the server, as ``subprocess.Popen`` would run it."""
    environ = dict(os.environ if env is None else env)
    conn = SERVER.connect()
    ends = [
        _pipe_or(stdin, "w", text),  # the child reads what we write
        _pipe_or(stdout, "r", text) if stdout is not None else (1, None, False),
    ]
    if stderr == subprocess.STDOUT:  # one stream, as the container runtime's log
        ends.append((ends[1][0], None, False))
    else:
        ends.append(_pipe_or(stderr, "r", text) if stderr is not None else (2, None, False))
    program, args = _command_line(argv)
    request = {"argv0": program, "args": args, "env": environ, "cwd": os.fspath(cwd or os.getcwd())}
    body = json.dumps(request).encode()
    try:
        socket.send_fds(conn, [_HEADER.pack(len(body)) + body], [fd for fd, _, _ in ends])
    finally:
        for fd, _, ours in ends:
            if ours:
                os.close(fd)
    reply = b""
    while b"\n" not in reply:
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError(f"the fork server did not start {list(argv)}")
        reply += chunk
    line, _, rest = reply.partition(b"\n")
    pid = int(json.loads(line)["pid"])
    return ForkedProcess(list(argv), pid, conn, ends[0][1], ends[1][1], ends[2][1], _buffer=rest)


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | bytes | None = None,
    capture_output: bool = False,
    text: bool = False,
    check: bool = False,
    timeout: float | None = None,
    stdout: Any = None,
    stderr: Any = None,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run``, with a ``gpu-jobs`` command line forked by the server; anything else, or a run whose
    environment changes what Python reads at start-up, is a real process."""
    if not is_gpu_jobs(argv) or needs_real_process(dict(os.environ if env is None else env)):
        return subprocess.run(
            argv,
            env=env,
            cwd=cwd,
            input=input,
            capture_output=capture_output,
            text=text,
            check=check,
            timeout=timeout,
            stdout=stdout,
            stderr=stderr,
        )
    if capture_output:
        stdout = stderr = subprocess.PIPE
    process = popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=text,
    )
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as expired:  # as subprocess.run: killed, and what it wrote kept
        process.kill()
        expired.output, expired.stderr = process.communicate()
        raise
    done = subprocess.CompletedProcess(list(argv), process.wait(), out, err)
    if check:
        done.check_returncode()
    return done


if __name__ == "__main__":
    serve(sys.argv[1])
