"""Row 8: query serving through a real Flux server and worker, on both runners.

Eight workflows (``bench/serving/``): a bare one in a module importing only Flux, a no-op in a
module importing flux_chroma, one running a single no-op Flux task, and the ``query`` task; each
on Flux's default runner (a fresh process per execution) and on ``runner="inprocess"``. Each call
is a ``POST /workflows/serve/{name}/run/sync`` timed from this process, the eight interleaved per
question. The same questions are also asked raw from this process (embed + ``collection.query``):
the work no serving layer can remove.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.context import TENANT, Bench, harness_embedder
from bench.flux_stack import FluxStack
from bench.report import Result, fmt, judge
from bench.rows_query import QuerySides, populate, sample_questions
from bench.timing import median, percentile

__all__ = ["run_row8", "SERVING_COMMAND"]

SERVING_COMMAND = "bash scripts/bench.sh --rows 8 --sizes 1000"
_HERE = Path(__file__).resolve().parent / "serving"
_WARMUP = 2
_GOAL_MS = 10.0
_SIDES = (
    ("bare", "bare workflow (imports Flux only)"),
    ("noop", "no-op workflow importing flux_chroma"),
    ("step", "workflow with one no-op Flux task"),
    ("ask", "query task"),
)


def _time_call(stack: FluxStack, name: str, payload: dict[str, object]) -> float:
    start = time.perf_counter()
    execution = stack.run_sync(f"serve/{name}", payload)
    seconds = time.perf_counter() - start
    if execution.get("state") != "COMPLETED":
        raise RuntimeError(f"row 8: serve/{name} ended {execution.get('state')}: {execution!r}")
    return seconds


def run_row8(b: Bench) -> None:
    """Row 8: p50/p95 of query serving through Flux, per workflow and runner."""
    size = min(b.plan.sizes)
    name = populate(b, size)
    calls = b.plan.serve_calls
    warmup = 1 if b.plan.quick else _WARMUP
    questions = sample_questions(b, size, calls + warmup)
    names = [f"{side}{suffix}" for side, _ in _SIDES for suffix in ("", "_inprocess")]
    times: dict[str, list[float]] = {n: [] for n in names}
    raw_times: list[float] = []
    raw = QuerySides(b, harness_embedder(), name)
    with FluxStack(b.ws.work / "serving", chroma_url=b.url) as stack:
        for module in ("bare.py", "chroma.py"):
            stack.register(_HERE / module)
        for i, question in enumerate(questions):
            payload = {"tenant": TENANT, "collection": name, "question": question, "k": 5}
            order = names if i % 2 == 0 else names[::-1]
            for n in order:
                seconds = _time_call(stack, n, payload)
                if i >= warmup:
                    times[n].append(seconds)
            seconds = raw.raw(question)
            if i >= warmup:
                raw_times.append(seconds)
    ms = 1000.0
    where = f"{size:,} chunks, {calls} calls each"
    for side, label in _SIDES:
        sub, inproc = times[side], times[f"{side}_inprocess"]
        b.report.add(
            Result(8, f"{label}, in-process runner, p50", where, ms * median(inproc), " ms", "",
                   "info",
                   f"p95 {fmt(ms * percentile(inproc, 95))} ms; default runner p50 "
                   f"{fmt(ms * median(sub))} ms, p95 {fmt(ms * percentile(sub, 95))} ms "
                   f"({fmt(median(sub) / median(inproc))}x the in-process p50)")
        )  # fmt: skip
    added = ms * (median(times["ask_inprocess"]) - median(times["noop_inprocess"]))
    flux_task = ms * (median(times["step_inprocess"]) - median(times["noop_inprocess"]))
    raw_ms = ms * median(raw_times)
    own = added - flux_task - raw_ms
    b.report.add(
        Result(8, "query task over the no-op workflow, in-process p50", where, added, " ms",
               f"<= {fmt(_GOAL_MS)} ms", judge(added, "<=", _GOAL_MS, unit=" ms"),
               f"of which Flux's cost of one task {fmt(flux_task)} ms (one no-op task over the "
               f"no-op workflow), the raw query {fmt(raw_ms)} ms (embed + collection.query from "
               f"the harness), the rest {fmt(own)} ms; default runner: "
               f"{fmt(ms * (median(times['ask']) - median(times['noop'])))} ms")
    )  # fmt: skip
    b.report.add(
        Result(8, "query task over one no-op Flux task and the raw query, in-process p50", where,
               own, " ms", "-", "info",
               "what flux-chroma itself adds per served query (tenancy, alias lookup, pin check, "
               "error handling, the hits' conversion); p50 differences, so noise can make it "
               "negative")
    )  # fmt: skip
    b.report.note(
        8,
        (
            "- A real `flux start server` (SQLite state) and one `flux start worker` on this host, "
            "started by `bench/flux_stack.py`; the Chroma server is the harness's. Eight workflows "
            "(`bench/serving/`): `bare` in a module importing only Flux, `noop` in a module "
            "importing flux_chroma, `step` running one no-op Flux task, `ask` running the `query` task (k=5, the fast default model, "
            f"a collection of {size:,} corpus chunks), each declared on Flux's default runner "
            'and with `runner="inprocess"`. Per question the eight run one after another (order '
            "reversed every other question), each a `POST .../run/sync` timed from the harness: "
            "the full round trip through the server and the worker. "
            f"{warmup} warm-up question{'s are' if warmup > 1 else ' is'} not counted. A `step` workflow running one no-op "
            "Flux task shows Flux's own cost of a task (its events go through the server), and "
            "the same question asked raw from the harness (fast default model + "
            "`collection.query`, k=5, a client built beforehand) shows the work no serving layer "
            "can remove: the goal compares the query task with the no-op workflow, so it includes "
            "both."
        ),
        (
            "- The default runner starts a fresh Python process per execution, which imports the "
            "workflow module (and with it flux_chroma, chromadb) and loads the model every time; "
            "the in-process runner keeps them loaded in the worker. That is why "
            "`examples/distributed/workflows.py` serves `kb/ask` and `kb/collections` in-process "
            "and keeps ingestion isolated (docs/deployment.md)."
        ),
        f"- Reproduce this row alone: `{SERVING_COMMAND}`.",
    )
