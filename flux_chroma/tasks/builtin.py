"""The public Flux tasks: ``embed_and_add``, ``query`` and tenant-scoped housekeeping.

Configure them with ``.with_options(tenant=..., url=..., ...)``. Each raises ``TenantError``
without a valid tenant, ``InvalidNameError`` for a bad collection name and
``ChromaUnavailableError`` (retried by Flux) when the server is unreachable. Blocking calls run
in a worker thread so Flux's ``timeout=`` can interrupt a task whose server froze.

Example:
    >>> from flux_chroma import embed_and_add, query
    >>> add = embed_and_add.with_options(tenant="acme", url="http://127.0.0.1:8000")
    >>> ask = query.with_options(tenant="acme", url="http://127.0.0.1:8000")
"""

from __future__ import annotations

import asyncio
from typing import Any

from flux_chroma.chroma.aliases import resolve_alias
from flux_chroma.chroma.collections import Resolved, Target, forget_collection, with_collection
from flux_chroma.chroma.connection import get_client
from flux_chroma.chroma.naming import Namespace
from flux_chroma.chroma.pinning import Pin
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import CollectionNotFoundError, InvalidQueryError, classify_chroma_error
from flux_chroma.tasks.context import chroma_options, chroma_settings, chroma_target
from flux_chroma.tasks.decorator import RETRY, chroma_task
from flux_chroma.tasks.hybrid import validate_mode, validate_path_prefix
from flux_chroma.tasks.reader import query_collection
from flux_chroma.tasks.results import CollectionEntry, Hit, Receipt
from flux_chroma.tasks.task import emit_progress
from flux_chroma.tasks.validation import (
    utf8_problem,
    validate_documents,
    validate_k,
    validate_questions,
    validate_where,
    validate_where_document,
)
from flux_chroma.tasks.writer import write_documents

__all__ = ["delete_collection", "delete_documents", "embed_and_add", "list_collections", "query"]


@chroma_task(**RETRY)
async def embed_and_add(collection: str, docs: list[dict[str, Any]]) -> Receipt:
    """Embed documents and upsert them into the tenant's collection (idempotent).

    Args:
        collection: Tenant-relative collection name (created with a pin when missing; an
            alias is followed, like ``query`` does).
        docs: ``[{"id": str, "text": str, "metadata": dict (optional)}, ...]``.

    Returns:
        A :class:`~flux_chroma.tasks.results.Receipt` (counts, the pin, timings).

    Raises:
        InvalidDocumentError: A malformed document (named by id); nothing is written.
        EmbeddingMismatchError: The configured model differs from the collection's pin.
    """
    documents = validate_documents(docs)
    target = await asyncio.to_thread(resolve_alias, chroma_target(collection))  # writers follow the alias
    send = emit_progress({"task": "embed_and_add", "collection": collection})
    return await asyncio.to_thread(
        write_documents,
        target,
        documents,
        chroma_options().write_options(),
        progress=lambda done, total: send({"done": done, "total": total}),
    )


@chroma_task(**RETRY)
async def query(
    collection: str,
    question: str | list[str],
    k: int = 5,
    where: dict[str, Any] | None = None,
    where_document: dict[str, Any] | None = None,
    mode: str = "hybrid",
    distinct: bool = True,
    path_prefix: str | None = None,
) -> list[Hit] | list[list[Hit]]:
    """Find the ``k`` records that best answer a question in the tenant's collection.

    Args:
        collection: Tenant-relative collection name (must exist).
        question: One question, or a list of questions.
        k: Results per question (>= 1).
        where: Chroma metadata filter (one key per dict; combine with ``$and``/``$or``).
        where_document: Chroma document filter (``$contains``, ``$regex``, ...).
        mode: ``"hybrid"`` (default): nearest vectors fused with full-text matches of the
            question's phrase, identifiers, numbers and rare words from the server's own
            full-text index; ``"dense"``: nearest vectors only (one request per call).
        distinct: Return each passage once (default): a hit whose text mostly repeats a
            better-ranked one's (identical, or the same passage from another file or format)
            is folded into it and listed under its ``"duplicates"``.
        path_prefix: Only records of files at or under this folder (``"docs/api"``) or
            this one file, for collections ingested from ``files`` sources.

    Returns:
        :class:`~flux_chroma.tasks.results.Hit` dicts, best first; for a list of questions,
        one such list per question.

    Raises:
        InvalidQueryError: Invalid ``k``, ``mode``, filter, prefix or question, or a filter
            that can never match this collection (e.g. ``$contains`` on a string key).
        CollectionNotFoundError: The collection does not exist.
        EmbeddingMismatchError: The configured model differs from the collection's pin.
    """
    options = chroma_options()
    target = chroma_target(collection)
    texts, single = validate_questions(question)
    validate_k(k)
    validate_where(where)
    validate_where_document(where_document)
    validate_mode(mode)
    if not isinstance(distinct, bool):
        raise InvalidQueryError(f"distinct must be True or False, got {distinct!r}.")
    prefix = validate_path_prefix(path_prefix)
    target = await asyncio.to_thread(resolve_alias, target)  # readers follow the tenant's alias
    hits, _stats = await asyncio.to_thread(
        query_collection,
        target,
        texts,
        k=k,
        where=where,
        where_document=where_document,
        ef=options.embedding_function,
        cache=options.embedding_cache(),
        space=options.space,
        mode=mode,
        distinct=distinct,
        path_prefix=prefix,
    )
    return hits[0] if single else hits


