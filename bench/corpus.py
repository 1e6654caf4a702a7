"""A deterministic benchmark corpus built from text every Python installation ships with.

Source: the docstrings of the standard library (``sysconfig.get_paths()["stdlib"]``), read
with :mod:`ast` (nothing is imported), from every ``.py`` file in sorted path order, skipping
test suites, IDLE, demos and ``site-packages``. Each module's docstrings are joined into one
stream of words and cut into chunks of 20-70 words and at most 400 characters unless 20 words are
longer (7 of the first 10,000 chunks, up to 751 characters; about 30-120 model tokens) whose sizes
follow a fixed cycle.

The stdlib holds about 230k docstring words, roughly 4k chunks. Larger corpora add further
passes over the same streams, each starting a few words later and using another size cycle
(overlapping windows, as RAG chunkers with overlap produce). Every chunk is real text and no
text repeats (exact duplicates are dropped). Chunk ``i`` of a size-N corpus is chunk ``i`` of
every larger corpus, so a smaller corpus is a prefix of a larger one.

Identical on every machine with the same Python version (the version is in the report).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Chunk",
    "build_corpus",
    "load_docs",
    "read_jsonl",
    "short_docs",
    "stdlib_root",
    "write_jsonl",
]

_SKIP_DIRS = frozenset(
    {
        "test",
        "tests",
        "idlelib",
        "turtledemo",
        "site-packages",
        "dist-packages",
        "__pycache__",
        "lib2to3",
    }
)
_MIN_WORDS, _MAX_WORDS = 20, 70
_MAX_CHARS = 400  # symbol-heavy text has more tokens per word
_PASS_SHIFT = 13  # words by which each further pass starts later
_TOPICS = ("api", "io", "net", "text", "data", "system")


@dataclass(frozen=True)
class Chunk:
    """One corpus record.

    Attributes:
        id: Deterministic id (``c{index:06d}-{8 hex of the text hash}``).
        text: The chunk text.
        metadata: ``{"module": dotted module, "pass": int, "topic": str}``.
    """

    id: str
    text: str
    metadata: dict[str, Any]

    def as_doc(self) -> dict[str, Any]:
        """The chunk as an ``embed_and_add`` document dict."""
        return {"id": self.id, "text": self.text, "metadata": dict(self.metadata)}


def stdlib_root() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def _module_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        files.extend(Path(folder) / n for n in sorted(names) if n.endswith(".py"))
    return files


def _docstring_words(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    words: list[str] = []
    for node in ast.walk(tree):  # breadth-first, deterministic
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                words.extend(doc.split())
    return words


def _size_cycle(pass_no: int) -> Iterator[int]:
    span = _MAX_WORDS - _MIN_WORDS + 1
    step = 19 + 2 * pass_no  # span 51 = 3 * 17: sizes spread over the whole range
    i = 0
    while True:
        yield _MIN_WORDS + (i * step + 11 * pass_no) % span
        i += 1


class _Streams:
    """Each module's docstring words, parsed lazily (small corpora read only the first files)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._files = _module_files(root)
        self._parsed: list[tuple[str, list[str]]] = []
        self._next = 0

    def __iter__(self) -> Iterator[tuple[str, list[str]]]:
        i = 0
        while True:
            while i >= len(self._parsed) and self._next < len(self._files):
                path = self._files[self._next]
                self._next += 1
                words = _docstring_words(path)
                if len(words) >= _MIN_WORDS:
                    rel = path.relative_to(self._root).with_suffix("")
                    self._parsed.append((".".join(rel.parts), words))
            if i >= len(self._parsed):
                return
            yield self._parsed[i]
            i += 1


