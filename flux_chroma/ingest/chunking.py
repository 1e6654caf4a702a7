"""Chunking options, the character chunker, and deterministic chunk ids.

By default a job cuts documents in the pinned model's tokens (:mod:`flux_chroma.ingest.splitter`);
``unit="chars"`` uses :func:`split_text`. Only the text and the options decide the cut.

A chunk id is ``{doc_id}#{index}:{sha256(text)[:12]}``: editing a chunk changes its id (cleanup
removes the old one); an unchanged chunk keeps its id, so a re-run skips it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from flux_chroma.errors import ConfigurationError
from flux_chroma.tasks.validation import doc_key_of

__all__ = ["ChunkingOptions", "split_text", "split_spans", "splitter_version", "UNITS", "DEFAULT_TOKENS", "chunk_id"]

_WORD = re.compile(r"\S+")


UNITS = ("tokens", "chars")
DEFAULT_TOKENS = 200
"""Default chunk size in the model's tokens (chosen by measurement: docs/benchmarks.md)."""
DEFAULT_CHARS = 1000
DEFAULT_CHAR_OVERLAP = 100


def splitter_version() -> str:
    """``"semantic-text-splitter <version>"`` (part of every token chunker's identity)."""
    return f"semantic-text-splitter {version('semantic-text-splitter')}"


@dataclass(frozen=True)
class ChunkingOptions:
    """How documents are cut into chunks.

    Args:
        size: Maximum chunk length in ``unit`` (default: :data:`DEFAULT_TOKENS` tokens, or
            1,000 characters). In tokens, at most what the model reads (254 for the default).
        overlap: Context repeated at the start of the next chunk, in ``unit``
            (0 <= overlap < size / 2; default 0 tokens, or 100 characters).
        unit: ``"tokens"`` (the pinned model's, structure-aware splitting) or ``"chars"``
            (flux-chroma's original word-boundary chunker).
    """

    size: int | None = None
    overlap: int | None = None
    unit: str = "tokens"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ConfigurationError(f"chunking.unit={self.unit!r}: use one of {UNITS}.")
        for name in ("size", "overlap"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"chunking.{name} must be an integer, got {value!r}.")
        size, overlap = self.resolved()
        least = 16 if self.unit == "chars" else 8
        if size < least:
            raise ConfigurationError(f"chunking.size={size} is too small; use at least {least} {self.unit}.")
        if not 0 <= overlap < size / 2:
            raise ConfigurationError(
                f"chunking.overlap={overlap} must be >= 0 and less than half of size={size} ({self.unit})."
            )

    def resolved(self) -> tuple[int, int]:
        """``(size, overlap)`` with the defaults of :attr:`unit` filled in."""
        chars = self.unit == "chars"
        size = (DEFAULT_CHARS if chars else DEFAULT_TOKENS) if self.size is None else self.size
        overlap = (DEFAULT_CHAR_OVERLAP if chars else 0) if self.overlap is None else self.overlap
        return size, overlap

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used in job specs (only what was set, plus the unit)."""
        out = {"unit": self.unit, "size": self.size, "overlap": self.overlap}
        return {key: value for key, value in out.items() if value is not None}


def _spans(text: str, size: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        while end - start > size:  # a "word" longer than a chunk: hard split
            spans.append((start, start + size))
            start += size
        spans.append((start, end))
    return spans


def split_spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Character spans of :func:`split_text`'s chunks (``text[start:end]`` is each chunk)."""
    spans = _spans(text, size)
    chunks: list[tuple[int, int]] = []
    first = 0
    while first < len(spans):
        start = spans[first][0]
        last = first
        while last + 1 < len(spans) and spans[last + 1][1] - start <= size:
            last += 1
        end = spans[last][1]
        chunks.append((start, end))
        if last + 1 >= len(spans):
            break
        nxt = last + 1  # step back over words that lie in the last `overlap` characters
        while nxt - 1 > first and spans[nxt - 1][0] >= end - overlap:
            nxt -= 1
        while spans[last + 1][1] - spans[nxt][0] > size:  # the next chunk must reach past `end`
            nxt += 1
        first = nxt
    return chunks


def split_text(text: str, options: ChunkingOptions) -> list[str]:
    """Cut ``text`` into chunks of at most ``options.size`` characters on word boundaries.

    The ``unit="chars"`` chunker (sizes are always characters here). Each chunk is a slice
    of ``text`` starting and ending on a word; a word longer than ``size`` is hard-split.

    Example:
        >>> split_text("one two three four", ChunkingOptions(size=16, overlap=5, unit="chars"))
        ['one two three', 'three four']
    """
    size, overlap = options.resolved()
    return [text[s:e] for s, e in split_spans(text, size, overlap)]


def chunk_id(doc_id: str, index: int, text: str) -> str:
    """Deterministic id of chunk ``index`` of document ``doc_id`` with content ``text``.

    Example:
        >>> chunk_id("docs/a.md", 0, "hello")
        'docs/a.md#0:2cf24dba5fb0'
    """
    return f"{doc_key_of(doc_id)}#{index}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"
