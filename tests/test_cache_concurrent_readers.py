"""Concurrent warm readers of one embedding cache all get hits (issue 12, row 7 warm mode).

Each lookup used to run in one ``BEGIN IMMEDIATE`` transaction (the LRU access-time updates),
so readers took SQLite's write lock one after another; a reader that waited longer than
``BUSY_TIMEOUT`` for it turned its whole batch into misses, and 4 processes ingesting from a
warm cache re-embedded most of it. The test counts hits, not time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flux_chroma.embedding.cache import EmbeddingCache

PROCS = 4
TEXTS = 3000
BATCH = 1000
ROUNDS = 4
DIM = 384

READER = """
import json, sys
import numpy as np
from flux_chroma.embedding.cache import EmbeddingCache

folder, texts, batch, rounds, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
keys = [f"text number {i}" for i in range(texts)]
cache = EmbeddingCache(folder)
cache.lookup("digest", keys[:1], dim)  # open the database before the start line
print("ready", flush=True)
sys.stdin.readline()
hits = wrong = 0
for _ in range(rounds):
    for begin in range(0, texts, batch):
        part = keys[begin:begin + batch]
        for i, entry in enumerate(cache.lookup("digest", part, dim)):
            if entry is not None:
                hits += 1
                wrong += int(entry[0][0] != float(begin + i) or entry[1] != begin + i)
print(json.dumps({"hits": hits, "wrong": wrong, "errors": cache.stats.errors}), flush=True)
"""


def test_concurrent_warm_readers_all_hit(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    vectors = [[float(i)] + [0.5] * (DIM - 1) for i in range(TEXTS)]
    with EmbeddingCache(folder) as seed:
        texts = [f"text number {i}" for i in range(TEXTS)]
        seed.set_many("digest", texts, vectors, tokens=list(range(TEXTS)))
    args = [str(folder), str(TEXTS), str(BATCH), str(ROUNDS), str(DIM)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", READER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [json.loads(proc.communicate(timeout=300)[0]) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert all(proc.returncode == 0 for proc in procs)
    for got in results:
        assert got == {"hits": TEXTS * ROUNDS, "wrong": 0, "errors": 0}, results
