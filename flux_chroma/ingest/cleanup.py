"""Cleanup of stale chunks, run only after every batch of a job has committed.

Scope: the job's tenant collection, and only records whose ``fc_source`` metadata names one
of the job's sources. Records written by other jobs or by ``embed_and_add`` are never
touched. Modes follow LangChain's indexing API:

* ``incremental``: delete chunks of the documents seen in this job that are no longer
  produced (an edited document's old chunks).
* ``full``: also delete chunks of documents that disappeared from the job's sources (a
  deleted file, a removed JSONL record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.errors import CollectionNotFoundError, SourceChangedError
from flux_chroma.ingest.plan import live_chunks
from flux_chroma.ingest.spec import IngestJob

__all__ = ["cleanup_stale", "SOURCE_KEY", "doc_key_from_id"]

SOURCE_KEY = "fc_source"
"""Metadata key holding the id of the job source that wrote a chunk."""


def doc_key_from_id(record_id: str) -> str:
    """The document key inside a chunk id (``{doc}#{index}:{hash}``)."""
    return record_id.rsplit("#", 1)[0]


def _stale_ids(resolved: Resolved, source_ids: list[str], page: int, is_stale: Callable[[str], bool]) -> tuple[int, list[str]]:
    """Page through the job's stored ids; keep only the stale ones (memory follows those)."""
    where: dict[str, Any] = {SOURCE_KEY: {"$in": source_ids}}
    stale: list[str] = []
    scanned = offset = 0
    while True:
        got = resolved.collection.get(where=where, include=[], limit=page, offset=offset)
        ids = list(got["ids"])
        scanned += len(ids)
        stale.extend(rid for rid in ids if is_stale(rid))
        if len(ids) < page:
            return scanned, stale
        offset += page


def cleanup_stale(target: Target, job: IngestJob, expected_digest: str | None, *, ef: Any = None, page: int = 1000) -> dict[str, Any]:
    """Delete the job's stale chunks from its collection (idempotent).

    Args:
        target: The job's (alias-resolved) collection.
        job: The job; its sources are re-read to know which chunks are live.
        expected_digest: The plan digest the batches were written from; cleanup refuses to
            delete anything when the sources changed since (``None`` skips the check).
        ef: Configured embedding function (only for the pin check).
        page: Ids fetched/deleted per request (keep it <= the server's max batch size).

    Returns:
        ``{"mode", "scanned", "deleted"}``.

    Raises:
        SourceChangedError: The sources changed after the batches were written.
    """
    mode = job.cleanup
    if mode is None:
        return {"mode": None, "scanned": 0, "deleted": 0}
    live, docs, digest = live_chunks(job)
    if expected_digest is not None and digest != expected_digest:
        raise SourceChangedError(
            f"the sources of ingestion job {job.tenant}/{job.collection} changed after its batches were "
            "written; cleanup deleted nothing. Run the job again to re-plan from the current content."
        )

    def is_stale(rid: str) -> bool:
        return rid not in live and (mode == "full" or doc_key_from_id(rid) in docs)

    def run(resolved: Resolved) -> dict[str, Any]:
        scanned, stale = _stale_ids(resolved, sorted(src["id"] for src in job.sources), page, is_stale)
        for start in range(0, len(stale), page):
            resolved.collection.delete(ids=stale[start : start + page])
        return {"mode": mode, "scanned": scanned, "deleted": len(stale)}

    try:
        return with_collection(target, run, ef=ef, create=False, action=f"clean up {target.label!r}")
    except CollectionNotFoundError:
        return {"mode": mode, "scanned": 0, "deleted": 0}  # nothing was ever written
