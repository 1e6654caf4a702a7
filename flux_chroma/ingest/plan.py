"""Planning: sources -> documents -> chunks -> batch references with content digests.

A plan is small and JSON-able: per batch a *reference* (source index, cursor of its first
document, chunks to skip in that document, chunk count, documents excluded by the duplicate
policy) and the digest of the chunks it covers. It never holds document text or chunk ids,
so it stays a few kilobytes for tens of thousands of chunks. A batch task re-reads its
slice from the reference with :func:`read_batch` and fails with
:class:`~flux_chroma.errors.SourceChangedError` when the digest no longer matches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from flux_chroma.errors import DuplicateIdError, SourceChangedError
from flux_chroma.ingest.chunking import chunk_digest, chunk_id, doc_key_of, split_text
from flux_chroma.ingest.sources import Unit, iter_units
from flux_chroma.ingest.spec import IngestJob
from flux_chroma.tasks.validation import Document

__all__ = ["Chunk", "build_plan", "read_batch", "iter_chunks", "live_chunks", "MAX_REPORTED_DUPLICATES"]

MAX_REPORTED_DUPLICATES = 50


@dataclass(frozen=True)
class Chunk:
    """One chunk of one document, ready to write."""

    id: str
    text: str
    metadata: dict[str, Any]
    doc_key: str
    index: int

    def digest(self) -> str:
        """Digest of what this chunk writes."""
        return chunk_digest(self.id, self.text, self.metadata)

    def document(self) -> Document:
        """The chunk as a writer :class:`~flux_chroma.tasks.validation.Document`."""
        return Document(self.id, self.text, self.metadata)


def chunks_of(unit: Unit, job: IngestJob) -> list[Chunk]:
    """Cut one document into chunks with deterministic ids."""
    key = doc_key_of(unit.doc_id)
    return [
        Chunk(chunk_id(unit.doc_id, i, text), text, dict(unit.metadata), key, i)
        for i, text in enumerate(split_text(unit.text, job.chunking))
    ]


def _combine(digests: list[str]) -> str:
    return hashlib.sha256("".join(digests).encode("ascii")).hexdigest()[:32]


def _duplicates(job: IngestJob, units: list[list[Unit]]) -> tuple[set[tuple[int, int]], list[dict[str, Any]]]:
    """Apply the duplicate policy; return excluded (source, cursor) pairs and a report."""
    seen: dict[str, list[tuple[int, Unit]]] = {}
    for s_idx, source_units in enumerate(units):
        for unit in source_units:
            seen.setdefault(unit.doc_id, []).append((s_idx, unit))
    collisions = {doc_id: hits for doc_id, hits in seen.items() if len(hits) > 1}
    report = [
        {
            "id": doc_id,
            "sources": [f"{job.sources[s]['id']}:{u.label}" for s, u in hits],
            "kept": f"{job.sources[hits[-1][0]]['id']}:{hits[-1][1].label}",
        }
        for doc_id, hits in list(collisions.items())[:MAX_REPORTED_DUPLICATES]
    ]
    if collisions and job.duplicates == "error":
        shown = "; ".join(f"{r['id']!r} in {', '.join(r['sources'])}" for r in report[:5])
        more = f" (and {len(collisions) - 5} more)" if len(collisions) > 5 else ""
        raise DuplicateIdError(
            f"ingestion job for {job.tenant}/{job.collection}: {len(collisions)} document id(s) appear more "
            f"than once: {shown}{more}. Nothing was written. Fix the sources, or set "
            "duplicates='last_wins' to keep the last occurrence."
        )
    excluded = {(s, u.cursor) for hits in collisions.values() for s, u in hits[:-1]}
    return excluded, report


def build_plan(job: IngestJob | Mapping[str, Any], max_batch: int | None = None) -> dict[str, Any]:
    """Read every source once and cut the job into batch references.

    Args:
        job: The job (spec dict or :class:`IngestJob`).
        max_batch: The server's maximum batch size (caps ``job.batch_size``).

    Returns:
        ``{"digest", "chunks", "docs", "batch_size", "sources": [...], "batches": [...],
        "duplicates": [...], "duplicate_count"}`` (JSON-able, no document text).

    Raises:
        DuplicateIdError: A document id repeats and the policy is ``"error"``.
        InvalidDocumentError: A malformed record (named by source and position).
        SourceChangedError: A source is missing.
    """
    job = IngestJob.from_dict(job)
    size = min(job.batch_size, max_batch) if max_batch else job.batch_size
    units = [list(iter_units(src)) for src in job.sources]
    excluded, duplicates = _duplicates(job, units)
    batches: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    all_digests: list[str] = []
    seen_ids: set[str] = set()
    for s_idx, source_units in enumerate(units):
        current: dict[str, Any] | None = None
        digests: list[str] = []
        docs = chunk_total = 0
        for unit in source_units:
            if (s_idx, unit.cursor) in excluded:
                if current is not None:
                    current.setdefault("exclude", []).append(unit.cursor)
                continue
            docs += 1
            for chunk in chunks_of(unit, job):
                if chunk.id in seen_ids:  # defensive: ids derive from unique doc ids
                    raise DuplicateIdError(f"chunk id {chunk.id!r} repeats in source {job.sources[s_idx]['id']!r}.")
                seen_ids.add(chunk.id)
                if current is None or current["count"] >= size:
                    if current is not None:
                        batches.append({**current, "digest": _combine(digests)})
                    current = {"batch": len(batches), "source": s_idx, "cursor": unit.cursor, "skip": chunk.index, "count": 0}
                    digests = []
                current["count"] += 1
                digest = chunk.digest()
                digests.append(digest)
                all_digests.append(digest)
                chunk_total += 1
        if current is not None:
            batches.append({**current, "digest": _combine(digests)})
        sources.append({"id": job.sources[s_idx]["id"], "kind": job.sources[s_idx]["kind"], "docs": docs, "chunks": chunk_total})
    for ref in batches:
        ref["of"] = len(batches)
    return {
        "digest": _combine(all_digests + [f"{s}:{c}" for s, c in sorted(excluded)]),
        "chunks": len(all_digests),
        "docs": sum(s["docs"] for s in sources),
        "batch_size": size,
        "sources": sources,
        "batches": batches,
        "duplicates": duplicates,
        "duplicate_count": len(excluded),
    }


def read_batch(job: IngestJob | Mapping[str, Any], ref: dict[str, Any]) -> list[Chunk]:
    """Re-read the slice a batch reference points at and check its digest.

    Args:
        job: The job the reference was planned for.
        ref: One entry of ``plan["batches"]``.

    Returns:
        The batch's chunks, in plan order.

    Raises:
        SourceChangedError: The slice's content differs from the plan (the source changed
            under the running job), or the source is gone.
    """
    job = IngestJob.from_dict(job)
    src = job.sources[ref["source"]]
    exclude = set(ref.get("exclude") or ())
    out: list[Chunk] = []
    first = True
    for unit in iter_units(src, ref["cursor"]):
        if unit.cursor in exclude:
            continue
        chunks = chunks_of(unit, job)
        if first:
            chunks = chunks[ref["skip"] :]
            first = False
        out.extend(chunks[: ref["count"] - len(out)])
        if len(out) >= ref["count"]:
            break
    if len(out) != ref["count"] or _combine([c.digest() for c in out]) != ref["digest"]:
        raise SourceChangedError(
            f"source {src['id']!r} changed while ingestion job {job.tenant}/{job.collection} was running: "
            f"batch {ref['batch']} no longer matches its planned digest. Nothing of this batch was "
            "written. Run the job again: it re-plans from the current content."
        )
    return out


def iter_chunks(job: IngestJob) -> Iterator[tuple[int, Chunk]]:
    """Every chunk of the job after the duplicate policy, as ``(source index, chunk)``."""
    units = [list(iter_units(src)) for src in job.sources]
    excluded, _ = _duplicates(job, units)
    for s_idx, source_units in enumerate(units):
        for unit in source_units:
            if (s_idx, unit.cursor) not in excluded:
                for chunk in chunks_of(unit, job):
                    yield s_idx, chunk


def live_chunks(job: IngestJob) -> tuple[dict[str, set[str]], set[str], str]:
    """What a finished job leaves in the collection, for cleanup.

    Returns:
        ``(live chunk ids per source id, document keys seen, plan digest)``; the digest is
        computed like :func:`build_plan`'s so a caller can check the corpus did not change.
    """
    live: dict[str, set[str]] = {src["id"]: set() for src in job.sources}
    docs: set[str] = set()
    digests: list[str] = []
    units = [list(iter_units(src)) for src in job.sources]
    excluded, _ = _duplicates(job, units)
    for s_idx, source_units in enumerate(units):
        for unit in source_units:
            docs.add(doc_key_of(unit.doc_id))  # excluded duplicates were seen too
            if (s_idx, unit.cursor) in excluded:
                continue
            for chunk in chunks_of(unit, job):
                live[job.sources[s_idx]["id"]].add(chunk.id)
                digests.append(chunk.digest())
    return live, docs, _combine(digests + [f"{s}:{c}" for s, c in sorted(excluded)])
