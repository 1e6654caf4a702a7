"""A local Flux fleet on loopback, as real OS processes: PostgreSQL, a Flux server, workers.

The one launcher behind ``examples/distributed/run_local.py``, the benchmarks and cluster tests.
"""

from __future__ import annotations

from flux_chroma.local_fleet.fleet import LIVENESS, LocalFleet
from flux_chroma.local_fleet.postgres import LocalPostgres
from flux_chroma.local_fleet.processes import (
    Processes,
    clean_env,
    flux_cli,
    free_port,
    tool,
    wait_for,
)

__all__ = [
    "LIVENESS",
    "LocalFleet",
    "LocalPostgres",
    "Processes",
    "clean_env",
    "flux_cli",
    "free_port",
    "tool",
    "wait_for",
]
