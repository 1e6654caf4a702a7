"""Fault-injection helpers for the reliability tests: real processes, real servers, no mocks.

* :class:`HashEmbedding`: a cheap, deterministic embedding function registered with chromadb
  (``name()``/``get_config()``/``build_from_config()``), with an optional cross-process *gate*
  that parks the embedding of one marked batch until the test has injected its fault.
* :data:`steps_wf`: one generic workflow that runs a list of public flux-chroma task calls.
  Secrets never travel in its input: ``token_env``/``headers_env`` name environment variables.
* :class:`BackgroundRun`: a workflow execution in a thread whose live event list the test
  can watch (Flux only checkpoints a task's retry events when the task ends).
* :class:`WorkerProcess`: a long-lived worker OS process running workflows on command.
* :class:`AuthProxy`: a loopback reverse proxy that answers 401 unless a bearer token is sent.
* :class:`OwnServer`: a dedicated server to freeze, SIGKILL, restart on the same port,
  snapshot and restore; :func:`wait_until` polls (its time limit is a hang guard only).

Flux re-executes this module when it registers ``steps_wf``: keep it free of side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function
from flux import ExecutionContext, workflow
from flux.domain.events import ExecutionEventType

import flux_chroma
from flux_chroma import ChromaServer

TESTS_DIR = Path(__file__).resolve().parent
HANG_GUARD = 180.0  # seconds; only stops a broken test from hanging, never a pass criterion
MARK = "@@FC "  # prefix of protocol lines on a worker's stdout (Flux logs go there too)
GATE_DIR_ENV, GATE_TEXT_ENV = "FC_TEST_GATE_DIR", "FC_TEST_GATE_TEXT"
FAIL_TEXT_ENV = "FC_TEST_FAIL_TEXT"  # HashEmbedding raises on a text starting with this
CALL_LOG_ENV = "FC_TEST_CALL_LOG"  # HashEmbedding appends {"thread", "texts"} per call to this file


# --------------------------------------------------------------------- embedding function


@register_embedding_function
class HashEmbedding(EmbeddingFunction[Documents]):
    """Deterministic unit vectors from SHA-256 of the text (equal texts, equal vectors).

    Failure switch: a text starting with ``$FC_TEST_FAIL_TEXT`` makes the call raise (a broken
    embedding backend). ``$FC_TEST_CALL_LOG`` names a file that gets one JSON line per call
    (the calling thread's name and the number of texts). Gate: when ``$FC_TEST_GATE_DIR`` is set and a text starts with ``$FC_TEST_GATE_TEXT``, the
    first such call creates ``reached`` in that folder and blocks until ``release`` exists.

    Args:
        dim: Vector dimension.
    """

    def __init__(self, dim: int = 16) -> None:
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:
        _gate(input)
        log = os.environ.get(CALL_LOG_ENV)
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"thread": threading.current_thread().name, "texts": len(input)}) + "\n")
        broken = os.environ.get(FAIL_TEXT_ENV)
        if broken and any(t.startswith(broken) for t in input):
            raise RuntimeError("embedding backend down (test switch FC_TEST_FAIL_TEXT)")
        return [self.vector(text) for text in input]

    def vector(self, text: str) -> np.ndarray:
        """The vector of one text."""
        raw = b"".join(
            hashlib.sha256(f"{i}:{text}".encode()).digest() for i in range(self.dim // 8 + 1)
        )
        values = np.frombuffer(raw, dtype=np.uint8)[: self.dim].astype(np.float32) - 127.5
        return values / np.linalg.norm(values)

    @staticmethod
    def name() -> str:
        """Registry name."""
        return "fc-test-hash"

    def get_config(self) -> dict[str, Any]:
        """Persisted config."""
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashEmbedding:
        """Rebuild from a persisted config."""
        return HashEmbedding(int(config.get("dim", 16)))

    def is_legacy(self) -> bool:
        """Full config protocol."""
        return False

    def default_space(self) -> Space:
        """l2, like Chroma's default."""
        return "l2"

    def supported_spaces(self) -> list[Space]:
        """Spaces that make sense for unit vectors."""
        return ["l2", "cosine", "ip"]


def _gate(texts: Iterable[str]) -> None:
    folder, marker = os.environ.get(GATE_DIR_ENV), os.environ.get(GATE_TEXT_ENV)
    if not folder or not marker or not any(t.startswith(marker) for t in texts):
        return
    reached = Path(folder) / "reached"
    if reached.exists():
        return  # only the first call is parked
    reached.touch()
    wait_until(lambda: (Path(folder) / "release").exists(), "the gate's release file")


def open_gate(folder: Path, marker: str) -> dict[str, str]:
    """Environment that parks the first embedding of a text starting with ``marker``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {GATE_DIR_ENV: str(folder), GATE_TEXT_ENV: marker}


def wait_for_gate(folder: Path, finished: Callable[[], bool]) -> None:
    """Wait until the gate is reached; fail at once if the run ``finished`` before that."""
    wait_until(lambda: (folder / "reached").exists() or finished(), "the gate")
    assert (folder / "reached").exists(), "the run finished without reaching the gate"


def docs(prefix: str, count: int, start: int = 0) -> list[dict[str, Any]]:
    """``count`` small documents ``{prefix}-{i}`` with a metadata key naming their id."""
    return [
        {
            "id": f"{prefix}-{i}",
            "text": f"{prefix} document number {i}",
            "metadata": {"key": f"{prefix}-{i}"},
        }
        for i in range(start, start + count)
    ]


# --------------------------------------------------------------------------- workflows

TASKS = {
    "embed_and_add": flux_chroma.embed_and_add,
    "query": flux_chroma.query,
    "list_collections": flux_chroma.list_collections,
    "delete_collection": flux_chroma.delete_collection,
    "delete_documents": flux_chroma.delete_documents,
}


def task_options(spec: dict[str, Any]) -> dict[str, Any]:
    """Task options from a workflow input: ``options`` plus ``tenant``, ``hash_dim``, env secrets."""
    opts = dict(spec.get("options") or {})
    if "tenant" in spec:
        opts["tenant"] = spec["tenant"]
    if spec.get("hash_dim"):
        opts["embedding_function"] = HashEmbedding(spec["hash_dim"])
    if spec.get("token_env"):
        opts["token"] = os.environ[spec["token_env"]]
    if spec.get("headers_env"):
        opts["headers"] = json.loads(os.environ[spec["headers_env"]])
    return opts


@workflow
async def steps_wf(ctx: ExecutionContext[dict[str, Any]]) -> list[Any]:
    """Run ``input.steps`` (``{"task", "args", "kwargs", "options"}``) in order; return outputs."""
    base = task_options(ctx.input)
    out = []
    for step in ctx.input["steps"]:
        call = TASKS[step["task"]].with_options(**{**base, **(step.get("options") or {})})
        out.append(await call(*step.get("args", []), **step.get("kwargs", {})))
    return out


def ingest_steps(collection: str, batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One ``embed_and_add`` step per batch."""
    return [{"task": "embed_and_add", "args": [collection, batch]} for batch in batches]


def retry_failures(events: Iterable[Any]) -> int:
    """Number of failed attempts that Flux retried or gave up on (original attempts included)."""
    return sum(1 for e in events if e.type == ExecutionEventType.TASK_RETRY_FAILED)


def describe(ctx: ExecutionContext[Any]) -> dict[str, Any]:
    """A JSON summary of a finished execution."""
    out = ctx.output
    return {
        "ok": bool(ctx.has_succeeded),
        "output": out if ctx.has_succeeded else None,
        "error_type": None if ctx.has_succeeded else type(out).__name__,
        "error": None if ctx.has_succeeded else str(out),
        "execution_id": ctx.execution_id,
        "retry_failures": retry_failures(ctx.events),
        "retry_started": sum(
            1 for e in ctx.events if e.type == ExecutionEventType.TASK_RETRY_STARTED
        ),
    }


class BackgroundRun:
    """Run ``wf`` on ``input`` in a thread; ``events`` is the live (in-memory) event list."""

    def __init__(self, wf: Any, input: dict[str, Any]) -> None:
        self.ctx: ExecutionContext[Any] = ExecutionContext(
            workflow_id=wf._ensure_registered(),
            workflow_namespace=wf.namespace,
            workflow_name=wf.name,
            input=input,
        )
        wf._save(self.ctx)
        self.ctx.set_checkpoint(wf._save)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(wf,), daemon=True)
        self._thread.start()

    def _run(self, wf: Any) -> None:
        try:
            asyncio.run(wf(self.ctx))
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self.error = exc

    @property
    def events(self) -> list[Any]:
        """The execution's events so far."""
        return list(self.ctx.events)

    def done(self) -> bool:
        """True once the workflow (and every worker thread it started) has finished."""
        return not self._thread.is_alive()

    def join(self) -> ExecutionContext[Any]:
        """Wait for the end (hang guard only) and return the context."""
        self._thread.join(HANG_GUARD)
        assert not self._thread.is_alive(), "workflow thread still blocked after the hang guard"
        if self.error is not None:
            raise self.error
        return self.ctx


