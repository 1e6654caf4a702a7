"""The shapes of the tasks' outputs, typed as ``TypedDict``.

Task outputs live in Flux's event log and cross JSON hops, so at run time they are plain dicts.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from flux_chroma.chroma.pinning import PinSummary

__all__ = ["CollectionEntry", "Hit", "PinSummary", "Receipt"]


class Receipt(TypedDict):
    """What ``embed_and_add`` returns: what was written, and how.

    Attributes:
        physical_name: The Chroma collection name (inside the tenant's namespace).
        upserted: ``added + updated``.
        updated: Records whose content or metadata changed.
        skipped: Records already stored with the same content hash (not re-embedded).
        embedded: Texts embedded by the model (cache misses, same as ``cache_misses``).
        truncated: Texts longer than the model's token limit (embedded truncated).
        batches: Upsert requests sent.
        embedding: The collection's pin.
    """

    tenant: str
    collection: str
    physical_name: str
    upserted: int
    added: int
    updated: int
    skipped: int
    embedded: int
    cache_hits: int
    cache_misses: int
    truncated: int
    batches: int
    embedding: PinSummary
    embed_seconds: float
    seconds: float


class Hit(TypedDict):
    """One result of ``query``, nearest first.

    Attributes:
        document: The stored text (``None`` if the record has none).
        metadata: The record's metadata, without flux-chroma's ``fc_*`` keys.
        distance: Distance to the question in the collection's space (smaller is nearer).
        duplicates: With ``distinct=True``, the ids of other candidates that repeat this
            hit's passage (:func:`flux_chroma.tasks.hybrid.distinct`), folded into it; absent
            when there are none.
        citation: Where the text comes from, for records of ingested files: ``document``,
            ``path``, ``heading``, ``page``, ``start``/``end`` (character offsets in the
            document), ``title``, ``format`` (those stored); absent when it has none.
    """

    id: str
    document: str | None
    metadata: dict[str, Any]
    distance: float | None
    duplicates: NotRequired[list[str]]
    citation: NotRequired[dict[str, Any]]


class CollectionEntry(TypedDict):
    """One collection in the output of ``list_collections``.

    Attributes:
        name: The tenant-relative collection name.
        pin: The collection's pin, or ``None`` for a collection created outside flux-chroma.
    """

    name: str
    count: int
    pin: PinSummary | None
