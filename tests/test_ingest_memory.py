"""Planning and cleanup stream their sources: memory follows batches, not corpus size.

Measured with tracemalloc (Python and numpy allocations), not wall clock: the extra peak
memory per extra chunk must stay that of a key (a 64-bit key per document and per live chunk),
where holding the corpus would cost its text (hundreds of bytes per chunk).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import toy_embeddings  # noqa: F401 - registers the "toy" embedding function with chromadb

from flux_chroma.ingest import IngestJob, build_plan, run_ingest
from flux_chroma.ingest.plan import live_chunks

TEXT = "a paragraph of about two hundred characters that stands in for a real chunk of a document, " * 2


def _jsonl(path: Path, records: int) -> IngestJob:
    with path.open("w", encoding="utf-8") as out:
        for i in range(records):
            out.write(json.dumps({"id": f"record-{i:07d}", "text": f"{i} {TEXT}", "metadata": {"n": i}}) + "\n")
    return IngestJob.from_dict(
        {
            "tenant": "acme",
            "collection": "notes",
            "sources": [{"kind": "jsonl", "path": str(path), "id": "corpus"}],
            "chunking": {"size": 1000, "overlap": 100, "unit": "chars"},
            "batch_size": 1000,
            "cleanup": "full",
        }
    )


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_plan_and_cleanup_memory_does_not_follow_the_corpus(tmp_path: Path) -> None:
    small, large = _jsonl(tmp_path / "small.jsonl", 2_000), _jsonl(tmp_path / "large.jsonl", 20_000)
    for step in (build_plan, live_chunks):
        # First-use costs (imports, bounded caches filled) are not the corpus.
        first = step(large)
        if step is build_plan:
            assert first["chunks"] == 20_000
        # The lowest of up to three peaks each: a bounded cache's churn (dict rebuilds) adds
        # spikes of a few MB to some runs, whatever the corpus. The small corpus (a tenth of
        # the work) is measured three times; the large one until a run is within the bound
        # (the same test as min(large) - min(small), without the runs that cannot change it).
        floor = min(_peak(lambda s=step: s(small)) for _ in range(3))
        per_chunk = []
        for _ in range(3):
            per_chunk.append((_peak(lambda s=step: s(large)) - floor) / 18_000)
            # A key per chunk in a set costs about 55 bytes (the int and its slot); holding
            # the chunks' text would cost its 200 characters and more.
            if min(per_chunk) < 128:
                break
        assert min(per_chunk) < 128, f"{step.__name__}: {min(per_chunk):.0f} extra bytes per extra chunk"


def test_duplicate_policy_still_finds_every_collision(tmp_path: Path) -> None:
    path = tmp_path / "dupes.jsonl"
    rows = [{"id": f"r{i}", "text": f"text {i}"} for i in range(50)] + [{"id": "r7", "text": "again"}, {"id": "r9", "text": "again"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = {"tenant": "acme", "collection": "notes", "sources": [{"kind": "jsonl", "path": str(path)}], "duplicates": "last_wins"}
    plan = build_plan(job)
    assert plan["duplicate_count"] == 2 and [d["id"] for d in plan["duplicates"]] == ["r7", "r9"]
    assert plan["docs"] == 50 and plan["chunks"] == 50


def _flux_statements(job: dict[str, Any]) -> tuple[int, int]:
    """Run ``job`` inline; return (most parameters in one statement, distinct statement texts).

    Every statement sent through SQLAlchemy in this process during the job is recorded (the
    only SQL database here is Flux's state; Chroma is a server in another process).
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: dict[str, int] = {}

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen[statement] = max(seen.get(statement, 0), len(parameters) if not executemany else 0)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        ctx = run_ingest(job)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert ctx.has_succeeded, ctx.output
    return max(seen.values()), len(seen)


def test_checkpoints_do_not_prepare_sql_in_proportion_to_batches(tmp_path: Path, tenant: str, url: str) -> None:
    """Each inline checkpoint hands Flux the new events only (``flux_chroma.ingest.checkpoints``).

    Flux's own inline checkpoint sends the whole event log, and Flux asks SQLite which events
    it already holds with ``event_id IN (?, ...)`` over ALL of them: a new, longer statement at
    every checkpoint. Python's sqlite3 keeps the last 128 distinct statements prepared, at about
    135 bytes of native memory per parameter: a job grew by ~100 KB per batch, unseen by
    tracemalloc. Counted here as SQL, not RSS: the largest statement and the number of distinct
    statements of a 60-batch job must be about those of a 10-batch job (a checkpoint that
    carries a few events more, e.g. the last one, may add a statement or 8 parameters per event);
    with whole-log checkpoints they grow by 2 per batch.
    """

    def job(records: int) -> dict[str, Any]:
        path = tmp_path / f"corpus-{records}.jsonl"
        path.write_text("".join(json.dumps({"id": f"r{i}", "text": f"{i} {TEXT}"}) + "\n" for i in range(records)))
        return {
            "tenant": tenant,
            "collection": f"notes{records}",
            "sources": [{"kind": "jsonl", "path": str(path), "id": "corpus"}],
            "batch_size": 2,
            "embedding_function": {"name": "toy", "config": {"dim": 8}},
            "options": {"url": url, "cache": False},
        }

    _flux_statements(job(4))  # first-use statements (schema checks, registration) are not the job's
    small_params, small_distinct = _flux_statements(job(20))
    large_params, large_distinct = _flux_statements(job(120))
    assert large_params <= small_params + 16, f"largest statement: {small_params} -> {large_params} parameters"
    assert large_distinct <= small_distinct + 4, f"distinct statements: {small_distinct} -> {large_distinct}"
