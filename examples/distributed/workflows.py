"""The workflows ``run_local.py`` registers with the Flux server (Flux ships them to workers).

Only this file travels to the workers: they import flux-chroma from their own environment
and find the ONE Chroma server through ``FLUX_CHROMA_URL``. The tenant comes from the input;
each task is a stateless ``HttpClient`` call, so any worker can run any execution.

Register and run them by hand with::

    flux workflow register examples/distributed/workflows.py --server-url http://127.0.0.1:8080
    flux workflow run kb/ingest '{"tenant": "acme", "path": "/srv/docs/acme"}' --mode sync --server-url ...
    flux workflow run kb/ask '{"tenant": "acme", "question": "..."}' --mode sync --server-url ...

Runners: ``ingest`` keeps Flux's default runner, a fresh process per execution (a crash or a
leak in one ingestion cannot take the worker down). ``ask`` and ``collections`` are
latency-critical and declare ``runner="inprocess"``: they run on the worker's own event loop,
where flux-chroma, the Chroma client and the model stay loaded between executions (about
1 s less per question; row 8 of docs/benchmarks.md). See docs/deployment.md for the trade-off.

Definitions only: Flux re-executes this module when it registers or runs a workflow.
"""

from __future__ import annotations

import os
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import list_collections, query
from flux_chroma.ingest import ingest_steps

COLLECTION = "handbook"


@workflow.with_options(namespace="kb")
async def ingest(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest the Markdown/text files under ``input.path`` into the tenant's collection.

    The input is a reference (a folder every worker can read), never the documents: the
    plan and each batch re-read their slice from it, and each batch is one Flux checkpoint.
    Embeddings go through the host's embedding cache.
    """
    job = {
        "tenant": ctx.input["tenant"],
        "collection": ctx.input.get("collection", COLLECTION),
        "sources": [{"kind": "files", "path": ctx.input["path"]}],
        "batch_size": ctx.input.get("batch_size", 2),
        "cleanup": "full",
        "options": {"cache": True},
    }
    return await ingest_steps(job)


@workflow.with_options(namespace="kb", runner="inprocess")
async def ask(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Answer ``input.question`` from the tenant's collection, with the tenant's collection list.

    In-process: ``pid`` in the answer is the worker's own process id.
    """
    tenant = ctx.input["tenant"]
    hits = await query.with_options(tenant=tenant, cache=True)(
        ctx.input.get("collection", COLLECTION), ctx.input["question"], k=ctx.input.get("k", 3)
    )
    listing = await list_collections.with_options(tenant=tenant)()
    return {"hits": hits, "collections": listing, "pid": os.getpid()}


@workflow.with_options(namespace="kb", runner="inprocess")
async def collections(ctx: ExecutionContext[dict[str, Any]]) -> list[dict[str, Any]]:
    """List the tenant's collections (name, count, pin), in-process like ``ask``."""
    return await list_collections.with_options(tenant=ctx.input["tenant"])()
