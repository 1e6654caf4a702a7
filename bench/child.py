"""Child processes of the benchmark (``python -m bench.child MODE 'JSON params'``).

Each child has its own Flux home (set by the parent through the environment) and prints one
JSON object as its last line.

Modes:
    ``ingest_job``: run a flux-chroma ingestion job (``flux_chroma.ingest.run_ingest``) over a
        JSONL corpus and report the Flux state it left (row 6).
    ``scale``: get ready to ingest a slice of the corpus with the ``embed_and_add`` workflow,
        print ``ready``, wait for ``go`` on stdin, ingest, report timings (row 7).
    ``ingest_once``: one run of the ``embed_and_add`` workflow in this fresh process, timed
        from the parent's launch; embedder calls counted, whether the model was loaded, and
        optionally a cProfile of the process' imports and run (row 4).
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["main", "flux_db_bytes", "flux_logical_bytes", "peak_rss_mib"]


def _db_path() -> Path:
    return Path(os.environ["FLUX_HOME"]) / "flux.db"


def flux_db_bytes() -> int:
    """Size of the Flux SQLite files after folding the write-ahead log in and vacuuming.

    The same method as ``bench/bench_ingest_state.py``.
    """
    path = _db_path()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def flux_logical_bytes() -> dict[str, int]:
    """Bytes of execution rows and event rows Flux stored (column lengths, no page overhead)."""
    with sqlite3.connect(_db_path()) as conn:
        executions = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(input)), 0) + COALESCE(SUM(LENGTH(output)), 0) FROM executions"
        ).fetchone()[0]
        events = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(value)), 0) + COALESCE(SUM(LENGTH(name)), 0) "
            "+ COALESCE(SUM(LENGTH(source_id)), 0) + COALESCE(SUM(LENGTH(event_id)), 0) FROM execution_events"
        ).fetchone()
    return {"executions": int(executions), "events": int(events[0]), "event_bytes": int(events[1])}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ingest_job(params: dict[str, Any]) -> dict[str, Any]:
    """Row 6: one ingestion job in a fresh Flux home; Flux state bytes before and after."""
    from flux.context_managers import ContextManager

    ContextManager.create()  # the schema, so the baseline excludes it
    before = flux_db_bytes()
    from flux_chroma.ingest import run_ingest

    job = {
        "tenant": params["tenant"],
        "collection": params["collection"],
        "sources": [{"kind": "jsonl", "path": params["corpus"], "id": "corpus"}],
        "options": params.get("options") or {},
    }
    if params.get("batch_size"):
        job["batch_size"] = int(params["batch_size"])
    if params.get("embedding_function"):
        import bench.stand_in  # noqa: F401 - registers the stand-in embedders

        job["embedding_function"] = params["embedding_function"]
    memory = {"start_rss_mib": _status_mib("VmRSS")}

    def on_progress(value: Any) -> None:
        # Where the peak is reached: the high-water mark when planning ends and at the last batch.
        phase = value.get("phase") if isinstance(value, dict) else None
        if phase == "planned":
            memory["planned_hwm_mib"] = _status_mib("VmHWM")
        elif phase == "batch":
            memory["batches_hwm_mib"] = _status_mib("VmHWM")

    start = time.perf_counter()
    with _flux_sql(memory):
        ctx = run_ingest(job, on_progress=on_progress)
    seconds = time.perf_counter() - start
    if not ctx.has_succeeded:
        raise SystemExit(f"ingestion job failed: {ctx.output!r}")
    report = ctx.output
    memory["end_rss_anon_mib"] = _status_mib("RssAnon")  # heap and other private memory
    memory["end_rss_file_mib"] = _status_mib("RssFile")  # mapped files (model, SQLite mmap)
    after = flux_db_bytes()
    return {
        "seconds": seconds,
        "db_before": before,
        "db_after": after,
        "logical": flux_logical_bytes(),
        "memory": memory,
        "report": {
            k: report.get(k)
            for k in (
                "chunks",
                "batches",
                "added",
                "skipped",
                "embedded",
                "cache_hits",
                "embed_seconds",
            )
        },
    }


@contextmanager
def _flux_sql(memory: dict[str, Any]) -> Iterator[None]:
    """Record the SQL this process sends during the job (Flux's state is its only SQL database).

    Sets ``flux_sql_max_params`` (most parameters bound in one statement) and
    ``flux_sql_statements`` (distinct statement texts): Python's sqlite3 keeps the last 128
    distinct statements of a connection prepared, so these bound the memory SQLite holds
    (row 6's explanation; ``python -m bench.sqlite_in_cost`` prices a parameter).
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: dict[str, int] = {}

    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        seen[statement] = max(seen.get(statement, 0), 0 if executemany else len(parameters or ()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", record)
        memory["flux_sql_max_params"] = max(seen.values(), default=0)
        memory["flux_sql_statements"] = len(seen)


def scale(params: dict[str, Any]) -> dict[str, Any]:
    """Row 7: warm up, wait for ``go``, ingest a slice through the embed_and_add workflow."""
    from bench.corpus import load_docs
    from bench.flows import corpus_ingest_wf
    from bench.timing import run_timed
    from flux_chroma.chroma.collections import Target, open_collection
    from flux_chroma.chroma.naming import Namespace
    from flux_chroma.chroma.settings import ConnectionSettings
    from flux_chroma.embedding import FastDefaultEmbedding, compute_fingerprint

    inp = params["input"]
    load_docs(params["corpus"], 0, 1)
    ef = FastDefaultEmbedding()
    ef.embed(["warm up the model session"])
    compute_fingerprint(ef)
    # First-use costs (Flux registration and database, client, collection resolution) are
    # paid before the start signal: an empty slice runs the workflow without any task.
    run_timed(corpus_ingest_wf, {**inp, "stop": inp["start"]})
    open_collection(
        Target(ConnectionSettings.resolve(None), Namespace(inp["tenant"]), inp["collection"]),
        create=False,
    )
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    cpu0, t0 = _cpu(), time.time()
    timed = run_timed(corpus_ingest_wf, inp)
    t1, cpu1 = time.time(), _cpu()
    return {
        "start": t0,
        "end": t1,
        "cpu": cpu1 - cpu0,
        "checkpoint_seconds": timed.checkpoint_seconds,
        "output": timed.ctx.output,
    }


def model(params: dict[str, Any]) -> dict[str, Any]:
    """Row 7's model-only side: warm up, wait for ``go``, embed a slice (no cache, no writes)."""
    from bench.corpus import load_docs
    from flux_chroma.embedding import FastDefaultEmbedding

    inp = params["input"]
    texts = [d["text"] for d in load_docs(params["corpus"], inp["start"], inp["stop"])]
    ef = FastDefaultEmbedding()
    ef.embed(["warm up the model session"])
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    cpu0, t0 = _cpu(), time.time()
    for start in range(0, len(texts), inp["batch"]):  # one call per ingestion batch
        ef.embed(texts[start : start + inp["batch"]])
    t1, cpu1 = time.time(), _cpu()
    return {"start": t0, "end": t1, "cpu": cpu1 - cpu0}


def ingest_once(params: dict[str, Any]) -> dict[str, Any]:
    """Row 4: import, run the ingest workflow once, report times from the parent's launch."""
    import cProfile
    import pstats

    profiler = cProfile.Profile() if params.get("profile") else None
    if profiler is not None:
        profiler.enable()
    imported = time.time()
    from bench.counting import COUNTING_EF
    from bench.flows import corpus_ingest_wf
    from bench.timing import run_timed

    ready = time.time()
    COUNTING_EF.reset()
    timed = run_timed(corpus_ingest_wf, params["input"])
    end = time.time()
    if profiler is not None:
        profiler.disable()
    calls, texts = COUNTING_EF.reset()
    from flux_chroma.embedding import onnx_session

    out: dict[str, Any] = {
        "process_seconds": end - float(params["launched"]),
        "startup_seconds": imported - float(params["launched"]),
        "import_seconds": ready - imported,
        "workflow_seconds": timed.seconds,
        "output": timed.ctx.output,
        "calls": calls,
        "texts": texts,
        "model_loaded": bool(onnx_session._SESSIONS),
        "onnxruntime_imported": "onnxruntime" in sys.modules,
    }
    if profiler is not None:
        from bench.timing import top_own_time

        stats = pstats.Stats(profiler)
        cumulative = sorted(
            (
                (row[3], f"{name} ({Path(file).name}:{line})")
                for (file, line, name), row in stats.stats.items()  # type: ignore[attr-defined]
                if not file.startswith(("<frozen", "~"))  # import machinery, builtins
            ),
            reverse=True,
        )
        out["profile_own"] = top_own_time(stats, 8)
        out["profile_cumulative"] = [f"{sec:6.3f} s  {what}" for sec, what in cumulative[:14]]
    return out


def _status_mib(field: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MiB (0.0 if absent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib() -> float:
    """This process' own peak RSS (``VmHWM``), in MiB.

    Not ``ru_maxrss``: Linux folds the RSS of the process image replaced by ``exec`` into it,
    so a child started by a big parent would report at least the parent's size.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    """Run the mode named on the command line and print its JSON result."""
    mode, params = sys.argv[1], json.loads(sys.argv[2])
    handlers = {
        "ingest_job": ingest_job,
        "scale": scale,
        "model": model,
        "ingest_once": ingest_once,
    }
    result = handlers[mode](params)
    result["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(result), flush=True)
    # Every figure is in the result (timed inside this process): skip the interpreter's
    # teardown of chromadb, onnxruntime and Flux (~0.3 s of CPU per child), as flux-chroma does.
    os._exit(0)


if __name__ == "__main__":
    main()
