"""Hybrid retrieval on the Chroma server's own full-text index, and distinct results.

A dense vector of a ~250-token chunk dilutes a single sentence, an identifier or a rare term,
which is what people paste into a search box (an error message, an option name, a version).
The local ``chroma run`` server has no BM25 or sparse index (``collection.search()`` and sparse
vectors are Chroma Cloud only in 1.5), but it does keep a full-text index behind
``where_document``. ``mode="hybrid"`` uses it:

1. :func:`probes` picks the question's distinctive parts, most specific first: quoted
   strings, the whole question as a phrase, identifiers and numbers (``fc_hash``,
   ``--no-cache``, ``1.5.9``, ``ExecStart``), then the longest words that are not stopwords.
2. :func:`combined_clause` folds every probe into ONE ``$regex`` alternation: one
   ``collection.get`` (sent while the question is being embedded) returns the records holding
   any probe with their texts. The server scans its text once per clause, so one clause
   instead of one request per probe is what keeps hybrid's latency down. :func:`contains`
   tells which record holds which probe; the records of rare probes (and those holding the
   question word for word) are ranked by the question's vector with one
   ``collection.query(ids=...)``, beside the dense query.
3. :func:`fuse` ranks the union by weighted reciprocal rank fusion (RRF, k=60): a record
   found by a specific probe rises even when the dense list missed it. Records that contain
   the question itself (or a quoted part of it) word for word come first.

No second index exists outside the server, so there is nothing to keep in sync.

:func:`distinct` folds hits whose text is identical (same SHA-256 of the whitespace-normalised
text) into the best-ranked one, which lists the others under ``duplicates``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from flux_chroma.errors import InvalidQueryError
from flux_chroma.tasks.results import Hit

__all__ = [
    "MODES",
    "Probe",
    "combined_clause",
    "contains",
    "fold",
    "distinct",
    "escape_regex",
    "fuse",
    "path_prefix_filter",
    "phrase_regex",
    "probes",
    "text_key",
    "validate_mode",
    "validate_path_prefix",
]

MODES = ("dense", "hybrid")
"""The retrieval modes of ``query``."""

RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al., 2009)."""

MAX_PROBES = 4
"""Full-text probes per question (all sent as one regular expression, see docs/retrieval.md)."""

MAX_MATCHES = 1000
"""Most record ids one full-text request returns; beyond it the specific probes (quoted,
phrase, identifiers) are asked again without the words."""

WORD_FILL = 4
"""Words are probed only while a question has fewer probes than this (measured: filling every
probe with words finds more answers to natural questions, and one request carries them all)."""

WORD_WEIGHT = 1.0
"""Fusion weight of a word probe (the dense list weighs 1)."""

COMMON_FACTOR = 0.25
"""A probe whose list came back full (a common term) counts this share of its weight."""

NATURAL_DENSE_WEIGHT = 2.0
"""Weight of the dense list when no record holds the question or a quoted part of it word
for word (a question in the user's own words, where the vector knows best)."""

MAX_PHRASE = 300
"""Longest question (characters) still probed as a whole phrase."""

_MAX_TERM = 120
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")
_QUOTED = re.compile(r'"([^"]{2,})"|“([^”]{2,})”|`([^`]{2,})`|\'([^\']{3,})\'(?!\w)')
_TOKEN = re.compile(r"[\w][\w.\-/:@+#]*[\w+#]|--?[\w][\w\-]*|\w")
_TRIM = ".,;:!?)('\"`"

# Words that say nothing about which record is meant (English function words and
# question words). Probing them would only repeat the dense ranking.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing done down during each
    either else etc even ever every few for from further get gets got had has have having he her
    here hers herself him himself his how however i if in into is it its itself just let like
    made make many may me might more most much must my myself no nor not now of off on once only
    or other our ours ourselves out over own per same she should since so some such than that the
    their theirs them themselves then there these they this those through thus to too under until
    up upon us use used uses using very via was we were what when where whether which while who
    whom whose why will with within without would yes yet you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class Probe:
    """One full-text probe of a question.

    Attributes:
        term: The text looked for (for reports and tests).
        clause: The ``where_document`` clause that finds it.
        weight: Its weight in the fusion (the dense list weighs 1).
        kind: ``"quoted"``, ``"phrase"``, ``"identifier"`` or ``"word"``.
    """

    term: str
    clause: dict[str, Any]
    weight: float
    kind: str

    @cached_property
    def folded(self) -> str:
        """The term as :func:`contains` compares phrases and words."""
        return " ".join(self.term.casefold().split())


