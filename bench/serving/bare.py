"""Serving benchmark (row 8): a workflow module that imports nothing but Flux.

Registered with a Flux server by ``bench/rows_serving.py``; only this file travels to the
worker, so it imports nothing from ``bench``. Definitions only.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow


@workflow.with_options(namespace="serve")
async def bare(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Return the question (Flux's own cost per execution, default runner)."""
    return str(ctx.input["question"])


@workflow.with_options(namespace="serve", runner="inprocess")
async def bare_inprocess(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Return the question (Flux's own cost per execution, in-process runner)."""
    return str(ctx.input["question"])
