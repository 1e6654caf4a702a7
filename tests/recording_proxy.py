"""A tiny loopback reverse proxy for tests: records every request, can demand a header.

It forwards to a real Chroma server with httpx. Tests use it to prove what did (and did not)
reach the server, and as a stand-in for a token-checking proxy in front of Chroma.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "content-encoding"}


@dataclass
class Recorded:
    """One request seen by the proxy."""

    method: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class RecordingProxy:
    """Forward loopback HTTP requests to ``upstream`` and remember them.

    Args:
        upstream: Base URL of the real server, e.g. ``http://127.0.0.1:8000``.
        require_header: Optional ``(name, value)``; requests without it get 401.
    """

    def __init__(self, upstream: str, require_header: tuple[str, str] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.require_header = require_header
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=30)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items()}
                with proxy._lock:
                    proxy.requests.append(Recorded(self.command, self.path, body, headers))
                if proxy.require_header is not None:
                    name, value = proxy.require_header
                    if self.headers.get(name) != value:
                        payload = b'{"error":"Unauthorized","message":"missing or wrong token"}'
                        self.send_response(401)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                        return
                forward = {k: v for k, v in headers.items() if k.lower() not in _HOP}
                upstream = proxy._http.request(self.command, proxy.upstream + self.path, content=body, headers=forward)
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(upstream.content)))
                self.end_headers()
                self.wfile.write(upstream.content)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The proxy's loopback URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def seen(self) -> list[Recorded]:
        """A snapshot of the recorded requests."""
        with self._lock:
            return list(self.requests)
