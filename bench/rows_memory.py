"""Row 6: Flux state bytes per chunk and peak RSS of an ingestion job, measured in child processes."""

from __future__ import annotations

import time
from typing import Any

from bench.context import TENANT, Bench
from bench.corpus import build_corpus, write_jsonl
from bench.jobs import corpus_file
from bench.report import Result, fmt, judge
from bench.workspace import flux_env, run_child

__all__ = ["run_row6"]


COLD_EVERY = 20
"""Row 6's cold rows read every 20th plain text file of /usr/share/doc (about 2,000 chunks)."""

COLD_BATCH_SIZES = (256, 64)
"""``flux-chroma ingest --batch-size`` values of the cold rows."""


def run_row6(b: Bench) -> None:
    """Row 6: Flux state bytes per chunk and peak RSS of an ingestion job, per corpus size."""
    _cold_rows(b)
    b.warm(max(b.plan.sizes))
    b.report.note(
        6,
        (
            "- Each size runs `flux_chroma.ingest.run_ingest` on a JSONL source holding exactly that "
            "many chunks (one record = one chunk), in a child process with a fresh Flux home, using the "
            "warm embedding cache (memory use of the write path does not depend on hits)."
        ),
        (
            "- Bytes per chunk: growth of Flux's SQLite file (write-ahead log folded in with "
            "`wal_checkpoint(TRUNCATE)`, then `VACUUM`) from just after schema creation to the end of the job, "
            "divided by the chunks. The stored-values figure sums the lengths of execution inputs and "
            "outputs and of event values, names and ids."
        ),
        (
            "- Peak RSS: the child's own high-water mark (`VmHWM` in `/proc/self/status`, read at "
            "the end of the job; `ru_maxrss` from `wait4` would also count the parent's size at fork). "
            "Flat means the largest corpus needs at most 10% more than the smallest. To show where "
            "the peak is reached, the child also reads its high-water mark from the job's progress "
            "callback when planning ends and after the last batch."
        ),
    )
    rss: list[tuple[int, float]] = []
    mems: list[dict[str, float]] = []
    for size in b.plan.sizes:
        out = _job_in_child(
            b, f"r6-{size}", corpus_file(b, size), {"cache": True, "cache_dir": str(b.warm_dir)}
        )
        _add_state_bytes(b, size, out)
        _add_rss(b, size, out, "warm cache, default model")
    _note_rss_series(b)
    top = max(b.plan.rss_sizes)
    source = _rss_corpus(b, top)
    for size in b.plan.rss_sizes:
        path = corpus_file(b, size, source)
        out = _job_in_child(b, f"r6-rss-{size}", path, {"cache": False}, embedder=True)
        _add_rss(b, size, out, "bench-hash embedder")
        rss.append((size, out["peak_rss_mib"]))
        mems.append(out.get("memory", {}))
    if len(rss) >= 2:
        growth = rss[-1][1] / rss[0][1]
        b.report.add(
            Result(
                6,
                "peak RSS of a job, largest / smallest corpus",
                f"{rss[0][0]:,} -> {rss[-1][0]:,} chunks",
                growth,
                "x",
                "<= 1.10",
                judge(growth, "<=", 1.10),
                f"{fmt(rss[0][1])} -> {fmt(rss[-1][1])} MiB for {rss[-1][0] / rss[0][0]:.0f}x the chunks "
                f"(bench-hash embedder; {' / '.join(f'{s:,}: {fmt(m)} MiB' for s, m in rss)})",
            )
        )
        _explain_rss(b, rss, mems, met=growth <= 1.10)


def _job_in_child(
    b: Bench, name: str, path: str, options: dict[str, Any], embedder: bool = False
) -> dict[str, Any]:
    """One ingestion job in a child process with a fresh Flux home; its JSON result."""
    params: dict[str, Any] = {
        "tenant": TENANT,
        "collection": name,
        "corpus": path,
        "options": options,
    }
    if embedder:
        from bench.stand_in import hash_spec

        params["embedding_function"] = hash_spec()
    home = b.ws.work / f"{name}-flux"
    got = run_child("ingest_job", params, flux_env(home, b.warm_dir))
    b.drop(b.physical(name))
    return got.output


