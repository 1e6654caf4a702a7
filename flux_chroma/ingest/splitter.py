"""Token-exact, structure-aware chunking with citation offsets and heading paths.

:class:`Chunker` cuts with `semantic-text-splitter <https://github.com/benbrandt/text-splitter>`_:
Markdown (and every format converted to it) with its ``MarkdownSplitter``, anything else with
its ``TextSplitter``. Sizes count the pinned model's own tokens (:mod:`flux_chroma.ingest.tokens`)
minus its special tokens, so no chunk is longer than the model reads, by construction. Each
:class:`Piece` has its character offsets and the Markdown heading path where it starts (read
with ``markdown-it-py``: never a ``#`` inside a code block). A model that declares no tokenizer
falls back to :data:`FALLBACK_CHARS_PER_TOKEN` characters per token of ``size``.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from flux_chroma.errors import ConfigurationError
from flux_chroma.ingest.chunking import ChunkingOptions, split_spans, splitter_version
from flux_chroma.ingest.tokens import ModelTokens, tokens_for_spec

__all__ = ["Piece", "Chunker", "chunker_for", "has_headings", "heading_paths", "is_markdown", "splitter_version", "FALLBACK_CHARS_PER_TOKEN", "MARKDOWN_FORMATS", "STUB_WORDS", "UNTITLED_FORMATS"]

FALLBACK_CHARS_PER_TOKEN = 2
"""Characters per token when a model declares no tokenizer. Measured (``python -m bench.chunking
--ratio``, 1,883 chunks of /usr/share/doc): median 3.47 per all-MiniLM-L6-v2 token, 1st
percentile 1.90, least 1.11; about 1% of chunks can still exceed the model."""

MARKDOWN_FORMATS = frozenset({"md", "markdown", "rst", "html", "htm", "xhtml", "info", "man", "pdf", "docx", "pptx", "xlsx", "epub"})
"""Formats split as Markdown (``fc_format``, last part: ``gz+md`` is ``md``); others as text."""

UNTITLED_FORMATS = frozenset({"pdf"})
"""Formats split as Markdown whose text has no headings (pdfminer's): a line above a lone ``=``
in an equation, or a listing's ``# comment`` line, is no title (1,503 of the 2,360 chunks of
five PDFs under /usr/share/doc carried such a heading path, valgrind's 1,404 of 1,592)."""

MAX_HEADING = 300
"""Longest stored heading path (characters; longer ones keep their last part)."""
SECTION_RUN = 16_000
"""Characters of consecutive Markdown sections the splitter is given at once. Its time grows
faster than the text it is given (``python -m bench.planning``: a 956 KB changelog of 195
sections, 26.5 s whole, 2.9 s in runs, 2,783 chunks against 2,779); a document up to this size
is cut whole."""
CUT_CACHE = 4096
"""Documents whose cuts (offsets and headings, never text) a chunker remembers: a job chunks
each document when it is planned, written and cleaned up, in one process when inline."""
STUB_WORDS = 4
"""A chunk with fewer word characters than this, code fences and their language left out
(```` ```cjs ````, a table rule), joins the one before it."""
_STUB_MAX_CHARS = 80  # a longer chunk is never a stub: its words are not counted
_TITLE = 80
_WORD = re.compile(r"\w")
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^\n`]*$", re.MULTILINE)  # a code fence and its language
_NEWLINE = re.compile(r"\r\n|\r|\n")
_LOCK = threading.Lock()
_CHUNKERS: dict[str, Chunker] = {}


@dataclass(frozen=True)
class Piece:
    """One chunk of a document: ``text == document[start:end]`` and its heading path."""

    start: int
    end: int
    text: str
    heading: str = ""


def _format(metadata: dict[str, Any]) -> str:
    """A document's format: its ``fc_format`` (last part: ``gz+md`` is ``md``), else its path's suffix."""
    fmt = metadata.get("fc_format")
    if not isinstance(fmt, str):
        path = metadata.get("path")
        fmt = path.rsplit(".", 1)[-1] if isinstance(path, str) and "." in path.rsplit("/", 1)[-1] else ""
    return fmt.rsplit("+", 1)[-1].lower()


def is_markdown(metadata: dict[str, Any]) -> bool:
    """Whether a document is split as Markdown: its ``fc_format``, else its path's suffix."""
    return _format(metadata) in MARKDOWN_FORMATS


def has_headings(metadata: dict[str, Any]) -> bool:
    """Whether a document's Markdown headings are titles (not :data:`UNTITLED_FORMATS`)."""
    return _format(metadata) not in UNTITLED_FORMATS


def heading_paths(text: str) -> tuple[list[int], list[str]]:
    """``(offsets, paths)``: sorted character offsets of top-level Markdown headings and the
    heading path in effect from each (``"Guide > Install > Offline"``)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").disable(["inline", "text_join"]).parse(text)  # blocks only: 5x faster
    if not any(t.type == "heading_open" for t in tokens):
        return [], []
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
    offsets: list[int] = []
    paths: list[str] = []
    stack: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or not token.map:
            continue
        level = int(token.tag[1:])
        title = " ".join(tokens[i + 1].content.split())[:_TITLE] if i + 1 < len(tokens) else ""
        stack = [h for h in stack if h[0] < level] + [(level, title)]
        path = " > ".join(t for _, t in stack if t)
        offsets.append(line_starts[min(token.map[0], len(line_starts) - 1)])
        paths.append(path if len(path) <= MAX_HEADING else "… " + path[-(MAX_HEADING - 2) :])
    return offsets, paths


def section_runs(offsets: list[int], length: int) -> list[tuple[int, int]]:
    """Cut a text at heading ``offsets`` into runs of whole sections of about :data:`SECTION_RUN`
    characters (a longer section is a run of its own); ``[(0, length)]`` without headings."""
    runs: list[tuple[int, int]] = []
    start = end = 0
    for cut in [*(o for o in offsets if o > 0), length]:
        if cut - start > SECTION_RUN and end > start:
            runs.append((start, end))
            start = end
        end = cut
    return [*runs, (start, length)]


class Chunker:
    """Cuts documents for one job: its options, resolved against the model's tokens (or None).

    Raises:
        ConfigurationError: ``size`` is more than the model reads.
    """

    def __init__(self, options: ChunkingOptions, tokens: ModelTokens | None) -> None:
        self.options = options
        self.tokens = tokens
        self.size, self.overlap = options.resolved()
        if options.unit == "tokens" and tokens is not None and self.size > tokens.capacity:
            if options.size is None:
                self.size = tokens.capacity
                self.overlap = min(self.overlap, self.size // 2 - 1)  # capacity >= 8 (tokens.py)
            else:
                raise ConfigurationError(
                    f"chunking.size={options.size} tokens is more than {tokens.model} reads: "
                    f"{tokens.max_tokens} tokens including {tokens.specials} special ones, so at most "
                    f"{tokens.capacity} tokens of text. Use chunking.size <= {tokens.capacity} (or leave it "
                    "out for the default)."
                )
        self._lock = threading.Lock()
        self._cuts: OrderedDict[tuple[bytes, bool], list[tuple[int, int, str]]] = OrderedDict()
        identity: dict[str, Any] = {"unit": options.unit}
        if options.unit == "chars":
            identity["splitter"] = "flux-chroma words"
        else:
            identity["splitter"] = splitter_version()
            identity["section_run"] = SECTION_RUN
            if tokens is None:
                identity["unit"] = "chars"
                identity["fallback"] = f"{FALLBACK_CHARS_PER_TOKEN} chars per token (the model declares no tokenizer)"
                self.size *= FALLBACK_CHARS_PER_TOKEN
                self.overlap *= FALLBACK_CHARS_PER_TOKEN
            else:
                identity["tokenizer"] = tokens.identity
                identity["stubs"] = f"lone headings joined forward, chunks of < {STUB_WORDS} word characters back"
                identity["max_tokens"] = tokens.max_tokens
        self.identity = {**identity, "size": self.size, "overlap": self.overlap}
        """What decides the cut (JSON-able): part of the plan digest, so a change re-chunks."""

    @cached_property
    def _splitters(self) -> tuple[Any, Any]:
        from semantic_text_splitter import MarkdownSplitter, TextSplitter

        def build(cls: Any) -> Any:
            if self.tokens is None:
                return cls(self.size, overlap=self.overlap)
            return cls.from_huggingface_tokenizer(self.tokens.tokenizer, self.size, overlap=self.overlap)

        return build(MarkdownSplitter), build(TextSplitter)

    def pieces(self, text: str, markdown: bool) -> list[Piece]:
        """Cut one document (on Markdown structure, with heading paths, when ``markdown``)."""
        key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), markdown)
        with self._lock:
            cuts = self._cuts.get(key)
            if cuts is not None:
                self._cuts.move_to_end(key)
        if cuts is None:
            cuts = self._cut(text, markdown)
            with self._lock:
                self._cuts[key] = cuts
                while len(self._cuts) > CUT_CACHE:
                    self._cuts.popitem(last=False)
        return [Piece(start, end, text[start:end], heading) for start, end, heading in cuts]

    def _cut(self, text: str, markdown: bool) -> list[tuple[int, int, str]]:
        offsets, paths = heading_paths(text) if markdown else ([], [])
        if self.options.unit == "chars":
            spans = split_spans(text, self.size, self.overlap)
        else:
            splitter = self._splitters[0 if markdown else 1]
            spans = self._join_stubs(text, offsets, [
                (lo + s, lo + s + len(chunk))
                for lo, hi in section_runs(offsets, len(text))
                for s, chunk in splitter.chunk_indices(text[lo:hi])
            ])  # fmt: skip
        out = []
        for start, end in spans:
            at = bisect.bisect_right(offsets, start) - 1
            out.append((start, end, paths[at] if at >= 0 else ""))
        return out

    def _join_stubs(self, text: str, offsets: list[int], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Join the stubs the splitter leaves to a neighbour, when both fit in what the model reads.

        A heading is cut off when its section's first paragraph does not fit beside it, and a
        code block too long for one chunk leaves its fences alone (```` ```js ````, ```` ``` ````):
        such a chunk answers no question but takes a place in the top k. A lone heading joins
        the chunk after it (from the end, so a run of them joins the text that follows); a chunk
        with fewer than :data:`STUB_WORDS` word characters joins the chunk before it.
        """
        if self.tokens is None:
            return spans
        limit, heads, out = self.tokens.max_tokens, set(offsets), list[tuple[int, int]]()
        for start, end in reversed(spans):
            lone = out and start in heads and "\n" not in text[start:end].strip()
            if lone and self.tokens.counts([text[start : out[-1][1]]])[0] <= limit:
                out[-1] = (start, out[-1][1])
            else:
                out.append((start, end))
        joined = list[tuple[int, int]]()
        for start, end in reversed(out):
            stub = joined and end - start < _STUB_MAX_CHARS and len(_WORD.findall(_FENCE.sub("", text[start:end]))) < STUB_WORDS
            if stub and self.tokens.counts([text[joined[-1][0] : end]])[0] <= limit:
                joined[-1] = (joined[-1][0], end)
            else:
                joined.append((start, end))
        return joined

    def over_limit(self, texts: list[str]) -> int | None:
        """How many texts the model would truncate (``None`` when it declares no tokenizer)."""
        if self.tokens is None:
            return None
        limit = self.tokens.max_tokens
        return sum(1 for n in self.tokens.counts(texts) if n > limit)


def chunker_for(options: ChunkingOptions, embedding_function: dict[str, Any] | None) -> Chunker:
    """The (cached) chunker of a job's chunking options and embedding-function spec.

    Raises:
        ConfigurationError: ``size`` is more than the model reads, or the function is unknown.
        ModelNotAvailableError: The default model's tokenizer file is missing.
    """
    tokens = tokens_for_spec(embedding_function)
    key = repr((options, embedding_function, tokens.identity if tokens else None))
    with _LOCK:
        if key not in _CHUNKERS:
            _CHUNKERS[key] = Chunker(options, tokens)
        return _CHUNKERS[key]
