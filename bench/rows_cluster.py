"""Row 11: one ingestion job across a Flux cluster on this host, and the dispatch cost per unit.

A PostgreSQL-backed Flux server with 1, 2 or 3 workers (:class:`bench.fleet.Fleet`, a fresh one
for each count), the job submitted as ``flux-chroma/ingest_job`` (registered from
``flux_chroma/ingest/workflow.py``) with ``parallel`` = workers, so its units run as
``flux-chroma/ingest_unit`` child executions.
"""

from __future__ import annotations

import time
from datetime import datetime
from statistics import median
from typing import Any

from bench.context import Bench
from bench.jobs import check_written, corpus_file, jsonl_job
from bench.report import Result, fmt, ratio_result
from bench.workspace import ROOT

__all__ = ["run_row11", "unit_overheads"]

_GUARD = 900.0  # seconds; stops a hung job, not a measurement
OVERHEAD_BATCHES = 24
OVERHEAD_PARALLEL = 2


def _submit(fleet: Any, job: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Submit the job, wait for it; (seconds from submission to COMPLETED, the execution)."""
    start = time.perf_counter()
    execution = fleet.wait_terminal(fleet.submit("flux-chroma/ingest_job", job), _GUARD)
    seconds = time.perf_counter() - start
    if execution.get("state") != "COMPLETED":
        raise RuntimeError(
            f"row 11: job {job['collection']} ended {execution.get('state')}: {execution.get('output')}"
        )
    return seconds, execution


def _time(value: Any) -> float:
    return datetime.fromisoformat(str(value)).timestamp()


def _value(event: dict[str, Any]) -> Any:
    """An event's value, unwrapped from Flux's output-storage envelope."""
    value = event.get("value")
    if isinstance(value, dict) and "storage_type" in value:
        return (value.get("metadata") or {}).get("value")
    return value


def unit_overheads(events: list[dict[str, Any]], report: dict[str, Any]) -> list[float]:
    """Per unit: its wall time seen by the parent minus the seconds of its batches.

    The unit's wall time runs from the parent's ``call`` task start (dispatch) to its
    ``await_unit`` task completion (the parent has the unit's receipts).

    Args:
        events: The parent execution's events (``GET /executions/{id}?detailed=true``).
        report: The job's report (``batch_timings`` name the child execution of each batch).

    Returns:
        Seconds of overhead per unit.
    """
    batch_seconds: dict[str, float] = {}
    for timing in report["batch_timings"]:
        key = str(timing["execution_id"])
        batch_seconds[key] = batch_seconds.get(key, 0.0) + float(timing["seconds"])
    started = {e["source_id"]: e for e in events if e["type"] == "TASK_STARTED"}
    done = {e["source_id"]: e for e in events if e["type"] == "TASK_COMPLETED"}
    out = []
    for child, seconds in batch_seconds.items():
        call = next((s for s, e in done.items() if _value(e) == child), None)
        wait = next(
            (
                s
                for s, e in started.items()
                if e.get("name") == "await_unit"
                and isinstance(e.get("value"), dict)
                and e["value"].get("execution_id") == child
            ),
            None,
        )
        if call is None or wait is None or call not in started or wait not in done:
            continue
        out.append(_time(done[wait]["time"]) - _time(started[call]["time"]) - seconds)
    return out


def run_row11(b: Bench) -> None:
    """Row 11: cluster docs/s with 1, 2, 3 workers (real model) and the dispatch overhead per unit."""
    from bench.fleet import Fleet
    from bench.stand_in import hash_spec

    n = min(b.plan.cluster_docs, max(b.plan.sizes))
    path = corpus_file(b, n)
    batch = max(1, min(b.batch, -(-n // 16)))  # 16 batches: two units per slot for 3 workers
    rates: list[tuple[int, float, dict[str, Any]]] = []
    overhead: list[float] = []
    per_unit_inline, units, batch_s = 0.0, 0, 0.0
    for workers in b.plan.cluster_workers:
        # A fleet per worker count: LocalFleet gives each of N workers its share of the cores
        # (FLUX_CHROMA_EMBED_THREADS, as docs/deployment.md advises), set when they start.
        fleet = Fleet(b.ws.work / f"r11-fleet-{workers}", b.url, preload=(ROOT, "bench.stand_in"))
        try:
            started = time.perf_counter()
            fleet.start(workers)
            print(
                f"row 11: {workers} worker(s) up in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
            if not b.plan.quick:  # quick: no warm-up job, the measured one pays the first use
                warm = corpus_file(b, min(n, 4 * workers))
                _submit(fleet, jsonl_job(b, f"r11-warm-{workers}", warm, 1, workers))
                b.drop(b.physical(f"r11-warm-{workers}"))
            name = f"r11-w{workers}"
            seconds, execution = _submit(fleet, jsonl_job(b, name, path, batch, workers))
            b.drop(b.physical(name))
            report = execution["output"]
            check_written(11, n, report)
            rates.append((workers, n / seconds, report))
            if workers == b.plan.cluster_workers[-1]:
                overhead, per_unit_inline, units, batch_s = _overhead(
                    b, fleet, n, path, hash_spec()
                )
        finally:
            fleet.stop()
    _report(b, n, batch, rates, overhead, per_unit_inline, units, batch_s)


def _overhead(
    b: Bench, fleet: Any, n: int, path: str, ef: dict[str, Any]
) -> tuple[list[float], float, int, float]:
    """The same trivial job (``n`` chunks of ``path``) through the server and inline; per-unit
    overhead through the server."""
    from flux_chroma.ingest import run_ingest

    batch = max(1, -(-n // OVERHEAD_BATCHES))
    _, execution = _submit(fleet, jsonl_job(b, "r11-ovh", path, batch, OVERHEAD_PARALLEL, ef))
    b.drop(b.physical("r11-ovh"))
    detail = fleet.execution(str(execution["execution_id"]), detailed=True)
    overheads = unit_overheads(detail.get("events") or [], execution["output"])
    units = len({t["execution_id"] for t in execution["output"]["batch_timings"]})
    batch_s = median(float(t["seconds"]) for t in execution["output"]["batch_timings"])
    start = time.perf_counter()
    ctx = run_ingest(jsonl_job(b, "r11-ovh-inline", path, batch, OVERHEAD_PARALLEL, ef))
    inline = time.perf_counter() - start
    b.drop(b.physical("r11-ovh-inline"))
    if not ctx.has_succeeded:
        raise RuntimeError(f"row 11: inline job failed: {ctx.output!r}")
    return overheads, inline * OVERHEAD_PARALLEL / max(units, 1), units, batch_s


def _report(
    b: Bench,
    n: int,
    batch: int,
    rates: list[tuple[int, float, dict[str, Any]]],
    overhead: list[float],
    per_unit_inline: float,
    units: int,
    batch_s: float,
) -> None:
    cores = b.report.meta.get("machine", {}).get("cores", "?")
    base = rates[0][1] if rates else 0.0
    for workers, docs_s, report in rates:
        writers = sorted({str(t.get("worker")) for t in report["batch_timings"]})
        last = workers == max(w for w, _, _ in rates) and workers > rates[0][0]
        b.report.add(
            ratio_result(
                11,
                f"cluster job docs/s, {workers} worker{'s' if workers > 1 else ''} / {rates[0][0]} "
                f"(parallel={workers}, default model)",
                f"{n:,} chunks",
                docs_s / base,
                f"{fmt(docs_s)} docs/s; {report['batches']} batches written by {len(writers)} "
                f"worker(s) ({', '.join(writers)}); embedding {fmt(report['embed_seconds'])} s "
                f"of the batches' time; {cores} cores on the host",
                (">=", 0.95, ">= 0.95 (no loss)") if last else None,
            )
        )
    if overhead:
        per_unit = median(overhead)
        b.report.add(
            Result(
                11,
                "dispatch overhead per unit through the Flux server (median)",
                f"{units} units",
                per_unit,
                " s",
                "",
                "info",
                f"unit wall seen by the parent minus its batches' time, {len(overhead)} units of about "
                f"{fmt(OVERHEAD_BATCHES / max(units, 1), 2)} batches (bench-hash embedder, median batch "
                f"{fmt(batch_s)} s); inline the same job takes {fmt(per_unit_inline)} s per unit in all; "
                f"range {fmt(min(overhead))}-{fmt(max(overhead))} s",
            )
        )
    _explain(b, rates, overhead)
    b.report.note(
        11,
        (
            "- For each worker count, a fresh fleet: a throwaway PostgreSQL (`flux_chroma/local_fleet/postgres.py`), "
            "a Flux server on it (event dispatch mode) and 1, 2 or 3 `flux start worker` processes on this host "
            "(`bench/fleet.py`, shared with the cluster tests). `flux_chroma/ingest/workflow.py` is "
            "registered; the job is submitted with `flux workflow run flux-chroma/ingest_job ... "
            f"--mode async` and polled until COMPLETED. {n:,} corpus chunks, batches of {batch}, the "
            "default model, no embedding cache, `parallel` = workers (1 worker: `parallel=1`, "
            "today's single-worker job; more: units as `flux-chroma/ingest_unit` child executions "
            "placed by the server). "
            + (
                "--quick: no warm-up job, so the measured job includes first-use costs. "
                if b.plan.quick
                else "Before each measured job a small warm-up job lets the workers load the model. "
            )
            + "docs/s = chunks / (submission to COMPLETED)."
        ),
        (
            f"- This host has {cores} cores and every worker embeds on them: more workers on one "
            "host cannot add embedding capacity (`LocalFleet` gives each of N workers "
            "`FLUX_CHROMA_EMBED_THREADS` = max(1, cores // N)). The figures that matter here "
            'are "no loss" (more '
            "workers and the dispatch do not slow the job down) and the overhead per unit; on N "
            "hosts the embedding capacity grows with N."
        ),
        (
            f"- Dispatch overhead: a job of {OVERHEAD_BATCHES} batches with `parallel="
            f"{OVERHEAD_PARALLEL}` and the `bench-hash` embedder (no model: the batches cost "
            "little, so the dispatch shows). From the parent's event log, per unit: time from its "
            "`call` task's start (the child execution is created) to its `await_unit` task's "
            "completion (the parent holds the receipts), minus the `seconds` of the unit's batches. "
            "It includes the server's placement, the worker's claim, and the parent's polling of the "
            "child (a cheap status call, first after 50 ms, then at intervals growing 1.25x to 1 s). Beside it, the same job inline (`run_ingest`, units in one "
            "process): wall time x parallel / units."
        ),
    )


def _explain(
    b: Bench, rates: list[tuple[int, float, dict[str, Any]]], overhead: list[float]
) -> None:
    """When more workers lost throughput: where the time went."""
    if len(rates) < 2 or rates[-1][1] / rates[0][1] >= 0.95:
        return
    first, last = rates[0], rates[-1]
    units = len({t["execution_id"] for t in last[2]["batch_timings"]})
    spent = units * median(overhead) / last[0] if overhead else 0.0
    b.report.note(
        11,
        (
            f"- Goal missed: {last[0]} workers reached {fmt(last[1] / first[1])}x the docs/s of "
            f"{first[0]}. The batches' embedding time, summed over the workers, went from "
            f"{fmt(first[2]['embed_seconds'])} s to {fmt(last[2]['embed_seconds'])} s for the same "
            "chunks: the workers' ONNX sessions share this host's cores, so each embeds more "
            f"slowly. Dispatch adds about {fmt(spent)} s of wall time ({units} units x the median "
            f"overhead / {last[0]} in flight) to a job of {fmt(last[2]['chunks'] / last[1])} s. "
            "Any other load on the machine during the run weighs on both."
        ),
    )
