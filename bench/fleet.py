"""A Flux fleet on loopback: PostgreSQL, a Flux server and N workers, as real processes.

Shared by the cluster tests (``tests/cluster_stack.py``) and benchmark row 11. Built from
``examples/distributed/run_local.py`` (``Stack`` stops every process by the pid it started,
``LocalPostgres`` is the throwaway PostgreSQL). The workers reach the Chroma server through
``FLUX_CHROMA_URL`` and the Flux server through ``FLUX_WORKERS__SERVER_URL``.

The server uses Flux's event dispatch mode (units go to the least-loaded worker) and short
liveness settings, so an execution whose worker died is reclaimed after ~12 s instead of ~60 s.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "distributed"))

from run_local import Stack, base_env, flux, free_port, tool, wait_for

__all__ = ["Fleet", "WORKFLOWS", "LIVENESS"]

WORKFLOWS = ROOT / "flux_chroma" / "ingest" / "workflow.py"
LIVENESS = {
    "FLUX_WORKERS__HEARTBEAT_INTERVAL": "2",
    "FLUX_WORKERS__HEARTBEAT_TIMEOUT": "8",
    "FLUX_WORKERS__EVICTION_GRACE_PERIOD": "4",
}


class Fleet:
    """PostgreSQL + Flux server + workers under ``workdir``; :meth:`stop` ends them all.

    Args:
        workdir: State and logs of every process.
        chroma_url: ``FLUX_CHROMA_URL`` of the workers.
        preload: ``(folder, module)``: every Python process of a worker puts ``folder`` on
            ``sys.path`` and imports ``module`` first (a ``sitecustomize``), e.g. to register
            the embedding functions the jobs name.
        worker_env: Extra environment variables of the workers.
        liveness: The Flux server's worker liveness settings (default :data:`LIVENESS`: a
            dead worker's executions are reclaimed after ~12 s).
    """

    def __init__(
        self,
        workdir: Path,
        chroma_url: str,
        preload: tuple[Path, str] | None = None,
        worker_env: dict[str, str] | None = None,
        liveness: dict[str, str] | None = None,
    ) -> None:
        self.stack = Stack(workdir)
        self.workdir = workdir
        self.chroma_url = chroma_url
        self.worker_env = dict(worker_env or {})
        self.liveness = dict(LIVENESS if liveness is None else liveness)
        self.url = ""
        self.token = ""
        self.server_env: dict[str, str] = {}
        self._tenant_of: dict[str, str] = {}
        self.site: Path | None = None
        if preload is not None:
            folder, module = preload
            self.site = workdir / "site"
            self.site.mkdir(parents=True, exist_ok=True)
            (self.site / "sitecustomize.py").write_text(
                f"import sys\nsys.path.insert(0, {str(folder)!r})\nimport {module}  # noqa: F401\n"
            )

    def start(self, workers: int, *, register: bool = True) -> Fleet:
        """Start PostgreSQL, the Flux server and ``workers`` workers; register the workflows."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server_env = base_env(
            FLUX_HOME=str(self.workdir / "flux-server"),
            FLUX_DATABASE_URL=self.stack.start_postgres(),
            FLUX_DATABASE_TYPE="postgresql",
            FLUX_DISPATCH__MODE="event",
            FLUX_SECURITY__AUTH__ALLOW_ANONYMOUS="true",
            **self.liveness,
        )
        self._start_server()
        self.token = wait_for(
            "the bootstrap token",
            lambda: flux(["server", "bootstrap-token"], self.server_env, 30).strip(),
            self.stack,
            "flux-server",
        )
        for n in range(1, workers + 1):
            self.start_worker(f"worker-{n}")
        self.wait_online([f"worker-{n}" for n in range(1, workers + 1)])
        if register:
            self.register()
        return self

    def _start_server(self) -> None:
        port = self.url.rsplit(":", 1)[1]
        argv = [tool("flux"), "start", "server", "--host", "127.0.0.1", "--port", port]
        self.stack.start("flux-server", argv, self.server_env)
        wait_for(
            "the Flux server",
            lambda: httpx.get(f"{self.url}/health", timeout=2).json().get("status") == "healthy",
            self.stack,
            "flux-server",
        )

    def stop_server(self, sig: int = signal.SIGTERM) -> None:
        """Stop the Flux server (``sig`` to its process group; PostgreSQL and workers stay up)."""
        for entry in list(self.stack.procs):
            name, proc, _ = entry
            if name == "flux-server" and proc.poll() is None:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=30)
                self.stack.procs.remove(entry)

    def start_server(self) -> None:
        """Start the Flux server again on the same port and database (after :meth:`stop_server`)."""
        self._start_server()

    def register(self) -> None:
        """Register ``flux_chroma/ingest/workflow.py`` (ingest_job, ingest_unit, ...) with the server."""
        flux(["workflow", "register", str(WORKFLOWS), "--server-url", self.url], self.server_env)

    def start_worker(self, name: str, *, server_url: bool = True) -> int:
        """Start one worker (``server_url=False``: without FLUX_WORKERS__SERVER_URL); its pid."""
        env = base_env(
            FLUX_HOME=str(self.workdir / name / ".flux"),
            FLUX_WORKERS__BOOTSTRAP_TOKEN=self.token,
            FLUX_CHROMA_URL=self.chroma_url,
            **LIVENESS,
            **self.worker_env,
        )
        if self.site is not None:
            env["PYTHONPATH"] = str(self.site)
        if server_url:
            env["FLUX_WORKERS__SERVER_URL"] = self.url
        proc = self.stack.start(
            name, [tool("flux"), "start", "worker", name, "--server-url", self.url], env
        )
        return proc.pid

    def online(self) -> set[str]:
        """Names of the workers the server sees online."""
        try:
            workers = json.loads(
                flux(
                    ["worker", "list", "--format", "json", "--server-url", self.url],
                    self.server_env,
                    30,
                )
            )
        except (ValueError, RuntimeError):  # the server answered with an error line: ask again
            return set()
        return {w["name"] for w in workers if w.get("status") == "online"}

    def wait_online(self, names: list[str], guard: float = 90.0) -> None:
        """Wait until the server sees ``names`` online (``guard`` only stops a hung test)."""
        deadline = time.monotonic() + guard
        while not self.online() >= set(names):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"workers {names} not online after {guard} s:\n{self.stack.log_tail(names[-1])}"
                )
            time.sleep(0.3)

    def kill(self, name: str) -> None:
        """SIGKILL a worker's whole process group (the worker and its execution children)."""
        for proc_name, proc, _ in self.stack.procs:
            if proc_name == name:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                return
        raise KeyError(name)

    def submit(self, workflow: str, payload: Any) -> str:
        """Start an execution (``--mode async``); its execution id."""
        out = flux(
            [
                "workflow",
                "run",
                workflow,
                json.dumps(payload),
                "--mode",
                "async",
                "--server-url",
                self.url,
            ],
            self.server_env,
        )
        return str(json.loads(out)["execution_id"])

    def execution(self, execution_id: str, *, detailed: bool = False) -> dict[str, Any]:
        """The execution's summary (state, input, output, current_worker; ``events`` if detailed)."""
        params = {"detailed": "true"} if detailed else {}
        response = httpx.get(f"{self.url}/executions/{execution_id}", params=params, timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def children(self, tenant: str) -> list[dict[str, Any]]:
        """The ``flux-chroma/ingest_unit`` executions of ``tenant``'s jobs:
        ``{"execution_id", "state", "current_worker"}`` each."""
        response = httpx.get(
            f"{self.url}/executions",
            params={"namespace": "flux-chroma", "workflow_name": "ingest_unit", "limit": 500},
            timeout=10,
        )
        response.raise_for_status()
        found = []
        for item in response.json()["executions"]:
            eid = item["execution_id"]
            if eid not in self._tenant_of:
                self._tenant_of[eid] = self.execution(eid)["input"]["job"]["tenant"]
            if self._tenant_of[eid] == tenant:
                found.append(
                    {
                        "execution_id": eid,
                        "state": item["state"],
                        "current_worker": item.get("worker_name") or "",
                    }
                )
        return found

    def wait_terminal(self, execution_id: str, guard: float) -> dict[str, Any]:
        """Poll until the execution ends; ``guard`` only stops a hung test."""
        deadline = time.monotonic() + guard
        while time.monotonic() < deadline:
            execution = self.execution(execution_id)
            if execution.get("state") in ("COMPLETED", "FAILED", "CANCELLED"):
                return execution
            time.sleep(0.5)
        raise AssertionError(
            f"execution {execution_id} did not end within {guard} s: {self.execution(execution_id)}"
        )

    def stop(self) -> None:
        """Stop every process started here (by pid), PostgreSQL last."""
        self.stack.stop()
