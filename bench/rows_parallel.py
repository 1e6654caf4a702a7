"""Row 10: an ingestion job inline (``run_ingest``) with ``parallel`` 1, 2 and 4 units in flight.

The embedder is a stand-in for a remote embedding API (:mod:`bench.stand_in`): a fixed
latency per call and deterministic vectors, so the figure is what ``parallel`` buys when
the embedding function waits on I/O instead of using the host's cores.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from bench.context import Bench
from bench.jobs import check_written, corpus_file, jsonl_job
from bench.report import fmt, ratio_result

__all__ = ["run_row10", "LATENCY", "PARALLEL"]

LATENCY = 0.1
"""Seconds the stand-in remote embedder sleeps per call (one call per batch)."""
PARALLEL = (1, 2, 4)
BATCHES = 64
"""Batches per job (each one embedder call): enough units for 4 slots to stay busy."""


def _job(b: Bench, name: str, path: str, batch: int, parallel: int) -> dict[str, Any]:
    from bench.stand_in import remote_spec

    return jsonl_job(b, name, path, batch, parallel, remote_spec(LATENCY))


def _run(b: Bench, job: dict[str, Any]) -> tuple[float, dict[str, Any], float, float]:
    """Run the job inline; (seconds, report, CPU seconds of this process, of the server)."""
    from flux_chroma.ingest import run_ingest

    server0, cpu0 = b.ws.server_cpu(), time.process_time()
    start = time.perf_counter()
    ctx = run_ingest(job)
    seconds = time.perf_counter() - start
    cpu, server = time.process_time() - cpu0, b.ws.server_cpu() - server0
    if not ctx.has_succeeded:
        raise RuntimeError(f"row 10: ingestion job failed: {ctx.output!r}")
    return seconds, ctx.output, cpu, server


def _raw_run(b: Bench, n: int, batch: int, threads: int) -> float:
    """The job's requests per batch from a bare ``chromadb.HttpClient``, ``threads`` at a time.

    Per batch, as an ingestion batch does: ask what the server holds (``get`` with metadatas),
    embed (the same stand-in: sleep, hash vectors), ``upsert`` with a content hash in the
    metadata, verify the ids (``get``). No Flux, no flux-chroma. Returns docs/s.
    """
    from bench.corpus import load_docs
    from bench.stand_in import RemoteStandIn

    docs = load_docs(str(b.corpus), 0, n)
    batches = [docs[start : start + batch] for start in range(0, n, batch)]
    ef = RemoteStandIn(LATENCY)
    name = f"r10-raw-{threads}"
    collection = b.client.create_collection(name, embedding_function=None)
    lock = threading.Lock()
    failures: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not batches or failures:
                    return
                part = batches.pop(0)
            try:
                ids = [d["id"] for d in part]
                texts = [d["text"] for d in part]
                collection.get(ids=ids, include=["metadatas"])
                vectors = ef(texts)
                metadatas = [
                    {
                        **d.get("metadata", {}),
                        "fc_hash": hashlib.sha256(
                            json.dumps([d["text"], d.get("metadata")]).encode()
                        ).hexdigest()[:32],
                    }
                    for d in part
                ]
                collection.upsert(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
                collection.get(ids=ids, include=[])
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                failures.append(exc)

    start = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - start
    written = collection.count()
    b.client.delete_collection(name)
    if failures:
        raise failures[0]
    if written != n:
        raise RuntimeError(f"row 10 raw side: expected {n} records, found {written}")
    return n / seconds


def run_row10(b: Bench) -> None:
    """Row 10: job docs/s inline with parallel 1/2/4, stand-in remote embedder."""
    import bench.stand_in  # noqa: F401 - registers bench-remote in this process

    n = min(b.plan.parallel_docs, max(b.plan.sizes))
    batch = max(1, -(-n // BATCHES))
    path = corpus_file(b, n)
    _run(b, _job(b, "r10-warmup", corpus_file(b, min(n, 2 * batch)), batch, 2))  # first-use costs
    b.drop(b.physical("r10-warmup"))
    base = 0.0
    per_batch: dict[int, tuple[float, float, float]] = {}
    for parallel in PARALLEL:
        name = f"r10-p{parallel}"
        seconds, out, cpu, server = _run(b, _job(b, name, path, batch, parallel))
        b.drop(b.physical(name))
        check_written(10, n, out)
        docs_s = n / seconds
        base = base or docs_s
        batches = int(out["batches"])
        floor = batches * LATENCY / parallel  # the embedder's sleeps alone, perfectly overlapped
        goal = parallel == max(PARALLEL)
        per_batch[parallel] = (seconds / batches, cpu / batches, server / batches)
        b.report.add(
            ratio_result(
                10,
                f"job docs/s inline, parallel={parallel} / parallel=1 (remote embedder, "
                f"{fmt(LATENCY * 1000)} ms per call)",
                f"{n:,} chunks",
                docs_s / base,
                f"{fmt(docs_s)} docs/s; {fmt(seconds)} s for {batches} batches of {batch} "
                f"(embedder sleeps alone: {fmt(floor)} s); CPU per batch: this process "
                f"{fmt(1000 * cpu / batches)} ms, Chroma server {fmt(1000 * server / batches)} ms",
                (">=", 3.5, ">= 3.5") if goal else None,
            )
        )
    top = max(PARALLEL)
    raw1, raw_top = _raw_run(b, n, batch, 1), _raw_run(b, n, batch, top)
    b.report.add(
        ratio_result(
            10,
            f"the same requests from a bare chromadb.HttpClient (no Flux), {top} threads / 1",
            f"{n:,} chunks",
            raw_top / raw1,
            f"{fmt(raw_top)} vs {fmt(raw1)} docs/s; per batch: get, embed (the same stand-in), "
            "upsert, get; what the server and client allow on this host without flux-chroma",
            None,
        )
    )
    _explain(b, base, per_batch, raw_top / raw1)
    b.report.note(
        10,
        (
            f"- One job (`flux_chroma.ingest.run_ingest`, no Flux server) over the first {n:,} corpus "
            f"chunks in {BATCHES} batches, embedded by a stand-in for a remote embedding API "
            f"(`bench/stand_in.py`, `bench-remote`): each call sleeps {fmt(LATENCY * 1000)} ms and returns "
            "hash vectors, so the job waits on I/O, not on the cores. No embedding cache; each run "
            "writes a fresh collection (every chunk embedded and added, checked)."
        ),
        (
            "- `parallel=N` runs N units (shards of consecutive batches) at once in the one process; "
            "each batch is still its own Flux task and checkpoint. The figure is docs/s relative to "
            '`parallel=1`; "embedder sleeps alone" is batches x latency / N, the floor of the job\'s '
            "time if everything else took no time."
        ),
        (
            "- The rest of a batch is CPU: this process's own work (Flux's task and checkpoint, "
            "validation, hashing, the Chroma client's requests; Python, so one unit at a time under "
            "the GIL) and the server's insert. Units overlap only the waiting, so the speed-up is "
            "bounded by (latency + CPU per batch) / CPU per batch; the CPU figures per batch "
            "(`time.process_time()` of this process, the server's utime+stime from `/proc`) are in "
            "the last column. On a machine shared with other work, that CPU time stretches."
        ),
    )


def _explain(
    b: Bench, base: float, per_batch: dict[int, tuple[float, float, float]], raw: float
) -> None:
    """When the goal is missed: the bound that the CPU time per batch puts on the speed-up."""
    top = max(PARALLEL)
    wall1, _, _ = per_batch[PARALLEL[0]]
    wall, cpu, server = per_batch[top]
    ratio = wall1 / wall
    if ratio >= 3.5:
        return
    b.report.note(
        10,
        (
            f"- Goal missed: with {top} units a batch took {fmt(1000 * wall)} ms of wall time "
            f"against {fmt(1000 * wall1)} ms with one ({fmt(1000 * LATENCY)} ms of it the "
            f"embedder's sleep). What does not overlap is CPU: {fmt(1000 * cpu)} ms per batch in "
            f"this process (one unit at a time under the GIL) and {fmt(1000 * server)} ms in the "
            f"Chroma server. On an idle 2-core host the speed-up is bounded by "
            f"{fmt(wall1 / max(cpu, server, wall1 / top))}x (one-unit time per batch over the "
            "largest of the two CPU figures and that time / 4); any other load on the machine "
            "stretches the CPU parts and lowers it further. The same requests from a bare "
            f"`chromadb.HttpClient` in {top} threads, with no Flux and no flux-chroma, reached "
            f"{fmt(raw)}x in this run (row above): the ceiling is the Chroma server's and client's "
            f"on this host, and the job's {fmt(ratio)}x is measured against it. The stand-in's "
            "latency is a fixed 100 ms per call; real remote embedding APIs take longer per call "
            "for batches of this size, which raises the bound."
        ),
    )
