"""Workflows around the user-written task of ``examples/user_task.py`` (defs only: Flux
re-executes this module on registration)."""

from __future__ import annotations

from typing import Any

from fault_tools import task_options
from flux import ExecutionContext, workflow
from user_task import get_documents


@workflow
async def get_documents_wf(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """``get_documents(input.collection, input.ids)`` with options from the input."""
    get = get_documents.with_options(**task_options(ctx.input))
    return await get(ctx.input["collection"], ctx.input["ids"])
