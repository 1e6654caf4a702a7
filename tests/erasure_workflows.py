"""Workflows of tests/test_erasure.py (definitions only: Flux re-executes this module)."""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import embed_and_add
from flux_chroma.erasure import erase_tenant


@workflow
async def fill_tenant(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Write ``input.docs`` into ``input.collection`` of ``input.tenant`` with the cache on."""
    data = ctx.input
    add = embed_and_add.with_options(tenant=data["tenant"], tenancy=data["tenancy"], cache=True)
    return await add(data["collection"], data["docs"])


@workflow
async def erase(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Erase ``input.tenant`` (``confirm``)."""
    data = ctx.input
    task = erase_tenant.with_options(tenant=data["tenant"], tenancy=data["tenancy"], retry_max_attempts=0)
    return await task(confirm=data["confirm"])
