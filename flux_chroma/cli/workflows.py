"""The Flux workflows behind the commands: ``query``, ``collections``, ``docs``/``show`` and
``tenant erase`` (namespace ``flux-chroma-cli``).

The CLI runs them inline (``workflow.run``), so every command leaves a normal Flux execution
in the Flux home. They take the tenant, URL and arguments from their input and run the
public tasks with ``retry_max_attempts=0``: an interactive command should fail at once
and say why, not retry a stopped server for several seconds. Definitions only (Flux
re-executes this module when it registers a workflow).
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.erasure import erase_tenant
from flux_chroma.tasks.builtin import list_collections, query
from flux_chroma.tasks.documents import expand_hit, get_document, get_records, list_documents

__all__ = ["cli_query", "cli_collections", "cli_inspect", "cli_erase_tenant", "task_options"]

_DOCUMENT_TASKS = {"get_document": get_document, "expand_hit": expand_hit, "get_records": get_records, "list_documents": list_documents}


def task_options(data: dict[str, Any]) -> dict[str, Any]:
    """Task options from a CLI workflow input (``tenant``, ``tenancy``, ``url``).

    Args:
        data: The workflow input.

    Returns:
        Keyword arguments for ``task.with_options``.
    """
    options: dict[str, Any] = {"tenant": data.get("tenant"), "retry_max_attempts": 0}
    if data.get("tenancy"):
        options["tenancy"] = data["tenancy"]
    if data.get("url"):
        options["url"] = data["url"]
    return options


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_query(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Query ``input.collection`` with ``input.question`` (``k``, ``where``, ``where_document``,
    ``mode``, ``distinct``, ``path_prefix``)."""
    data = ctx.input
    ask = query.with_options(**task_options(data))
    return await ask(
        data["collection"],
        data["question"],
        k=data.get("k", 5),
        where=data.get("where"),
        where_document=data.get("where_document"),
        mode=data.get("mode", "hybrid"),
        distinct=data.get("distinct", True),
        path_prefix=data.get("path_prefix"),
    )


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_collections(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """List the tenant's collections with counts and pins."""
    return await list_collections.with_options(**task_options(ctx.input))()


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_inspect(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Run one document task: ``input.task`` with ``input.args`` (tenant, tenancy, url from the input)."""
    data = ctx.input
    call = _DOCUMENT_TASKS[data["task"]].with_options(**task_options(data))
    return await call(data["collection"], *data.get("args", []))


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_erase_tenant(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Erase ``input.tenant`` (``tenancy``, ``url``, ``confirm``, ``cache_only``; no retries)."""
    data = ctx.input or {}
    task = erase_tenant.with_options(**task_options(data))
    return await task(confirm=bool(data.get("confirm")), cache_only=bool(data.get("cache_only")))
