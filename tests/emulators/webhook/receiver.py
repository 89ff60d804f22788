"""An incoming-webhook receiver on 127.0.0.1, as Slack's behaves on the wire: ``POST`` of a JSON body to the
webhook's path answers ``200 ok``; a body that is not JSON, or not an object with ``text``, answers ``400
invalid_payload``; another path answers ``404 no_service``. Faults (:class:`tests.emulators.base.Faults`, operation
``post``): ``throttle`` -> 429 ``rate_limited`` with ``Retry-After: 1`` (Slack's own answer to a burst),
``server_error`` -> 500, ``timeout`` -> held past the client's timeout, then 504. ``GET /received`` lists the
messages accepted so far.

``messages`` are the bodies it accepted (what a person would see); ``log`` has every request, refused ones too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from tests.emulators.base import Emulator, RunningServer, start

#: The webhook's path: a URL like Slack's, whose path is the secret part.
PATH = "/services/T0GPUJOBS/B0NOTIFY/sandbox0secret0token"
OPERATION = "post"
#: ``GET`` here lists the messages accepted so far (JSON), for a person at the sandbox: ``curl URL/received``.
RECEIVED = "/received"

_FAULTS = {
    "throttle": ("429 Too Many Requests", b"rate_limited", [("Retry-After", "1")]),
    "server_error": ("500 Internal Server Error", b"internal_error", []),
    "timeout": ("504 Gateway Timeout", b"", []),
}


class WebhookReceiver(Emulator):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server: RunningServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None, "not started"
        return self.server.url + PATH

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.messages)

    def attempts(self) -> int:
        return self.log.count(OPERATION)

    def clear(self) -> None:
        with self._lock:
            self.messages.clear()
        self.log.clear()
        self.faults.clear()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        fault = self.begin(method, path, OPERATION if method == "POST" else method.lower(), body=body)
        if fault in _FAULTS:
            status, text, headers = _FAULTS[fault]
            return _answer(start_response, status, text, headers)
        if (method, path) == ("GET", RECEIVED):  # what a person at the sandbox reads (curl)
            with self._lock:
                listing = json.dumps(self.messages, indent=2).encode()
            return _answer(start_response, "200 OK", listing, [("Content-Type", "application/json")])
        if path != PATH:
            return _answer(start_response, "404 Not Found", b"no_service")
        if method != "POST":
            return _answer(start_response, "405 Method Not Allowed", b"invalid_method")
        try:
            message = json.loads(body)
        except ValueError:
            return _answer(start_response, "400 Bad Request", b"invalid_payload")
        if not isinstance(message, dict) or not isinstance(message.get("text"), str) or not message["text"]:
            return _answer(start_response, "400 Bad Request", b"no_text")
        with self._lock:
            self.messages.append(message)
        return _answer(start_response, "200 OK", b"ok")

    def start(self, port: int = 0) -> WebhookReceiver:
        self.server = start(self, port)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def _answer(
    start_response: Callable[..., Any], status: str, text: bytes, headers: list[tuple[str, str]] | None = None
) -> list[bytes]:
    sent = dict([("Content-Type", "text/plain"), *(headers or [])])
    start_response(status, [*sent.items(), ("Content-Length", str(len(text)))])
    return [text]


def start_receiver(port: int = 0) -> WebhookReceiver:
    return WebhookReceiver().start(port)
