"""Hybrid retrieval on the Chroma server's own full-text index, and distinct results.

A chunk's dense vector dilutes an identifier or a rare term; the server has no BM25 index but
does keep a full-text one behind ``where_document``. :func:`probes` picks the question's
distinctive parts, :func:`combined_clause` folds them into ONE ``$regex`` (the server scans
its text once per clause, so one clause is what keeps latency down), and :func:`fuse` merges
the lists by weighted reciprocal rank fusion. :func:`distinct` folds copies of a
better-ranked hit (the same passage from another file or format) into it.
"""

from __future__ import annotations

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
    "probes",
    "validate_mode",
    "validate_path_prefix",
]

MODES = ("dense", "hybrid")
"""The retrieval modes of ``query``."""

RRF_K = 60  # reciprocal rank fusion's rank constant (Cormack et al., 2009)
MAX_PROBES = 4
MAX_MATCHES = 1000  # ids per full-text request; beyond it the specific probes are asked alone
WORD_FILL = 4  # measured: filling every probe with words finds more natural-question answers
WORD_WEIGHT = 1.0
COMMON_FACTOR = 0.25  # weight share of a probe whose list came back full (a common term)
MIN_CANDIDATES = 30  # per list, whatever k: with fewer, a small k made rare terms "common"
NATURAL_DENSE_WEIGHT = 2.0  # dense weight when nothing holds the question word for word
NATURAL_DENSE_K = 20  # and its rank constant when no identifier matched: one word no longer lifts a record to the top
MAX_PHRASE = 300  # longest question (characters) still probed as a whole phrase
SHINGLE = 5  # words per run when results are compared (:func:`distinct`)
NEAR_COPY = 0.8  # share of a hit's word runs, in one stretch, already shown that makes it a copy
CUT_LONGER = 0.5  # share of a hit that a kept hit's stretch must fill to make it a longer cut of it

_MAX_TERM = 120
_EXACT_KINDS = ("quoted", "phrase")
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")
# Quotes and code spans; a span closes with as many backticks as opened it (reStructuredText
# and Markdown write ``OLD`` or ``NEW``: never "or" quoted between two spans).
_QUOTED = re.compile(r'"([^"]{2,})"|“([^”]{2,})”|(?<!`)(`+)([^`]{2,}?)\3(?!`)|\'([^\']{3,})\'(?!\w)')
_QUOTED_TEXT = (1, 2, 4, 5)  # the groups holding the quoted text
_TOKEN = re.compile(r"[\w][\w.\-/:@+#]*[\w+#]|--?[\w][\w\-]*|\w")
_TRIM = ".,;:!?)('\"`"
_WORD = re.compile(r"\w+")

# English function and question words: probing them would only repeat the dense ranking.
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
_ASKING = frozenset({"how", "what", "which", "where", "why", "who"})


@dataclass(frozen=True)
class Probe:
    """One full-text probe of a question.

    Attributes:
        term: The text looked for.
        clause: The ``where_document`` clause that finds it.
        weight: Its weight in the fusion (the dense list weighs 1).
        kind: ``"quoted"``, ``"phrase"``, ``"identifier"`` or ``"word"``.
    """

    term: str
    clause: dict[str, Any]
    weight: float
    kind: str

    @property
    def exact(self) -> bool:
        """A quoted part or the whole question: the asker's own words, matched as they are."""
        return self.kind in _EXACT_KINDS

    @cached_property
    def folded(self) -> str:
        """The term as :func:`contains` compares phrases and words."""
        return fold(self.term)


def escape_regex(text: str) -> str:
    """Escape ``text`` for the server's (Rust) regex syntax; whitespace runs match any whitespace.

    A pasted sentence may have been wrapped differently from the stored text.
    """
    escaped = "".join("\\" + ch if ch in _REGEX_META else ch for ch in text)
    return re.sub(r"\s+", lambda _: r"\s+", escaped)


def phrase_regex(text: str) -> dict[str, Any]:
    """A case-insensitive ``where_document`` clause matching ``text`` as a phrase."""
    return {"$regex": "(?i)" + escape_regex(text)}


def _pattern(probe: Probe) -> str:
    if "$contains" in probe.clause:
        return escape_regex(str(probe.clause["$contains"]))
    pattern = str(probe.clause["$regex"])
    return "(?i:" + pattern.removeprefix("(?i)") + ")" if pattern.startswith("(?i)") else pattern


def combined_clause(found: Sequence[Probe]) -> dict[str, Any]:
    """``{"$regex": "p1|p2|..."}`` matching a record that holds any of ``found`` (non-empty).

    Identifiers keep their case; phrases and words are case-insensitive ``(?i:...)`` groups.
    One clause costs the server one scan of its text; an ``$or`` costs one scan per clause.
    """
    return {"$regex": "|".join(_pattern(p) for p in found)}


