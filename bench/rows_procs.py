"""Rows 6 and 7, measured in child processes: ingestion-job state and memory, multi-process scaling."""

from __future__ import annotations

import time
from typing import Any

from bench.context import TENANT, Bench
from bench.corpus import load_docs
from bench.report import Result, fmt, judge
from bench.workspace import ChildResult, flux_env, launch_child, reap_child, run_child, stop_child

__all__ = ["run_row6", "run_row7"]


def _corpus_file(b: Bench, size: int) -> str:
    """A JSONL file holding exactly the first ``size`` chunks (an ingestion job reads all of it)."""
    path = b.ws.work / f"corpus-{size}.jsonl"
    if not path.exists():
        import json

        with open(path, "w", encoding="utf-8") as out:
            out.writelines(
                json.dumps(doc, ensure_ascii=False) + "\n"
                for doc in load_docs(str(b.corpus), 0, size)
            )
    return str(path)


def run_row6(b: Bench) -> None:
    """Row 6: Flux state bytes per chunk and peak RSS of an ingestion job, per corpus size."""
    try:
        import flux_chroma.ingest  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - not built yet: report it, do not fail the run
        for size in b.plan.sizes:
            b.report.add(
                Result(
                    6,
                    "Flux state bytes per chunk",
                    f"{size:,} chunks",
                    None,
                    "",
                    "< 200",
                    "TODO: flux_chroma.ingest not importable",
                    f"{type(exc).__name__}: {exc}",
                )
            )
        b.report.note(
            6, "- TODO: needs the reference-driven ingestion workflow (`flux_chroma.ingest`)."
        )
        return
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
        params = {
            "tenant": TENANT,
            "collection": f"r6-{size}",
            "corpus": _corpus_file(b, size),
            "options": {"cache": True, "cache_dir": str(b.warm_dir)},
        }
        home = b.ws.work / f"r6-flux-{size}"
        got = run_child("ingest_job", params, flux_env(home, b.warm_dir))
        b.drop(b.physical(f"r6-{size}"))
        out = got.output
        chunks = int(out["report"]["chunks"])
        per_chunk = (out["db_after"] - out["db_before"]) / chunks
        logical = out["logical"]
        mem = out.get("memory", {})
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
        b.report.add(
            Result(
                6,
                "peak RSS of the ingesting process",
                f"{size:,} chunks",
                out["peak_rss_mib"],
                " MiB",
                "flat",
                "info",
                f"job {fmt(out['seconds'])} s, {fmt(chunks / out['seconds'])} chunks/s; RSS at start "
                f"{fmt(mem.get('start_rss_mib'))} MiB, high-water mark when planning ended "
                f"{fmt(mem.get('planned_hwm_mib'))} MiB, after the batches {fmt(mem.get('batches_hwm_mib'))} MiB "
                f"(at the end: anonymous {fmt(mem.get('end_rss_anon_mib'))} MiB, mapped files "
                f"{fmt(mem.get('end_rss_file_mib'))} MiB)",
            )
        )
        rss.append((size, out["peak_rss_mib"]))
        mems.append(mem)
    if len(rss) >= 2:
        growth = rss[-1][1] / rss[0][1]
        b.report.add(
            Result(
                6,
                "peak RSS, largest / smallest corpus",
                f"{rss[0][0]:,} -> {rss[-1][0]:,} chunks",
                growth,
                "x",
                "<= 1.10",
                judge(growth, "<=", 1.10),
                f"{fmt(rss[0][1])} -> {fmt(rss[-1][1])} MiB for {rss[-1][0] / rss[0][0]:.0f}x the chunks",
            )
        )
        if growth > 1.10:
            _explain_rss(b, rss, mems)


