"""Ingestion sources: where documents come from, and how a slice of them is read again.

A job names its sources by reference; the documents never travel through Flux. Each source
yields *units* (one document each) in a deterministic order, each with a *cursor* a batch task
restarts from: ``files`` (position in the sorted listing; unreadable files are
:class:`SkippedUnit`, never errors), ``jsonl`` (byte offset of the line), or a loader registered
with :func:`register_loader` (position in its sequence, which must be the same on every call).

A source's *location* (:func:`source_location`) is stored with each chunk next to its id and
scopes cleanup: two sources share records only when both agree. The default id of a ``files``
or ``jsonl`` source is a readable name plus a digest of its location (``docs-1f2e3d4c``).
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
import os
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from flux_chroma.errors import ConfigurationError, InvalidDocumentError, SourceChangedError
from flux_chroma.ingest.convert import Converted, Skipped, default_globs, read_file
from flux_chroma.tasks.validation import utf8_problem, validate_metadata

__all__ = [
    "Unit", "SkippedUnit", "FileCensus", "UNMATCHED_SAMPLE", "file_census", "file_metadata", "iter_doc_ids",
    "register_loader", "normalize_source", "iter_units", "source_location", "default_source_id",
    "BUILTIN_KINDS", "Loader",
]  # fmt: skip

Loader = Callable[[dict[str, Any]], Iterable[Mapping[str, Any]]]
BUILTIN_KINDS = ("files", "jsonl")
MAX_LOCATION = 200
"""A custom loader's location longer than this is stored as a digest of its parameters."""
_NOT_PARAMS = ("kind", "id", "relocate")  # job-level fields, never a loader's parameters
_RECORD_FIELDS = {"id_field": "id", "text_field": "text", "metadata_field": "metadata"}  # defaults
_LOADERS: dict[str, Loader] = {}


@dataclass(frozen=True)
class Unit:
    """One document read from a source.

    Args:
        doc_id: Document id (chunk ids derive from it).
        metadata: User metadata copied to each chunk.
        cursor: Where a re-read starting at this document begins (JSON-able int).
        label: Human description for messages (``"docs/a.md"``, ``"data.jsonl byte 3"``).
        page_starts: Character offsets in ``text`` where each page starts (PDF), else ``()``.
    """

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    cursor: int = 0
    label: str = ""
    page_starts: tuple[int, ...] = ()


@dataclass(frozen=True)
class SkippedUnit:
    """A file of a ``files`` source that could not be read or converted: its listing position,
    relative path and the reason (see :func:`~flux_chroma.ingest.convert.read_file`)."""

    cursor: int
    label: str
    reason: str


def register_loader(kind: str) -> Callable[[Loader], Loader]:
    """Register a loader for the source ``kind`` (decorator).

    The loader must be registered in every process that runs ingestion tasks, and must yield
    the same records (``{"id", "text", "metadata"?}``) in the same order on every call.

    Raises:
        ConfigurationError: ``kind`` is empty or a built-in kind.

    Example:
        >>> @register_loader("faq")
        ... def load_faq(params):
        ...     return [{"id": "q1", "text": "How do I resume a job?"}]
    """
    if not isinstance(kind, str) or not kind or kind in BUILTIN_KINDS:
        raise ConfigurationError(f"loader kind {kind!r} must be a non-empty string other than {BUILTIN_KINDS}.")

    def decorate(loader: Loader) -> Loader:
        _LOADERS[kind] = loader
        return loader

    return decorate


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value.strip() or "#" in value or value != value.strip():
        raise ConfigurationError(
            f"{what} {value!r} must be a non-empty string without '#' or surrounding spaces."
        )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_source_id(name: str, location: str) -> str:
    """The default id of a source: ``{name}-{8 hex digits of its location}``.

    Example:
        >>> default_source_id("docs", "/srv/legal/docs") != default_source_id("docs", "/srv/hr/docs")
        True
    """
    readable = name.replace("#", "_").strip() or "source"
    return f"{readable}-{_sha(location)[:8]}"


def source_location(src: Mapping[str, Any]) -> str:
    """Where a normalized source reads from: its absolute path, or for a custom loader
    ``{kind}:{its parameters as canonical JSON}`` (a digest past :data:`MAX_LOCATION` characters)."""
    if src["kind"] in BUILTIN_KINDS:
        return str(src["path"])
    params = {k: v for k, v in src.items() if k not in _NOT_PARAMS}
    text = f"{src['kind']}:{json.dumps(params, sort_keys=True, ensure_ascii=False, separators=(',', ':'))}"
    return text if len(text) <= MAX_LOCATION else f"{src['kind']}:sha256:{_sha(text)[:32]}"


