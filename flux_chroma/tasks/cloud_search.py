"""Hybrid mode through ``collection.search()`` where the server has it (Chroma Cloud).

Chroma 1.5's Search API (``chromadb.execution.expression``: ``Search``, ``Knn``; see
``chromadb/execution/expression/plan.py`` and ``operator.py`` in chromadb 1.5.9) takes a
batch of searches in ONE request. Hybrid mode sends two there: the dense k-nearest
neighbours, and the nearest neighbours among records whose text matches the question's probes
(``Key.DOCUMENT.regex(...)``, the same clause the local path sends to ``get``). The two lists
then go through the same per-probe split and fusion as on a local server.

A local ``chroma run`` server answers ``search()`` with "Search operation is not implemented
for local executor" (chromadb 1.5.9). :func:`search_lists` tries it once per collection
(by its UUID, for the life of the process), remembers the refusal, and returns ``None`` so the caller uses ``get`` + ``query``
instead; no error surfaces. This path is tested only for that refusal: it has never run
against Chroma Cloud.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["search_lists", "search_supported", "where_for_search"]

_NOT_SUPPORTED = ("not implemented", "not supported", "search is not implemented")
_lock = threading.Lock()
_known: dict[str, bool] = {}  # by collection UUID: one entry per collection queried
_FIELDS = ["#document", "#metadata", "#score"]


def search_supported(collection: Any) -> bool | None:
    """``True``/``False`` once :func:`search_lists` has tried ``collection``; ``None`` before."""
    with _lock:
        return _known.get(str(collection.id))


def _remember(collection: Any, supported: bool) -> None:
    with _lock:
        _known[str(collection.id)] = supported


def where_for_search(where: dict[str, Any] | None, where_document: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Search API ``where`` dict from query()'s ``where`` and ``where_document``.

    ``{"$contains": "x"}`` on the document becomes ``{"#document": {"$contains": "x"}}``
    (``Where.from_dict`` in chromadb 1.5.9 reads ``#document`` keys); ``$and``/``$or`` nest.
    """

    def document(clause: dict[str, Any]) -> dict[str, Any]:
        (op, value), = clause.items()
        if op in ("$and", "$or"):
            return {op: [document(c) for c in value]}
        return {"#document": {op: value}}

    parts = [p for p in (where, document(where_document) if where_document else None) if p]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _columns(result: Any, row: int) -> dict[str, Any]:
    """A ``query()``-shaped result (one row) from a SearchResult row."""
    ids = list(result["ids"][row])
    documents = (result.get("documents") or [None] * (row + 1))[row] or [None] * len(ids)
    metadatas = (result.get("metadatas") or [None] * (row + 1))[row] or [None] * len(ids)
    scores = (result.get("scores") or [None] * (row + 1))[row] or [None] * len(ids)
    return {"ids": [ids], "documents": [documents], "metadatas": [metadatas], "distances": [scores]}


def search_lists(
    collection: Any,
    vector: Any,
    text_clause: dict[str, Any] | None,
    n: int,
    m: int,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """The dense list and the full-text matches ranked by vector, in one ``search()`` request.

    Args:
        collection: The chromadb collection.
        vector: The question's embedding.
        text_clause: The probes' ``where_document`` clause, or ``None`` (dense only).
        n: Dense results.
        m: Full-text matches to rank.
        where: The user's metadata filter (path prefix included).
        where_document: The user's document filter.

    Returns:
        ``(dense, matches)`` as ``query()``-shaped results (``distances`` are Knn scores), or
        ``None`` when the server has no ``search()`` (remembered for this collection).

    Raises:
        Exception: Any other error of the request, unchanged (the caller maps it).
    """
    if search_supported(collection) is False:
        return None
    from chromadb.execution.expression.operator import Knn
    from chromadb.execution.expression.plan import Search

    query = [float(x) for x in vector]
    searches = [Search(where=where_for_search(where, where_document), rank=Knn(query=query, limit=n), limit=n, select=_FIELDS)]
    if text_clause is not None:
        both = {"$and": [text_clause, where_document]} if where_document else text_clause
        searches.append(Search(where=where_for_search(where, both), rank=Knn(query=query, limit=m), limit=m, select=_FIELDS))
    try:
        result = collection.search(searches)
    except Exception as exc:  # only "not implemented" is swallowed; the rest is re-raised
        if any(text in str(exc).lower() for text in _NOT_SUPPORTED):
            _remember(collection, False)
            return None
        raise
    _remember(collection, True)
    return _columns(result, 0), (_columns(result, 1) if text_clause is not None else None)
