"""Validation of documents, metadata and query arguments, before anything reaches the server.

Chroma silently drops NaN/inf metadata values, turns ints >= 2**63 into floats and accepts
``where`` shapes it later rejects. Each check raises a typed error naming the culprit, so a bad
call fails before a single record is written.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flux_chroma.errors import DuplicateIdError, InvalidDocumentError, InvalidQueryError

__all__ = [
    "RESERVED_PREFIX",
    "Document",
    "doc_key_of",
    "utf8_problem",
    "validate_documents",
    "validate_k",
    "validate_metadata",
    "validate_questions",
    "validate_where",
    "validate_where_document",
]

MAX_DOC_ID = 400
"""Document ids longer than this are replaced by a digest inside chunk ids."""


def doc_key_of(doc_id: str) -> str:
    """The form of a document id used inside chunk ids (a digest when it is very long)."""
    if len(doc_id) <= MAX_DOC_ID:
        return doc_id
    return "h-" + hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:32]


RESERVED_PREFIX = "fc_"
"""Metadata keys with this prefix are flux-chroma's own (content hash, source, ...)."""

MAX_ID_LENGTH = 1024
_INT_LIMIT = 2**63
_DOC_KEYS = frozenset({"id", "text", "metadata"})
_FIELD_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not_contains"})
_DOC_OPS = frozenset({"$contains", "$not_contains", "$regex", "$not_regex"})


@dataclass(frozen=True)
class Document:
    """One validated record: id, text (embedded and stored) and flat JSON-able metadata."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def utf8_problem(text: str) -> str | None:
    """Why ``text`` cannot be sent as UTF-8 (a lone surrogate, ...), or ``None`` when it can.

    chromadb fails on a lone surrogate deep inside a request, after earlier batches were written.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds {text[exc.start : exc.end]!r} at character {exc.start}, which is not valid UTF-8 ({exc.reason})"
    return None


def _utf8(text: str, error: type[InvalidDocumentError | InvalidQueryError], where: str) -> None:
    problem = utf8_problem(text)
    if problem is not None:
        raise error(f"{where} {problem}; fix or drop the character (nothing was written).")


def _scalar_ok(value: Any) -> bool:
    kind = type(value)
    if kind is bool or kind is str:
        return True
    if kind is int:
        return bool(-_INT_LIMIT <= value < _INT_LIMIT)
    if kind is float:
        return math.isfinite(value)
    return False


def _describe_bad_value(value: Any) -> str:
    kind = type(value)
    if kind is float:
        return f"{value!r} (NaN and infinity are silently dropped by Chroma)"
    if kind is int:
        return f"{value} (integers must fit in 64 bits; Chroma turns larger ones into floats)"
    if kind.__module__ == "numpy":
        return f"a numpy {kind.__name__} (convert with .item())"
    if isinstance(value, (bytes, bytearray)):
        return "bytes (decode to str first)"
    if isinstance(value, Mapping):
        return "a dict (metadata must be flat; flatten or JSON-encode it)"
    if value is None:
        return "None (omit the key instead)"
    return f"a {kind.__name__}"