# -------------------------------------------------------------------- worker processes


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for a child worker: its own Flux home and database, tests on sys.path."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FC_TEST_", "PYTEST_"))}
    env.update(
        FLUX_HOME=str(home),
        FLUX_DATABASE_URL=f"sqlite:///{home / 'flux.db'}",
        PYTHONPATH=os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)]),
    )
    env.update(extra)
    return env


def reply(payload: Any) -> None:
    """Print one protocol line for the parent."""
    print(MARK + json.dumps(payload, default=str), flush=True)


def worker_main() -> None:
    """Serve ``{"wf": "steps_wf", "input": {...}}`` commands from stdin, one reply each."""
    reply({"ready": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        try:
            reply(describe(globals()[command["wf"]].run(command["input"])))
        except Exception:  # noqa: BLE001 - a crash of run() itself is a test failure
            reply({"ok": False, "crash": traceback.format_exc()})


class WorkerProcess:
    """A child OS process running :func:`worker_main` (or ``code``) with its own Flux state.

    Args:
        home: Folder for the child's Flux state and stderr.
        env: Extra environment variables.
        code: Python code to run (default: the command loop).
    """

    def __init__(
        self, home: Path, env: dict[str, str] | None = None, code: str | None = None
    ) -> None:
        self.stderr_path = home / "stderr.txt"
        home.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code or "import fault_tools; fault_tools.worker_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=child_env(home, **(env or {})),
        )
        self.other_output: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                self._lines.put(line[len(MARK) :])
            else:
                self.other_output.append(line)
        self._lines.put(None)

    def read(self) -> Any:
        """The next protocol reply (hang guard only)."""
        try:
            line = self._lines.get(timeout=HANG_GUARD)
        except queue.Empty:
            raise AssertionError(
                f"worker {self.proc.pid} sent nothing for {HANG_GUARD} s"
            ) from None
        if line is None:
            raise AssertionError(
                f"worker {self.proc.pid} exited: {self.stderr_path.read_text()[-3000:]}"
            )
        return json.loads(line)

    def has_reply(self) -> bool:
        """True when a reply (or the end of output) is waiting."""
        return not self._lines.empty()

    def send(self, payload: Any) -> None:
        """Write one JSON line to the child's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()

    def run(self, input: dict[str, Any], wf: str = "steps_wf") -> dict[str, Any]:
        """Run a workflow in the child and return :func:`describe` of it."""
        self.send({"wf": wf, "input": input})
        result: dict[str, Any] = self.read()
        assert "crash" not in result, result["crash"]
        return result

    def close(self) -> None:
        """Close stdin, wait for the exit, SIGKILL this pid if it hangs."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait()
        finally:
            self._stderr.close()


# ----------------------------------------------------------------------- server helpers


def wait_until(predicate: Callable[[], bool], what: str, guard: float = HANG_GUARD) -> None:
    """Poll ``predicate`` every 20 ms; fail after ``guard`` seconds (hang guard only)."""
    deadline = time.monotonic() + guard
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class OwnServer:
    """A dedicated ``chroma run`` server in ``folder`` that a test may kill, freeze or replace.

    Restarts reuse the directory and the port, so workers keep the same URL.

    Args:
        folder: Holds ``data/`` and one log per start.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.starts = 0
        self.server = self._start(port=0)

    def _start(self, port: int) -> ChromaServer:
        self.starts += 1
        log = self.folder / f"chroma-{self.starts}.log"
        return ChromaServer(self.folder / "data", port=port, log_path=log).start()

    @property
    def url(self) -> str:
        """The server URL (stable across restarts)."""
        return self.server.url

    @property
    def data(self) -> Path:
        """The data directory."""
        return self.server.path

    @property
    def pid(self) -> int:
        """The running ``chroma`` pid."""
        assert self.server.pid is not None
        return self.server.pid

    def signal(self, sig: int) -> None:
        """Send ``sig`` (SIGSTOP, SIGCONT, ...) to the ``chroma`` process."""
        os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL ``chroma``, reap it and release the directory."""
        self.signal(signal.SIGKILL)
        self.server.stop()

    def restart(self) -> None:
        """Start again on the same directory and port (stops the current process first)."""
        self.server.stop()
        self.server = self._start(port=self.server.port)

    def snapshot(self, dest: Path) -> None:
        """Copy the data directory to ``dest`` while the server is stopped, then restart."""
        self.server.stop()
        shutil.copytree(self.data, dest)
        self.restart()

    def restore(self, snapshot: Path) -> None:
        """Replace the data directory with ``snapshot`` and restart on the same port."""
        self.server.stop()
        shutil.rmtree(self.data)
        shutil.copytree(snapshot, self.data)
        self.restart()

    def stop(self) -> None:
        """Stop for good (SIGCONT first, in case a test left it frozen)."""
        if self.server.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server.pid, signal.SIGCONT)
        self.server.stop()

    def client(self) -> Any:
        """A plain chromadb HttpClient on this server."""
        import chromadb
        from chromadb.config import Settings

        return chromadb.HttpClient(
            host="127.0.0.1", port=self.server.port, settings=Settings(anonymized_telemetry=False)
        )

    def pending_request_bytes(self) -> int:
        """Bytes that clients sent and ``chroma`` has not read yet (Linux /proc)."""
        total = 0
        for table in ("tcp", "tcp6"):
            for row in Path(f"/proc/{self.pid}/net/{table}").read_text().splitlines()[1:]:
                fields = row.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == self.server.port:
                    total += int(fields[4].split(":")[1], 16)
        return total


