"""Deterministic chunking and chunk ids.

Text is cut into chunks of at most ``size`` characters on word boundaries (whitespace), with
about ``overlap`` characters of trailing context repeated at the start of the next chunk. A
word longer than ``size`` is hard-split. Only the text decides the cut: the same text and
options give the same chunks on every run and every machine (no locale, no randomness).

A chunk id is ``{doc_id}#{index}:{sha256(text)[:12]}``: the document id, the chunk's position
in its document and a digest of its text. Editing a chunk changes its id (the old one is
removed by cleanup); an unchanged chunk keeps its id, so a re-run skips it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from flux_chroma.errors import ConfigurationError

__all__ = ["ChunkingOptions", "split_text", "chunk_id", "doc_key_of", "chunk_digest", "MAX_DOC_ID"]

_WORD = re.compile(r"\S+")
MAX_DOC_ID = 400
"""Document ids longer than this are replaced by a digest inside chunk ids."""


@dataclass(frozen=True)
class ChunkingOptions:
    """How documents are cut into chunks.

    Args:
        size: Maximum chunk length in characters (>= 16).
        overlap: Characters of trailing context repeated at the start of the next chunk
            (0 <= overlap < size / 2).

    Raises:
        ConfigurationError: Out-of-range values.
    """

    size: int = 1000
    overlap: int = 100

    def __post_init__(self) -> None:
        for name in ("size", "overlap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigurationError(f"chunking.{name} must be an integer, got {value!r}.")
        if self.size < 16:
            raise ConfigurationError(f"chunking.size={self.size} is too small; use at least 16 characters.")
        if not 0 <= self.overlap < self.size / 2:
            raise ConfigurationError(
                f"chunking.overlap={self.overlap} must be >= 0 and less than half of size={self.size}."
            )

    def to_dict(self) -> dict[str, int]:
        """The JSON form used in job specs."""
        return {"size": self.size, "overlap": self.overlap}


def _spans(text: str, size: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        while end - start > size:  # a "word" longer than a chunk: hard split
            spans.append((start, start + size))
            start += size
        spans.append((start, end))
    return spans


def split_text(text: str, options: ChunkingOptions) -> list[str]:
    """Cut ``text`` into chunks on word boundaries.

    Args:
        text: The document text.
        options: Size and overlap.

    Returns:
        The chunks in order; each is a slice of ``text`` that starts and ends on a word (inner
        whitespace is kept). Whitespace-only text gives no chunks.

    Example:
        >>> split_text("one two three four", ChunkingOptions(size=16, overlap=5))
        ['one two three', 'three four']
    """
    size, overlap = options.size, options.overlap
    spans = _spans(text, size)
    chunks: list[str] = []
    first = 0
    while first < len(spans):
        start = spans[first][0]
        last = first
        while last + 1 < len(spans) and spans[last + 1][1] - start <= size:
            last += 1
        end = spans[last][1]
        chunks.append(text[start:end])
        if last + 1 >= len(spans):
            break
        nxt = last + 1  # step back over words that lie in the last `overlap` characters
        while nxt - 1 > first and spans[nxt - 1][0] >= end - overlap:
            nxt -= 1
        while spans[last + 1][1] - spans[nxt][0] > size:  # the next chunk must reach past `end`
            nxt += 1
        first = nxt
    return chunks


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc_key_of(doc_id: str) -> str:
    """The form of a document id used inside chunk ids (a digest when it is very long)."""
    return doc_id if len(doc_id) <= MAX_DOC_ID else "h-" + _sha(doc_id)[:32]


def chunk_id(doc_id: str, index: int, text: str) -> str:
    """Deterministic id of chunk ``index`` of document ``doc_id`` with content ``text``.

    Example:
        >>> chunk_id("docs/a.md", 0, "hello")
        'docs/a.md#0:2cf24dba5fb0'
    """
    return f"{doc_key_of(doc_id)}#{index}:{_sha(text)[:12]}"


def chunk_digest(chunk_id_: str, text: str, metadata: dict[str, Any]) -> str:
    """Digest of everything a chunk writes (id, text, user metadata)."""
    canonical = json.dumps([chunk_id_, text, metadata], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return _sha(canonical)[:32]