def escape_regex(text: str) -> str:
    """Escape ``text`` for the server's (Rust) regex syntax; whitespace runs match any whitespace.

    Args:
        text: Literal text.

    Returns:
        A pattern matching ``text`` literally, except that every run of whitespace matches
        any run of whitespace (a pasted sentence may have been wrapped differently).
    """
    parts = []
    for chunk in re.split(r"(\s+)", text):
        if not chunk:
            continue
        if chunk.isspace():
            parts.append(r"\s+")
        else:
            parts.append("".join("\\" + ch if ch in _REGEX_META else ch for ch in chunk))
    return "".join(parts)


def phrase_regex(text: str) -> dict[str, Any]:
    """A case-insensitive ``where_document`` clause matching ``text`` as a phrase."""
    return {"$regex": "(?i)" + escape_regex(text)}


def _pattern(probe: Probe) -> str:
    if "$contains" in probe.clause:
        return escape_regex(str(probe.clause["$contains"]))
    pattern = str(probe.clause["$regex"])
    return "(?i:" + pattern.removeprefix("(?i)") + ")" if pattern.startswith("(?i)") else pattern


def combined_clause(found: Sequence[Probe]) -> dict[str, Any]:
    """One ``where_document`` clause matching a record that holds any of ``found``.

    Identifiers keep their case; phrases and words are case-insensitive (``(?i:...)``
    groups of the server's Rust regex syntax). One clause costs the server one scan of its
    text, where an ``$or`` of clauses costs one scan each.

    Args:
        found: Probes of one question (at least one).

    Returns:
        ``{"$regex": "p1|p2|..."}``.
    """
    return {"$regex": "|".join(_pattern(p) for p in found)}


def fold(text: str) -> str:
    """``text`` as phrases and words are compared: case-folded, whitespace runs as one space."""
    return " ".join(text.casefold().split())


def contains(probe: Probe, document: str | None, folded: str | None = None) -> bool:
    """Whether ``document`` holds ``probe``, as its ``where_document`` clause decides it.

    Identifiers are matched exactly; phrases and words ignore case and treat any run of
    whitespace as one space.

    Args:
        probe: The probe.
        document: The record's text.
        folded: ``fold(document)`` when the caller already has it (checking several probes).
    """
    if not document:
        return False
    if "$contains" in probe.clause:
        return str(probe.clause["$contains"]) in document
    return probe.folded in (fold(document) if folded is None else folded)


def _words(text: str) -> list[str]:
    return [t.strip(_TRIM) for t in _TOKEN.findall(text)]


def _is_identifier(token: str) -> bool:
    if len(token) < 2:
        return False
    if any(ch.isdigit() for ch in token):
        return True  # numbers, versions, 0x1f, sha256, ipv6
    if any(ch in token for ch in "_./:@+#") or token.startswith("-") or "-" in token[1:-1]:
        return True  # fc_hash, os.path, /etc/fstab, --no-cache, systemd-resolved
    inner = token[1:]
    return any(ch.isupper() for ch in inner) and any(ch.islower() for ch in token)  # camelCase


def probes(question: str, *, limit: int = MAX_PROBES, fill: int | None = None) -> list[Probe]:
    """The full-text probes for a question, most specific first.

    Args:
        question: The question as the user typed it.
        limit: At most this many probes.
        fill: Words are added only while there are fewer probes than this (default
            :data:`WORD_FILL`): each probe is a request, and a word says less than a phrase or
            an identifier.

    Returns:
        Quoted strings (weight 2), the whole question as a phrase when it has at least
        three words, two of them not stopwords, and is at most :data:`MAX_PHRASE` characters
        (weight 2), identifiers and numbers (exact case, weight 1.5), then the longest
        non-stopword words of 4+ letters (any case, weight 1) up to ``fill`` probes in all. A
        question of only stopwords or punctuation has no probes (hybrid then equals dense).
    """
    fill = WORD_FILL if fill is None else fill
    out: list[Probe] = []
    seen: set[str] = set()

    def add(term: str, clause: dict[str, Any], weight: float, kind: str) -> None:
        key = term.lower()
        longest = MAX_PHRASE if kind in ("quoted", "phrase") else _MAX_TERM
        if len(out) < limit and key not in seen and 2 <= len(term) <= longest:
            seen.add(key)
            out.append(Probe(term, clause, weight, kind))

    for match in _QUOTED.finditer(question):
        quoted = " ".join(next(g for g in match.groups() if g).split())
        if quoted:
            add(quoted, phrase_regex(quoted), 2.0, "quoted")
    words = _words(question)
    content = [w for w in words if w and w.lower() not in _STOPWORDS]
    phrase = " ".join(question.split()).strip(" " + _TRIM)
    if len(words) >= 3 and len(content) >= 2 and len(phrase) <= MAX_PHRASE:
        add(phrase, phrase_regex(phrase), 2.0, "phrase")
    for token in dict.fromkeys(w for w in content if _is_identifier(w)):
        add(token, {"$contains": token}, 1.5, "identifier")
    plain = [w for w in dict.fromkeys(content) if w.isalpha() and len(w) >= 4 and not _is_identifier(w)]
    for word in sorted(plain, key=len, reverse=True):
        if len(out) >= fill:
            break
        add(word, phrase_regex(word), WORD_WEIGHT, "word")
    return out


