"""Ask a collection a labelled set of questions and score the answers, per query mode.

Every question goes through the public ``query`` task (50 per task), so what is measured is
what users get: the same alias resolution, pin check and embedding cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow
from flux.errors import ExecutionError

from flux_chroma.errors import ConfigurationError, FluxChromaError
from flux_chroma.flux_state import ensure_flux_db_folder
from flux_chroma.quality.labels import LabelledQuestion, check_labels, load_labels
from flux_chroma.quality.metrics import NDCG_DEPTH, score_question, summarize
from flux_chroma.tasks.builtin import query
from flux_chroma.tasks.documents import document_key, list_documents
from flux_chroma.tasks.hybrid import MODES

__all__ = ["check_run", "evaluate", "evaluate_collection", "evaluation_steps", "query_modes"]

DEFAULT_KS = (1, 5, 10)
_BATCH = 50


def query_modes() -> tuple[str, ...]:
    """The ``mode=`` values the ``query`` task accepts."""
    return MODES


def check_run(modes: Any, ks: Any) -> tuple[list[str], list[int]]:
    """Validate modes (``None``: all) and recall cut-offs; return them de-duplicated, ks sorted.

    Raises:
        ConfigurationError: An empty or malformed list, or a mode ``query`` does not accept.
    """
    if modes is None:
        modes = list(MODES)
    if isinstance(modes, str) or not isinstance(modes, Sequence) or not modes or not all(isinstance(m, str) and m for m in modes):
        raise ConfigurationError(f"modes must be a non-empty list of mode names such as ['dense'], got {modes!r}.")
    if isinstance(ks, int) or not isinstance(ks, Sequence) or not ks or not all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 1000 for k in ks
    ):
        raise ConfigurationError(f"k must be a list of cut-offs between 1 and 1000 such as [1, 5, 10], got {ks!r}.")
    unknown = [m for m in modes if m != "default" and m not in MODES]
    if unknown:  # "default": whatever query does without mode=
        raise ConfigurationError(f"mode {unknown[0]!r} is not a query mode; use one of {list(MODES)} (or 'default').")
    return list(dict.fromkeys(modes)), sorted(set(ks))


async def evaluation_steps(
    collection: str,
    labels: list[LabelledQuestion],
    *,
    modes: Sequence[str],
    ks: Sequence[int],
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """Run the questions as ``query`` tasks in this workflow; return :func:`evaluate`'s report."""
    modes, ks = check_run(modes, ks)
    depth = max([*ks, NDCG_DEPTH])
    ask = query.with_options(**dict(options))
    texts = [q["question"] for q in labels]
    kinds = sorted({q.get("kind", "") for q in labels} - {""})
    report: dict[str, Any] = {"collection": collection, "questions": len(labels), "k": ks, "modes": {}, "kinds": {}, "per_question": []}
    per_question: list[dict[str, Any]] = [{"question": q["question"], "kind": q.get("kind"), "first_rank": {}} for q in labels]
    for mode in modes:
        scores: list[dict[str, Any]] = []
        for start in range(0, len(texts), _BATCH):
            batch = texts[start : start + _BATCH]
            hits = await ask(collection, batch, k=depth, **({} if mode == "default" else {"mode": mode}))
            for offset, row in enumerate(hits):
                label = labels[start + offset]
                places = [[h["id"], *h.get("duplicates", [])] for h in row]  # a hit and its copies
                score = score_question(places, label["relevant_documents"], ks)
                scores.append(score)
                per_question[start + offset]["first_rank"][mode] = score["first_rank"]
        report["modes"][mode] = summarize(scores, ks)
        for kind in kinds:
            chosen = [s for s, q in zip(scores, labels, strict=True) if q.get("kind") == kind]
            report["kinds"].setdefault(kind, {})[mode] = summarize(chosen, ks)
    report["per_question"] = per_question
    # Relevant ids naming no document of the collection (they would score zero silently).
    listed = await list_documents.with_options(**dict(options))(collection)
    known = {entry["document_id"] for entry in listed}
    wanted = {doc for q in labels for doc in q["relevant_documents"]}
    unknown = sorted(doc for doc in wanted if doc not in known and document_key(doc) not in known)
    report["unknown_documents"] = unknown
    return report


@workflow.with_options(namespace="flux-chroma")
async def evaluate_collection(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Score a collection against a labelled set. Input: ``collection``, ``labels``, ``modes``, ``k``, ``options``."""
    data = ctx.input or {}
    return await evaluation_steps(
        data["collection"],
        check_labels(data["labels"]),
        modes=data.get("modes") or list(MODES),
        ks=data.get("k") or list(DEFAULT_KS),
        options=data.get("options") or {},
    )


def evaluate(
    collection: str,
    labels: str | Path | Iterable[Mapping[str, Any]],
    *,
    tenant: str,
    modes: Sequence[str] | None = None,
    k: Sequence[int] = DEFAULT_KS,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure retrieval quality of a collection on a labelled set (one inline Flux execution).

    Args:
        collection: Tenant-relative collection name (an alias is followed).
        labels: A JSON-lines file (see :mod:`flux_chroma.quality.labels`) or a list of
            ``{"question", "relevant_documents"}`` dicts.
        modes: Query modes to compare (default: every mode ``query`` has); ``"default"``
            calls ``query`` without ``mode=``.
        k: Recall cut-offs.
        options: Other loggable task options (``url``, ``tenancy``, timeouts, ...).

    Returns:
        ``{"collection", "questions", "k", "modes": {mode: {"questions", "recall@k"...,
        "hit@k"..., "mrr", "ndcg@10"}}, "kinds": {kind: {mode: same}}, "per_question": [{"question",
        "kind", "first_rank": {mode: rank or None}}], "unknown_documents": [relevant ids
        that name no document of the collection]}``.

    Raises:
        ConfigurationError: A malformed labelled set, mode or cut-off.
        FluxChromaError: The queries failed (collection missing, server down, ...).

    Example:
        >>> report = evaluate("kb", "labels.jsonl", tenant="acme")  # doctest: +SKIP
        >>> report["modes"]["dense"]["recall@5"]  # doctest: +SKIP
        0.91
    """
    checked = load_labels(labels)
    modes_list, ks = check_run(None if modes is None else list(modes), list(k))
    opts = {"retry_max_attempts": 0, **dict(options or {}), "tenant": tenant}
    ensure_flux_db_folder()
    ctx = evaluate_collection.run(
        {"collection": collection, "labels": [dict(q) for q in checked], "modes": modes_list, "k": ks, "options": opts}
    )
    if not ctx.has_succeeded:
        error = ctx.output
        while isinstance(error, ExecutionError) and not isinstance(error, FluxChromaError) and error.inner_exception:
            error = error.inner_exception
        if isinstance(error, FluxChromaError):
            raise error
        raise FluxChromaError(f"evaluation of {collection!r} failed: {error!r}")
    return dict(ctx.output)
