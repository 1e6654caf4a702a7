"""Row 5: the ``query`` task inside a workflow vs a raw ``collection.query``, per question."""

from __future__ import annotations

import time
from typing import Any

from bench.context import TENANT, Bench
from bench.corpus import load_docs
from bench.report import Result, fmt
from bench.timing import median, percentile, run_timed

__all__ = ["run_row5", "populate", "sample_questions", "QuerySides"]

_K = 5
_WARMUP = 3


def sample_questions(b: Bench, size: int, count: int) -> list[str]:
    """Deterministic questions: the first 10 words of chunks spread over the corpus."""
    docs = load_docs(str(b.corpus), 0, size)
    step = max(1, len(docs) // count)
    return [" ".join(docs[(i * step) % len(docs)]["text"].split()[:10]) for i in range(count)]


def populate(b: Bench, size: int) -> str:
    """A collection holding the first ``size`` chunks (row 4's, or ingested from the warm cache)."""
    from bench.flows import corpus_ingest_wf

    if size not in b.populated:
        b.warm(size)
        name = f"r5-{size}"
        run_timed(
            corpus_ingest_wf,
            b.ingest_input(name, size, {"cache": True, "cache_dir": str(b.warm_dir)}),
        )
        b.populated[size] = name
    return b.populated[size]


class QuerySides:
    """The three ways one question is asked, each returning (seconds, checkpoint seconds)."""

    def __init__(self, b: Bench, ef: Any, name: str) -> None:
        self.b, self.ef, self.name = b, ef, name
        self.coll = b.client.get_collection(b.physical(name), embedding_function=None)

    def raw(self, question: str) -> float:
        start = time.perf_counter()
        vector = self.ef.embed([question])
        self.coll.query(
            query_embeddings=vector, n_results=_K, include=["documents", "metadatas", "distances"]
        )
        return time.perf_counter() - start

    def flux(self, question: str) -> tuple[float, float]:
        from bench.flows import query_wf

        inp = {"tenant": TENANT, "collection": self.name, "question": question, "k": _K}
        timed = run_timed(query_wf, inp)
        if len(timed.ctx.output) != _K:
            raise RuntimeError(f"row 5: expected {_K} hits, got {timed.ctx.output!r}")
        return timed.seconds, timed.checkpoint_seconds

    def noop(self, question: str) -> tuple[float, float]:
        from bench.flows import noop_wf

        timed = run_timed(noop_wf, {"question": question})
        return timed.seconds, timed.checkpoint_seconds


def _row5_size(b: Bench, ef: Any, size: int) -> None:
    sides = QuerySides(b, ef, populate(b, size))
    questions = sample_questions(b, size, b.plan.queries + _WARMUP)
    for q in questions[:_WARMUP]:
        sides.raw(q), sides.flux(q), sides.noop(q)
    t_raw, t_flux, t_ckpt, t_noop, t_noop_ckpt, added = [], [], [], [], [], []
    for i, q in enumerate(questions[_WARMUP:]):
        if i % 2 == 0:
            r = sides.raw(q)
            f, c = sides.flux(q)
        else:
            f, c = sides.flux(q)
            r = sides.raw(q)
        n, nc = sides.noop(q)
        t_raw.append(r)
        t_flux.append(f)
        t_ckpt.append(c)
        t_noop.append(n)
        t_noop_ckpt.append(nc)
        added.append(f - r)
    p50, p95 = percentile(added, 50), percentile(added, 95)
    share = 100 * median(t_ckpt) / p50 if p50 > 0 else float("nan")
    where = f"{size:,} chunks, {len(added)} questions"
    ms = 1000.0
    b.report.add(
        Result(5, "added latency per query, p50", where, ms * p50, " ms", "", "info",
               f"workflow p50 {fmt(ms * median(t_flux))} ms vs raw p50 {fmt(ms * median(t_raw))} ms "
               f"({fmt(median(t_flux) / median(t_raw))}x)")
    )  # fmt: skip
    b.report.add(
        Result(5, "added latency per query, p95", where, ms * p95, " ms", "", "info",
               f"workflow p95 {fmt(ms * percentile(t_flux, 95))} ms vs raw p95 "
               f"{fmt(ms * percentile(t_raw, 95))} ms")
    )  # fmt: skip
    b.report.add(
        Result(5, "share of added latency in Flux checkpoints", where, share, "%", "", "info",
               f"checkpoints p50 {fmt(ms * median(t_ckpt))} ms per query workflow; a workflow with "
               f"one no-op task: p50 {fmt(ms * median(t_noop))} ms, of which checkpoints "
               f"{fmt(ms * median(t_noop_ckpt))} ms")
    )  # fmt: skip


def run_row5(b: Bench) -> None:
    """Row 5: p50/p95 added latency of the query task and its checkpoint share, per size."""
    from flux_chroma.embedding import FastDefaultEmbedding

    ef = FastDefaultEmbedding()
    for size in b.plan.sizes:
        _row5_size(b, ef, size)
    b.report.note(
        5,
        (
            f"- Per question, side by side (order alternating): the raw path embeds the question with "
            f"the fast default model and calls `collection.query(query_embeddings=, n_results={_K})` on "
            "a client built beforehand; the Flux path runs a workflow whose only step is the `query` "
            "task (same model, no cache, k=5), inline like `wf.run()`. Added latency = workflow time "
            "minus raw time for the same question; p50/p95 over all questions."
        ),
        (
            "- Checkpoint share: Flux persists its event log through `ctx.checkpoint()`; the harness "
            "runs the workflow exactly as `wf.run()` does but with that callback timed "
            "(`bench/timing.py`). The share is the median checkpoint time over the median added "
            "latency. A workflow with a single no-op task shows Flux's fixed cost per execution."
        ),
    )
