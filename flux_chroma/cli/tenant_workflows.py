"""The Flux workflow behind ``flux-chroma tenant erase`` (definitions only: Flux re-executes
this module when it registers a workflow)."""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.erasure import erase_tenant

__all__ = ["cli_erase_tenant"]


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_erase_tenant(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Erase ``input.tenant`` (``tenancy``, ``url``, ``confirm``, ``cache_only``; no retries)."""
    data = ctx.input or {}
    options: dict[str, Any] = {"tenant": data.get("tenant"), "retry_max_attempts": 0}
    for key in ("tenancy", "url"):
        if data.get(key):
            options[key] = data[key]
    task = erase_tenant.with_options(**options)
    return await task(confirm=bool(data.get("confirm")), cache_only=bool(data.get("cache_only")))
