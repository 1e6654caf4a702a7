"""The fleet of the cluster tests: :class:`bench.fleet.Fleet` with the tests' embedding functions.

Every Python process of a worker imports ``ingest_workflows`` first (a ``sitecustomize`` on
``PYTHONPATH``), so the job's ``counting-toy`` embedding function is registered in the child
executions and logs what it embeds to ``FC_EMBED_LOG`` (:attr:`Fleet.embed_log`).
"""

from __future__ import annotations

from pathlib import Path

from bench.fleet import Fleet as _Fleet

ROOT = Path(__file__).resolve().parent.parent


class Fleet(_Fleet):
    """PostgreSQL + Flux server + workers that log what they embed to ``embed_log``."""

    def __init__(
        self,
        workdir: Path,
        chroma_url: str,
        embed_log: Path,
        liveness: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            workdir,
            chroma_url,
            preload=(ROOT / "tests", "ingest_workflows"),
            worker_env={"FC_EMBED_LOG": str(embed_log)},
            liveness=liveness,
        )
        self.embed_log = embed_log
