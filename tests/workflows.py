"""Workflows shared by the tests (Flux re-executes this module on registration: defs only).

Each workflow takes its tenant and options from its input, so every test gets its own
namespace on the one session server.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import delete_collection, delete_documents, embed_and_add, list_collections, query


def _opts(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    opts = dict(ctx.input.get("options") or {})
    if isinstance(opts.get("embedding_function"), str):
        from toy_embeddings import EFS

        opts["embedding_function"] = EFS[opts["embedding_function"]]
    if "tenant" in ctx.input:
        opts["tenant"] = ctx.input["tenant"]
    return opts


@workflow
async def ingest_wf(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert ``input.docs`` into ``input.collection``."""
    add = embed_and_add.with_options(**_opts(ctx))
    return await add(ctx.input["collection"], ctx.input["docs"])


@workflow
async def query_wf(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Query ``input.collection`` with ``input.question`` (plus optional k/where)."""
    ask = query.with_options(**_opts(ctx))
    extra = {key: ctx.input[key] for key in ("k", "where", "where_document") if key in ctx.input}
    return await ask(ctx.input["collection"], ctx.input["question"], **extra)


@workflow
async def ingest_then_query_wf(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Two tenants, same short collection name, written and queried in one workflow."""
    out: dict[str, Any] = {}
    for tenant, docs in ctx.input["by_tenant"].items():
        add = embed_and_add.with_options(tenant=tenant)
        await add(ctx.input["collection"], docs)
    for tenant in ctx.input["by_tenant"]:
        ask = query.with_options(tenant=tenant)
        out[tenant] = await ask(ctx.input["collection"], ctx.input["question"], k=10)
    return out


@workflow
async def housekeeping_wf(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Run one housekeeping task named by ``input.op``."""
    opts = _opts(ctx)
    op = ctx.input["op"]
    if op == "list":
        return await list_collections.with_options(**opts)()
    if op == "delete_collection":
        return await delete_collection.with_options(**opts)(ctx.input["collection"])
    if op == "delete_documents":
        return await delete_documents.with_options(**opts)(
            ctx.input["collection"], ids=ctx.input.get("ids"), where=ctx.input.get("where")
        )
    raise ValueError(op)


@workflow
async def hostile_wf(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, str]:
    """Try every tenant-scoped task with one (possibly hostile) collection name.

    Returns ``{op: "rejected:<ErrorType>" | "ok:<physical or result>"}``.
    """
    opts = _opts(ctx)
    name = ctx.input["name"]
    outcome: dict[str, str] = {}
    calls = {
        "add": lambda: embed_and_add.with_options(**opts)(name, [{"id": "h1", "text": "hostile probe"}]),
        "query": lambda: query.with_options(**opts)(name, "hostile probe", k=1),
        "delete_documents": lambda: delete_documents.with_options(**opts)(name, ids=["h1"]),
        "delete_collection": lambda: delete_collection.with_options(**opts)(name),
    }
    for op, call in calls.items():
        try:
            result = await call()
        except Exception as exc:  # noqa: BLE001 - the outcome is the assertion
            outcome[op] = f"rejected:{type(exc).__name__}"
        else:
            outcome[op] = "ok:" + (result.get("physical_name", "") if isinstance(result, dict) else "")
    return outcome
