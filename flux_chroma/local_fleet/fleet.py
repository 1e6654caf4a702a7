"""A Flux server and its workers on loopback, as real OS processes: :class:`LocalFleet`.

The server keeps its state in a throwaway PostgreSQL (what several workers need) or SQLite, and
allows anonymous access because everything listens on 127.0.0.1 only. Workers reach Chroma
through ``FLUX_CHROMA_URL`` and the Flux server through ``FLUX_WORKERS__SERVER_URL``.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, Literal, Self, cast

import httpx

from flux_chroma.errors import ServerStartError
from flux_chroma.local_fleet.processes import (
    RUN_TIMEOUT,
    Processes,
    clean_env,
    flux_cli,
    free_port,
    tool,
    wait_for,
)

__all__ = ["LIVENESS", "LocalFleet"]

LIVENESS = {
    "FLUX_WORKERS__HEARTBEAT_INTERVAL": "2",
    "FLUX_WORKERS__HEARTBEAT_TIMEOUT": "8",
    "FLUX_WORKERS__EVICTION_GRACE_PERIOD": "4",
}
"""Short worker liveness: a dead worker's executions are reclaimed after ~12 s, not ~60 s."""

_ENDED = ("COMPLETED", "FAILED", "CANCELLED")
_STATE_LAG_GUARD = 60.0  # seconds a sync answer's state may take to catch up with its events


