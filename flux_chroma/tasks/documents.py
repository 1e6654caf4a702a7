"""Looking at what is stored: whole documents, a hit with its neighbours, records, listings.

Chunk ids are ``{document id}#{index}:{sha12}``. A document's text is rebuilt from its chunks
in index order: at their ``fc_start``/``fc_end`` offsets when stored (so offsets into the
returned text are the stored ones), else writing the overlap of consecutive chunks once.
A files source's document is found with one ``where`` request, others by scanning ids.
``collection`` is tenant-relative and an alias is followed; a missing one raises
:class:`~flux_chroma.errors.CollectionNotFoundError`.

Example:
    >>> from flux_chroma import expand_hit, get_document
    >>> read = get_document.with_options(tenant="acme")
    >>> around = expand_hit.with_options(tenant="acme")
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, TypedDict

from flux_chroma.chroma.collections import Resolved, pages
from flux_chroma.chroma.collections import rows as _rows
from flux_chroma.errors import InvalidQueryError
from flux_chroma.tasks.context import use_collection
from flux_chroma.tasks.decorator import RETRY, chroma_task
from flux_chroma.tasks.reader import public_metadata
from flux_chroma.tasks.validation import doc_key_of, utf8_problem, validate_where

__all__ = [
    "DocumentEntry",
    "Passage",
    "Record",
    "expand_hit",
    "get_document",
    "get_records",
    "list_documents",
    "parse_chunk_id",
    "document_key",
]

_CHUNK_ID = re.compile(r"^(?P<doc>.+)#(?P<index>\d+):(?P<sha>[0-9a-f]{12})$", re.DOTALL)
_PAGE = 5000
_SOURCE_KEY, _START_KEY, _END_KEY = "fc_source", "fc_start", "fc_end"


class Record(TypedDict):
    """One stored record (a chunk, or a record written with ``embed_and_add``).

    Attributes:
        document: The stored text (``None`` if the record has none).
        metadata: The record's metadata, without flux-chroma's ``fc_*`` keys.
        document_id: The chunk's document (for a record that is not a chunk, its id).
        index: The chunk's position in its document (``None`` for a record that is not a chunk).
    """

    id: str
    document: str | None
    metadata: dict[str, Any]
    document_id: str
    index: int | None


class Passage(TypedDict):
    """A document, or a window of consecutive chunks of one, with its text rebuilt in order.

    Attributes:
        text: The chunks' text joined in order, overlaps written once.
        chunks: The chunks, in index order.
        total_chunks: How many chunks the document has in the collection.
        complete: True when ``chunks`` is the whole document.
        hit_id: The chunk asked about (``expand_hit``), else ``None``.
    """

    document_id: str
    text: str
    chunks: list[Record]
    total_chunks: int
    complete: bool
    hit_id: str | None


class DocumentEntry(TypedDict):
    """One document in the output of ``list_documents``.

    Attributes:
        path: The ``path`` metadata of its chunks (files sources), else ``None``.
        chunks: How many records (chunks) it has.
    """

    document_id: str
    path: str | None
    chunks: int


def parse_chunk_id(record_id: str) -> tuple[str, int] | None:
    """``(document key, index)`` of a chunk id, or ``None`` for an id that is not a chunk's.

    Example:
        >>> parse_chunk_id("docs/a.md#3:2cf24dba5fb0")
        ('docs/a.md', 3)
        >>> parse_chunk_id("plain-record") is None
        True
    """
    match = _CHUNK_ID.match(record_id)
    return (match["doc"], int(match["index"])) if match else None


def document_key(record_id: str) -> str:
    """The document a record belongs to: the chunk id's document part, or the id itself."""
    parsed = parse_chunk_id(record_id)
    return parsed[0] if parsed else record_id


def _source_document(meta: dict[str, Any]) -> str | None:
    """``{source id}/{path}`` of a files source's chunk, else ``None``."""
    source, path = meta.get(_SOURCE_KEY), meta.get("path")
    return f"{source}/{path}" if isinstance(source, str) and isinstance(path, str) else None


def _record(rid: str, doc: str | None, meta: dict[str, Any] | None) -> Record:
    parsed = parse_chunk_id(rid)
    return {
        "id": rid,
        "document": doc,
        "metadata": public_metadata(meta),
        "document_id": parsed[0] if parsed else rid,
        "index": parsed[1] if parsed else None,
    }


