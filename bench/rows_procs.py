"""Row 7, measured in child processes: multi-process scaling of ingestion against one server."""

from __future__ import annotations

import itertools
import time
from typing import Any

from bench.context import TENANT, Bench
from bench.report import Result, fmt, judge
from bench.workspace import ChildResult, flux_env, launch_child, reap_child, stop_child
from flux_chroma.embedding.onnx_session import threads_per_process

__all__ = ["run_row7"]


def _together(
    b: Bench, kind: str, inputs: list[dict[str, Any]], envs: list[dict[str, str]]
) -> tuple[list[dict[str, Any]], float, float]:
    """Start one child per input, let each load, start them all at once, wait for all.

    Returns:
        ``(the children's outputs, wall seconds from the start to the last finish, the Chroma
        server's CPU seconds meanwhile)``.
    """
    children = []
    try:
        for inp, env in zip(inputs, envs, strict=True):
            children.append(
                (
                    launch_child(kind, {"corpus": str(b.corpus), "input": inp}, env),
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
    outs = [r.output for r in results]
    return outs, max(o["end"] for o in outs) - t0, server1 - server0


def _bounds(n: int, procs: int) -> list[tuple[int, int]]:
    cuts = [round(i * n / procs) for i in range(procs + 1)]
    return list(itertools.pairwise(cuts))


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
    inputs = [
        {
            "tenant": TENANT,
            "collection": name,
            "corpus": str(b.corpus),
            "start": start,
            "stop": stop,
            "batch": b.batch,
            "options": options,
        }
        for start, stop in _bounds(n, procs)
    ]
    envs = [
        {**flux_env(b.ws.work / f"{name}-flux-{i}", b.warm_dir), **(extra_env or {})}
        for i in range(procs)
    ]
    outs, wall, server = _together(b, "scale", inputs, envs)
    b.drop(b.physical(name))
    task = sum(o["output"]["task_seconds"] for o in outs)
    return {
        "docs_s": n / wall,
        "wall": wall,
        "embed_share": sum(o["output"]["embed_seconds"] for o in outs) / task if task else 0.0,
        "client_cores": sum(o["cpu"] for o in outs) / wall,
        "server_cores": server / wall,
        "embedded": sum(o["output"]["embedded"] for o in outs),
        "cache_hits": sum(o["output"]["cache_hits"] for o in outs),
    }


def _model_run(b: Bench, procs: int) -> dict[str, Any]:
    """The model alone: ``procs`` processes embed their share of ``scale_docs`` chunks at once."""
    n = b.plan.scale_docs
    inputs = [{"start": start, "stop": stop, "batch": 256} for start, stop in _bounds(n, procs)]
    outs, wall, _ = _together(b, "model", inputs, [{} for _ in range(procs)])
    return {"docs_s": n / wall, "client_cores": sum(o["cpu"] for o in outs) / wall}


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
        threads = threads_per_process(top)
        shared = _scale_run(b, top, "cold", {"FLUX_CHROMA_EMBED_THREADS": str(threads)})
        b.report.add(
            Result(
                7,
                f"throughput vs {b.plan.procs[0]} process: {top} processes, embedding + insert, "
                f"{threads} thread{'s' if threads > 1 else ''} per session (cores // processes)",
                f"{b.plan.scale_docs:,} chunks",
                shared["docs_s"] / cold1["docs_s"],
                "x",
                "",
                "info",
                f"{fmt(shared['docs_s'])} docs/s with FLUX_CHROMA_EMBED_THREADS={threads} (the "
                "setting docs/deployment.md gives for this many processes); CPU cores busy: clients "
                f"{fmt(shared['client_cores'])}, server {fmt(shared['server_cores'])}",
            )
        )
    if top > 1:
        alone = [(procs, _model_run(b, procs)) for procs in (b.plan.procs[0], top)]
        one, many = alone[0][1], alone[1][1]
        b.report.add(
            Result(
                7,
                f"model alone (no writes, no Flux): {top} processes / {b.plan.procs[0]}",
                f"{b.plan.scale_docs:,} chunks",
                many["docs_s"] / one["docs_s"],
                "x",
                "",
                "info",
                f"{fmt(many['docs_s'])} vs {fmt(one['docs_s'])} docs/s, the default threads (every "
                f"core in each process); CPU cores busy {fmt(many['client_cores'])} vs {fmt(one['client_cores'])}",
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
            "- cold: no embedding cache, so every process embeds. Nothing is set in the children's "
            "environment: each ONNX session uses every core (the default; processes do not "
            "coordinate); goal: the most processes keep at least 0.95x the docs/s of one "
            "(issue 11). The extra cold row gives each session its share instead, "
            "`FLUX_CHROMA_EMBED_THREADS` = max(1, cores // processes), as docs/deployment.md "
            "advises (`python -m bench.embed_threads` measures the model alone). warm: every text is a cache hit, so only the write "
            "path remains; every child's cache hits are checked (a lookup that times out on the "
            "cache's SQLite lock would be a miss and re-embed). The model-alone row runs the same "
            "split with only the model (the same chunks, one `embed` call per ingestion batch, no "
            "writes, no Flux): the ceiling the ingesting processes can reach."
        ),
        (
            "- The figure is docs/s relative to 1 process of the same mode. Bottleneck: the embedding "
            "share is the receipts' `embed_seconds` over the task `seconds`; CPU cores busy are CPU "
            "seconds over wall time, for the clients (their own `getrusage` over the ingest) and the "
            "server (`/proc/<pid>/stat` utime+stime)."
        ),
    )
    b.report.note(7, _bottleneck(results, cores))