def _explain_rss(b: Bench, rss: list[tuple[int, float]], mems: list[dict[str, float]]) -> None:
    """Say which phase and which kind of memory grew with the corpus."""
    first, last = mems[0], mems[-1]
    extra = rss[-1][0] - rss[0][0]

    def grew(key: str) -> float:
        return float(last.get(key, 0.0)) - float(first.get(key, 0.0))

    planning = (
        ": planning holds memory in proportion to the corpus"
        if grew("planned_hwm_mib") > 0.25 * (rss[-1][1] - rss[0][1])
        else ", so planning is not what grows"
    )
    b.report.note(
        6,
        (
            f"- Goal missed: from {rss[0][0]:,} to {rss[-1][0]:,} chunks the peak grew by "
            f"{fmt(rss[-1][1] - rss[0][1])} MiB ({fmt(2**20 * (rss[-1][1] - rss[0][1]) / extra)} bytes "
            f"per extra chunk). The high-water mark when planning ended grew by "
            f"{fmt(grew('planned_hwm_mib'))} MiB{planning}. "
            f"At the end of the job, anonymous memory (Python heap, native buffers) had grown by "
            f"{fmt(grew('end_rss_anon_mib'))} MiB and mapped files (the model, SQLite files mapped "
            f"by the embedding cache and Flux) by {fmt(grew('end_rss_file_mib'))} MiB."
        ),
    )


