"""Which records a job's sources own, and cleanup of their stale chunks.

Every chunk a job writes carries its source's id (``fc_source``) and location (``fc_loc``).
A source owns exactly the records whose id AND location are its own: :func:`claim_sources`
(before any write) refuses a source id that holds records from another location, unless the
source opts in with ``relocate``. Cleanup runs only after every batch committed and only on
the job's sources' records (never other jobs' or ``embed_and_add``'s). Modes follow LangChain's
indexing API: ``incremental`` deletes stale chunks of the documents seen in this job (an edited
document's old chunks); ``full`` also those of documents gone from the sources.
"""

from __future__ import annotations

from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, pages, with_collection
from flux_chroma.errors import (
    ChromaRequestError,
    CollectionNotFoundError,
    SourceChangedError,
    SourceConflictError,
)
from flux_chroma.ingest.plan import live_chunks
from flux_chroma.ingest.sources import source_location
from flux_chroma.ingest.spec import IngestJob

__all__ = ["cleanup_stale", "claim_sources", "source_metadata", "source_scope", "SOURCE_KEY", "LOCATION_KEY"]

SOURCE_KEY = "fc_source"
"""Metadata key holding the id of the job source that wrote a chunk."""
LOCATION_KEY = "fc_loc"
"""Metadata key holding that source's location (:func:`~flux_chroma.ingest.sources.source_location`)."""


def source_metadata(src: dict[str, Any]) -> dict[str, str]:
    """The ``fc_*`` keys every chunk of source ``src`` carries: its id and its location."""
    return {SOURCE_KEY: src["id"], LOCATION_KEY: source_location(src)}


def source_scope(sources: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """A ``where`` matching exactly the records of these sources (id AND location)."""
    clauses = [{"$and": [{k: v} for k, v in source_metadata(src).items()]} for src in sources]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def _foreign(src: dict[str, Any]) -> dict[str, Any]:
    """Records of ``src``'s id from another location (``$ne`` also matches a missing key)."""
    return {"$and": [{SOURCE_KEY: src["id"]}, {LOCATION_KEY: {"$ne": source_location(src)}}]}


def _conflict(label: str, src: dict[str, Any], other: Any) -> SourceConflictError:
    here = source_location(src)
    theirs = f"records of source {src['id']!r} " + (
        f"read from {other}" if isinstance(other, str)
        else "with no recorded location (written by a flux-chroma release that did not record it)"
    )  # fmt: skip
    return SourceConflictError(
        f"source {src['id']!r} reads {here}, but collection {label} already holds "
        f"{theirs}. Nothing was written. If these are two different sources, give this one another id "
        "('id' in the job spec, --source-id on the command line). If those records are this source's own "
        "(its folder moved, or an earlier release wrote them), run the job once with 'relocate': true on "
        "the source (--relocate): it takes them over, and its cleanup then removes what the new location "
        "no longer holds."
    )


def _relocate(resolved: Resolved, src: dict[str, Any], page: int) -> int:
    """Move every record of ``src``'s id from other locations to its own (metadata only)."""
    where, here = _foreign(src), source_location(src)
    moved = 0
    previous: set[str] = set()
    while True:
        ids = list(resolved.collection.get(where=where, include=[], limit=page)["ids"])
        if not ids:
            return moved
        if previous & set(ids):  # update did not take: never loop forever
            raise ChromaRequestError(
                f"relocating source {src['id']!r}: the server kept returning the same records after "
                f"their {LOCATION_KEY!r} was updated (e.g. {sorted(previous & set(ids))[:3]})."
            )
        resolved.collection.update(ids=ids, metadatas=[{LOCATION_KEY: here} for _ in ids])
        moved += len(ids)
        previous = set(ids)


def claim_sources(target: Target, job: IngestJob, *, ef: Any = None, adopt: bool = False, page: int = 1000) -> dict[str, int]:
    """Check, before any write, that each source's id holds no records of another location.

    A source with ``relocate: true`` takes such records over instead (only their ``fc_loc``
    changes), so its batches skip what is unchanged and its cleanup removes what it lacks.

    Args:
        target: The job's (alias-resolved) collection; a missing collection holds nothing.
        ef: Configured embedding function (only for the pin check; ``adopt`` likewise).
        page: Records relocated per request.

    Returns:
        ``{source id: records relocated}`` for the sources that relocated any.

    Raises:
        SourceConflictError: A source's id holds another location's records, without ``relocate``.
    """

    def run(resolved: Resolved) -> dict[str, int]:
        moved: dict[str, int] = {}
        for src in job.sources:
            got = resolved.collection.get(where=_foreign(src), include=["metadatas"], limit=1)
            if not got["ids"]:
                continue
            if not src.get("relocate"):
                metas = got["metadatas"] or []
                raise _conflict(target.label, src, (metas[0] if metas and metas[0] else {}).get(LOCATION_KEY))
            moved[src["id"]] = _relocate(resolved, src, page)
        return moved

    try:
        return with_collection(target, run, ef=ef, create=False, adopt=adopt, action=f"check the sources of {target.label!r}")
    except CollectionNotFoundError:
        return {}  # nothing was ever written


def cleanup_stale(target: Target, job: IngestJob, expected_digest: str | None, *, ef: Any = None, page: int = 1000) -> dict[str, Any]:
    """Delete the job's stale chunks from its collection (idempotent).

    Args:
        expected_digest: The plan digest the batches were written from (``None``: no check).
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

    def is_stale(rid: str) -> bool:  # a chunk id is {document key}#{index}:{hash}
        return rid not in live and (mode == "full" or rid.rsplit("#", 1)[0] in docs)

    def run(resolved: Resolved) -> dict[str, Any]:
        stale: list[str] = []  # only the stale ids are kept: memory follows those
        scanned = 0
        for got in pages(resolved.collection, page, where=source_scope(job.sources), include=[]):
            scanned += len(got["ids"])
            stale.extend(rid for rid in got["ids"] if is_stale(rid))
        for start in range(0, len(stale), page):
            resolved.collection.delete(ids=stale[start : start + page])
        return {"mode": mode, "scanned": scanned, "deleted": len(stale)}

    try:
        return with_collection(target, run, ef=ef, create=False, action=f"clean up {target.label!r}")
    except CollectionNotFoundError:
        return {"mode": mode, "scanned": 0, "deleted": 0}  # nothing was ever written
