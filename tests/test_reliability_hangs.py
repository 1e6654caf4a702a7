"""Servers that hang, trickle or are not Chroma at all (issue #15, items 4, 5 and 8).

A stub HTTP server on a free loopback port plays the part:

* ``identity-hang``: answers heartbeat, pre-flight checks and version like Chroma, but never
  answers ``/api/v2/auth/identity`` (chromadb's client constructor calls it, with no timeout).
* ``trickle``: sends a valid Chroma answer one byte every 0.5 s (httpx's read timeout restarts
  at every byte, so it never fires).
* ``list``: answers ``200 []`` to everything; ``static``: ``python -m http.server``.

Each run must end within its configured timeouts plus a margin (the bound asserted is a hang
guard far above the expected time, never a performance threshold), with a typed error naming
the real cause.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

from flux_chroma import errors as E
from flux_chroma.cli.support import ExitCode, exit_code_for

HANG_GUARD = 40.0  # seconds: expected ~2-4 s; before the fixes these runs took 78 s or forever
TIMEOUTS = {"read_timeout": 2, "connect_timeout": 2, "timeout": 3, "retry_max_attempts": 0}
CHROMA_ANSWERS: dict[str, Any] = {
    "/api/v2/heartbeat": {"nanosecond heartbeat": 1},
    "/api/v2/pre-flight-checks": {"max_batch_size": 100},
    "/api/v2/version": "1.5.9",
    "/api/v2/auth/identity": {"user_id": "", "tenant": "default_tenant", "databases": ["*"]},
}


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.stopping = threading.Event()
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Stub

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        path = self.path.split("?")[0]
        if self.server.mode == "list":
            return self._send(200, b"[]")
        if self.server.mode == "identity-hang" and path == "/api/v2/auth/identity":
            self.server.stopping.wait(120)  # never answers while the test runs
            return None
        if path not in CHROMA_ANSWERS:
            return self._send(404, b'{"error":"NotFound"}')
        body = json.dumps(CHROMA_ANSWERS[path]).encode()
        if self.server.mode == "trickle":
            return self._trickle(body)
        return self._send(200, body)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self, body: bytes) -> None:
        raw = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        try:
            for i in range(len(raw)):
                if self.server.stopping.wait(0.5):
                    return
                self.wfile.write(raw[i : i + 1])
                self.wfile.flush()
        except OSError:
            return  # the client gave up
        self.close_connection = True


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[Stub]:
    server = Stub(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def _list_collections(url: str, tenant: str) -> tuple[Any, float]:
    """Run list_collections in a Flux execution in a thread; (execution, seconds)."""
    result: dict[str, Any] = {}

    def run() -> None:
        spec = {"tenant": tenant, "options": {"url": url, **TIMEOUTS}}
        result["run"] = ft.steps_wf.run({**spec, "steps": [{"task": "list_collections"}]})

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    seconds = time.monotonic() - started
    assert not thread.is_alive(), f"still running after the {HANG_GUARD:.0f} s hang guard"
    return result["run"], seconds


@pytest.mark.parametrize("stub", ["identity-hang"], indirect=True)
def test_server_that_never_answers_identity_fails_in_time_naming_it(stub: Stub, tenant: str) -> None:
    run, seconds = _list_collections(stub.url, tenant)
    assert not run.has_succeeded
    assert isinstance(run.output, E.ChromaUnavailableError), repr(run.output)
    message = str(run.output)
    assert "answered heartbeat but never answered GET /api/v2/auth/identity within 2 s" in message, message
    assert "/api/v2/auth/identity" in stub.paths
    assert seconds < HANG_GUARD


@pytest.mark.parametrize("stub", ["trickle"], indirect=True)
def test_trickling_server_is_bounded_per_request_not_per_byte(stub: Stub, tenant: str) -> None:
    run, seconds = _list_collections(stub.url, tenant)
    assert not run.has_succeeded
    assert isinstance(run.output, E.ChromaUnavailableError), repr(run.output)
    message = str(run.output)
    assert "GET /api/v2/heartbeat got no complete answer within 2 s" in message, message
    assert "timed out (3" not in message, message  # the real cause, not Flux's timeout
    assert seconds < HANG_GUARD


@pytest.mark.parametrize("stub", ["list"], indirect=True)
def test_server_answering_200_to_everything_is_not_chroma(stub: Stub, tenant: str) -> None:
    run, _ = _list_collections(stub.url, tenant)
    assert isinstance(run.output, E.NotChromaServerError), repr(run.output)
    message = str(run.output)
    assert f"{stub.url} answered but is not a Chroma server (GET /api/v2/heartbeat -> 200" in message, message
    assert "mapping" not in message and "fix the request" not in message
    assert ft.retry_failures(run.events) <= 1  # permanent: never retried
    assert exit_code_for(run.output) == ExitCode.UNREACHABLE


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_static_http_server_is_not_chroma(tmp_path: Path, tenant: str) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ft.wait_until(lambda: _answers(port), "python -m http.server")
        url = f"http://127.0.0.1:{port}"
        run, _ = _list_collections(url, tenant)
        assert isinstance(run.output, E.NotChromaServerError), repr(run.output)
        message = str(run.output)
        assert f"{url} answered but is not a Chroma server (GET /api/v2/heartbeat -> 404" in message, message
        assert "fix the request" not in message
        cli = subprocess.run(
            [sys.executable, "-m", "flux_chroma.cli", "collections", "--tenant", tenant, "--url", url],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
        assert cli.returncode == 3, cli.stdout + cli.stderr
        assert "not a Chroma server" in cli.stdout + cli.stderr
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
