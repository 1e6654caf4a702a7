"""Planning and cleanup stream their sources: memory follows batches, not corpus size.

Measured with tracemalloc (Python and numpy allocations), not wall clock: the extra peak
memory per extra chunk must stay a few bytes (a 64-bit key per document and per live chunk),
where holding the corpus would cost its text (hundreds of bytes per chunk).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

from flux_chroma.ingest import IngestJob, build_plan
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
            "chunking": {"size": 1000, "overlap": 100},
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
    assert build_plan(large)["chunks"] == 20_000
    for step in (build_plan, live_chunks):
        step(small)  # first-use costs (imports, caches) are not the corpus
        grown = _peak(lambda s=step: s(large)) - _peak(lambda s=step: s(small))
        per_chunk = grown / 18_000
        assert per_chunk < 64, f"{step.__name__}: {per_chunk:.0f} extra bytes per extra chunk"


def test_duplicate_policy_still_finds_every_collision(tmp_path: Path) -> None:
    path = tmp_path / "dupes.jsonl"
    rows = [{"id": f"r{i}", "text": f"text {i}"} for i in range(50)] + [{"id": "r7", "text": "again"}, {"id": "r9", "text": "again"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = {"tenant": "acme", "collection": "notes", "sources": [{"kind": "jsonl", "path": str(path)}], "duplicates": "last_wins"}
    plan = build_plan(job)
    assert plan["duplicate_count"] == 2 and [d["id"] for d in plan["duplicates"]] == ["r7", "r9"]
    assert plan["docs"] == 50 and plan["chunks"] == 50
