"""Planning: sources -> documents -> chunks -> batch references with content digests.

A plan is small and JSON-able: per batch a *reference* (source index, cursor of its first
document, chunks to skip in it, chunk count, documents excluded) and the digest of its chunks;
never document text or chunk ids. A batch task re-reads its slice with :func:`read_batch`,
which fails with :class:`~flux_chroma.errors.SourceChangedError` when the digest differs.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flux_chroma.errors import DuplicateIdError, SourceChangedError
from flux_chroma.ingest.chunking import chunk_id
from flux_chroma.ingest.sources import (
    UNMATCHED_SAMPLE,
    SkippedUnit,
    Unit,
    file_census,
    iter_doc_ids,
    iter_units,
    source_location,
)
from flux_chroma.ingest.spec import IngestJob, digest_of
from flux_chroma.ingest.splitter import Chunker, chunker_for, has_headings, is_markdown
from flux_chroma.tasks.validation import Document, doc_key_of

__all__ = ["Chunk", "chunks_of", "build_plan", "submitted_plans", "take_plan", "read_batch", "iter_chunks", "live_chunks", "LiveSet", "key64", "MAX_REPORTED_DUPLICATES", "MAX_REPORTED_SKIPS"]

MAX_REPORTED_DUPLICATES = 50
MAX_REPORTED_SKIPS = 100
"""Skipped files named in a plan (and the report); ``skipped_file_count`` counts them all."""
READING_PROGRESS_EVERY = 0.5
"""Seconds between two ``reading`` progress values of :func:`build_plan`."""


@dataclass(frozen=True)
class Chunk:
    """One chunk of one document, ready to write."""

    id: str
    text: str
    metadata: dict[str, Any]
    doc_key: str
    index: int

    def digest(self) -> str:
        """Digest of what this chunk writes (id, text, user metadata)."""
        return digest_of([self.id, self.text, self.metadata])

    def document(self) -> Document:
        """The chunk as a writer :class:`~flux_chroma.tasks.validation.Document`."""
        return Document(self.id, self.text, self.metadata)


def chunks_of(unit: Unit, job: IngestJob, chunker: Chunker | None = None) -> list[Chunk]:
    """Cut one document into chunks with deterministic ids and citation metadata.

    Each chunk's metadata is the document's plus ``fc_start``/``fc_end`` (its character
    offsets in ``unit.text``), ``fc_heading`` (the Markdown heading path, when there is one
    and the format has headings: :func:`~flux_chroma.ingest.splitter.has_headings`)
    and ``fc_page`` (1-based, when the unit has ``page_starts``). Pass ``chunker`` (the job's,
    from :func:`~flux_chroma.ingest.splitter.chunker_for`) when cutting many documents:
    resolving it costs a file stat.
    """
    chunker = chunker or chunker_for(job.chunking, job.embedding_function)
    key = doc_key_of(unit.doc_id)
    pages = unit.page_starts
    titled = has_headings(unit.metadata)
    out = []
    for i, piece in enumerate(chunker.pieces(unit.text, is_markdown(unit.metadata))):
        meta = {**unit.metadata, "fc_start": piece.start, "fc_end": piece.end}
        if piece.heading and titled:
            meta["fc_heading"] = piece.heading
        if pages:
            meta["fc_page"] = max(1, bisect.bisect_right(pages, piece.start))
        out.append(Chunk(chunk_id(unit.doc_id, i, piece.text), piece.text, meta, key, i))
    return out


def _plan_digest(total: _Combined, excluded: set[tuple[int, int]], chunker: Chunker) -> str:
    """The plan digest: the chunks' digests (in ``total``), the exclusions and the chunker."""
    for s, c in sorted(excluded):
        total.add(f"{s}:{c}")
    total.add("chunker:" + digest_of(chunker.identity))
    return total.hexdigest()


class _Combined:
    """A digest of digests, computed incrementally (without keeping the list)."""

    def __init__(self, digests: Iterable[str] = ()) -> None:
        self._hash = hashlib.sha256()
        for digest in digests:
            self.add(digest)

    def add(self, digest: str) -> None:
        self._hash.update(digest.encode("ascii"))

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:32]


