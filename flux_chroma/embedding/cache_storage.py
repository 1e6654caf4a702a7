"""The cache's SQLite storage: a diskcache ``Disk`` that only reads raw values, and a ``Cache``
that never waits long for a lock held by another process."""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import diskcache

from flux_chroma.seams import (
    cache_connection,
    cache_disk,
    cache_sql,
    disk_directory,
    retry_cache_statements,
)

__all__ = ["BUSY_TIMEOUT", "BoundedCache", "SafeDisk"]

_SELECT_CHUNK = 500  # keys per SELECT (SQLite's limit on bound variables is far above)

BUSY_TIMEOUT = 0.25
"""Seconds the cache waits for SQLite's lock before a lookup misses / a store is skipped.

With diskcache's 60 s defaults, a ``sqlite3`` shell holding ``BEGIN EXCLUSIVE`` on ``cache.db``
stalled a 5-document write for 121 s; the cache must never be what a task waits on.
"""
_REFUSED = object()  # what SafeDisk returns instead of a non-raw value


class SafeDisk(diskcache.Disk):  # type: ignore[misc]
    """A diskcache ``Disk`` that only ever reads raw values stored inside SQLite.

    Pickled keys or values and values in files are read as misses; ``remove`` ignores paths
    outside the cache folder. Our values are small bytes, stored raw in SQLite.
    """

    def get(self, key: Any, raw: bool) -> Any:
        """Return a raw key, or a placeholder for a pickled key (never unpickled)."""
        if not raw:
            return _REFUSED
        return super().get(key, raw)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        """Return a raw row's ``bytes``, else a placeholder read as a miss (files never opened)."""
        if mode != diskcache.core.MODE_RAW or read:
            return _REFUSED
        return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else _REFUSED

    def remove(self, file_path: str) -> None:
        """Remove a value file, but only inside the cache folder."""
        root = os.path.realpath(disk_directory(self))
        target = os.path.realpath(os.path.join(root, file_path))
        if os.path.commonpath([root, target]) == root and target != root:
            super().remove(file_path)


def _within_busy_timeout(sql: Any) -> Any:
    """``sql``, retried on a locked database for :data:`BUSY_TIMEOUT` only (diskcache: 60 s)."""

    def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                return sql(statement, *args, **kwargs)
            except sqlite3.OperationalError as exc:
                if str(exc) != "database is locked" or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    return execute


@retry_cache_statements(_within_busy_timeout)
class BoundedCache(diskcache.Cache):  # type: ignore[misc]
    """diskcache's ``Cache`` giving up on a busy database after :data:`BUSY_TIMEOUT`, not 60 s.

    diskcache's LRU ``get`` reads inside a write transaction, so concurrent readers queue for the
    write lock and lose whole batches to misses. :meth:`read_many` uses plain SELECTs (WAL mode:
    readers never wait) and :meth:`touch` updates access times only if the write lock is free.
    """

    def read_many(self, keys: Sequence[str]) -> tuple[list[Any], list[int]]:
        """Read ``str`` keys without the write lock: values (``None``: absent) and found row ids."""
        found: dict[str, tuple[int, Any]] = {}
        now = time.time()
        for part in itertools.batched(keys, _SELECT_CHUNK):
            marks = ",".join("?" * len(part))
            rows = cache_sql(self)(
                "SELECT rowid, key, mode, filename, value FROM Cache WHERE raw = 1"
                f" AND key IN ({marks}) AND (expire_time IS NULL OR expire_time > ?)",
                (*part, now),
            ).fetchall()
            for rowid, key, mode, filename, value in rows:
                found[key] = (rowid, cache_disk(self).fetch(mode, filename, value, False))
        values = [found[k][1] if k in found else None for k in keys]
        return values, [rowid for rowid, _ in found.values()]

    def touch(self, rowids: Sequence[int]) -> bool:
        """Set the access time of rows to now if the write lock is free; return whether it was."""
        if not rowids:
            return True
        con = cache_connection(self)
        con.execute("PRAGMA busy_timeout = 0")
        try:
            now = time.time()
            for part in itertools.batched(rowids, _SELECT_CHUNK):
                marks = ",".join("?" * len(part))
                con.execute(
                    f"UPDATE Cache SET access_time = ? WHERE rowid IN ({marks})", (now, *part)
                )
        except sqlite3.Error:  # busy, read-only folder, ...: the hits stand, the LRU order waits
            return False
        finally:
            con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        return True
