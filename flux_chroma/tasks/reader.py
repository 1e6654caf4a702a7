"""The read path: question(s) -> pin check -> embed (+cache) -> dense or hybrid -> distinct -> dicts.

Hits are plain JSON-able dicts without numpy (distributed Flux turns numpy into strings) and
without ``fc_*`` metadata keys. Only the question's embedding may come from the cache, never
the results. A filter that can never match raises :class:`InvalidQueryError` instead of
returning an empty list.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.errors import InvalidQueryError
from flux_chroma.tasks import hybrid
from flux_chroma.tasks.results import Hit
from flux_chroma.tasks.validation import RESERVED_PREFIX
from flux_chroma.tasks.writer import make_embedder

__all__ = ["CITATION_KEYS", "Hit", "citation", "public_metadata", "query_collection"]

_MAX_FETCH = 10_000

CITATION_KEYS = {
    "fc_heading": "heading",
    "fc_page": "page",
    "fc_start": "start",
    "fc_end": "end",
    "fc_title": "title",
    "fc_format": "format",
}
"""Stored ``fc_*`` metadata keys a hit's ``citation`` carries, and their names there."""


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def public_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """User metadata without flux-chroma's reserved ``fc_*`` keys, as plain Python values."""
    return {k: _plain(v) for k, v in (metadata or {}).items() if not k.startswith(RESERVED_PREFIX)}


