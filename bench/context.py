"""What every row needs: the plan, the corpus file, the server, a raw client and a warm cache."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.corpus import build_corpus, load_docs, write_jsonl
from bench.report import Report
from bench.workspace import Workspace

__all__ = ["Plan", "Bench", "TENANT", "harness_embedder"]

TENANT = "bench"


def harness_embedder() -> Any:
    """The default model for the harness's own embeddings (warming caches, raw-query sides)."""
    from flux_chroma.embedding import FastDefaultEmbedding

    return FastDefaultEmbedding()


@dataclass(frozen=True)
class Plan:
    """Sizes and sample sizes of one run.

    Attributes:
        sizes: Corpus sizes (chunks), ascending.
        rows: Rows to run.
        embed_sample: Row 1: short texts embedded by both embedders (half as many
            200-character chunks too).
        chunk_sample: Rows 1 and 3: 1000-character chunks embedded / ingested both ways.
        naive_sample: Row 3: documents ingested both ways.
        naive_batch: Row 3: documents per workflow run.
        queries: Row 5: questions per size.
        reps: Row 2: repetitions per size (each flux + raw, order alternating).
        scale_docs: Row 7: documents per configuration.
        int8_sample: Row 12: corpus chunks embedded by the fp32 and int8 models (a third as
            many 1000-character chunks too).
        procs: Row 7: process counts.
        serve_calls: Row 8: timed calls per served workflow.
        first_ingest_sample: Row 9: ~1,000-character chunks ingested (and twice as many
            short corpus chunks).
        first_ingest_reps: Row 9: runs per sample.
        rss_sizes: Row 6: corpus sizes of the peak-RSS series (fixed, whatever ``sizes`` says).
        parallel_docs: Row 10: chunks of the inline ``parallel`` job.
        cluster_docs: Row 11: chunks of the cluster job (real model).
        cluster_workers: Row 11: Flux worker counts.
        quick: Quick mode.
    """

    sizes: tuple[int, ...]
    rows: frozenset[int]
    embed_sample: int = 1000
    chunk_sample: int = 300
    naive_sample: int = 300
    naive_batch: int = 100
    queries: int = 100
    reps: int = 3
    scale_docs: int = 3000
    int8_sample: int = 450
    procs: tuple[int, ...] = (1, 2, 4)
    serve_calls: int = 30
    first_ingest_sample: int = 700
    first_ingest_reps: int = 3
    rss_sizes: tuple[int, ...] = (10_000, 50_000, 200_000)
    parallel_docs: int = 1024
    cluster_docs: int = 2000
    cluster_workers: tuple[int, ...] = (1, 2, 3)
    quick: bool = False

    @classmethod
    def quick_plan(cls, sizes: tuple[int, ...], rows: frozenset[int]) -> Plan:
        """Small samples for iterating (figures are noisier)."""
        return cls(
            sizes,
            rows,
            embed_sample=100,
            chunk_sample=40,
            naive_sample=40,
            naive_batch=20,
            queries=30,
            reps=2,
            scale_docs=min(600, max(sizes)),
            int8_sample=60,
            serve_calls=10,
            first_ingest_sample=150,
            first_ingest_reps=1,
            rss_sizes=(2000, 10_000, 40_000),
            parallel_docs=512,
            cluster_docs=600,
            quick=True,
        )

    def reps_for(self, size: int) -> int:
        """Row 2 repetitions at ``size`` (2 from 50k chunks up, to keep the run short)."""
        return min(self.reps, 2) if size >= 50_000 else self.reps