@chroma_task(**RETRY)
async def list_collections() -> list[CollectionEntry]:
    """List the tenant's collections, sorted by name (:class:`CollectionEntry` dicts)."""
    return await asyncio.to_thread(_list_sync, chroma_options().namespace(), chroma_settings())


@chroma_task(**RETRY)
async def delete_collection(collection: str) -> dict[str, Any]:
    """Delete a tenant collection (idempotent); return ``{"collection", "deleted": bool}``.

    Raises:
        ConfigurationError: ``collection`` is an alias (the message names the collection it
            points at); nothing is deleted.
    """
    return await asyncio.to_thread(_delete_collection_sync, chroma_target(collection))


@chroma_task(**RETRY)
async def delete_documents(
    collection: str,
    ids: list[str] | None = None,
    where: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Delete records by id and/or ``where`` filter inside one of the tenant's collections.

    Args:
        collection: Tenant-relative collection name (must exist).
        ids: Record ids to delete.
        where: Chroma metadata filter selecting records to delete.

    Returns:
        ``{"collection": name, "deleted": records that existed and were deleted}``.

    Raises:
        InvalidQueryError: Neither ``ids`` nor ``where`` given, or malformed.
        CollectionNotFoundError: The collection does not exist.
    """
    target = chroma_target(collection)
    if ids is None and where is None:
        raise InvalidQueryError("delete_documents needs ids= or where= (refusing to delete everything).")
    if ids is not None and (not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids)):
        raise InvalidQueryError("ids= must be a non-empty list of non-empty strings.")
    for i, rid in enumerate(ids or []):
        problem = utf8_problem(rid)
        if problem is not None:
            raise InvalidQueryError(f"ids[{i}] {rid!r} {problem}; nothing was deleted.")
    validate_where(where)
    target = await asyncio.to_thread(resolve_alias, target)  # deletes follow the alias like reads
    return await asyncio.to_thread(_delete_documents_sync, target, list(ids) if ids else None, where)


# --- blocking helpers (run in worker threads) ----------------------------------------------


def _list_sync(namespace: Namespace, settings: ConnectionSettings) -> list[CollectionEntry]:
    try:
        client = get_client(settings, namespace.database)
        out: list[CollectionEntry] = []
        for coll in client.list_collections():
            if not namespace.owns(coll.name) or namespace.short(coll.name).startswith("fc."):
                continue  # other tenants' collections and flux-chroma's own (alias registry)
            pin = Pin.from_metadata(coll.metadata)
            out.append(
                {
                    "name": namespace.short(coll.name),
                    "count": int(coll.count()),
                    "pin": pin.summary() if pin else None,
                }
            )
    except CollectionNotFoundError:
        return []  # database mode: the tenant's database does not exist yet
    except Exception as exc:  # noqa: BLE001 - classified in one place
        raise classify_chroma_error(exc, action=f"list collections of {namespace.tenant!r}", url=settings.url) from None
    return sorted(out, key=lambda c: c["name"])


def _delete_collection_sync(target: Target) -> dict[str, Any]:
    resolve_alias(target, drop=True)  # refuses an alias name
    try:
        client = get_client(target.settings, target.namespace.database)
        client.delete_collection(target.physical)
        deleted = True
    except Exception as exc:  # noqa: BLE001
        mapped = classify_chroma_error(exc, action=f"delete collection {target.label!r}", url=target.settings.url)
        if not isinstance(mapped, CollectionNotFoundError):
            raise mapped from None
        deleted = False
    finally:
        forget_collection(target)
    return {"collection": target.name, "deleted": deleted}


def _delete_documents_sync(target: Target, ids: list[str] | None, where: dict[str, Any] | None) -> dict[str, Any]:
    def delete(resolved: Resolved) -> int:
        found = resolved.collection.get(ids=ids, where=where, include=[])
        existing = list(found["ids"])
        if existing:
            resolved.collection.delete(ids=existing)
        return len(existing)

    # with_collection re-resolves a cached handle whose collection was dropped and recreated.
    deleted = with_collection(target, delete, create=False, action=f"delete from {target.label!r}")
    return {"collection": target.name, "deleted": deleted}