def citation(record_id: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """Where a stored chunk comes from, from its metadata (``{}`` for records not from files).

    Args:
        record_id: The record id; an ingested chunk's id is ``<document id>#<n>:<hash>``.
        metadata: The record's stored metadata, ``fc_*`` keys included.

    Returns:
        ``document`` (for chunk ids), ``path``, then the :data:`CITATION_KEYS` names stored.

    Example:
        >>> citation("docs/a.md#2:9f06", {"path": "a.md", "fc_heading": "Setup", "fc_start": 10})
        {'document': 'docs/a.md', 'path': 'a.md', 'heading': 'Setup', 'start': 10}
    """
    meta = metadata or {}
    found = {name: _plain(meta[key]) for key, name in CITATION_KEYS.items() if meta.get(key) is not None}
    if not found and "fc_source" not in meta:
        return {}
    head: dict[str, Any] = {}
    if "#" in record_id:
        head["document"] = record_id.split("#", 1)[0]
    if isinstance(meta.get("path"), str):
        head["path"] = meta["path"]
    return {**head, **found}


def _hits(result: dict[str, Any], row: int) -> list[Hit]:
    ids = result["ids"][row]
    documents = (result.get("documents") or [[None] * len(ids)])[row]
    metadatas = (result.get("metadatas") or [[None] * len(ids)])[row]
    distances = (result.get("distances") or [[None] * len(ids)])[row]
    out: list[Hit] = []
    for rid, doc, meta, dist in zip(ids, documents, metadatas, distances, strict=True):
        hit: Hit = {
            "id": str(rid),
            "document": doc,
            "metadata": public_metadata(meta),
            "distance": None if dist is None else float(dist),
        }
        cited = citation(str(rid), meta)
        if cited:
            hit["citation"] = cited
        out.append(hit)
    return out


def _and(*clauses: dict[str, Any] | None) -> dict[str, Any] | None:
    present = [c for c in clauses if c]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


_INCLUDE: Any = ["documents", "metadatas", "distances"]


class _Search:
    """One question's candidate lists against one resolved collection."""

    def __init__(self, resolved: Resolved, where: dict[str, Any] | None, where_document: dict[str, Any] | None) -> None:
        self.collection = resolved.collection
        self.where = where
        self.where_document = where_document

    def dense(self, vectors: list[Any], n: int) -> list[list[Hit]]:
        result = self.collection.query(
            query_embeddings=vectors,
            n_results=n,
            where=self.where,
            where_document=self.where_document,  # type: ignore[arg-type]
            include=_INCLUDE,
        )
        return [_hits(dict(result), row) for row in range(len(vectors))]

    def _texts(self, clause: dict[str, Any]) -> dict[str, str]:
        result = self.collection.get(
            where=self.where,
            where_document=_and(clause, self.where_document),  # type: ignore[arg-type]
            limit=hybrid.MAX_MATCHES,
            include=["documents"],
        )
        return {str(i): d or "" for i, d in zip(result["ids"], result["documents"] or [], strict=True)}

    def matches(self, found: list[hybrid.Probe]) -> dict[str, str]:
        """The records holding any probe, id -> text: one full-text request. While an answer comes
        back full (cut at MAX_MATCHES), the probes holding at most half of it are asked again
        without the others: a common term must not crowd out the records of a rare one."""
        texts: dict[str, str] = {}
        asked = found
        while asked:
            last = self._texts(hybrid.combined_clause(asked))
            texts = {**last, **texts}
            if len(last) < hybrid.MAX_MATCHES:
                break
            pairs = [(t, hybrid.fold(t)) for t in last.values()]
            rarer = [p for p in asked if 2 * sum(hybrid.contains(p, t, f) for t, f in pairs) <= len(last)]
            asked = rarer if len(rarer) < len(asked) else []
        return texts

    def by_ids(self, vector: Any, ids: list[str], m: int) -> list[Hit]:
        if not ids:
            return []
        result = self.collection.query(query_embeddings=[vector], ids=ids, n_results=min(m, len(ids)), include=_INCLUDE)
        return _hits(dict(result), 0)

    def hybrid(
        self,
        found: list[hybrid.Probe],
        vector: Any,
        n: int,
        sent: Future[dict[str, str]],
        pool: ThreadPoolExecutor,
    ) -> tuple[list[Hit], bool]:
        texts = sent.result()
        folded = {i: hybrid.fold(t) for i, t in texts.items()}
        holding = [[i for i, t in texts.items() if hybrid.contains(p, t, folded[i])] for p in found]
        # Ranked by vector: every record of a rare probe (< n matches), and the nearest n per
        # common exact one (a quoted term or phrase), asked apart: in one request the common
        # ones' nearer records crowded the rare ones out. A common word's matches are not
        # ranked (it would cost more than the dense query).
        rare = {i for ids in holding if len(ids) < n for i in ids}
        common = [ids for p, ids in zip(found, holding, strict=True) if len(ids) >= n and p.exact]
        ranked = [pool.submit(self.by_ids, vector, sorted(rare), len(rare))]
        if common:
            ids = sorted({i for each in common for i in each} - rare)
            ranked.append(pool.submit(self.by_ids, vector, ids, n * len(common)))
        dense = self.dense([vector], n)[0]
        matched = sorted((h for r in ranked for h in r.result()), key=lambda h: h["distance"] or 0.0)
        lists = [dense] + [[h for h in matched if h["id"] in held][:n] for held in map(set, holding)]
        by_id: dict[str, Hit] = {}
        for hits in lists:
            for hit in hits:
                by_id.setdefault(hit["id"], hit)
        weights = [1.0] + [p.weight for p in found]
        order = hybrid.fuse(
            [([h["id"] for h in hits], w) for hits, w in zip(lists, weights, strict=True)],
            full=[False] + [len(ids) >= n for ids in holding],
            exact=[False] + [p.exact for p in found],
            named=any(p.kind == "identifier" and ids for p, ids in zip(found, holding, strict=True)),
        )
        return [by_id[rid] for rid in order], len(dense) >= n


def query_collection(
    target: Target,
    questions: list[str],
    *,
    k: int,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    ef: Any = None,
    cache: Any = None,
    space: str | None = None,
    mode: str = "dense",
    distinct: bool = True,
    path_prefix: str | None = None,
) -> tuple[list[list[Hit]], dict[str, Any]]:
    """Run validated questions against a tenant's existing collection.

    Args:
        ef: Configured embedding function, or ``None`` for the pinned one.
        cache: Embedding cache for the questions, or ``None``.
        space: Expected distance space (``None``: the pinned one).
        distinct: Return each passage once (more candidates are fetched to find ``k``).

    Returns:
        ``(hits per question, stats)``; stats holds cache hits/misses and embedding seconds.

    Raises:
        InvalidQueryError: A filter matched nothing because it can never match.
    """
    full_where = _and(where, hybrid.path_prefix_filter(path_prefix) if path_prefix else None)

    def run(resolved: Resolved) -> tuple[list[list[Hit]], dict[str, Any]]:
        embedder = make_embedder(resolved, cache)
        search = _Search(resolved, full_where, where_document)
        out: list[list[Hit]] = []
        with (
            ThreadPoolExecutor(max_workers=hybrid.MAX_PROBES, thread_name_prefix="fc-text") as text_pool,
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="fc-rank") as rank_pool,
        ):
            n = min(_MAX_FETCH, max(3 * k, k + 10) if distinct else k)  # distinct: more candidates
            early = mode == "hybrid"
            if early:  # a probe is rare when fewer than n records hold it: judged the same for any k
                n = max(n, hybrid.MIN_CANDIDATES)
            # The full-text requests need no vector: they run while the questions are embedded.
            found = [hybrid.probes(q, limit=hybrid.MAX_PROBES) for q in questions] if early else []
            sent = [text_pool.submit(search.matches, probed) for probed in found]
            embedded = embedder.embed(questions)

            def ranked(index: int, n: int) -> tuple[list[Hit], bool]:
                """Candidates for question ``index``, and whether more may exist beyond ``n``."""
                vector = embedded.vectors[index]
                if mode == "hybrid":
                    return search.hybrid(found[index], vector, n, sent[index], rank_pool)
                hits = search.dense([vector], n)[0]
                return hits, len(hits) >= n

            batch = search.dense(list(embedded.vectors), n) if mode == "dense" else None
            for index in range(len(questions)):
                hits, more = (batch[index], len(batch[index]) >= n) if batch is not None else ranked(index, n)
                size = n
                while distinct:
                    kept = hybrid.distinct(hits, k)
                    if len(kept) >= k or not more or size >= _MAX_FETCH:
                        hits = kept
                        break
                    size = min(_MAX_FETCH, size * 4)
                    hits, more = ranked(index, size)
                out.append(hits[:k])
        if not any(out) and (full_where or where_document):
            _explain_no_hits(resolved, where)
        stats = {
            "cache_hits": embedded.hits,
            "cache_misses": embedded.misses,
            "embed_seconds": round(embedded.seconds, 6),
        }
        return out, stats

    return with_collection(
        target,
        run,
        ef=ef,
        space=space,
        create=False,
        action=f"query {target.label!r}",
    )


