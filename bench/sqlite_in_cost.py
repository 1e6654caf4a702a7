"""Native memory of prepared ``IN (?, ...)`` statements in Python's sqlite3 (row 6's explanation).

Flux 0.87's inline checkpoint asks SQLite which of the execution's events it already stores
with ``event_id IN (...)`` over the events it is handed. Python's sqlite3 keeps the last 128
distinct statements of a connection prepared. This script prepares 128 such statements of
about N parameters (N = 100, 400, 1,600: the event count of a 50-, 200- and 800-batch job)
and prints SQLite's own count of the memory they hold (``sqlite3_memory_used``).

Run: ``python -m bench.sqlite_in_cost``. It reads the counter from ``libsqlite3.so.0``, which
must be the library Python's ``_sqlite3`` is linked to (``ldd`` on ``_sqlite3``'s file
tells); with a statically linked SQLite it refuses to print a number.
"""

from __future__ import annotations

import ctypes
import sqlite3
from typing import Any

__all__ = ["main", "cached_in_statements_bytes"]

CACHED = 128  # sqlite3.connect(cached_statements=128), Python's default


def _memory_used() -> Any:
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        raise SystemExit("no libsqlite3.so.0 here (Python's SQLite is statically linked?): no figure.") from None
    fn = lib.sqlite3_memory_used
    fn.restype = ctypes.c_int64
    return fn


def cached_in_statements_bytes(params: int) -> int:
    """Bytes SQLite holds for ``CACHED`` prepared statements of ``params - 127 .. params`` ``IN`` parameters."""
    used = _memory_used()
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE ev (execution_id TEXT, event_id TEXT, type TEXT, PRIMARY KEY (execution_id, event_id, type))")
    base = used()
    for k in range(params - CACHED + 1, params + 1):
        sql = f"SELECT event_id, type FROM ev WHERE execution_id = ? AND event_id IN ({', '.join('?' * k)})"
        con.execute(sql, ["x"] + [f"{i:032x}" for i in range(k)]).fetchall()
    grown = int(used() - base)
    con.close()
    return grown


def main() -> None:
    """Print the bytes held per ``IN`` parameter at three statement sizes."""
    probe = sqlite3.connect(":memory:")
    before = _memory_used()()
    probe.execute("SELECT 1").fetchall()
    if _memory_used()() == before:
        probe.close()
        raise SystemExit("libsqlite3.so.0 is not the SQLite this Python uses (statically linked?): no figure.")
    probe.close()
    for n in (100, 400, 1600):
        grown = cached_in_statements_bytes(n)
        print(f"{CACHED} cached statements of ~{n:,} IN parameters: {grown / 2**20:.1f} MiB, "
              f"{grown / CACHED / n:.0f} B per parameter per statement")


if __name__ == "__main__":
    main()
