"""The read path: question(s) -> pin check -> embed (+cache) -> ``collection.query`` -> plain dicts.

Results are plain JSON-able dicts ``{"id", "document", "metadata", "distance"}``: no numpy
(distributed Flux turns numpy into strings), no Chroma result objects, and none of
flux-chroma's internal ``fc_*`` metadata keys. Only the question's embedding may come from
the cache, never the results.
"""

from __future__ import annotations

from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.tasks.results import Hit
from flux_chroma.tasks.validation import RESERVED_PREFIX

__all__ = ["Hit", "public_metadata", "query_collection"]


def public_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """User metadata without flux-chroma's reserved ``fc_*`` keys, as plain Python values."""
    return {
        k: (v.item() if hasattr(v, "item") else v)
        for k, v in (metadata or {}).items()
        if not k.startswith(RESERVED_PREFIX)
    }


def _hits(result: dict[str, Any], row: int) -> list[Hit]:
    ids = result["ids"][row]
    documents = (result.get("documents") or [[None] * len(ids)])[row]
    metadatas = (result.get("metadatas") or [[None] * len(ids)])[row]
    distances = (result.get("distances") or [[None] * len(ids)])[row]
    return [
        {
            "id": str(rid),
            "document": doc,
            "metadata": public_metadata(meta),
            "distance": None if dist is None else float(dist),
        }
        for rid, doc, meta, dist in zip(ids, documents, metadatas, distances, strict=True)
    ]


def query_collection(
    target: Target,
    questions: list[str],
    *,
    k: int,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    ef: Any = None,
    cache: Any = None,
    space: str | None = None,
) -> tuple[list[list[Hit]], dict[str, Any]]:
    """Run validated questions against a tenant's existing collection.

    Args:
        target: The collection (must exist).
        questions: Validated question texts.
        k: Results per question.
        where: Validated metadata filter.
        where_document: Validated document filter.
        ef: Configured embedding function, or ``None`` for the pinned one.
        cache: Embedding cache for the questions, or ``None``.
        space: Expected distance space (``None`` = whatever the collection is pinned to).

    Returns:
        ``(hits per question, stats)`` where stats holds cache hits/misses and seconds.

    Raises:
        FluxChromaError: Typed errors (not found, pin mismatch, unavailable, ...).
    """

    def run(resolved: Resolved) -> tuple[list[list[Hit]], dict[str, Any]]:
        from flux_chroma.embedding.embedder import CachingEmbedder

        embedder = CachingEmbedder(
            resolved.ef,
            cache=cache,
            digest=resolved.pin.fingerprint.digest,
            dimension=resolved.pin.dimension,
        )
        embedded = embedder.embed(questions)
        result = resolved.collection.query(
            query_embeddings=embedded.vectors,
            n_results=k,
            where=where,
            where_document=where_document,  # type: ignore[arg-type]
            include=["documents", "metadatas", "distances"],
        )
        stats = {
            "cache_hits": embedded.hits,
            "cache_misses": embedded.misses,
            "embed_seconds": round(embedded.seconds, 6),
        }
        return [_hits(dict(result), row) for row in range(len(questions))], stats

    return with_collection(
        target,
        run,
        ef=ef,
        space=space,
        create=False,
        action=f"query {target.label!r}",
    )