def _absolute(raw: Any) -> Path:
    """The absolute, lexically normalized path (``..`` folded; symlinks are not resolved)."""
    return Path(os.path.abspath(Path(str(raw)).expanduser()))


def _patterns(raw: Any, what: str, root: Path, *, empty: bool = False) -> list[str]:
    """Validate glob patterns (one string or a list; relative, no ``..``)."""
    patterns = [raw] if isinstance(raw, str) else raw
    ok = isinstance(patterns, (list, tuple)) and (empty or bool(patterns))
    if not ok or not all(isinstance(g, str) and g for g in patterns):
        raise ConfigurationError(f"{what} must be a pattern or a list of patterns, got {raw!r}.")
    if any(g.startswith("/") or ".." in Path(g).parts for g in patterns):
        raise ConfigurationError(f"{what} {list(patterns)} must stay inside {root} (no '..', not absolute).")
    return list(patterns)


def normalize_source(raw: Any, position: int) -> dict[str, Any]:
    """Validate one source reference and fill in its defaults (absolute paths, id, globs).

    ``relocate: true`` (any kind) lets the job take over records of its id that another
    location wrote (a folder that moved); it is kept only when true.

    Raises:
        ConfigurationError: Unknown fields, missing path, bad id, non-boolean ``relocate``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"sources[{position}] must be a dict with a 'kind', got {type(raw).__name__}.")
    src = dict(raw)
    kind = src.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ConfigurationError(f"sources[{position}] needs a 'kind' ('files', 'jsonl' or a registered loader).")
    relocate = src.pop("relocate", False)
    if not isinstance(relocate, bool):
        raise ConfigurationError(
            f"sources[{position}].relocate must be true or false, got {relocate!r} (true lets this source "
            "take over the records its id holds from another location, e.g. a folder that moved)."
        )
    if kind in BUILTIN_KINDS and "path" not in src:
        what = "the directory" if kind == "files" else "the .jsonl file"
        raise ConfigurationError(f"sources[{position}] ({kind}) needs 'path': {what} to read.")
    if kind == "files":
        allowed = {"kind", "id", "path", "glob", "exclude", "encoding"}
        path = _absolute(src["path"])
        globs = _patterns(src["glob"] if "glob" in src else default_globs(), f"sources[{position}].glob", path)
        excludes = _patterns(src.get("exclude", []), f"sources[{position}].exclude", path, empty=True)
        src.update(path=str(path), glob=globs, id=src.get("id") or default_source_id(path.name, str(path)), encoding=src.get("encoding", "utf-8"))
        src.pop("exclude", None)
        if excludes:
            src["exclude"] = excludes
    elif kind == "jsonl":
        allowed = {"kind", "id", "path", *_RECORD_FIELDS}
        path = _absolute(src["path"])
        src.update(path=str(path), id=src.get("id") or default_source_id(path.stem, str(path)))
        src.update({key: src.get(key, default) for key, default in _RECORD_FIELDS.items()})
    else:
        allowed = set(src)  # custom loaders own their parameters
        if not src.get("id"):
            raise ConfigurationError(f"sources[{position}] ({kind}) needs an 'id' (custom loaders have no default).")
    unknown = set(src) - allowed
    if unknown:
        raise ConfigurationError(f"sources[{position}] ({kind}) has unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}.")
    _check_id(src["id"], f"sources[{position}].id")
    if relocate:
        src["relocate"] = True
    try:
        json.dumps(src)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"sources[{position}] must be JSON-able ({exc}).") from None
    return src


UNMATCHED_SAMPLE = 3
"""Unmatched files a census names (the CLI's summary shows them)."""


@dataclass(frozen=True)
class FileCensus:
    """What a ``files`` source's patterns select under its folder.

    Args:
        matched: Sorted relative paths matching a ``glob`` and no ``exclude`` (cursors index it).
        unmatched: Files matching no ``glob`` (0 when no pattern has wildcards).
        excluded: Files matching a ``glob`` and an ``exclude`` pattern.
        links: Relative paths of symlinked folders, which are not entered (a link may lead out
            of the folder or back into it): ingest one as its own source to take its files.
        unmatched_sample: The first :data:`UNMATCHED_SAMPLE` unmatched files, folders and files
            in name order.
    """

    matched: list[str]
    unmatched: int
    excluded: int
    links: list[str]
    unmatched_sample: list[str]


def _matcher(patterns: list[str], root: Path) -> Callable[[str], bool]:
    """A test of relative POSIX paths against glob patterns, with :meth:`Path.glob`'s syntax."""
    if not patterns:
        return lambda rel: False
    translate = getattr(globlib, "translate", None)
    if translate is None:  # Python 3.12 has no glob.translate: list each pattern's matches
        found = {item.relative_to(root).as_posix() for p in patterns for item in root.glob(p)}
        return found.__contains__
    regex = re.compile("|".join(f"(?:{translate(p, recursive=True, include_hidden=True)})" for p in patterns))
    return lambda rel: regex.match(rel) is not None


def file_census(src: Mapping[str, Any]) -> FileCensus:
    """List a ``files`` source: one walk, symlinked folders not entered (but named), unlistable ones
    a pattern reaches matched (and skipped with a reason later), files no pattern reaches unmatched.

    Raises:
        SourceChangedError: The folder does not exist.
    """
    root = Path(src["path"])
    if not root.is_dir():
        raise SourceChangedError(f"source {src['id']!r}: directory {root} does not exist (or is not a directory).")
    globs = list(src["glob"])
    include, exclude = _matcher(globs, root), _matcher(list(src.get("exclude") or []), root)
    # How many folders deep the patterns reach (None: any depth, a ** pattern). Deeper folders are
    # walked all the same, their files counted as unmatched, unless the patterns only name files.
    depth = None if any("**" in p for p in globs) else max(p.count("/") for p in globs)
    named = not any(char in p for p in globs for char in "*?[")

    def reached(folder: str) -> bool:
        """Can a pattern match a file in ``folder`` (a relative path with its trailing ``/``)?"""
        return depth is None or folder.count("/") <= depth

    unreadable: list[str] = []
    matched: list[str] = []
    links: list[str] = []
    sample: list[str] = []
    unmatched = excluded = 0

    def failed(exc: OSError) -> None:
        if exc.filename and os.fspath(exc.filename) != str(root):
            unreadable.append(Path(exc.filename).relative_to(root).as_posix())

    for folder, dirs, files in os.walk(root, onerror=failed):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else f"{base}/"
        if reached(f"{prefix}*/"):  # files of its subfolders: walk in, report symlinked ones
            links += (prefix + name for name in dirs if os.path.islink(os.path.join(folder, name)))
        elif named:
            dirs.clear()
        dirs.sort()
        for name in sorted(files):
            rel = prefix + name
            if not include(rel):
                unmatched += 1
                if len(sample) < UNMATCHED_SAMPLE:
                    sample.append(rel)
            elif exclude(rel):
                excluded += 1
            else:
                matched.append(rel)
    reachable = [rel for rel in unreadable if reached(f"{rel}/")]
    unmatched += len(unreadable) - len(reachable)  # an unlistable folder no pattern reaches
    matched.extend(rel for rel in reachable if not exclude(rel))
    if named:
        unmatched, sample = 0, []  # named files (one file on the command line): their neighbours were never candidates
    return FileCensus(sorted(matched), unmatched, excluded, sorted(links), sample)


def file_metadata(rel: str, converted: Converted) -> dict[str, Any]:
    """The metadata of a file's document (copied to each of its chunks).

    Returns:
        ``path``, ``fc_format`` (a ``.gz`` file's inner format), ``fc_dir`` (the relative
        folder, ``""`` at the root), ``fc_dirs`` (every ancestor folder, for
        ``{"fc_dirs": {"$contains": "a/b"}}``; absent at the root: Chroma refuses empty lists),
        ``fc_title`` (when the document has one), ``fc_conv`` (converter and version; absent
        for text read as it is).

    Example:
        >>> from flux_chroma.ingest.convert import Converted
        >>> file_metadata("a/b/c.md", Converted("# Hi", "md"))
        {'path': 'a/b/c.md', 'fc_format': 'md', 'fc_dir': 'a/b', 'fc_dirs': ['a', 'a/b']}
    """
    parts = rel.split("/")[:-1]
    meta: dict[str, Any] = {"path": rel, "fc_format": converted.format, "fc_dir": "/".join(parts)}
    if parts:
        meta["fc_dirs"] = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if converted.title:
        meta["fc_title"] = converted.title[:200]
    if converted.converter:
        meta["fc_conv"] = converted.converter
    return meta


def _file_units(src: dict[str, Any], start: int, skip: Container[int], on_skip: Callable[[SkippedUnit], None] | None) -> Iterator[Unit]:
    root = Path(src["path"])
    names = file_census(src).matched
    if start > len(names):
        raise SourceChangedError(f"source {src['id']!r}: {root} now holds fewer files than when the job was planned.")
    for position in range(start, len(names)):
        if position in skip:
            continue
        rel = names[position]
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            result: Converted | Skipped = Skipped("a folder that cannot be listed (permission denied)")
        else:
            result = read_file(str(path), rel, src["encoding"])
        if isinstance(result, Converted):
            yield Unit(f"{src['id']}/{rel}", result.text, file_metadata(rel, result), position, rel, result.page_starts)
        elif on_skip is not None:
            on_skip(SkippedUnit(position, rel, result.reason))


def _record_unit(src: dict[str, Any], record: Any, cursor: int, label: str) -> Unit:
    if not isinstance(record, Mapping):
        raise InvalidDocumentError(f"source {src['id']!r}: {label} is not a JSON object.")
    doc_id = record.get(src["id_field"])
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise InvalidDocumentError(f"source {src['id']!r}: {label} has no string {src['id_field']!r} field.")
    text = record.get(src["text_field"])
    if not isinstance(text, str):
        raise InvalidDocumentError(f"source {src['id']!r}: {label} (id {doc_id!r}) has no string {src['text_field']!r} field.")
    for what, value in (("id", doc_id), ("text", text)):
        problem = utf8_problem(value)
        if problem is not None:
            raise InvalidDocumentError(f"source {src['id']!r}: {label} (id {doc_id!r}): {what} {problem}.")
    metadata = validate_metadata(record.get(src["metadata_field"]), where=f"source {src['id']!r} {label} (id {doc_id!r})")
    return Unit(doc_id, text, metadata, cursor, label)


def _jsonl_units(src: dict[str, Any], start: int) -> Iterator[Unit]:
    path = Path(src["path"])
    if not path.is_file():
        raise SourceChangedError(f"source {src['id']!r}: {path} does not exist.")
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if start > size:
            raise SourceChangedError(f"source {src['id']!r}: {path} is shorter than when the job was planned.")
        handle.seek(start)
        offset = start
        for raw in handle:
            here, offset = offset, offset + len(raw)
            line = raw.strip()
            if not line:
                continue
            label = f"{path.name} byte {here}"
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InvalidDocumentError(f"source {src['id']!r}: {label} is not valid JSON ({exc}).") from None
            yield _record_unit(src, record, here, label)


def _custom_units(src: dict[str, Any], start: int) -> Iterator[Unit]:
    loader = _LOADERS.get(src["kind"])
    if loader is None:
        raise ConfigurationError(
            f"source {src['id']!r}: unknown kind {src['kind']!r}. Built-in kinds: {BUILTIN_KINDS}; "
            f"registered loaders: {sorted(_LOADERS)}. Register it with "
            "flux_chroma.ingest.register_loader in every process that runs ingestion tasks."
        )
    params = {k: v for k, v in src.items() if k not in ("kind", "relocate")}
    for position, record in enumerate(islice(loader(params), start, None), start=start):
        yield _record_unit({**_RECORD_FIELDS, **src}, record, position, f"record #{position}")


def iter_units(
    src: dict[str, Any],
    start: int = 0,
    *,
    skip: Container[int] = (),
    on_skip: Callable[[SkippedUnit], None] | None = None,
) -> Iterator[Unit]:
    """Yield a normalized source's documents in order, starting at cursor ``start``.

    Args:
        start: A cursor previously reported by a :class:`Unit` (0 = from the beginning).
        skip: Cursors of a ``files`` source not to read at all (files the plan skipped).
        on_skip: Called with each file of a ``files`` source that cannot be read or converted.

    Raises:
        SourceChangedError: The source is gone or shorter than the cursor.
        InvalidDocumentError: A record is malformed (named by position).
        ConfigurationError: Unknown source kind.
    """
    if src["kind"] == "files":
        return _file_units(src, start, skip, on_skip)
    if src["kind"] == "jsonl":
        return _jsonl_units(src, start)
    return _custom_units(src, start)


def iter_doc_ids(src: dict[str, Any]) -> Iterator[tuple[str, int, str]]:
    """``(document id, cursor, label)`` of every document of a source.

    A ``files`` source yields every listed file (skipped or not) without reading any.
    """
    if src["kind"] == "files":
        for position, rel in enumerate(file_census(src).matched):
            yield f"{src['id']}/{rel}", position, rel
        return
    for unit in iter_units(src):
        yield unit.doc_id, unit.cursor, unit.label
