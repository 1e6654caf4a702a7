"""A busy embedding cache is a miss, never a stall or a failure (issue #15, item 6).

A second OS process holds ``BEGIN EXCLUSIVE`` on the cache's SQLite file (what a backup tool,
a ``sqlite3`` shell or a stuck worker does). Before the fix diskcache waited 60 s to open the
cache and 60 s to write it: a 5-document ``embed_and_add(cache=True)`` took 121 s, and with
``timeout=20`` it failed with "The Chroma server may be overloaded or frozen".
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

from flux_chroma.embedding.cache import EmbeddingCache

HANG_GUARD = 60.0  # seconds: expected ~1 s; before the fix 121 s (or a failure at timeout=20)
HOLDER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
con.execute("SELECT count(*) FROM Cache").fetchone()
print("locked", flush=True)
time.sleep(300)
"""


@pytest.fixture
def locked_cache(tmp_path: Path) -> Iterator[Path]:
    """A cache folder whose ``cache.db`` another process holds in ``BEGIN EXCLUSIVE``."""
    folder = tmp_path / "cache"
    seed = EmbeddingCache(folder)
    seed.set_many("seed", ["warm"], [[1.0, 2.0]])
    seed.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder / "cache.db")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield folder
    finally:
        holder.kill()
        holder.wait(10)


def test_busy_cache_becomes_misses_and_the_write_succeeds(
    locked_cache: Path, tenant: str, raw_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    options = {"cache": True, "cache_dir": str(locked_cache), "timeout": 20, "retry_max_attempts": 0}
    spec = {"tenant": tenant, "hash_dim": 16, "options": options}
    caplog.set_level(logging.WARNING, logger="flux_chroma.embedding.cache")
    started = time.monotonic()
    run = ft.steps_wf.run(
        {
            **spec,
            "steps": [
                *ft.ingest_steps("locked", [ft.docs("l", 5)]),
                {"task": "query", "args": ["locked", "l document number 3"], "kwargs": {"k": 1}},
            ],
        }
    )
    seconds = time.monotonic() - started
    assert run.has_succeeded, run.output
    receipt, hits = run.output
    assert receipt["upserted"] == 5 and receipt["cache_hits"] == 0
    assert hits[0]["id"] == "l-3"
    assert raw_client.get_collection(f"{tenant}__locked").count() == 5
    assert any("embedding cache" in r.getMessage() for r in caplog.records), "no warning logged"
    assert seconds < HANG_GUARD, f"{seconds:.1f} s"
