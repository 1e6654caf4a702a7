"""A real Flux server and worker(s) on loopback, for serving benchmarks and tests.

:class:`FluxStack` starts ``flux start server`` (SQLite state in its folder, anonymous access
on 127.0.0.1 only) and ``flux start worker`` processes, each in its own process group, and
stops every one of them by pid. Workflows are registered and run over Flux's HTTP API
(``POST /workflows``, ``POST /workflows/{ns}/{name}/run/sync``), so a timed call measures the
server and the worker, not a ``flux`` CLI process starting up.

Example:
    >>> with FluxStack(folder, chroma_url=server.url) as stack:  # doctest: +SKIP
    ...     stack.register(Path("examples/distributed/workflows.py"))
    ...     stack.run_sync("kb/ask", {"tenant": "acme", "question": "refunds?"})
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

__all__ = ["FluxStack"]

_BIN = Path(sys.executable).parent
_STARTUP = 120.0  # seconds; a hang guard, not an expectation
_RUN = 300.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _flux() -> str:
    path = _BIN / "flux"
    if not path.exists():
        raise RuntimeError(f"`flux` is not installed next to {sys.executable} (pip install -e .)")
    return str(path)


class FluxStack:
    """One Flux server and ``workers`` workers as OS processes under ``folder``.

    Args:
        folder: State and logs (created).
        chroma_url: ``FLUX_CHROMA_URL`` of the workers.
        workers: Number of workers (named ``worker-1``, ``worker-2``, ...).
        worker_env: Extra environment variables for the workers.
    """

    def __init__(
        self,
        folder: Path,
        chroma_url: str,
        workers: int = 1,
        worker_env: dict[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.chroma_url = chroma_url
        self.worker_count = workers
        self.worker_env = dict(worker_env or {})
        self.url = ""
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._http: httpx.Client | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _env(self, **extra: str) -> dict[str, str]:
        env = {  # flux-chroma's own settings (model, cache) pass through; Flux's do not
            k: v
            for k, v in os.environ.items()
            if k.startswith("FLUX_CHROMA_") or not k.startswith(("FLUX_", "CHROMA_"))
        }
        env.update(FLUX_LOG_LEVEL="WARNING", PATH=f"{_BIN}{os.pathsep}{env.get('PATH', '')}")
        env.update(extra)
        return env

    def _start(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        cwd = self.folder / name
        cwd.mkdir(parents=True, exist_ok=True)
        with (cwd / "output.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last ``lines`` lines of one process's output."""
        log = self.folder / name / "output.log"
        return (
            "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""
        )

    def _wait(self, what: str, probe: Any) -> Any:
        deadline = time.monotonic() + _STARTUP
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log_tail(name)}")
            try:
                value = probe()
            except (httpx.HTTPError, OSError, ValueError, subprocess.SubprocessError):
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.log_tail('flux-server')}")

    def start(self) -> None:
        """Start the server, then the workers, and wait until every worker is online."""
        self.folder.mkdir(parents=True, exist_ok=True)
        port, home = _free_port(), self.folder / "flux-server"
        self.url = f"http://127.0.0.1:{port}"
        server_env = self._env(
            FLUX_HOME=str(home),
            FLUX_DATABASE_URL=f"sqlite:///{home / 'flux.db'}",
            FLUX_SECURITY__AUTH__ALLOW_ANONYMOUS="true",  # loopback only
        )
        argv = [_flux(), "start", "server", "--host", "127.0.0.1", "--port", str(port)]
        self._start("flux-server", argv, server_env)
        self._http = httpx.Client(base_url=self.url, timeout=_RUN)
        self._wait("the Flux server", lambda: self.http.get("/health").json().get("status"))
        token = self._wait("the bootstrap token", lambda: self._bootstrap_token(server_env))
        for i in range(1, self.worker_count + 1):
            name = f"worker-{i}"
            env = self._env(
                FLUX_HOME=str(self.folder / name / ".flux"),
                FLUX_WORKERS__BOOTSTRAP_TOKEN=token,
                FLUX_WORKERS__SERVER_URL=self.url,
                FLUX_CHROMA_URL=self.chroma_url,
                **self.worker_env,
            )
            self._start(name, [_flux(), "start", "worker", name, "--server-url", self.url], env)
        self._wait("the workers to come online", self._all_online)

    def _bootstrap_token(self, env: dict[str, str]) -> str:
        done = subprocess.run(
            [_flux(), "server", "bootstrap-token"], env=env, capture_output=True, text=True,
            timeout=60, check=False, cwd=self.folder / "flux-server",
        )  # fmt: skip
        return done.stdout.strip() if done.returncode == 0 else ""

    def _all_online(self) -> bool:
        online = {
            w["name"] for w in self.http.get("/workers").json() if w.get("status") == "online"
        }
        return online >= {f"worker-{i}" for i in range(1, self.worker_count + 1)}

    def stop(self) -> None:
        """SIGTERM each process group (by the pid started here), SIGKILL after 15 s."""
        if self._http is not None:
            self._http.close()
            self._http = None
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)  # the group id is the pid we started
                    proc.wait(timeout=15)
                except ProcessLookupError:
                    pass
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)

    # ------------------------------------------------------------------ use

    @property
    def http(self) -> httpx.Client:
        """An HTTP client of the Flux server (after :meth:`start`)."""
        if self._http is None:
            raise RuntimeError("the Flux stack is not started")
        return self._http

    def pid(self, name: str) -> int:
        """The pid of a process started here (``flux-server``, ``worker-1``, ...)."""
        return self.procs[name].pid

    def register(self, path: Path) -> list[dict[str, Any]]:
        """Register the workflows of one file (``flux workflow register``)."""
        with path.open("rb") as source:
            response = self.http.post(
                "/workflows", files={"file": (path.name, source, "text/x-python")}
            )
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json()
        return result

    def run_sync(self, ref: str, payload: Any) -> dict[str, Any]:
        """Run ``namespace/name`` and wait for its answer (``flux workflow run --mode sync``).

        Raises:
            RuntimeError: The execution did not complete; the message carries its output.
        """
        namespace, name = ref.split("/", 1)
        response = self.http.post(f"/workflows/{namespace}/{name}/run/sync", json=payload)
        response.raise_for_status()
        execution: dict[str, Any] = response.json()
        if execution.get("state") == "FAILED" or "output" not in execution:
            raise RuntimeError(
                f"{ref} ended {execution.get('state')}: {json.dumps(execution)[:2000]}"
            )
        return execution
