"""Workflows around the document tasks (definitions only: Flux re-executes this module)."""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

import flux_chroma

DOC_TASKS = {
    "get_document": flux_chroma.get_document,
    "expand_hit": flux_chroma.expand_hit,
    "get_records": flux_chroma.get_records,
    "list_documents": flux_chroma.list_documents,
    "query": flux_chroma.query,
}


@workflow
async def doc_steps_wf(ctx: ExecutionContext[dict[str, Any]]) -> list[Any]:
    """Run ``input.steps`` (``{"task", "args", "kwargs"}``) with ``tenant`` and no retries."""
    opts = {"tenant": ctx.input["tenant"], "retry_max_attempts": 0}
    out = []
    for step in ctx.input["steps"]:
        call = DOC_TASKS[step["task"]].with_options(**opts)
        out.append(await call(*step.get("args", []), **step.get("kwargs", {})))
    return out
