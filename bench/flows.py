"""Workflows the benchmark runs (definitions only: Flux re-executes this module).

Inputs are small references (a corpus path and a slice), never document payloads, except
:func:`docs_ingest_wf` and :func:`naive_ingest_wf`, which take documents as input the way
the simplest published examples do.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, task, workflow

from bench.corpus import load_docs
from flux_chroma import embed_and_add, query

_SUMMED = (
    "upserted",
    "added",
    "updated",
    "skipped",
    "embedded",
    "cache_hits",
    "cache_misses",
    "batches",
)


def _add_task(inp: dict[str, Any]) -> Any:
    opts: dict[str, Any] = {"tenant": inp["tenant"], **(inp.get("options") or {})}
    if inp.get("count"):
        from bench.counting import COUNTING_EF

        opts["embedding_function"] = COUNTING_EF
    return embed_and_add.with_options(**opts)


def _summary(receipts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(int(r[k]) for r in receipts) for k in _SUMMED}
    out["calls"] = len(receipts)
    out["embed_seconds"] = sum(float(r["embed_seconds"]) for r in receipts)
    out["task_seconds"] = sum(float(r["seconds"]) for r in receipts)
    return out


@workflow
async def corpus_ingest_wf(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest ``corpus[start:stop]`` with one ``embed_and_add`` call per ``batch`` documents."""
    inp = ctx.input
    add = _add_task(inp)
    docs = load_docs(inp["corpus"], inp.get("start", 0), inp.get("stop"))
    batch = int(inp["batch"])
    receipts = []
    for begin in range(0, len(docs), batch):
        receipts.append(await add(inp["collection"], docs[begin : begin + batch]))
    return _summary(receipts)


@workflow
async def docs_ingest_wf(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest ``input.docs`` with one ``embed_and_add`` call."""
    add = _add_task(ctx.input)
    return _summary([await add(ctx.input["collection"], ctx.input["docs"])])


@task
async def naive_upsert(url: str, collection: str, docs: list[dict[str, Any]]) -> int:
    """The naive pattern: a fresh HttpClient, Chroma's default embedding function, one upsert."""
    import asyncio

    def work() -> int:
        from urllib.parse import urlsplit

        import chromadb

        parts = urlsplit(url)
        client = chromadb.HttpClient(host=parts.hostname or "127.0.0.1", port=parts.port or 8000)
        coll = client.get_or_create_collection(collection)  # DefaultEmbeddingFunction
        coll.upsert(
            ids=[d["id"] for d in docs],
            documents=[d["text"] for d in docs],
            metadatas=[d.get("metadata") or None for d in docs],  # type: ignore[misc]
        )
        return len(docs)

    return await asyncio.to_thread(work)


@workflow
async def naive_ingest_wf(ctx: ExecutionContext[dict[str, Any]]) -> int:
    """One upsert of ``input.docs`` in which Chroma embeds with its default function."""
    return int(await naive_upsert(ctx.input["url"], ctx.input["collection"], ctx.input["docs"]))


@workflow
async def query_wf(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Ask ``input.question`` through the ``query`` task."""
    ask = query.with_options(tenant=ctx.input["tenant"], **(ctx.input.get("options") or {}))
    return await ask(ctx.input["collection"], ctx.input["question"], k=int(ctx.input.get("k", 5)))


@task
async def noop(value: str) -> str:
    """Do nothing (measures what one task call costs in Flux itself)."""
    return value


@workflow
async def noop_wf(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """One no-op task call."""
    return str(await noop(ctx.input["question"]))