def _check_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidQueryError(f"{what} must be a non-empty string, got {value!r}.")
    problem = utf8_problem(value)
    if problem is not None:
        raise InvalidQueryError(f"{what} {value!r} {problem}.")
    return value


def _chunks_of(collection: Any, doc_key: str, hint: dict[str, Any] | None) -> list[tuple[str, str | None, dict[str, Any] | None]]:
    """Every chunk of document ``doc_key``, in index order (empty when it has none)."""

    def mine(rid: str) -> bool:
        parsed = parse_chunk_id(rid)
        return parsed is not None and parsed[0] == doc_key

    ids: list[str] = []
    source, path = (hint or {}).get(_SOURCE_KEY), (hint or {}).get("path")
    if source is None and "/" in doc_key:
        source, path = doc_key.split("/", 1)
    if isinstance(source, str) and isinstance(path, str):  # a files source: one where request
        got = collection.get(where={"$and": [{_SOURCE_KEY: source}, {"path": path}]}, include=[])
        ids = [str(i) for i in got["ids"] if mine(str(i))]
    if not ids:
        ids = [i for got in pages(collection, _PAGE, include=[]) for i in map(str, got["ids"]) if mine(i)]
    rows: list[tuple[str, str | None, dict[str, Any] | None]] = []
    for start in range(0, len(ids), _PAGE):
        rows += _rows(collection.get(ids=ids[start : start + _PAGE], include=["documents", "metadatas"]))
    return sorted(rows, key=lambda row: (parse_chunk_id(row[0]) or ("", 0))[1])


def _overlap(left: str, right: str) -> int:
    """Length of the longest end of ``left`` that starts ``right`` (the chunking overlap)."""
    for size in range(min(len(left), len(right)) - 1, 0, -1):
        if left.endswith(right[:size]) and (size == len(left) or left[-size - 1].isspace()):
            return size
    return 0


def join_chunks(rows: list[tuple[str | None, dict[str, Any] | None]]) -> str:
    """Rebuild the text of consecutive chunks (offsets when every chunk has them)."""
    texts = [doc or "" for doc, _ in rows]
    metas = [meta or {} for _, meta in rows]
    if texts and all(isinstance(m.get(_START_KEY), int) and isinstance(m.get(_END_KEY), int) for m in metas):
        out: list[str] = []
        at = int(metas[0][_START_KEY])
        for text, meta in zip(texts, metas, strict=True):
            start = int(meta[_START_KEY])
            if start > at:
                out.append(" " * (start - at))  # whitespace the chunks do not store
                at = start
            out.append(text[at - start :])
            at = max(at, start + len(text))
        return "".join(out)
    joined = texts[0] if texts else ""
    for prev, text in pairwise(texts):
        shared = _overlap(prev, text)
        joined += text[shared:] if shared else " " + text
    return joined


def _passage(doc_id: str, rows: list[tuple[str, str | None, dict[str, Any] | None]], total: int, hit_id: str | None) -> Passage:
    return {
        "document_id": doc_id,
        "text": join_chunks([(doc, meta) for _, doc, meta in rows]),
        "chunks": [_record(rid, doc, meta) for rid, doc, meta in rows],
        "total_chunks": total,
        "complete": len(rows) == total,
        "hit_id": hit_id,
    }


@chroma_task(**RETRY)
async def get_document(collection: str, document_id: str) -> Passage:
    """Read a whole document back from its stored chunks, in order.

    Args:
        document_id: The document id as the ingestion job named it (``{source id}/{relative
            path}`` for a files source), the id of a record that is not a chunk, or a relative
            path as query results show it when one stored document has that path.

    Returns:
        A :class:`Passage` with every chunk and the rebuilt text.

    Raises:
        InvalidQueryError: Empty id, no document of that id in the collection, or a path that
            several sources' documents have (the message names their ids).

    Example:
        >>> page = await get_document.with_options(tenant="acme")("kb", "docs/guide.md")  # doctest: +SKIP
    """
    _check_text(document_id, "document_id")

    def rows_of(coll: Any, doc_id: str) -> list[tuple[str, str | None, dict[str, Any] | None]]:
        rows = _chunks_of(coll, doc_key_of(doc_id), None)
        return rows or _rows(coll.get(ids=[doc_id], include=["documents", "metadatas"]))

    def read(resolved: Resolved) -> Passage:
        coll = resolved.collection
        found, rows = document_id, rows_of(coll, document_id)
        named: list[str] = []
        if not rows:  # a relative path, as query results show it: the document stored under it
            got = coll.get(where={"path": document_id}, include=["metadatas"])
            named = sorted({d for m in got["metadatas"] or [] if (d := _source_document(dict(m)))})
            if len(named) == 1:
                found, rows = named[0], rows_of(coll, named[0])
        if not rows:
            also = f" Documents with that path: {', '.join(named)}." if named else ""
            raise InvalidQueryError(
                f"collection {collection!r} has no document {document_id!r}.{also} List what is stored "
                "with list_documents (CLI: flux-chroma docs -c NAME)."
            )
        return _passage(found, rows, len(rows), None)

    return await use_collection(collection, read, action="get_document")