def fold(text: str) -> str:
    """``text`` as phrases and words are compared: case-folded, whitespace runs as one space."""
    return " ".join(text.casefold().split())


def contains(probe: Probe, document: str | None, folded: str | None = None) -> bool:
    """Whether ``document`` holds ``probe`` as the server decides; ``folded``: its :func:`fold`."""
    if not document:
        return False
    if "$contains" in probe.clause:
        return str(probe.clause["$contains"]) in document
    return probe.folded in (fold(document) if folded is None else folded)


def _is_identifier(token: str) -> bool:
    if len(token) < 2:
        return False
    if any(ch.isdigit() for ch in token):
        return True  # numbers, versions, 0x1f, sha256, ipv6
    if any(ch in token for ch in "_./:@+#") or token.startswith("-") or "-" in token[1:-1]:
        return True  # fc_hash, os.path, /etc/fstab, --no-cache, systemd-resolved
    inner = token[1:]
    return any(ch.isupper() for ch in inner) and any(ch.islower() for ch in token)  # camelCase


def probes(question: str, *, limit: int = MAX_PROBES) -> list[Probe]:
    """The full-text probes for a question, most specific first.

    Args:
        question: The question as the user typed it.
        limit: At most this many probes; words are added only while there are fewer than
            :data:`WORD_FILL`.

    Returns:
        Quoted strings (weight 2), the whole question as a phrase (a how/what/which/where/
        why/who question without its leading stopwords) when it has 3+ words, 2 of them not
        stopwords, and at most :data:`MAX_PHRASE` characters (weight 2), identifiers
        and numbers (weight 1.5; exact case, but any case when typed in lower-case letters
        and digits only), then the longest non-stopword words of 4+ letters (any case,
        weight 1). Only stopwords or punctuation: no probes.
    """
    out: list[Probe] = []
    seen: set[str] = set()

    def add(term: str, clause: dict[str, Any], weight: float, kind: str) -> None:
        key = term.lower()
        longest = MAX_PHRASE if kind in _EXACT_KINDS else _MAX_TERM
        if len(out) < limit and key not in seen and 2 <= len(term) <= longest:
            seen.add(key)
            out.append(Probe(term, clause, weight, kind))

    for match in _QUOTED.finditer(question):
        quoted = " ".join(next(g for g in match.group(*_QUOTED_TEXT) if g).split())
        if quoted:
            add(quoted, phrase_regex(quoted), 2.0, "quoted")
    words = [t.strip(_TRIM) for t in _TOKEN.findall(question)]
    content = [w for w in words if w and w.lower() not in _STOPWORDS]
    spoken = " ".join(question.split()).strip(" " + _TRIM).split(" ")
    asking = spoken[0].lower() in _ASKING  # "how do I ...", "what is the ...": not in the text asked about
    while asking and spoken and spoken[0].lower().strip(_TRIM) in _STOPWORDS:
        spoken.pop(0)
    phrase = " ".join(spoken)
    if len(spoken if asking else words) >= 3 and len(content) >= 2 and len(phrase) <= MAX_PHRASE:
        add(phrase, phrase_regex(phrase), 2.0, "phrase")
    for token in dict.fromkeys(w for w in content if _is_identifier(w)):
        # Typed in lower case, letters and digits only (ipv6, sha256): prose writes IPv6, SHA256.
        loose = token.isalnum() and token.islower()
        add(token, phrase_regex(token) if loose else {"$contains": token}, 1.5, "identifier")
    plain = [w for w in dict.fromkeys(content) if w.isalpha() and len(w) >= 4 and not _is_identifier(w)]
    for word in sorted(plain, key=len, reverse=True):
        if len(out) >= WORD_FILL:
            break
        add(word, phrase_regex(word), WORD_WEIGHT, "word")
    return out


def fuse(
    lists: Sequence[tuple[Sequence[str], float]],
    *,
    full: Sequence[bool] | None = None,
    exact: Sequence[bool] | None = None,
    named: bool = False,
) -> list[str]:
    """Rank ids by weighted reciprocal rank fusion; ties keep first appearance (dense first).

    Args:
        lists: ``(ids nearest first, weight)`` per ranked list; the dense list first.
        full: Per list, whether it came back full (a common term): it counts
            :data:`COMMON_FACTOR` of its weight.
        exact: Per list, whether it holds the records containing the question (or a quoted
            part) word for word; those records come first.
        named: Whether an identifier of the question matched records. When nothing holds
            the question word for word, the dense list weighs :data:`NATURAL_DENSE_WEIGHT`,
            and unless ``named`` its ranks count from :data:`NATURAL_DENSE_K`, not
            :data:`RRF_K`: a word of the question held by a record lifts it a few places (the
            dense list's 10th to 5th), no longer to the first place.
    """
    scores: dict[str, float] = {}
    promoted: set[str] = set()
    worded = exact is not None and not any(ids for (ids, _), e in zip(lists, exact, strict=True) if e)
    for index, (ids, weight) in enumerate(lists):
        rank_k = RRF_K
        if index == 0 and worded:
            weight, rank_k = weight * NATURAL_DENSE_WEIGHT, RRF_K if named else NATURAL_DENSE_K
        w = weight * (COMMON_FACTOR if full is not None and index > 0 and full[index] else 1.0)
        for rank, rid in enumerate(ids, start=1):
            scores[rid] = scores.get(rid, 0.0) + w / (rank_k + rank)
        if exact is not None and exact[index]:
            promoted.update(ids)
    return sorted(scores, key=lambda rid: (rid not in promoted, -scores[rid]))  # a stable sort


