"""Measure Flux state per ingested chunk for a 10,000-chunk ingestion job.

Starts its own Chroma server and Flux SQLite database in a temporary directory, writes a
corpus that chunks into exactly ``--chunks`` chunks, runs :func:`flux_chroma.ingest.run_ingest`
once, and reports:

* ``event_bytes``: bytes Flux stored for the execution (every event's pickled value plus
  its ids and names, and the execution row's input and output), i.e. what grows with the
  job;
* ``db_growth_bytes``: growth of the SQLite file (after VACUUM) caused by the job;
* both divided by the number of chunks;
* for comparison, the bytes the same documents would cost when passed as workflow input
  and then as a positional task argument (stored three times).

Usage::

    python bench/bench_ingest_state.py                 # real default model
    python bench/bench_ingest_state.py --fast          # hash embeddings (state is identical)
    python bench/bench_ingest_state.py --chunks 2000 --batch-size 500 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ["river", "stone", "cloud", "ember", "lantern", "harbor", "meadow", "signal", "copper", "willow", "orbit", "canyon", "thistle", "quartz"]


def _register_fast_embedding() -> None:
    """Register ``bench-hash`` (``bench/stand_in.py``, shared with the harness's rows 6 and 11).

    This file runs as a script (``python bench/bench_ingest_state.py``), so its own folder is
    first on ``sys.path``.
    """
    import stand_in  # noqa: F401 - registers bench-hash with chromadb


def write_corpus(path: Path, chunks: int) -> int:
    """A JSONL file of ``chunks`` records of ~450 characters (one chunk each). Returns bytes of text."""
    total = 0
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(chunks):
            text = " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i + j * 13) % 97}" for j in range(50))
            total += len(text)
            handle.write(json.dumps({"id": f"doc-{i:05d}", "text": text, "metadata": {"n": i % 10}}) + "\n")
    return total


def _vacuumed_size(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))  # db, -wal, -journal


def _event_bytes(db: Path, execution_id: str) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        events, count = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(value) + LENGTH(source_id) + LENGTH(event_id) + LENGTH(name) + LENGTH(type)), 0), "
            "COUNT(*) FROM execution_events WHERE execution_id = ?",
            (execution_id,),
        ).fetchone()
        row = conn.execute(
            "SELECT COALESCE(LENGTH(input), 0) + COALESCE(LENGTH(output), 0) FROM executions WHERE execution_id = ?",
            (execution_id,),
        ).fetchone()
    return {"events": int(count), "event_bytes": int(events), "execution_row_bytes": int(row[0])}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--fast", action="store_true", help="hash embeddings instead of the real model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="flux-chroma-bench-") as tmp:
        root = Path(tmp)
        home = root / "flux"
        home.mkdir()
        db = home / "flux.db"
        os.environ["FLUX_HOME"] = str(home)
        os.environ["FLUX_DATABASE_URL"] = f"sqlite:///{db}"
        os.environ.setdefault("FLUX_LOG_LEVEL", "WARNING")
        os.environ["FLUX_CHROMA_CACHE_DIR"] = str(root / "cache")

        from flux_chroma import ChromaServer
        from flux_chroma.ingest import ingest_job, run_ingest

        if args.fast:
            _register_fast_embedding()
        corpus = root / "corpus.jsonl"
        text_bytes = write_corpus(corpus, args.chunks)
        job: dict[str, Any] = {
            "tenant": "bench",
            "collection": "corpus",
            "sources": [{"kind": "jsonl", "path": str(corpus)}],
            "chunking": {"size": 1000, "overlap": 100, "unit": "chars"},
            "batch_size": args.batch_size,
            "cleanup": "full",
        }
        if args.fast:
            job["embedding_function"] = {"name": "bench-hash"}
        with ChromaServer(root / "chroma", port=0) as server:
            os.environ["FLUX_CHROMA_URL"] = server.url
            ingest_job._ensure_registered()
            baseline = _vacuumed_size(db)
            started = time.perf_counter()
            ctx = run_ingest(job)
            seconds = time.perf_counter() - started
            if not ctx.has_succeeded:
                print(f"ingestion failed: {ctx.output}", file=sys.stderr)
                return 1
            report = ctx.output
        sizes = _event_bytes(db, ctx.execution_id)
        after = _vacuumed_size(db)
        growth = after - baseline
        chunks = int(report["chunks"])
        stored = sizes["event_bytes"] + sizes["execution_row_bytes"]
        docs_json = len(corpus.read_bytes())
        result = {
            "chunks": chunks,
            "batches": report["batches"],
            "batch_size": args.batch_size,
            "model": "bench-hash" if args.fast else "default (all-MiniLM-L6-v2)",
            "seconds": round(seconds, 1),
            "chunks_per_second": round(chunks / seconds, 1),
            **sizes,
            "flux_state_bytes": stored,
            "bytes_per_chunk": round(stored / chunks, 1),
            "db_bytes_before": baseline,
            "db_bytes_after": after,
            "db_growth_bytes": growth,
            "db_growth_per_chunk": round(growth / chunks, 1),
            "text_bytes": text_bytes,
            "naive_docs_as_arguments_bytes": 3 * docs_json,
            "naive_bytes_per_chunk": round(3 * docs_json / chunks, 1),
        }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>32}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
