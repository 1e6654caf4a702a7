"""Serving benchmark (row 8): workflows in a module that imports flux_chroma.

``noop*`` import flux_chroma and do nothing; ``step*`` run one no-op Flux task (Flux's own cost
of a task: its checkpoints through the server); ``ask*`` run the ``query`` task. Registered by
``bench/rows_serving.py``; only this file travels to the worker. Definitions only.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, task, workflow

from flux_chroma import query


async def _ask(inp: dict[str, Any]) -> Any:
    ask = query.with_options(tenant=inp["tenant"])
    return await ask(inp["collection"], inp["question"], k=int(inp.get("k", 5)))


@workflow.with_options(namespace="serve")
async def noop(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Return the question from a module that imported flux_chroma (default runner)."""
    return str(ctx.input["question"])


@workflow.with_options(namespace="serve", runner="inprocess")
async def noop_inprocess(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Return the question from a module that imported flux_chroma (in-process runner)."""
    return str(ctx.input["question"])


@task
async def _echo(value: str) -> str:
    return value


@workflow.with_options(namespace="serve")
async def step(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Run one no-op Flux task (default runner)."""
    return await _echo(str(ctx.input["question"]))


@workflow.with_options(namespace="serve", runner="inprocess")
async def step_inprocess(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Run one no-op Flux task (in-process runner)."""
    return await _echo(str(ctx.input["question"]))


@workflow.with_options(namespace="serve")
async def ask(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Answer the question with the ``query`` task (default runner)."""
    return await _ask(ctx.input)


@workflow.with_options(namespace="serve", runner="inprocess")
async def ask_inprocess(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Answer the question with the ``query`` task (in-process runner)."""
    return await _ask(ctx.input)
