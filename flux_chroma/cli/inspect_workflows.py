"""The Flux workflow behind ``flux-chroma docs`` and ``flux-chroma show`` (definitions only:
Flux re-executes this module when it registers the workflow)."""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.cli.workflows import task_options
from flux_chroma.tasks.documents import expand_hit, get_document, get_records, list_documents

__all__ = ["cli_inspect"]

_TASKS = {"get_document": get_document, "expand_hit": expand_hit, "get_records": get_records, "list_documents": list_documents}


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_inspect(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Run one document task: ``input.task`` with ``input.args`` (tenant, tenancy, url from the input)."""
    data = ctx.input
    call = _TASKS[data["task"]].with_options(**task_options(data))
    return await call(data["collection"], *data.get("args", []))