def validate_metadata(metadata: Any, *, where: str) -> dict[str, Any]:
    """Check one metadata dict (``None``: empty) and return a plain copy.

    Args:
        metadata: The candidate metadata.
        where: Culprit description for messages, e.g. ``"document 'a1'"``.

    Raises:
        InvalidDocumentError: A key or value Chroma cannot store faithfully.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidDocumentError(f"{where}: metadata must be a dict, got {type(metadata).__name__}.")
    clean: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or key == "":
            raise InvalidDocumentError(f"{where}: metadata keys must be non-empty strings, got {key!r}.")
        _utf8(key, InvalidDocumentError, f"{where}: metadata key {key!r}")
        if key[0] in "#$":
            raise InvalidDocumentError(f"{where}: metadata key {key!r} must not start with '#' or '$'.")
        if key.startswith(RESERVED_PREFIX):
            raise InvalidDocumentError(
                f"{where}: metadata key {key!r} uses the reserved prefix {RESERVED_PREFIX!r}."
            )
        if isinstance(value, list):
            if not value:
                raise InvalidDocumentError(f"{where}: metadata[{key!r}] is an empty list; Chroma rejects those.")
            kinds = {type(item) for item in value}
            if len(kinds) != 1 or not all(_scalar_ok(item) for item in value):
                raise InvalidDocumentError(
                    f"{where}: metadata[{key!r}] must be a list of str, int, float or bool of one type."
                )
            for i, item in enumerate(value):
                if type(item) is str:
                    _utf8(item, InvalidDocumentError, f"{where}: metadata[{key!r}][{i}]")
            clean[key] = list(value)
            continue
        if not _scalar_ok(value):
            raise InvalidDocumentError(
                f"{where}: metadata[{key!r}] is {_describe_bad_value(value)}; allowed: str, int, "
                "float, bool, or a non-empty list of one of them."
            )
        if type(value) is str:
            _utf8(value, InvalidDocumentError, f"{where}: metadata[{key!r}]")
        clean[key] = value
    return clean


def validate_documents(docs: Any) -> list[Document]:
    """Check a list of documents ``{"id", "text", "metadata"?}`` and return them typed, in order.

    Raises:
        InvalidDocumentError: A malformed document (named by id or position).
        DuplicateIdError: The same id appears twice.
    """
    if isinstance(docs, (str, bytes, Mapping)) or not isinstance(docs, Sequence):
        raise InvalidDocumentError(
            f"docs must be a list of {{'id', 'text', 'metadata'}} dicts, got {type(docs).__name__}."
        )
    if len(docs) == 0:
        raise InvalidDocumentError("docs is empty: pass at least one document.")
    out: list[Document] = []
    seen: dict[str, int] = {}
    for position, doc in enumerate(docs):
        label = f"document #{position}"
        if not isinstance(doc, Mapping):
            raise InvalidDocumentError(f"{label} must be a dict with 'id' and 'text', got {type(doc).__name__}.")
        unknown = set(doc) - _DOC_KEYS
        if unknown:
            raise InvalidDocumentError(
                f"{label} has unknown field(s) {sorted(map(str, unknown))}; allowed: id, text, metadata."
            )
        doc_id = doc.get("id")
        if not isinstance(doc_id, str) or doc_id.strip() == "":
            raise InvalidDocumentError(f"{label}: 'id' must be a non-empty string, got {doc_id!r}.")
        if len(doc_id) > MAX_ID_LENGTH:
            raise InvalidDocumentError(f"{label}: 'id' is {len(doc_id)} characters; the limit is {MAX_ID_LENGTH}.")
        _utf8(doc_id, InvalidDocumentError, f"{label}: 'id' {doc_id!r}")
        label = f"document {doc_id!r}"
        text = doc.get("text")
        if isinstance(text, (bytes, bytearray)):
            raise InvalidDocumentError(f"{label}: 'text' is bytes; decode it to str first.")
        if not isinstance(text, str):
            raise InvalidDocumentError(f"{label}: 'text' must be a string, got {type(text).__name__}.")
        if text.strip() == "":
            raise InvalidDocumentError(f"{label}: 'text' is empty or whitespace; nothing to embed.")
        _utf8(text, InvalidDocumentError, f"document #{position} ({doc_id!r}): 'text'")
        if doc_id in seen:
            raise DuplicateIdError(
                f"id {doc_id!r} appears twice in one call (documents #{seen[doc_id]} and "
                f"#{position}); ids must be unique."
            )
        seen[doc_id] = position
        meta = validate_metadata(doc.get("metadata"), where=label)
        out.append(Document(doc_id, text, meta))
    return out


def _validate_field_condition(key: str, cond: Any, path: str) -> None:
    if isinstance(cond, Mapping):
        if len(cond) != 1:
            raise InvalidQueryError(f"{path}[{key!r}] must hold exactly one operator, got {sorted(cond)}.")
        (op, operand), = cond.items()
        if op not in _FIELD_OPS:
            raise InvalidQueryError(f"{path}[{key!r}] uses unknown operator {op!r}; allowed: {sorted(_FIELD_OPS)}.")
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not operand or not all(_scalar_ok(v) for v in operand):
                raise InvalidQueryError(f"{path}[{key!r}][{op!r}] must be a non-empty list of scalars.")
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            if type(operand) not in (int, float) or not _scalar_ok(operand):
                raise InvalidQueryError(f"{path}[{key!r}][{op!r}] must be a finite number.")
        elif not _scalar_ok(operand):
            raise InvalidQueryError(f"{path}[{key!r}][{op!r}] must be a str, int, float or bool.")
        return
    if not _scalar_ok(cond):
        raise InvalidQueryError(f"{path}[{key!r}] must be a scalar or an operator dict, got {_describe_bad_value(cond)}.")


def validate_where(where: Any, path: str = "where") -> None:
    """Check a Chroma ``where`` metadata filter (one key per dict; use ``$and``/``$or``).

    Raises:
        InvalidQueryError: The filter is malformed (the message names ``path``).
    """
    if where is None:
        return
    if not isinstance(where, Mapping) or len(where) != 1:
        got = sorted(map(str, where)) if isinstance(where, Mapping) else type(where).__name__
        raise InvalidQueryError(
            f"{path} must be a dict with exactly one key (combine conditions with "
            f"{{'$and': [...]}}), got {got}."
        )
    (key, value), = where.items()
    if key in ("$and", "$or"):
        if not isinstance(value, list) or len(value) < 2:
            raise InvalidQueryError(f"{path}[{key!r}] must be a list of at least two filters.")
        for i, sub in enumerate(value):
            validate_where(sub, f"{path}[{key!r}][{i}]")
    elif not isinstance(key, str) or key == "" or key.startswith("$"):
        raise InvalidQueryError(f"{path} has an invalid key {key!r} (unknown operator or empty).")
    else:
        _validate_field_condition(key, value, path)


def validate_where_document(where_document: Any, path: str = "where_document") -> None:
    """Check a ``where_document`` full-text filter (:class:`InvalidQueryError` if malformed)."""
    if where_document is None:
        return
    if not isinstance(where_document, Mapping) or len(where_document) != 1:
        raise InvalidQueryError(f"{path} must be a dict with exactly one operator.")
    (op, value), = where_document.items()
    if op in ("$and", "$or"):
        if not isinstance(value, list) or len(value) < 2:
            raise InvalidQueryError(f"{path}[{op!r}] must be a list of at least two filters.")
        for i, sub in enumerate(value):
            validate_where_document(sub, f"{path}[{op!r}][{i}]")
    elif op not in _DOC_OPS:
        raise InvalidQueryError(f"{path} uses unknown operator {op!r}; allowed: {sorted(_DOC_OPS)}.")
    elif not isinstance(value, str) or value == "":
        raise InvalidQueryError(f"{path}[{op!r}] must be a non-empty string.")


def validate_k(k: Any, *, limit: int = 10_000) -> None:
    """Check ``k``, the results per question (:class:`InvalidQueryError` unless in 1..limit)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise InvalidQueryError(f"k must be an integer, got {type(k).__name__}.")
    if not 1 <= k <= limit:
        raise InvalidQueryError(f"k={k} is out of range; it must be between 1 and {limit}.")


def validate_questions(questions: Any) -> tuple[list[str], bool]:
    """Check one question or a list of them; return ``(texts, whether one string was given)``.

    Raises:
        InvalidQueryError: Empty, whitespace or non-string questions.
    """
    single = isinstance(questions, str)
    items = [questions] if single else questions
    if isinstance(items, (bytes, Mapping)) or not isinstance(items, Sequence):
        raise InvalidQueryError(f"question must be a string or a list of strings, got {type(questions).__name__}.")
    if not items:
        raise InvalidQueryError("the list of questions is empty.")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidQueryError(f"question #{i} must be a string, got {type(text).__name__}.")
        if text.strip() == "":
            raise InvalidQueryError(f"question #{i} is empty or whitespace.")
        _utf8(text, InvalidQueryError, f"question #{i}")
    return list(items), single