def _scale_run(
    b: Bench, procs: int, mode: str, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Ingest ``scale_docs`` chunks with ``procs`` processes at once into a fresh collection."""
    from flux_chroma.chroma.collections import Target, open_collection
    from flux_chroma.chroma.naming import Namespace
    from flux_chroma.chroma.settings import ConnectionSettings

    n = b.plan.scale_docs
    name = f"r7-{mode}-{procs}{'-env' if extra_env else ''}"
    open_collection(Target(ConnectionSettings.resolve(b.url), Namespace(TENANT), name), create=True)
    options = {"cache": False} if mode == "cold" else {"cache": True, "cache_dir": str(b.warm_dir)}
    bounds = [round(i * n / procs) for i in range(procs + 1)]
    children = []
    try:
        for i in range(procs):
            inp = {
                "tenant": TENANT,
                "collection": name,
                "corpus": str(b.corpus),
                "start": bounds[i],
                "stop": bounds[i + 1],
                "batch": b.batch,
                "options": options,
            }
            env = {**flux_env(b.ws.work / f"{name}-flux-{i}", b.warm_dir), **(extra_env or {})}
            children.append(
                (
                    launch_child("scale", {"corpus": str(b.corpus), "input": inp}, env),
                    time.perf_counter(),
                )
            )
        for proc, _ in children:
            assert proc.stdout is not None
            while (line := proc.stdout.readline()) and line.strip() != "ready":
                pass
            if not line:
                raise RuntimeError(f"row 7 child {proc.pid} exited before it was ready")
        server0, t0 = b.ws.server_cpu(), time.time()
        for proc, _ in children:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results: list[ChildResult] = [reap_child(proc, started) for proc, started in children]
        server1 = b.ws.server_cpu()
    finally:
        for proc, _ in children:
            stop_child(proc)
    b.drop(b.physical(name))
    outs = [r.output for r in results]
    wall = max(o["end"] for o in outs) - t0
    task = sum(o["output"]["task_seconds"] for o in outs)
    return {
        "docs_s": n / wall,
        "wall": wall,
        "embed_share": sum(o["output"]["embed_seconds"] for o in outs) / task if task else 0.0,
        "client_cores": sum(o["cpu"] for o in outs) / wall,
        "server_cores": (server1 - server0) / wall,
        "embedded": sum(o["output"]["embedded"] for o in outs),
        "cache_hits": sum(o["output"]["cache_hits"] for o in outs),
    }


def _bottleneck(results: list[tuple[str, int, dict[str, Any]]], cores: Any) -> str:
    """One sentence per mode saying where the time goes at the highest process count."""
    lines = []
    for mode in ("cold", "warm"):
        runs = [(p, g) for m, p, g in results if m == mode]
        if not runs:
            continue
        procs, got = max(runs, key=lambda r: r[0])
        best = max(runs, key=lambda r: r[1]["docs_s"])
        busy = got["client_cores"] + got["server_cores"]
        if got["embed_share"] >= 0.5:
            where = (
                f"client embedding ({fmt(100 * got['embed_share'])}% of task time is the model; clients "
                f"keep {fmt(got['client_cores'])} cores busy, the server {fmt(got['server_cores'])})"
            )
        elif got["server_cores"] >= got["client_cores"]:
            where = (
                f"server insertion (server {fmt(got['server_cores'])} cores busy vs clients "
                f"{fmt(got['client_cores'])})"
            )
        else:
            where = (
                f"the client write path (clients {fmt(got['client_cores'])} cores busy vs server "
                f"{fmt(got['server_cores'])})"
            )
        if isinstance(cores, int) and busy < 0.7 * cores:
            where += (
                f"; only {fmt(busy)} of {cores} cores were busy in total, so the processes also "
                "waited (on each other, on the server's write path, or on other load on the machine)"
            )
        lines.append(
            f"- Bottleneck, {mode} ({procs} processes): {where}. Best: {best[0]} "
            f"process{'es' if best[0] > 1 else ''}, {fmt(best[1]['docs_s'])} docs/s."
        )
    return "\n".join(lines)


def run_row7(b: Bench) -> None:
    """Row 7: 1, 2 and 4 ingesting processes against one server, cold and warm embedding cache."""
    b.warm(b.plan.scale_docs)
    cores = b.report.meta.get("machine", {}).get("cores", "?")
    results: list[tuple[str, int, dict[str, Any]]] = []
    for mode in ("cold", "warm"):
        base = None
        for procs in b.plan.procs:
            got = _scale_run(b, procs, mode)
            base = base or got["docs_s"]
            what = "embedding + insert" if mode == "cold" else "insert only (warm cache)"
            # Issue 11 item 4: the most processes on one host keep >= 0.95x one's cold docs/s.
            goal = mode == "cold" and procs == max(b.plan.procs) and procs > 1
            b.report.add(
                Result(
                    7,
                    f"throughput vs {b.plan.procs[0]} process: {procs} process{'es' if procs > 1 else ''}, {what}",
                    f"{b.plan.scale_docs:,} chunks",
                    got["docs_s"] / base,
                    "x",
                    ">= 0.95" if goal else "",
                    judge(got["docs_s"] / base, ">=", 0.95) if goal else "info",
                    f"{fmt(got['docs_s'])} docs/s; embedding {fmt(100 * got['embed_share'])}% of task time; CPU "
                    f"cores busy: clients {fmt(got['client_cores'])}, server {fmt(got['server_cores'])} (of {cores})"
                    + (
                        f"; cache hits {got['cache_hits']:,} of {b.plan.scale_docs:,}"
                        if mode == "warm"
                        else ""
                    ),
                )
            )
            results.append((mode, procs, got))
    top = max(b.plan.procs)
    if top > 1 and isinstance(cores, int):
        cold1 = next(g for m, p, g in results if m == "cold" and p == b.plan.procs[0])
        every = _scale_run(b, top, "cold", {"FLUX_CHROMA_EMBED_THREADS": str(cores)})
        b.report.add(
            Result(
                7,
                f"throughput vs {b.plan.procs[0]} process: {top} processes, embedding + insert, "
                f"every session on all {cores} cores",
                f"{b.plan.scale_docs:,} chunks",
                every["docs_s"] / cold1["docs_s"],
                "x",
                "",
                "info",
                f"{fmt(every['docs_s'])} docs/s with FLUX_CHROMA_EMBED_THREADS={cores} (what every "
                "process did before the thread budget); CPU cores busy: clients "
                f"{fmt(every['client_cores'])}, server {fmt(every['server_cores'])}",
            )
        )
    b.report.note(
        7,
        (
            f"- {b.plan.scale_docs:,} chunks split evenly over 1, 2 or 4 child processes that ingest "
            "into one collection on one server at the same time, each through the `embed_and_add` "
            "workflow with its own Flux home. Every child loads its model and corpus first, then all "
            "start together; docs/s = chunks / (last finish - start)."
        ),
        (
            "- cold: no embedding cache, so every process embeds. Each ONNX session takes its share of "
            "the cores (cores // processes embedding on the host, `flux_chroma/embedding/threads.py`: "
            "the shipped default, nothing set in the children's environment); goal: the most "
            "processes keep at least 0.95x the docs/s of one (issue 11). "
            "the extra cold row pins every session to all cores (`FLUX_CHROMA_EMBED_THREADS`), as "
            "before the budget, side by side. warm: every text is a cache hit, so only the write "
            "path remains; every child's cache hits are checked (a lookup that times out on the "
            "cache's SQLite lock would be a miss and re-embed)."
        ),
        (
            "- The figure is docs/s relative to 1 process of the same mode. Bottleneck: the embedding "
            "share is the receipts' `embed_seconds` over the task `seconds`; CPU cores busy are CPU "
            "seconds over wall time, for the clients (their own `getrusage` over the ingest) and the "
            "server (`/proc/<pid>/stat` utime+stime)."
        ),
    )
    b.report.note(7, _bottleneck(results, cores))