def _add_state_bytes(b: Bench, size: int, out: dict[str, Any]) -> None:
    chunks = int(out["report"]["chunks"])
    per_chunk = (out["db_after"] - out["db_before"]) / chunks
    logical = out["logical"]
    b.report.add(
        Result(
            6,
            "Flux state bytes per chunk",
            f"{size:,} chunks",
            per_chunk,
            " B",
            "< 200",
            judge(per_chunk, "<", 200),
            f"SQLite file +{out['db_after'] - out['db_before']:,} B; rows: {logical['events']:,} events, "
            f"{(logical['event_bytes'] + logical['executions']) / chunks:.0f} B/chunk of stored values; "
            f"{out['report']['batches']} batches, {out['report']['cache_hits']:,} cache hits",
        )
    )


def _add_rss(b: Bench, size: int, out: dict[str, Any], what: str) -> None:
    chunks = int(out["report"]["chunks"])
    mem = out.get("memory", {})
    b.report.add(
        Result(
            6,
            f"peak RSS of the ingesting process ({what})",
            f"{size:,} chunks",
            out["peak_rss_mib"],
            " MiB",
            "",
            "info",
            f"job {fmt(out['seconds'])} s, {fmt(chunks / out['seconds'])} chunks/s; RSS at start "
            f"{fmt(mem.get('start_rss_mib'))} MiB, high-water mark when planning ended "
            f"{fmt(mem.get('planned_hwm_mib'))} MiB, after the batches {fmt(mem.get('batches_hwm_mib'))} MiB "
            f"(at the end: anonymous {fmt(mem.get('end_rss_anon_mib'))} MiB, mapped files "
            f"{fmt(mem.get('end_rss_file_mib'))} MiB); Flux SQL: largest statement "
            f"{mem.get('flux_sql_max_params', '?')} parameters, {mem.get('flux_sql_statements', '?')} distinct",
        )
    )


def _rss_corpus(b: Bench, top: int) -> str:
    """A JSONL corpus of ``top`` chunks: the run's corpus if it is large enough, else built."""
    if top <= max(b.plan.sizes):
        return str(b.corpus)
    path = b.ws.work / f"corpus-rss-{top}.jsonl"
    if not path.exists():
        start = time.perf_counter()
        write_jsonl(build_corpus(top), path)
        print(f"row 6 corpus: {top:,} chunks in {time.perf_counter() - start:.1f} s", flush=True)
    return str(path)


def _note_rss_series(b: Bench) -> None:
    sizes = ", ".join(f"{s:,}" for s in b.plan.rss_sizes)
    b.report.note(
        6,
        (
            f"- Memory flatness (issue 11, item 3): the same job at {sizes} chunks (fixed sizes, "
            "whatever `--sizes` says; `--rss-sizes` overrides them), embedded by `bench-hash` "
            "(`bench/stand_in.py`: 16 floats from a hash of the text, no model, no embedding cache). "
            "Embedding 200k chunks with the real model would take about half an hour on 2 cores; the "
            "write path's memory (plan, batches, Flux state, client) does not depend on the embedder "
            "beyond the embedder's own model, which is a constant. Without the model the baseline is "
            "smaller, so the ratio is the stricter one. The goal is the largest over the smallest "
            "peak RSS of this series."
        ),
        (
            "- What grew before, and why it no longer does: the batch phase used to add about 100 KB "
            "of native memory per batch, unseen by `tracemalloc` (136 -> 219 MiB from 10,000 to 200,000 "
            "chunks, 1.61x, measured by this row at commit c6ed3af). Flux 0.87's inline checkpoint hands `ContextManager.save` the whole "
            "execution after every task start and end, and Flux asks SQLite which events it already "
            "stores with `event_id IN (?, ...)` over all of them: a new statement at each checkpoint, "
            "two parameters longer per batch. Python's `sqlite3` keeps the last 128 distinct statements "
            "of a connection prepared, and SQLite holds 100-180 bytes per `IN` parameter of a prepared "
            "statement (`python -m bench.sqlite_in_cost`): about 35 MiB at 800 batches (1,600 events), "
            "plus the malloc heap around it. flux-chroma's inline jobs (`run_ingest`, `flux-chroma "
            "ingest`, `run_migration`) now checkpoint as Flux's workers do, with only the events not "
            "stored yet (`flux_chroma/ingest/checkpoints.py`): the largest Flux statement has the same "
            "number of parameters at every size (\"Flux SQL\" in the rows above). A workflow you run "
            "yourself with Flux's `wf.run()` still gets Flux's whole-log checkpoint. What still grows "
            "with batches: Flux's event log in memory (two events per batch, holding the batch "
            "reference and its receipt), the report's per-batch timings, and the pages of Flux's SQLite "
            "file read through its memory map (`mmap_size`, counted as mapped-file RSS)."
        ),
    )


