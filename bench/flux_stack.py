"""A real Flux server and worker(s) on loopback, for serving benchmarks and tests.

:class:`FluxStack` is :class:`flux_chroma.local_fleet.LocalFleet` with SQLite state (one node),
started on entering its ``with`` block: ``flux start server`` (anonymous access on 127.0.0.1
only) and ``flux start worker`` processes, each in its own process group, stopped by pid.
Workflows are registered and run over Flux's HTTP API (``POST /workflows``,
``POST /workflows/{ns}/{name}/run/sync``), so a timed call measures the server and the worker,
not a ``flux`` CLI process starting up. The workers keep flux-chroma's own settings
(``FLUX_CHROMA_*``: model, cache) from this process's environment.

Example:
    >>> with FluxStack(folder, chroma_url=server.url) as stack:  # doctest: +SKIP
    ...     stack.register(Path("examples/distributed/workflows.py"))
    ...     stack.run_sync("kb/ask", {"tenant": "acme", "question": "refunds?"})
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from flux_chroma.local_fleet import LocalFleet, Processes

__all__ = ["FluxStack"]


class FluxStack(LocalFleet):
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
        super().__init__(
            folder,
            chroma_url,
            database="sqlite",
            worker_env=worker_env,
            keep_env=("FLUX_CHROMA_",),
            processes=Processes(folder, announce=False),
        )
        self.worker_count = workers

    def __enter__(self) -> Self:
        try:
            self.start(self.worker_count)
        except BaseException:
            self.stop()
            raise
        return self
