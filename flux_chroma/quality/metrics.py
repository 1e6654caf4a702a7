"""Recall@k, hit@k, reciprocal rank and nDCG@10 of one ranked hit list, and their means.

A hit answers to its own id and its document's id, so a label may name documents or chunks.
Each relevant item counts once, at the first hit (rank 1 = first) that finds it; nDCG uses
binary gains over ``min(len(relevant), 10)`` ideal hits. The copies ``query`` folded into a hit
(``duplicates``) share its rank (nDCG lists them right after it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from flux_chroma.tasks.documents import document_key
from flux_chroma.tasks.validation import doc_key_of

__all__ = ["NDCG_DEPTH", "score_question", "summarize"]

NDCG_DEPTH = 10


def score_question(hit_ids: Sequence[str | Sequence[str]], relevant: Iterable[str], ks: Sequence[int]) -> dict[str, Any]:
    """Score hit ids (best first) against the relevant document or chunk ids.

    A place may hold several ids: a hit and the copies ``query`` folded into it. They count at
    that place for recall, hit and the first rank; nDCG gives each its own place, right after
    the hit, so every relevant document keeps a gain of its own.

    Returns:
        ``{"recall@k" and "hit@k" for each k, "rr", "ndcg@10", "first_rank"}`` (``first_rank``
        is ``None`` when no hit is relevant).

    Example:
        >>> s = score_question(["d/b#0:000000000000", "d/a#1:000000000000"], ["d/a"], [1, 5])
        >>> s["recall@1"], s["recall@5"], s["rr"]
        (0.0, 1.0, 0.5)
    """
    wanted = {doc_key_of(r) for r in relevant}
    places = [[ids] if isinstance(ids, str) else list(ids) for ids in hit_ids]
    found_at: dict[str, int] = {}
    gains: list[int] = []
    for rank, place in enumerate(places, 1):
        for hit in place:
            new = ({hit, document_key(hit)} & wanted) - set(found_at)  # a hit answers for its document too
            found_at.update(dict.fromkeys(new, rank))
            gains.append(1 if new else 0)
    out: dict[str, Any] = {f"recall@{k}": sum(1 for r in found_at.values() if r <= k) / len(wanted) for k in ks}
    first = min(found_at.values(), default=None)
    out.update({f"hit@{k}": 1.0 if first is not None and first <= k else 0.0 for k in ks})
    out["rr"] = 0.0 if first is None else 1.0 / first
    dcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(gains[:NDCG_DEPTH], 1))
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), NDCG_DEPTH) + 1))
    out[f"ndcg@{NDCG_DEPTH}"] = dcg / ideal
    out["first_rank"] = first
    return out


def summarize(scores: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Means over questions: ``questions``, ``recall@k``, ``hit@k``, ``mrr``, ``ndcg@10`` (4 decimals)."""
    n = len(scores)
    out: dict[str, Any] = {"questions": n}
    for name in ("recall", "hit"):
        for k in ks:
            out[f"{name}@{k}"] = round(sum(s[f"{name}@{k}"] for s in scores) / n, 4) if n else 0.0
    out["mrr"] = round(sum(s["rr"] for s in scores) / n, 4) if n else 0.0
    out[f"ndcg@{NDCG_DEPTH}"] = round(sum(s[f"ndcg@{NDCG_DEPTH}"] for s in scores) / n, 4) if n else 0.0
    return out