def _contains_keys(where: Any, path: str = "where") -> list[tuple[str, str, Any]]:
    """``(path, key, operand)`` of every ``$contains`` metadata condition."""
    if not isinstance(where, dict):
        return []
    found: list[tuple[str, str, Any]] = []
    for key, value in where.items():
        if key in ("$and", "$or") and isinstance(value, list):
            for i, sub in enumerate(value):
                found.extend(_contains_keys(sub, f"{path}[{key!r}][{i}]"))
        elif isinstance(value, dict) and "$contains" in value:
            found.append((path, key, value["$contains"]))
    return found


def _explain_no_hits(resolved: Resolved, where: dict[str, Any] | None) -> None:
    """Raise when an empty answer comes from a filter that cannot match (samples 200 records)."""
    checks = _contains_keys(where)
    if not checks:
        return
    sample = resolved.collection.get(limit=200, include=["metadatas"])
    metas = [m for m in (sample.get("metadatas") or []) if m]
    for path, key, operand in checks:
        values = [m[key] for m in metas if key in m]
        if values and not any(isinstance(v, list) for v in values):
            example = next(str(v) for v in values)
            hint = (
                f"use path_prefix={operand!r} (--path-prefix) for a folder"
                if key == "path"
                else f"use {{{key!r}: {{'$eq': {operand!r}}}}} for equality"
            )
            raise InvalidQueryError(
                f"{path}[{key!r}] uses $contains, which tests membership in a LIST value, but "
                f"{key!r} holds single values here (e.g. {example!r}), so this filter can never "
                f"match: {hint}, or where_document={{'$contains': ...}} for text in the document."
            )
