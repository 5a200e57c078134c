"""A real HTTP server for the monitoring tests: it records what monitors would receive.

The first path segment decides how it answers: ``/ok/...`` 200, ``/500/...`` 500,
``/hang/...`` never (until the server stops), ``/slow/...`` 200 after ``SLOW`` seconds (a
receiver that takes a request and answers past a 1-s ``PING_TIMEOUT``).
``/api/<project>/envelope/`` is Sentry's ingestion endpoint: its envelopes are decoded with the
SDK's own parser.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Seconds a ``/slow/`` request waits for its answer.
SLOW = 2.0


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    at: float
    headers: dict[str, str] = field(default_factory=dict)


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def paths(self, prefix: str = "") -> list[tuple[str, str]]:
        with self.lock:
            return [(r.method, r.path) for r in self.requests if r.path.startswith(prefix)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"never happened; requests: {self.paths()}"
            time.sleep(0.02)

    def check_ins(self) -> list[dict[str, Any]]:
        """The Sentry check-in payloads received so far, in order."""
        from sentry_sdk.envelope import Envelope

        found = []
        with self.lock:
            bodies = [r.body for r in self.requests if r.path.endswith("/envelope/")]
        for body in bodies:
            for item in Envelope.deserialize(body).items:
                if item.type == "check_in":
                    found.append(json.loads(item.payload.get_bytes()))
        return found

    def hang_no_more(self) -> None:
        """End the ``/hang/`` and ``/slow/`` requests now and later at once, unanswered (the
        connection closes): a sender stopped once the test has seen what it waits for need
        not wait its ``PING_TIMEOUT`` out."""
        self.stopping.set()

    def stop(self) -> None:
        self.hang_no_more()
        self.shutdown()
        self.server_close()


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "br":
            import brotli  # type: ignore[import-not-found]

            body = brotli.decompress(body)
        headers = dict(self.headers.items())
        self.server.record(Request(self.command, self.path, body, time.monotonic(), headers))
        mode = self.path.split("/")[1]
        if mode == "hang":
            self.server.stopping.wait(60)
            return
        if mode == "slow" and self.server.stopping.wait(SLOW):
            return
        status = 500 if mode == "500" else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _answer


def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()