@dataclass
class Bench:
    """State shared by the rows of one run.

    Attributes:
        ws: The workspace (folders and server).
        plan: The plan.
        report: The report being filled.
        corpus: Path of the corpus file (largest size).
        batch: Documents per upsert / per ``embed_and_add`` call (the server's max batch size).
        warm_dir: Embedding cache folder that holds every corpus vector once warmed.
    """

    ws: Workspace
    plan: Plan
    report: Report
    corpus: Path = Path()
    batch: int = 0
    warm_dir: Path = Path()
    _warm_upto: int = 0
    _vectors: Any = None
    _client: Any = None
    populated: dict[int, str] = field(default_factory=dict)

    def setup(self) -> None:
        """Build and write the corpus, start the server, read the max batch size."""
        start = time.perf_counter()
        chunks = build_corpus(max(self.plan.sizes))
        self.corpus = self.ws.work / "corpus.jsonl"
        write_jsonl(chunks, self.corpus)
        load_docs(str(self.corpus), 0, 1)  # read once; workflows then take it from memory
        print(f"corpus: {len(chunks):,} chunks in {time.perf_counter() - start:.1f} s", flush=True)
        self.ws.start_server()
        self.batch = int(self.client.get_max_batch_size())
        self.warm_dir = self.ws.work / "cache-warm"
        from bench import flows

        for wf in (
            flows.corpus_ingest_wf,
            flows.docs_ingest_wf,
            flows.naive_ingest_wf,
            flows.query_wf,
            flows.noop_wf,
        ):
            wf._ensure_registered()  # a workflow's first run would otherwise pay for registration

    @property
    def url(self) -> str:
        """The server URL."""
        return str(self.ws.server.url)

    @property
    def client(self) -> Any:
        """A plain chromadb HttpClient (the baselines' client)."""
        if self._client is None:
            import chromadb

            self._client = chromadb.HttpClient(host="127.0.0.1", port=self.ws.server.port)
        return self._client

    def physical(self, name: str) -> str:
        """The Chroma name of a flux-chroma collection of the bench tenant."""
        return f"{TENANT}__{name}"

    def ingest_input(
        self, collection: str, size: int, options: dict[str, Any], count: bool = False
    ) -> dict[str, Any]:
        """The input of ``bench.flows.corpus_ingest_wf``: the first ``size`` corpus chunks into
        ``collection`` of the bench tenant, in batches of :attr:`batch`, with task ``options``."""
        return {
            "tenant": TENANT,
            "collection": collection,
            "corpus": str(self.corpus),
            "stop": size,
            "batch": self.batch,
            "options": options,
            "count": count,
        }

    def drop(self, *names: str) -> None:
        """Delete Chroma collections by their physical names (missing ones are ignored)."""
        for name in names:
            with contextlib.suppress(Exception):  # cleanup only
                self.client.delete_collection(name)

    def mark_warm(self, size: int) -> None:
        """Record that :attr:`warm_dir` holds the vectors of the first ``size`` chunks."""
        self._warm_upto = max(self._warm_upto, size)

    def warm(self, size: int) -> None:
        """Make sure :attr:`warm_dir` holds the vectors of the first ``size`` chunks."""
        if self._warm_upto >= size:
            return
        from flux_chroma.embedding import CachingEmbedder, EmbeddingCache

        start = time.perf_counter()
        texts = [d["text"] for d in load_docs(str(self.corpus), 0, size)]
        with EmbeddingCache(self.warm_dir) as cache:
            CachingEmbedder(harness_embedder(), cache=cache).embed(texts)
        self.mark_warm(size)
        print(
            f"warmed the embedding cache with {size:,} chunks in {time.perf_counter() - start:.1f} s",
            flush=True,
        )

    def vectors(self, size: int) -> np.ndarray:
        """The first ``size`` corpus vectors (read from the warm cache once, then sliced)."""
        top = max(self.plan.sizes)
        if self._vectors is None:
            from flux_chroma.embedding import CachingEmbedder, EmbeddingCache

            self.warm(top)
            texts = [d["text"] for d in load_docs(str(self.corpus))]
            with EmbeddingCache(self.warm_dir) as cache:
                result = CachingEmbedder(
                    harness_embedder(), cache=cache, count_tokens=False
                ).embed(texts)
            if result.misses:
                raise RuntimeError(f"warm cache missed {result.misses} vectors")
            self._vectors = result.vectors
        return np.asarray(self._vectors[:size])