class LocalFleet:
    """A Flux server (and its database) plus workers under ``workdir``; :meth:`stop` ends them all.

    Args:
        workdir: State and logs of every process (``WORKDIR/NAME/output.log``).
        chroma_url: ``FLUX_CHROMA_URL`` of the workers.
        database: ``"postgresql"`` (a throwaway PostgreSQL: several workers; the server in Flux's
            ``event`` dispatch mode, as docs/deployment.md sets it for a fleet) or ``"sqlite"``.
        server_env: Extra environment variables of the Flux server (they win over the above).
        worker_env: Extra environment variables of the workers.
        keep_env: Prefixes of this process's ``FLUX_``/``CHROMA_`` variables the processes
            inherit (see :func:`clean_env`); all others are dropped.
        preload: ``(folder, module)`` every worker Python process puts on ``sys.path`` and
            imports first (a ``sitecustomize``), e.g. to register embedding functions.
        processes: Start the processes in this group (to stop them together with others).
    """

    def __init__(
        self,
        workdir: Path,
        chroma_url: str,
        *,
        database: Literal["postgresql", "sqlite"] = "postgresql",
        server_env: dict[str, str] | None = None,
        worker_env: dict[str, str] | None = None,
        keep_env: tuple[str, ...] = (),
        preload: tuple[Path, str] | None = None,
        processes: Processes | None = None,
    ) -> None:
        self.workdir = workdir
        self.chroma_url = chroma_url
        self.database = database
        self.extra_server_env = dict(server_env or {})
        self.worker_env = dict(worker_env or {})
        self.keep_env = keep_env
        self.processes = processes if processes is not None else Processes(workdir)
        self.url = ""
        self.token = ""
        self.server_env: dict[str, str] = {}
        self.site: Path | None = None
        self._http: httpx.Client | None = None
        if preload is not None:
            folder, module = preload
            self.site = workdir / "site"
            self.site.mkdir(parents=True, exist_ok=True)
            (self.site / "sitecustomize.py").write_text(
                f"import sys\nsys.path.insert(0, {str(folder)!r})\nimport {module}  # noqa: F401\n"
            )

    def start(self, workers: int) -> Self:
        """Start the database, the Flux server and workers ``worker-1`` ... ``worker-N``, online.

        Raises:
            ServerStartError: A process exited or did not answer in time (its log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{free_port()}"
        home = self.workdir / "flux-server"
        if self.database == "postgresql":
            database = {
                "FLUX_DATABASE_URL": self.processes.start_postgres(),
                "FLUX_DATABASE_TYPE": "postgresql",
                "FLUX_DISPATCH__MODE": "event",  # one dispatcher woken by NOTIFY, not a poll per worker
            }
        else:
            database = {"FLUX_DATABASE_URL": f"sqlite:///{home / 'flux.db'}"}
        self.server_env = clean_env(
            self.keep_env,
            FLUX_HOME=str(home),
            FLUX_SECURITY__AUTH__ALLOW_ANONYMOUS="true",  # loopback only; configure auth in production
            **{**database, **self.extra_server_env},
        )
        self.start_server()
        self.token = wait_for("the bootstrap token", self._bootstrap_token, self.processes, "flux-server")
        # The workers share this host's cores: each ONNX session gets its share, as
        # docs/deployment.md ("Embedding threads") advises, unless the caller set a value.
        from flux_chroma.embedding.onnx_session import EMBED_THREADS_ENV, threads_per_process

        if EMBED_THREADS_ENV not in clean_env(self.keep_env, **self.worker_env):
            self.worker_env[EMBED_THREADS_ENV] = str(threads_per_process(workers))
        names = [f"worker-{n}" for n in range(1, workers + 1)]
        for name in names:
            self.start_worker(name)
        wait_for("the workers online", lambda: self.online() >= set(names), self.processes, names[-1])
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _bootstrap_token(self) -> str:
        """The configured or persisted bootstrap token, else ``flux server bootstrap-token``'s
        (the command costs a Python start-up, seconds on a busy machine)."""
        from flux.security.bootstrap_token import read_persisted

        configured = self.server_env.get("FLUX_WORKERS__BOOTSTRAP_TOKEN", "").strip()
        if configured:
            return configured
        return read_persisted(self.server_env["FLUX_HOME"]) or flux_cli(["server", "bootstrap-token"], self.server_env, 30).strip()

    def start_server(self) -> None:
        """Start the Flux server (again, after :meth:`stop_server`: same port and database)."""
        port = self.url.rsplit(":", 1)[1]
        argv = [tool("flux"), "start", "server", "--host", "127.0.0.1", "--port", port]
        self.processes.start("flux-server", argv, self.server_env)
        wait_for(
            "the Flux server",
            lambda: self.http.get("/health", timeout=2).json().get("status") == "healthy",
            self.processes,
            "flux-server",
        )

    def stop_server(self, sig: int = signal.SIGTERM) -> None:
        """Stop the Flux server (``sig`` to its process group); the database and workers stay up."""
        self.processes.signal("flux-server", sig, forget=True)

    def start_worker(self, name: str, *, server_url: bool = True) -> int:
        """Start one worker; its pid (``server_url=False``: no ``FLUX_WORKERS__SERVER_URL``)."""
        env = clean_env(
            self.keep_env,
            FLUX_HOME=str(self.workdir / name / ".flux"),
            FLUX_WORKERS__BOOTSTRAP_TOKEN=self.token,
            FLUX_CHROMA_URL=self.chroma_url,
            **self.worker_env,
        )
        if self.site is not None:
            env["PYTHONPATH"] = str(self.site)
        if server_url:
            env["FLUX_WORKERS__SERVER_URL"] = self.url  # child executions (parallel units) go here
        argv = [tool("flux"), "start", "worker", name, "--server-url", self.url]
        return self.processes.start(name, argv, env, group="workers").pid  # stopped together

    def kill(self, name: str) -> None:
        """SIGKILL a worker's whole process group (the worker and its execution children)."""
        self.processes.signal(name, signal.SIGKILL)

    def stop(self) -> None:
        """Stop every process started here (by pid), the database last."""
        if self._http is not None:
            self._http.close()
            self._http = None
        self.processes.stop()

    @property
    def http(self) -> httpx.Client:
        """An HTTP client of the Flux server (after :meth:`start`)."""
        if not self.url:
            raise ServerStartError("the Flux server is not started: call LocalFleet.start() first")
        if self._http is None:
            # One client (its TLS set-up loads CA files: ~30 ms) but a fresh connection per
            # request: tests stop and restart the server under it.
            fresh = httpx.Limits(max_keepalive_connections=0)
            self._http = httpx.Client(base_url=self.url, timeout=RUN_TIMEOUT, limits=fresh)
        return self._http

    def pid(self, name: str) -> int:
        """The pid of a process started here (``flux-server``, ``worker-1``, ...)."""
        return self.processes.pids()[name]

    def online(self) -> set[str]:
        """Names of the workers the server sees online (empty while it does not answer)."""
        try:
            workers = self.http.get("/workers", timeout=30).json()
        except (httpx.HTTPError, ValueError):
            return set()
        return {w["name"] for w in workers if isinstance(w, dict) and w.get("status") == "online"}

    def wait_online(self, names: list[str], guard: float = 90.0) -> None:
        """Wait until the server sees ``names`` online (others may have exited meanwhile).

        Raises:
            TimeoutError: Not all online within ``guard`` seconds.
        """
        deadline = time.monotonic() + guard
        while not self.online() >= set(names):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"workers {names} not online after {guard} s:\n{self.processes.log_tail(names[-1])}"
                )
            time.sleep(0.3)

    def register(self, path: Path) -> list[dict[str, Any]]:
        """Register the workflows of one file (what ``flux workflow register`` does)."""
        with path.open("rb") as source:
            response = self.http.post("/workflows", files={"file": (path.name, source, "text/x-python")})
        response.raise_for_status()
        return cast(list[dict[str, Any]], response.json())

    def run_sync(self, ref: str, payload: Any) -> dict[str, Any]:
        """Run ``namespace/name`` and wait for its answer (``flux workflow run --mode sync``).

        Raises:
            RuntimeError: The execution did not complete (the message carries it).
        """
        execution = self._run(ref, payload, "sync")
        if execution.get("state") not in _ENDED and "execution_id" in execution:
            # Flux answers a sync run once the completion event is stored, and has been seen
            # (on a loaded host) to do so while the execution's state still read RUNNING.
            execution = self.wait_terminal(str(execution["execution_id"]), _STATE_LAG_GUARD)
        if execution.get("state") == "FAILED" or "output" not in execution:
            raise RuntimeError(f"{ref} ended {execution.get('state')}: {json.dumps(execution)[:2000]}")
        return execution

    def submit(self, ref: str, payload: Any) -> str:
        """Start an execution of ``namespace/name`` (``flux workflow run --mode async``); its id."""
        return str(self._run(ref, payload, "async")["execution_id"])

    def _run(self, ref: str, payload: Any, mode: str) -> dict[str, Any]:
        """What ``flux workflow run REF PAYLOAD --mode MODE`` sends, without a process per call."""
        namespace, name = ref.split("/", 1)
        response = self.http.post(f"/workflows/{namespace}/{name}/run/{mode}", json=payload)
        response.raise_for_status()
        return cast(dict[str, Any], response.json())

    def execution(self, execution_id: str, *, detailed: bool = False) -> dict[str, Any]:
        """The execution's summary (state, input, output, current_worker; ``events`` if detailed)."""
        params = {"detailed": "true"} if detailed else {}
        response = self.http.get(f"/executions/{execution_id}", params=params, timeout=10)
        response.raise_for_status()
        return cast(dict[str, Any], response.json())

    def wait_terminal(self, execution_id: str, guard: float) -> dict[str, Any]:
        """Poll until the execution ends; ``TimeoutError`` after ``guard`` seconds."""
        deadline = time.monotonic() + guard
        while time.monotonic() < deadline:
            execution = self.execution(execution_id)
            if execution.get("state") in _ENDED:
                return execution
            time.sleep(0.5)
        raise TimeoutError(
            f"execution {execution_id} did not end within {guard} s: {self.execution(execution_id)}"
        )
