"""Workflows of the retrieval tests (Flux re-executes this module on registration: defs only)."""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import query

_KEYS = ("k", "where", "where_document", "mode", "distinct", "path_prefix")


@workflow
async def ask_wf(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Query ``input.collection`` with ``input.question`` and any of k/where/mode/distinct/path_prefix."""
    ask = query.with_options(tenant=ctx.input["tenant"], retry_max_attempts=0)
    extra = {key: ctx.input[key] for key in _KEYS if key in ctx.input}
    return await ask(ctx.input["collection"], ctx.input["question"], **extra)