# ---------------------------------------------------------------------------- auth proxy

_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "host",
}


class AuthProxy:
    """A loopback reverse proxy to ``upstream`` that answers 401 unless the token is sent.

    Args:
        upstream: The real Chroma server URL.
        token: Accepted bearer token (``Authorization: Bearer <token>``).
        echo: Hostile mode: the rejection body quotes the Authorization header it received.
        status: HTTP status of a rejection (tests may change it, and ``token``, at any time).
    """

    def __init__(self, upstream: str, token: str, *, echo: bool = False, status: int = 401) -> None:
        self.upstream, self.token, self.echo, self.status = upstream, token, echo, status
        self.forwarded = 0
        self.rejected = 0
        self._lock = threading.Lock()
        self._http = httpx.Client(base_url=upstream, timeout=60, trust_env=False)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The proxy's URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        presented = handler.headers.get("Authorization", "")
        if presented != f"Bearer {self.token}":
            with self._lock:
                self.rejected += 1
            message = (
                f"invalid credentials {presented!r}"
                if self.echo
                else "missing or invalid bearer token"
            )
            name = "Unauthorized" if self.status == 401 else "BadRequest"
            self._respond(
                handler,
                self.status,
                {"content-type": "application/json"},
                json.dumps({"error": name, "message": message}).encode(),
            )
            return
        headers = {
            k: v for k, v in handler.headers.items() if k.lower() not in _HOP | {"authorization"}
        }
        upstream = self._http.request(handler.command, handler.path, content=body, headers=headers)
        with self._lock:
            self.forwarded += 1
        kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        self._respond(handler, upstream.status_code, kept, upstream.content)

    @staticmethod
    def _respond(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        """Stop serving and close the upstream client."""
        self._server.shutdown()
        self._server.server_close()
        self._http.close()


def python_child(code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Run ``python -c code`` with text pipes on stdin and stdout (the caller reaps it)."""
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
