"""Row 9: a cold first ingest, sequential, and where its wall time goes.

The ingestion job (``run_ingest``: plan, one ``ingest_batch`` task per 256 chunks, verify,
checkpoint) writes a JSONL sample into a fresh collection, cold (no embedding cache, the real
default model). The wall time is split into the model's time (the batches' ``embed_seconds``),
the rest of the batch tasks (server get/upsert/verify, hashing, reading the batch) and what
lies outside them (plan, Flux's execution and checkpoints, cleanup). Two samples: realistic
~1,000-character chunks and the bench corpus's short docstrings.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bench.context import TENANT, Bench
from bench.corpus import build_corpus
from bench.report import Result, fmt
from bench.timing import median

__all__ = ["run_row9"]

_LONG = 1000  # characters per realistic chunk (the ingestion job's default chunk size)


def _samples(b: Bench) -> list[tuple[str, Path, int]]:
    """Write the two JSONL samples; returns ``(label, path, chunks)``."""
    long_n, short_n = b.plan.first_ingest_sample, 2 * b.plan.first_ingest_sample
    chunks = build_corpus(5 * long_n + short_n)
    records: list[dict[str, Any]] = []
    text = ""
    for chunk in chunks[short_n:]:
        if len(text) + 1 + len(chunk.text) > _LONG:
            records.append({"id": f"long-{len(records):05d}", "text": text, "metadata": {"n": len(records)}})
            text = ""
            if len(records) == long_n:
                break
        text = f"{text} {chunk.text}".strip()
    if len(records) < long_n:
        raise RuntimeError(f"row 9: built {len(records)} of {long_n} long records")
    short = [c.as_doc() for c in chunks[:short_n]]
    out = []
    for label, rows in (("long", records), ("short", short)):
        path = b.ws.work / f"row9-{label}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        out.append((label, path, len(rows)))
    return out


def _ingest(b: Bench, path: Path, name: str) -> tuple[float, dict[str, Any]]:
    from flux_chroma.ingest import run_ingest

    job = {
        "tenant": TENANT,
        "collection": name,
        "sources": [{"kind": "jsonl", "path": str(path), "id": "sample"}],
        "options": {"url": b.url},
    }
    start = time.perf_counter()
    ctx = run_ingest(job)
    seconds = time.perf_counter() - start
    if not ctx.has_succeeded:
        raise RuntimeError(f"row 9: ingest {name} failed: {ctx.output}")
    b.drop(b.physical(name))
    return seconds, ctx.output


def run_row9(b: Bench) -> None:
    """Row 9: first ingest wall time and the embedding's share of it, on two samples."""
    samples = _samples(b)
    warm = b.ws.work / "row9-warmup.jsonl"
    warm.write_text("".join(samples[1][1].read_text().splitlines(keepends=True)[:8]))
    _ingest(b, warm, "r9-warmup")  # first-use costs (model load, imports) outside the figures
    reps = b.plan.first_ingest_reps
    for label, path, n in samples:
        wall: list[float] = []
        embed: list[float] = []
        tasks: list[float] = []
        report: dict[str, Any] = {}
        for rep in range(reps):
            seconds, report = _ingest(b, path, f"r9-{label}-{rep}")
            chunks = int(report["chunks"])
            if report["added"] != chunks or report["embedded"] != chunks or report["verified"] != chunks:
                raise RuntimeError(f"row 9: expected all {chunks} chunks added, embedded and verified: {report}")
            wall.append(seconds)
            embed.append(float(report["embed_seconds"]))
            tasks.append(sum(float(t["seconds"]) for t in report["batch_timings"]))
        t, e, k = median(wall), median(embed), median(tasks)
        share = e / t
        chunks = int(report["chunks"])
        records = "records of ~1,000 characters" if label == "long" else "bench corpus chunks"
        b.report.add(
            Result(
                9,
                "first ingest, sequential: embedding share of wall time",
                f"{chunks:,} chunks of {n:,} {records} (sample)",
                share,
                "",
                "",
                "info",
                f"{fmt(t)} s ({fmt(chunks / t)} chunks/s): embedding {fmt(e)} s ({fmt(100 * share)}%), the rest of "
                f"the batch tasks (server get/upsert/verify, hashing, reading) {fmt(max(0.0, k - e))} s "
                f"({fmt(100 * max(0.0, k - e) / t)}%), outside them (plan, Flux execution and checkpoints, "
                f"cleanup) {fmt(max(0.0, t - k))} s ({fmt(100 * max(0.0, t - k) / t)}%); {report['batches']} "
                f"batches; medians of {reps} runs",
            )
        )
    b.report.note(
        9,
        (
            "- The ingestion job (`run_ingest`: plan, one `ingest_batch` task per 256 chunks, "
            "verify-after-write, Flux checkpoint per batch) writes the JSONL sample into a fresh "
            "collection, cold: no embedding cache, the real default model. Each batch is embedded and "
            "written after the previous one committed. A tiny warm-up ingest first (model load, "
            "imports); each figure is the median of the runs."
        ),
        (
            "- Where the time goes: `embedding` is the model's time (sum of the batches' "
            "`embed_seconds`); `the rest of the batch tasks` is the batch tasks' own time minus that; "
            "`outside them` is the wall time minus the batch tasks' time. Only the non-embedding part "
            "can be won back by overlapping work with the model; the `overlap` option that did so "
            "measured 0.90-0.95 of the sequential wall time on 2 cores (the model already keeps both "
            "cores busy; row 9 at commit b312ac8) and was removed before 0.1.0."
        ),
        (
            "- Samples: records of up to 1,000 characters (consecutive corpus docstrings joined; the "
            "job's default token chunker cuts most into two chunks) and short chunks of the bench corpus."
        ),
    )