def fuse(
    lists: Sequence[tuple[Sequence[str], float]],
    *,
    full: Sequence[bool] | None = None,
    exact: Sequence[bool] | None = None,
) -> list[str]:
    """Rank ids by weighted reciprocal rank fusion.

    Args:
        lists: ``(ids nearest first, weight)`` per ranked list; the dense list first.
        full: Per list, whether it came back full (its probe matched at least as many
            records as were asked for, so the term is common); such a probe counts a quarter:
            its list mostly repeats the dense order.
        exact: Per list, whether it holds the records that contain the question itself or a
            quoted part of it; those records come first (in fused order), the rest after.

    Returns:
        The ids, best first; ties keep the order of first appearance (dense first).
    """
    scores: dict[str, float] = {}
    promoted: set[str] = set()
    worded = exact is not None and not any(ids for (ids, _), e in zip(lists, exact, strict=True) if e)
    for index, (ids, weight) in enumerate(lists):
        if index == 0 and worded:
            weight *= NATURAL_DENSE_WEIGHT
        w = weight * (COMMON_FACTOR if full is not None and index > 0 and full[index] else 1.0)
        for rank, rid in enumerate(ids, start=1):
            scores[rid] = scores.get(rid, 0.0) + w / (RRF_K + rank)
        if exact is not None and exact[index]:
            promoted.update(ids)
    order = {rid: i for i, rid in enumerate(scores)}
    return sorted(scores, key=lambda rid: (rid not in promoted, -scores[rid], order[rid]))


def text_key(hit: Hit) -> str:
    """What makes two hits "the same text": SHA-256 of the whitespace-normalised document.

    A hit without a stored document is only the same as itself (its id).
    """
    document = hit.get("document")
    if document is None:
        return "id:" + str(hit["id"])
    return hashlib.sha256(" ".join(document.split()).encode("utf-8")).hexdigest()


def distinct(hits: Sequence[Hit], k: int) -> list[Hit]:
    """The first ``k`` hits with distinct texts; each lists the ids of its identical copies.

    Args:
        hits: Ranked hits (best first).
        k: How many to keep.

    Returns:
        At most ``k`` hits; a hit with copies among ``hits`` has ``"duplicates": [ids]``
        (in rank order). Copies outside ``hits`` are not known.
    """
    kept: dict[str, Hit] = {}
    for hit in hits:
        key = text_key(hit)
        first = kept.get(key)
        if first is None:
            kept[key] = hit.copy()
        else:
            first.setdefault("duplicates", []).append(hit["id"])
    return list(kept.values())[:k]


def path_prefix_filter(prefix: str) -> dict[str, Any]:
    """The ``where`` clause selecting records of files at or under ``prefix``.

    Relies on two keys the ``files`` ingestion source stores: ``path`` (the file's path
    relative to the source folder) and ``fc_dirs`` (every ancestor folder of it, e.g.
    ``"a/b/c.md"`` -> ``["a", "a/b"]``).

    Args:
        prefix: A folder (``"docs/api"``; a trailing ``/`` is ignored) or one file's path.

    Returns:
        ``{"$or": [{"fc_dirs": {"$contains": prefix}}, {"path": {"$eq": prefix}}]}``.
    """
    clean = prefix.strip().strip("/")
    return {"$or": [{"fc_dirs": {"$contains": clean}}, {"path": {"$eq": clean}}]}


def validate_mode(mode: Any) -> str:
    """Check a retrieval mode.

    Raises:
        InvalidQueryError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise InvalidQueryError(f"mode={mode!r} is not a retrieval mode; use one of {', '.join(MODES)}.")
    return str(mode)


def validate_path_prefix(prefix: Any) -> str | None:
    """Check a folder/file prefix (relative, ``/``-separated, as ``files`` sources store paths).

    Raises:
        InvalidQueryError: Not a string, empty, absolute, or with ``.``/``..`` segments.
    """
    if prefix is None:
        return None
    if not isinstance(prefix, str):
        raise InvalidQueryError(f"path_prefix must be a string, got {type(prefix).__name__}.")
    clean = prefix.strip().strip("/")
    parts = clean.split("/")
    if not clean or "\\" in clean or any(p in ("", ".", "..") for p in parts) or prefix.strip().startswith("/"):
        raise InvalidQueryError(
            f"path_prefix={prefix!r} is not a relative folder path like 'docs/api': paths are stored "
            "relative to the ingested folder, with '/' separators and no '.' or '..' segments."
        )
    return clean