def _shingles(text: str) -> list[int]:
    """Hashes of the runs of :data:`SHINGLE` consecutive words of ``text``, in order (case-folded
    as :func:`fold` does, punctuation ignored; a shorter text is one run of all its words).
    Comparable within a process."""
    words = _WORD.findall(text.casefold())
    if len(words) <= SHINGLE:
        return [hash(tuple(words))]
    return list(map(hash, zip(*(words[i:] for i in range(SHINGLE)), strict=False)))


def _is_copy(runs: list[int], present: frozenset[int], shown: list[int], seen: frozenset[int]) -> bool:
    """Whether a hit (its word runs, and their set) repeats a kept hit (its runs and their set).

    It does when :data:`NEAR_COPY` of its runs lie in the kept hit as one stretch, or when
    :data:`NEAR_COPY` of the kept hit's runs lie in it as one stretch that fills
    :data:`CUT_LONGER` of it (the same passage, cut longer).
    """
    common = len(present & seen)  # most pairs end here, in C
    need = NEAR_COPY * len(runs)
    if common >= need and _stretch(runs, seen, need):
        return True
    need = max(NEAR_COPY * len(shown), CUT_LONGER * len(runs))
    return common >= need and _stretch(shown, present, need)


def _stretch(runs: list[int], seen: frozenset[int], need: float) -> bool:
    """Whether ``need`` of ``runs`` lie in ``seen`` as ONE unbroken stretch."""
    stretch = 0
    for run in runs:
        stretch = stretch + 1 if run in seen else 0
        if stretch >= need:
            return True
    return False


def distinct(hits: Sequence[Hit], k: int) -> list[Hit]:
    """The first ``k`` hits that are not copies of a better-ranked one; copies go to ``"duplicates"``.

    A hit is a copy when :data:`NEAR_COPY` of its text, in one unbroken stretch of word runs
    (:func:`_shingles`), is in a kept hit: the same text, the same passage cut at other bounds,
    or the same page read from another format (a folder holding ``fs.md`` and ``fs.html``).
    It is also one when it holds :data:`NEAR_COPY` of a kept hit in one stretch that fills
    :data:`CUT_LONGER` of it: the same passage cut longer (a PDF page's chunk holding an HTML
    section and the start of the next). Templated pages that differ in a name or a number
    mid-text (CMake's policy pages) break the stretch and stay apart. A hit without a document
    is compared by id.
    """
    kept: list[tuple[Hit, list[int], frozenset[int]]] = []
    for hit in hits:
        if len(kept) == k:  # copies ranked below the k-th kept hit are not looked for
            break
        document = hit.get("document")
        runs = [hash("id:" + str(hit["id"]))] if document is None else _shingles(document)
        present = frozenset(runs)
        first = next((h for h, shown, seen in kept if _is_copy(runs, present, shown, seen)), None)
        if first is not None:
            first.setdefault("duplicates", []).append(hit["id"])
        else:
            kept.append((hit.copy(), runs, present))
    return [h for h, _, _ in kept]


def path_prefix_filter(prefix: str) -> dict[str, Any]:
    """The ``where`` clause selecting records of files at or under folder or file ``prefix``.

    Relies on the ``files`` source's ``path`` and ``fc_dirs`` (ancestor folders) keys.
    """
    clean = prefix.strip().strip("/")
    return {"$or": [{"fc_dirs": {"$contains": clean}}, {"path": {"$eq": clean}}]}


def validate_mode(mode: Any) -> None:
    """Check a retrieval mode (:class:`InvalidQueryError` when not in :data:`MODES`)."""
    if mode not in MODES:
        raise InvalidQueryError(f"mode={mode!r} is not a retrieval mode; use one of {', '.join(MODES)}.")


def validate_path_prefix(prefix: Any) -> str | None:
    """Check a relative ``/``-separated folder/file prefix; return it without edge slashes.

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
