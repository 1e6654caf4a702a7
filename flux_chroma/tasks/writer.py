"""The write path: validated documents -> (skip unchanged) -> embed (+cache) -> upsert batches.

Idempotent: records are upserted by id with a content hash (``fc_hash``), and a record whose
stored hash matches is skipped after asking the SERVER (never a cache). Chroma's upsert merges
metadata, so keys that disappeared from a record are set to ``None`` on rewrite.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.seams import collection_server
from flux_chroma.tasks.results import Receipt
from flux_chroma.tasks.validation import Document

__all__ = ["HASH_KEY", "WriteOptions", "content_hash", "write_documents"]

HASH_KEY = "fc_hash"


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
        extra_metadata: Metadata added to every record (``fc_*`` keys allowed; not hashed).
        record_metadata: Metadata added to single records, by id (as ``extra_metadata``).
    """

    ef: Any = None
    cache: Any = None
    space: str | None = None
    adopt: bool = False
    extra_metadata: dict[str, Any] = field(default_factory=dict)
    record_metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


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


def make_embedder(resolved: Resolved, cache: Any) -> Any:
    """A :class:`CachingEmbedder` for ``resolved``'s pinned function, through ``cache``."""
    from flux_chroma.embedding.embedder import CachingEmbedder

    return CachingEmbedder(
        resolved.ef,
        cache=cache,
        digest=resolved.pin.fingerprint.digest,
        dimension=resolved.pin.dimension,
    )


def _write_batch(
    resolved: Resolved,
    docs: Sequence[Document],
    opts: WriteOptions,
    embedder: Callable[[], Any],
    tally: _Tally,
) -> None:
    """Ask the server what it holds for ``docs`` (one ``get``), then embed and upsert the rest."""
    stored = resolved.collection.get(ids=[d.id for d in docs], include=["metadatas"])
    existing: dict[str, dict[str, Any]] = {
        rid: dict(meta or {})
        for rid, meta in zip(stored["ids"], stored["metadatas"] or [], strict=False)
    }
    todo: list[Document] = []
    metadatas: list[dict[str, Any]] = []
    for doc in docs:
        digest = content_hash(doc)
        old = existing.get(doc.id)
        if old is not None and old.get(HASH_KEY) == digest:
            tally.skipped += 1
            continue
        own = opts.record_metadata.get(doc.id, {})
        meta: dict[str, Any] = {**doc.metadata, **opts.extra_metadata, **own, HASH_KEY: digest}
        if old is not None:
            for stale in set(old) - set(meta):
                meta[stale] = None  # upsert merges metadata: delete keys that disappeared
            tally.updated += 1
        else:
            tally.added += 1
        todo.append(doc)
        metadatas.append(meta)
    if not todo:
        return
    result = embedder().embed([d.text for d in todo])
    tally.hits += result.hits
    tally.misses += result.misses
    tally.truncated += result.truncated
    tally.embed_seconds += result.seconds
    resolved.collection.upsert(
        ids=[d.id for d in todo],
        embeddings=result.vectors,
        documents=[d.text for d in todo],
        metadatas=metadatas,  # type: ignore[arg-type]
    )


def write_documents(
    target: Target,
    docs: Sequence[Document],
    opts: WriteOptions,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Receipt:
    """Upsert validated documents into a tenant's collection (created with a pin when missing).

    Each server batch is decided (one ``get`` of the stored hashes), embedded and upserted
    before the next one is read; ``progress(done, total)`` is called after each.
    """
    started = time.perf_counter()

    def run(resolved: Resolved) -> tuple[Resolved, _Tally]:
        tally = _Tally()  # fresh per attempt: a re-resolution starts the count over
        size = max(1, int(collection_server(resolved.collection).get_max_batch_size()))
        embedder = functools.cache(lambda: make_embedder(resolved, opts.cache))
        for start in range(0, len(docs), size):
            chunk = docs[start : start + size]
            _write_batch(resolved, chunk, opts, embedder, tally)
            tally.batches += 1
            if progress is not None:
                progress(start + len(chunk), len(docs))
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
