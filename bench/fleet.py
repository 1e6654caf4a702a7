"""The cluster fleet of benchmark row 11 and the cluster tests: flux-chroma's ingestion workflows
on :class:`flux_chroma.local_fleet.LocalFleet`.

PostgreSQL, a Flux server in event dispatch mode (units go to the least-loaded worker) with short
liveness settings (an execution whose worker died is reclaimed after ~12 s instead of ~60 s),
and N workers that reach the Chroma server through ``FLUX_CHROMA_URL`` and the Flux server through
``FLUX_WORKERS__SERVER_URL``. ``flux_chroma/ingest/workflow.py`` is registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from flux_chroma.local_fleet import LIVENESS, LocalFleet

__all__ = ["Fleet", "WORKFLOWS", "LIVENESS"]

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / "flux_chroma" / "ingest" / "workflow.py"


class Fleet(LocalFleet):
    """PostgreSQL + Flux server + workers under ``workdir``; :meth:`stop` ends them all.

    Args:
        workdir: State and logs of every process.
        chroma_url: ``FLUX_CHROMA_URL`` of the workers.
        preload: As for :class:`~flux_chroma.local_fleet.LocalFleet`.
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
        self.liveness = dict(LIVENESS if liveness is None else liveness)
        super().__init__(
            workdir,
            chroma_url,
            database="postgresql",
            server_env=self.liveness,
            worker_env={**LIVENESS, **(worker_env or {})},
            preload=preload,
        )
        self.stack = self.processes
        self._tenant_of: dict[str, str] = {}

    def start(self, workers: int, *, register: bool = True) -> Fleet:
        """Start PostgreSQL, the Flux server and ``workers`` workers; register the workflows."""
        super().start(workers)
        if register:
            self.register()
        return self

    def register(self, path: Path = WORKFLOWS) -> list[dict[str, Any]]:
        """Register ``flux_chroma/ingest/workflow.py`` (ingest_job, ingest_unit, ...) with the server."""
        return super().register(path)

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