def build_corpus(size: int, root: Path | None = None) -> list[Chunk]:
    """Build the first ``size`` chunks of the corpus.

    Args:
        size: Number of chunks (>= 1).
        root: Standard library folder (default: this interpreter's).

    Returns:
        ``size`` chunks in corpus order.

    Raises:
        ValueError: The standard library holds too little text for ``size`` chunks.
    """
    streams = _Streams(root or stdlib_root())
    chunks: list[Chunk] = []
    seen: set[str] = set()
    pass_no = 0
    while len(chunks) < size:
        if pass_no > 60:
            raise ValueError(f"the standard library gives fewer than {size} distinct chunks")
        for module, words in streams:
            sizes = _size_cycle(pass_no)
            start = (pass_no * _PASS_SHIFT) % max(1, len(words) - _MIN_WORDS)
            while start + _MIN_WORDS <= len(words) and len(chunks) < size:
                take = next(sizes)
                piece = words[start : start + take]
                while len(piece) > _MIN_WORDS and sum(len(w) + 1 for w in piece) > _MAX_CHARS:
                    piece = piece[:-1]
                text = " ".join(piece)
                start += len(piece)
                if text in seen:
                    continue
                seen.add(text)
                index = len(chunks)
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
                meta = {"module": module, "pass": pass_no, "topic": _TOPICS[index % len(_TOPICS)]}
                chunks.append(Chunk(f"c{index:06d}-{digest}", text, meta))
            if len(chunks) >= size:
                break
        pass_no += 1
    return chunks


def short_docs(count: int, root: Path | None = None) -> list[str]:
    """Deterministic short texts (the start of corpus chunks, about 30 tokens each).

    Each text is the first 18 words of a chunk, shortened word by word to at most 110
    characters (mean about 28 model tokens).

    Args:
        count: Number of texts.
        root: Standard library folder (default: this interpreter's).

    Returns:
        ``count`` distinct short texts.
    """
    out: list[str] = []
    seen: set[str] = set()
    for chunk in build_corpus(count * 2, root):
        words = chunk.text.split()[:18]
        while len(words) > 6 and len(" ".join(words)) > 110:
            words.pop()
        text = " ".join(words)
        if text not in seen:
            seen.add(text)
            out.append(text)
        if len(out) == count:
            return out
    raise ValueError(f"could not build {count} distinct short texts")


def sized_docs(count: int, chars: int, root: Path | None = None) -> list[str]:
    """Deterministic texts cut the way the ingestion job cuts documents, ``chars`` long.

    Each module's docstrings are joined into one document and cut by the ingestion job's own
    chunker (``flux_chroma.ingest.chunking.split_text``, ``size=chars``, no overlap); only
    chunks of at least 90% of ``chars`` are kept (no short tails). ``chars=1000`` gives the
    job's default chunk size (about 250 model tokens).

    Args:
        count: Number of texts.
        chars: Chunk size in characters.
        root: Standard library folder (default: this interpreter's).

    Returns:
        ``count`` distinct texts.

    Raises:
        ValueError: The standard library holds too little text.
    """
    from flux_chroma.ingest.chunking import ChunkingOptions, split_text

    options = ChunkingOptions(size=chars, overlap=0)
    out: list[str] = []
    seen: set[str] = set()
    for _, words in _Streams(root or stdlib_root()):
        for text in split_text(" ".join(words), options):
            if len(text) >= 0.9 * chars and text not in seen:
                seen.add(text)
                out.append(text)
                if len(out) == count:
                    return out
    raise ValueError(f"could not build {count} distinct texts of {chars} characters")


def write_jsonl(chunks: list[Chunk], path: Path) -> None:
    """Write chunks as JSON lines ``{"id", "text", "metadata"}``.

    Args:
        chunks: The chunks.
        path: Destination file.
    """
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(chunk.as_doc(), ensure_ascii=False) + "\n" for chunk in chunks)


def read_jsonl(path: Path, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
    """Read documents ``[start, stop)`` from a JSON-lines file written by :func:`write_jsonl`.

    Args:
        path: The file.
        start: First line (0-based).
        stop: One past the last line (None = to the end).

    Returns:
        The documents as dicts.
    """
    docs: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as src:
        for i, line in enumerate(src):
            if stop is not None and i >= stop:
                break
            if i >= start:
                docs.append(json.loads(line))
    return docs


_LOADED: dict[str, list[dict[str, Any]]] = {}


def load_docs(path: str, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
    """Documents ``[start, stop)`` of a corpus file, read once per process and kept in memory.

    Workflows take the corpus by reference (a path) and call this, so a document payload is
    never workflow input, and a measured run does not include reading the file.

    Args:
        path: A file written by :func:`write_jsonl`.
        start: First document.
        stop: One past the last document (None = to the end).

    Returns:
        Copies of the document dicts.
    """
    docs = _LOADED.get(path)
    if docs is None:
        docs = _LOADED[path] = read_jsonl(Path(path))
    return [dict(d) for d in docs[start:stop]]