def _duplicates(job: IngestJob) -> tuple[set[tuple[int, int]], list[dict[str, Any]]]:
    """Apply the duplicate policy, streaming: returns excluded ``(source, cursor)`` pairs and a report.

    Pass 1 keeps 8 bytes per document (a :func:`key64` of its id) and finds repeated keys;
    only when there are some, pass 2 collects the colliding documents' positions.
    """
    import numpy as np

    keys = array("Q")
    for src in job.sources:
        keys.extend(key64(doc_id) for doc_id, _, _ in iter_doc_ids(src))
    ordered = np.sort(np.frombuffer(keys, dtype=np.uint64))
    del keys
    repeated = {int(k) for k in np.unique(ordered[1:][ordered[1:] == ordered[:-1]])}
    del ordered
    groups: dict[str, list[tuple[int, int, str]]] = {}
    if repeated:
        for s_idx, src in enumerate(job.sources):
            for doc_id, cursor, label in iter_doc_ids(src):
                if key64(doc_id) in repeated:
                    groups.setdefault(doc_id, []).append((s_idx, cursor, label))
    collisions = {doc_id: hits for doc_id, hits in groups.items() if len(hits) > 1}
    report = [
        {
            "id": doc_id,
            "sources": [f"{job.sources[s]['id']}:{label}" for s, _, label in hits],
            "kept": f"{job.sources[hits[-1][0]]['id']}:{hits[-1][2]}",
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
    excluded = {(s, c) for hits in collisions.values() for s, c, _ in hits[:-1]}
    return excluded, report


def _kept_units(
    job: IngestJob, excluded: set[tuple[int, int]], skips: list[tuple[int, SkippedUnit]] | None = None
) -> Iterator[tuple[int, Unit, bool]]:
    """Every document of the job, streamed: ``(source index, unit, kept by the policy)``.

    Unreadable files yield no unit; with ``skips`` each is appended there as ``(source index,
    skipped file)`` before the next unit is yielded.
    """
    for s_idx, src in enumerate(job.sources):
        on_skip = None if skips is None else (lambda skipped, s=s_idx: skips.append((s, skipped)))
        for unit in iter_units(src, on_skip=on_skip):
            yield s_idx, unit, (s_idx, unit.cursor) not in excluded


def build_plan(
    job: IngestJob | Mapping[str, Any],
    max_batch: int | None = None,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Read the sources (streaming, twice) and cut the job into batch references.

    The first pass applies the duplicate policy, the second cuts batches. Memory follows the
    number of batches (and 8 bytes per document id), not the corpus size.

    Args:
        max_batch: The server's maximum batch size (caps ``job.batch_size``).
        on_progress: Called every :data:`READING_PROGRESS_EVERY` seconds while the second
            pass reads, and once at its end, with ``{"phase": "reading", "tenant",
            "collection", "read": files and records read so far, "of": how many there are
            (``None`` unless every source is a folder), "chunks": chunks cut so far}``.

    Returns:
        ``{"digest", "chunks", "truncated", "chunker", "docs", "batch_size", "sources",
        "batches", "duplicates", "duplicate_count", "skipped_files", "skipped_file_count",
        "unmatched_files", "unmatched_sample", "excluded_files", "symlinked_folders",
        "symlinked_folder_count"}`` (JSON-able); ``unmatched_sample`` names the first
        :data:`~flux_chroma.ingest.sources.UNMATCHED_SAMPLE` unmatched files. ``truncated`` counts chunks longer
        than the model reads (``None``: no tokenizer declared). Each ``sources`` entry is
        ``{"id", "kind", "location", "docs", "chunks"}``, plus ``skipped_files``,
        ``unmatched`` and ``excluded`` counts for a ``files`` source. ``skipped_files`` names
        up to :data:`MAX_REPORTED_SKIPS` files (``{"source", "path", "reason"}``). A skipped
        file inside a batch's slice is in that batch's ``exclude`` (its re-read skips it).
        ``symlinked_folders`` names up to :data:`MAX_REPORTED_SKIPS` symlinked folders, which
        are not entered (``{"source", "path", "target"}``).

    Raises:
        DuplicateIdError: A document id repeats and the policy is ``"error"``.
        InvalidDocumentError: A malformed record (named by source and position).
        SourceChangedError: A source is missing.
    """
    job = IngestJob.from_dict(job)
    size = _batch_size(job, max_batch)
    excluded, duplicates = _duplicates(job)
    batches: list[dict[str, Any]] = []
    stats = [{"id": src["id"], "kind": src["kind"], "location": source_location(src), "docs": 0, "chunks": 0} for src in job.sources]
    total = _Combined()
    current: dict[str, Any] | None = None
    batch_hash = _Combined()
    chunker = chunker_for(job.chunking, job.embedding_function)
    truncated: int | None = 0 if chunker.tokens is not None else None
    files: int | None = 0  # documents to read, when every source is a folder
    links: list[dict[str, str]] = []  # symlinked folders, not entered
    unmatched: list[str] = []  # a few files no glob took, for the summary
    for s_idx, src in enumerate(job.sources):
        if src["kind"] == "files":
            census = file_census(src)
            stats[s_idx].update(skipped_files=0, unmatched=census.unmatched, excluded=census.excluded)
            links += ({"source": src["id"], "path": rel, "target": os.path.realpath(os.path.join(src["path"], rel))} for rel in census.links)
            unmatched += census.unmatched_sample
            files = None if files is None else files + len(census.matched)
        else:
            files = None
    skips: list[tuple[int, SkippedUnit]] = []
    named: list[dict[str, Any]] = []
    read = cut = 0

    def tell() -> float:
        if on_progress is not None:
            on_progress({"phase": "reading", "tenant": job.tenant, "collection": job.collection, "read": read, "of": files, "chunks": cut})
        return time.monotonic()

    told = time.monotonic()

    def close() -> None:
        if current is not None:
            batches.append({**current, "digest": batch_hash.hexdigest()})

    def account() -> None:
        """Skipped files before the next unit: counted, named, and excluded from the open batch."""
        nonlocal read
        read += len(skips)
        for s_idx, skipped in skips:
            stats[s_idx]["skipped_files"] += 1
            if len(named) < MAX_REPORTED_SKIPS:
                named.append({"source": job.sources[s_idx]["id"], "path": skipped.label, "reason": skipped.reason})
            if current is not None and current["source"] == s_idx and current["count"] < size:
                current.setdefault("exclude", []).append(skipped.cursor)
        skips.clear()

    for s_idx, unit, kept in _kept_units(job, excluded, skips):
        account()
        read += 1
        if on_progress is not None and time.monotonic() - told >= READING_PROGRESS_EVERY:
            told = tell()
        if current is not None and current["source"] != s_idx:  # batches never span sources
            close()
            current = None
        if not kept:
            if current is not None:
                current.setdefault("exclude", []).append(unit.cursor)
            continue
        stats[s_idx]["docs"] += 1
        chunks = chunks_of(unit, job, chunker)
        over = chunker.over_limit([c.text for c in chunks])
        if truncated is not None and over is not None:
            truncated += over
        cut += len(chunks)
        for chunk in chunks:
            if current is None or current["count"] >= size:
                close()
                current = {"batch": len(batches), "source": s_idx, "cursor": unit.cursor, "skip": chunk.index, "count": 0}
                batch_hash = _Combined()
            current["count"] += 1
            digest = chunk.digest()
            batch_hash.add(digest)
            total.add(digest)
            stats[s_idx]["chunks"] += 1
    account()
    close()
    tell()
    for ref in batches:
        ref["of"] = len(batches)
    return {
        "digest": _plan_digest(total, excluded, chunker),
        "chunks": sum(int(s["chunks"]) for s in stats),
        "truncated": truncated,
        "chunker": chunker.identity,
        "docs": sum(int(s["docs"]) for s in stats),
        "batch_size": size,
        "sources": stats,
        "batches": batches,
        "duplicates": duplicates,
        "duplicate_count": len(excluded),
        "skipped_files": named,
        "skipped_file_count": sum(int(s.get("skipped_files", 0)) for s in stats),
        "unmatched_files": sum(int(s.get("unmatched", 0)) for s in stats),
        "unmatched_sample": unmatched[:UNMATCHED_SAMPLE],
        "excluded_files": sum(int(s.get("excluded", 0)) for s in stats),
        "symlinked_folders": links[:MAX_REPORTED_SKIPS],
        "symlinked_folder_count": len(links),
    }


def _batch_size(job: IngestJob, max_batch: int | None) -> int:
    """Chunks per batch: the job's ``batch_size``, capped by the server's maximum."""
    return min(job.batch_size, max_batch) if max_batch else job.batch_size


def _plan_key(job: IngestJob, max_batch: int | None) -> tuple[str, int]:
    return digest_of(job.to_dict()), _batch_size(job, max_batch)


_SUBMITTED: dict[tuple[str, int], dict[str, Any]] = {}  # (spec digest, batch size) -> plan
_SUBMITTED_LOCK = threading.Lock()


@contextmanager
def submitted_plans(
    jobs: list[IngestJob], on_progress: Callable[[dict[str, Any]], None] | None = None
) -> Iterator[list[str]]:
    """Plan jobs that are about to run in this process; yield their corpus digests.

    Inside the block each job's plan task takes its plan (:func:`take_plan`) instead of
    reading the sources a second time. What the block leaves untaken is dropped on exit.
    """
    keys: list[tuple[str, int]] = []
    try:
        digests = []
        for job in jobs:
            plan = build_plan(job, on_progress=on_progress)
            keys.append(_plan_key(job, None))
            with _SUBMITTED_LOCK:
                _SUBMITTED[keys[-1]] = plan
            digests.append(str(plan["digest"]))
        yield digests
    finally:
        with _SUBMITTED_LOCK:
            for key in keys:
                _SUBMITTED.pop(key, None)


def take_plan(job: IngestJob, max_batch: int | None, expected_digest: str | None) -> dict[str, Any] | None:
    """The plan :func:`submitted_plans` built for ``job``, when its digest is ``expected_digest``.

    Returns ``None`` (build the plan) for another batch size, another digest or none kept.
    """
    with _SUBMITTED_LOCK:
        plan = _SUBMITTED.pop(_plan_key(job, max_batch), None)
    return plan if plan is not None and plan["digest"] == expected_digest else None


def read_batch(job: IngestJob | Mapping[str, Any], ref: dict[str, Any]) -> list[Chunk]:
    """Re-read the chunks of one entry of ``plan["batches"]`` and check their digest.

    Raises:
        SourceChangedError: The slice's content differs from the plan, or the source is gone.
    """
    job = IngestJob.from_dict(job)
    src = job.sources[ref["source"]]
    exclude = set(ref.get("exclude") or ())
    chunker = chunker_for(job.chunking, job.embedding_function)
    out: list[Chunk] = []
    skip = ref["skip"]  # the first document's chunks that earlier batches hold
    for unit in iter_units(src, ref["cursor"], skip=exclude):
        if unit.cursor in exclude:
            continue
        chunks = chunks_of(unit, job, chunker)[skip:]
        skip = 0
        out.extend(chunks[: ref["count"] - len(out)])
        if len(out) >= ref["count"]:
            break
    if len(out) != ref["count"] or _Combined(c.digest() for c in out).hexdigest() != ref["digest"]:
        raise SourceChangedError(
            f"source {src['id']!r} changed while ingestion job {job.tenant}/{job.collection} was running: "
            f"batch {ref['batch']} no longer matches its planned digest. Nothing of this batch was "
            "written. Run the job again: it re-plans from the current content."
        )
    return out


def iter_chunks(job: IngestJob) -> Iterator[tuple[int, Chunk]]:
    """Every chunk of the job after the duplicate policy, as ``(source index, chunk)`` (streamed)."""
    excluded, _ = _duplicates(job)
    chunker = chunker_for(job.chunking, job.embedding_function)
    for s_idx, unit, kept in _kept_units(job, excluded):
        if kept:
            for chunk in chunks_of(unit, job, chunker):
                yield s_idx, chunk


def key64(text: str) -> int:
    """A 64-bit key of an id (the first 8 bytes of its SHA-256), for compact membership sets."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def live_chunks(job: IngestJob) -> tuple[LiveSet, LiveSet, str]:
    """What a finished job leaves in the collection, for cleanup (streamed, compact).

    Returns:
        ``(live chunk ids, document keys seen, plan digest)`` as :func:`key64` sets (8 bytes
        per chunk) and :func:`build_plan`'s digest. A 64-bit collision can only make cleanup
        KEEP a stale chunk, never delete a live one.
    """
    live, docs = array("Q"), array("Q")
    total = _Combined()
    excluded, _ = _duplicates(job)
    chunker = chunker_for(job.chunking, job.embedding_function)
    for _s_idx, unit, kept in _kept_units(job, excluded):
        docs.append(key64(doc_key_of(unit.doc_id)))  # excluded duplicates were seen too
        if kept:
            for chunk in chunks_of(unit, job, chunker):
                live.append(key64(chunk.id))
                total.add(chunk.digest())
    return LiveSet(live), LiveSet(docs), _plan_digest(total, excluded, chunker)


class LiveSet:
    """A sorted array of :func:`key64` keys with ``in`` for strings."""

    def __init__(self, keys: array[int]) -> None:
        import numpy as np

        self.keys = np.unique(np.frombuffer(keys, dtype=np.uint64))

    def __contains__(self, text: str) -> bool:
        import numpy as np

        key = np.uint64(key64(text))
        at = int(np.searchsorted(self.keys, key))
        return at < len(self.keys) and bool(self.keys[at] == key)
