"""The write path: validated documents -> (skip unchanged) -> embed (+cache) -> upsert batches.

Idempotent by construction: records are upserted by id, each record's metadata carries a
content hash (``fc_hash``), and a record whose stored hash already matches is skipped after
asking the SERVER (never a cache) what it holds. Chroma's upsert merges metadata, so keys
that disappeared from a record are explicitly deleted (set to ``None``) on rewrite.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.tasks.background import in_background
from flux_chroma.tasks.results import Receipt
from flux_chroma.tasks.validation import Document

__all__ = [
    "HASH_KEY",
    "Prepared",
    "WriteOptions",
    "commit_batch",
    "content_hash",
    "make_embedder",
    "prepare_batch",
    "write_documents",
]

HASH_KEY = "fc_hash"
_INTERNAL_KEYS = frozenset({HASH_KEY})


def content_hash(doc: Document) -> str:
    """Hash of a record's text and user metadata (what decides "unchanged")."""
    canonical = json.dumps(
        [doc.text, doc.metadata], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class WriteOptions:
    """How a write behaves.

    Args:
        ef: Configured embedding function, or ``None`` for the pinned/default one.
        cache: An :class:`~flux_chroma.embedding.EmbeddingCache` or ``None``.
        space: Distance space for new collections.
        adopt: Adopt an unpinned collection.
        skip_unchanged: Skip records whose stored content hash matches (checked on the server).
        extra_metadata: Metadata added to every record (reserved ``fc_*`` keys allowed).
        overlap: Embed the next server batch in a background thread while the current one
            is upserted (same requests, receipts and contents as without).
    """

    ef: Any = None
    cache: Any = None
    space: str | None = None
    adopt: bool = False
    skip_unchanged: bool = True
    extra_metadata: dict[str, Any] = field(default_factory=dict)
    overlap: bool = False


@dataclass
class _Tally:
    added: int = 0
    updated: int = 0
    skipped: int = 0
    hits: int = 0
    misses: int = 0
    truncated: int = 0
    embed_seconds: float = 0.0
    batches: int = 0
    written_ids: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """One server batch, decided and (when overlapping) embedded, not yet written.

    Attributes:
        todo: Documents to upsert (new or changed).
        metadatas: Their metadata as written (content hash added, vanished keys set to None).
        added: New records among ``todo``.
        updated: Changed records among ``todo``.
        skipped: Unchanged records (not written).
        ready: Vectors computed ahead for ``todo`` (None: embed when written).
    """

    todo: list[Document]
    metadatas: list[dict[str, Any]]
    added: int
    updated: int
    skipped: int
    ready: Any = None


def _max_batch(resolved: Resolved) -> int:
    client = resolved.collection._client  # the ServerAPI the collection was built with
    size = int(client.get_max_batch_size())
    return max(1, size)


def make_embedder(resolved: Resolved, opts: WriteOptions) -> Any:
    """The :class:`~flux_chroma.embedding.CachingEmbedder` of a resolved collection."""
    from flux_chroma.embedding.embedder import CachingEmbedder

    return CachingEmbedder(
        resolved.ef,
        cache=opts.cache,
        digest=resolved.pin.fingerprint.digest,
        dimension=resolved.pin.dimension,
    )


def prepare_batch(
    resolved: Resolved, docs: Sequence[Document], opts: WriteOptions, embedder: Any = None
) -> Prepared:
    """Ask the server what it holds for ``docs`` and decide what to write; nothing is written.

    Args:
        resolved: The collection.
        docs: One server batch of validated documents.
        opts: Write options.
        embedder: When given, the texts to write are embedded now
            (:meth:`~flux_chroma.embedding.CachingEmbedder.precompute`: nothing cached yet).

    Returns:
        The decisions (and vectors) for :func:`commit_batch`.
    """
    ids = [d.id for d in docs]
    stored = resolved.collection.get(ids=ids, include=["metadatas"])
    existing: dict[str, dict[str, Any]] = {
        rid: dict(meta or {})
        for rid, meta in zip(stored["ids"], stored["metadatas"] or [], strict=False)
    }
    out = Prepared([], [], 0, 0, 0)
    for doc in docs:
        digest = content_hash(doc)
        old = existing.get(doc.id)
        if opts.skip_unchanged and old is not None and old.get(HASH_KEY) == digest:
            out.skipped += 1
            continue
        meta: dict[str, Any] = {**doc.metadata, **opts.extra_metadata, HASH_KEY: digest}
        if old is not None:
            for stale in set(old) - set(meta):
                meta[stale] = None  # upsert merges metadata: delete keys that disappeared
            out.updated += 1
        else:
            out.added += 1
        out.todo.append(doc)
        out.metadatas.append(meta)
    if embedder is not None and out.todo:
        out.ready = embedder.precompute([d.text for d in out.todo])
    return out


def commit_batch(
    resolved: Resolved,
    prepared: Prepared,
    embedder: Callable[[], Any],
    tally: _Tally,
    embedded: Callable[[], None] | None = None,
) -> None:
    """Embed what is not embedded yet (through the cache), then upsert one prepared batch.

    ``embedder`` returns the :class:`~flux_chroma.embedding.CachingEmbedder` (called only when
    a text needs embedding). ``embedded`` is called once the vectors are ready, before the
    upsert (a pipeline starts the next batch's embedding there).
    """
    tally.skipped += prepared.skipped
    tally.added += prepared.added
    tally.updated += prepared.updated
    if not prepared.todo:
        if embedded is not None:
            embedded()
        return
    result = embedder().embed([d.text for d in prepared.todo], ready=prepared.ready)
    tally.hits += result.hits
    tally.misses += result.misses
    tally.truncated += result.truncated
    tally.embed_seconds += result.seconds
    if embedded is not None:
        embedded()
    resolved.collection.upsert(
        ids=[d.id for d in prepared.todo],
        embeddings=result.vectors,
        documents=[d.text for d in prepared.todo],
        metadatas=prepared.metadatas,  # type: ignore[arg-type]
    )
    tally.written_ids.extend(d.id for d in prepared.todo)


def write_documents(
    target: Target,
    docs: Sequence[Document],
    opts: WriteOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
    after_embedding: Callable[[Resolved], None] | None = None,
    ready: Any = None,
) -> Receipt:
    """Upsert validated documents into a tenant's collection, batch by batch.

    With ``opts.overlap`` the next server batch is read and embedded in a background thread
    while the current one is upserted (a pipeline of depth 2). A batch is still written only
    after every batch before it was; if an upsert fails, the next batch's vectors are dropped.

    Args:
        target: The collection (created with a pin when missing).
        docs: Validated documents with unique ids.
        opts: Write options.
        progress: Called with ``(documents done, total)`` after each batch.
        after_embedding: Called with the collection once the last batch's vectors are
            ready, before its upsert (an ingestion job starts its next batch there).
        ready: :class:`~flux_chroma.embedding.embedder.Precomputed` vectors of some of these
            texts, computed ahead (used instead of a model run of the same text).

    Returns:
        A JSON-able receipt (counts, embedding identity, timings).

    Raises:
        FluxChromaError: Typed errors from resolution, pin checks, embedding or the server.
    """
    started = time.perf_counter()

    def run(resolved: Resolved) -> tuple[Resolved, _Tally]:
        tally = _Tally()  # fresh per attempt: a re-resolution starts the count over
        size = _max_batch(resolved)
        # built when a text needs embedding
        embedder = functools.cache(lambda: make_embedder(resolved, opts))
        chunks = [docs[start : start + size] for start in range(0, len(docs), size)]
        ahead: Future[Prepared] | None = None  # batch i + 1, embedded while batch i is upserted
        done = 0
        try:
            for i, chunk in enumerate(chunks):
                prepared = (
                    ahead.result() if ahead is not None else prepare_batch(resolved, chunk, opts)
                )
                ahead = None
                if prepared.ready is None:
                    prepared.ready = ready
                last = i + 1 == len(chunks)

                def embedded(i: int = i, last: bool = last) -> None:
                    nonlocal ahead
                    if opts.overlap and not last:
                        ahead = in_background(
                            prepare_batch, resolved, chunks[i + 1], opts, embedder()
                        )
                    elif last and after_embedding is not None:
                        after_embedding(resolved)

                commit_batch(resolved, prepared, embedder, tally, embedded)
                tally.batches += 1
                done += len(chunk)
                if progress is not None:
                    progress(done, len(docs))
        finally:
            if ahead is not None:
                ahead.cancel()  # a failed upsert drops the next batch's vectors unwritten
        return resolved, tally

    resolved, tally = with_collection(
        target,
        run,
        ef=opts.ef,
        space=opts.space,
        create=True,
        adopt=opts.adopt,
        action=f"upsert into {target.label!r}",
    )
    return {
        "tenant": target.namespace.tenant,
        "collection": target.name,
        "physical_name": target.physical,
        "upserted": tally.added + tally.updated,
        "added": tally.added,
        "updated": tally.updated,
        "skipped": tally.skipped,
        "embedded": tally.misses,
        "cache_hits": tally.hits,
        "cache_misses": tally.misses,
        "truncated": tally.truncated,
        "batches": tally.batches,
        "embedding": resolved.pin.summary(),
        "embed_seconds": round(tally.embed_seconds, 6),
        "seconds": round(time.perf_counter() - started, 6),
    }