def _explain_rss(b: Bench, rss: list[tuple[int, float]], mems: list[dict[str, float]], met: bool) -> None:
    """Say which phase and which kind of memory grew with the corpus."""
    first, last = mems[0], mems[-1]
    extra = rss[-1][0] - rss[0][0]

    def grew(key: str) -> float:
        return float(last.get(key, 0.0)) - float(first.get(key, 0.0))

    if met:
        planning = ""
    elif grew("planned_hwm_mib") > 0.25 * (rss[-1][1] - rss[0][1]):
        planning = ": planning holds memory in proportion to the corpus"
    else:
        planning = ", so planning is not what grows"
    b.report.note(
        6,
        (
            f"- Goal {'met' if met else 'missed'}: from {rss[0][0]:,} to {rss[-1][0]:,} chunks the peak grew by "
            f"{fmt(rss[-1][1] - rss[0][1])} MiB ({fmt(2**20 * (rss[-1][1] - rss[0][1]) / extra)} bytes "
            f"per extra chunk). The high-water mark when planning ended grew by "
            f"{fmt(grew('planned_hwm_mib'))} MiB{planning}. "
            f"At the end of the job, anonymous memory (Python heap, native buffers) had grown by "
            f"{fmt(grew('end_rss_anon_mib'))} MiB and mapped files (the model, SQLite files mapped "
            f"by the embedding cache and Flux) by {fmt(grew('end_rss_file_mib'))} MiB."
        ),
    )


def _cold_rows(b: Bench) -> None:
    """Cold CLI ingests of real documents: peak RSS at two batch sizes, old embedder beside new."""
    from bench.cold_memory import cold_ingest, copy_corpus

    every = COLD_EVERY * (40 if b.plan.quick else 1)
    folder = b.ws.work / "cold-corpus"
    files = copy_corpus(folder, every)
    b.report.note(
        6,
        (
            f"- Cold ingest (issue 23, item 5): `flux-chroma ingest FOLDER --batch-size B --json` in a "
            f"fresh process with a fresh Flux home and an empty embedding cache, so every chunk is "
            f"embedded by the default model; FOLDER holds every {every}th plain text file of "
            f"/usr/share/doc ({files} files, copied to the run's temp folder; documents this project "
            "did not write). Peak RSS is the process's own `VmHWM` when the command returns "
            "(`bench/cold_memory.py`, which also runs alone: `.venv/bin/python -m bench.cold_memory`). "
            "new: ONNX runs cut to the attention budget (`ATTENTION_BUDGET` in "
            "`flux_chroma/embedding/onnx_session.py`: texts x length^2 <= 4 x 256^2); old: the same "
            "code with the budget lifted in that process (one ONNX run per 32 texts, as before), run "
            "side by side at the first batch size. Goal: at most 600 MiB."
        ),
    )
    old_at: dict[int, dict[str, Any]] = {}
    for k, size in enumerate(COLD_BATCH_SIZES[:1] if b.plan.quick else COLD_BATCH_SIZES):
        sides = ("new", "old") if k == 0 else ("new",)
        got: dict[str, dict[str, Any]] = {}
        for side in sides if k % 2 == 0 else tuple(reversed(sides)):
            name = f"r6-cold-{side}-{size}"
            got[side] = cold_ingest(folder, b.ws.work, b.url, name, size, side)
            b.drop(b.physical(name))
        new = got["new"]
        old = got.get("old")
        if old is not None:
            old_at[size] = old
        speed = new["chunks"] / new["seconds"]
        beside = (
            f"old (budget lifted, same run): {fmt(old['peak_rss_mib'])} MiB, "
            f"{fmt(old['chunks'] / old['seconds'])} chunks/s; "
            if old
            else ""
        )
        b.report.add(
            Result(
                6,
                f"peak RSS of a cold `flux-chroma ingest`, --batch-size {size}",
                f"{new['chunks']:,} chunks",
                new["peak_rss_mib"],
                " MiB",
                "<= 600",
                judge(new["peak_rss_mib"], "<=", 600),
                f"{beside}new: {fmt(speed)} chunks/s, {fmt(new['seconds'])} s; cache hits "
                f"{new['cache_hits']} (cold)",
            )
        )