@chroma_task(**RETRY)
async def expand_hit(collection: str, hit_id: str, window: int = 1) -> Passage:
    """A hit with up to ``window`` neighbouring chunks on each side, text rebuilt in order.

    Returns:
        A :class:`Passage` (``hit_id`` set). A record that is not a chunk comes back alone.

    Raises:
        InvalidQueryError: Empty id, bad ``window``, or no record of that id.
    """
    _check_text(hit_id, "hit_id")
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InvalidQueryError(f"window must be an integer >= 0, got {window!r}.")

    def read(resolved: Resolved) -> Passage:
        coll = resolved.collection
        found = _rows(coll.get(ids=[hit_id], include=["documents", "metadatas"]))
        if not found:
            raise InvalidQueryError(f"collection {collection!r} has no record {hit_id!r}; it may have been re-ingested since the query.")
        parsed = parse_chunk_id(hit_id)
        if parsed is None:
            return _passage(hit_id, found, 1, hit_id)
        doc_key, index = parsed
        rows = _chunks_of(coll, doc_key, found[0][2]) or found
        near = [r for r in rows if abs((parse_chunk_id(r[0]) or ("", 0))[1] - index) <= window]
        return _passage(_source_document(found[0][2] or {}) or doc_key, near, len(rows), hit_id)

    return await use_collection(collection, read, action="expand_hit")


@chroma_task(**RETRY)
async def get_records(collection: str, ids: list[str]) -> list[Record]:
    """Read records by id as :class:`Record` dicts, in the order asked (missing ids left out).

    Raises:
        InvalidQueryError: ``ids`` is not a list of 1 to 5,000 non-empty strings.
    """
    if not isinstance(ids, list) or not ids or len(ids) > _PAGE:
        raise InvalidQueryError(f"ids must be a list of 1 to {_PAGE} record ids, got {type(ids).__name__} of {len(ids) if isinstance(ids, list) else '?'}.")
    wanted = [_check_text(rid, f"ids[{i}]") for i, rid in enumerate(ids)]

    def read(resolved: Resolved) -> list[Record]:
        got = {rid: (doc, meta) for rid, doc, meta in _rows(resolved.collection.get(ids=list(dict.fromkeys(wanted)), include=["documents", "metadatas"]))}
        return [_record(rid, *got[rid]) for rid in wanted if rid in got]

    return await use_collection(collection, read, action="get_records")


@chroma_task(**RETRY)
async def list_documents(collection: str, where: dict[str, Any] | None = None) -> list[DocumentEntry]:
    """List a collection's documents as :class:`DocumentEntry` dicts, sorted by id.

    Args:
        where: Optional Chroma metadata filter (e.g. ``{"path": "guide.md"}``).

    Raises:
        InvalidQueryError: A malformed filter.
    """
    validate_where(where)

    def read(resolved: Resolved) -> list[DocumentEntry]:
        counts: dict[str, DocumentEntry] = {}
        for got in pages(resolved.collection, _PAGE, where=where, include=["metadatas"]):
            for rid, _, meta in _rows(got):
                meta = meta or {}
                key = _source_document(meta) or document_key(rid)
                entry = counts.setdefault(key, {"document_id": key, "path": meta.get("path") if isinstance(meta.get("path"), str) else None, "chunks": 0})
                entry["chunks"] += 1
        return sorted(counts.values(), key=lambda e: e["document_id"])

    return await use_collection(collection, read, action="list_documents")
