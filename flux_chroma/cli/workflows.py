"""The Flux workflow behind ``flux-chroma tenant erase``, run inline so that an erasure
leaves a normal Flux execution. No retries: an interactive command fails at once and says why.
Definitions only (Flux re-executes this module when it registers a workflow).
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.erasure import erase_tenant

__all__ = ["cli_erase_tenant"]


@workflow.with_options(namespace="flux-chroma-cli")
async def cli_erase_tenant(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Erase ``input.tenant`` (``tenancy``, ``url``, ``confirm``, ``cache_only``; no retries)."""
    data = ctx.input or {}
    options = {key: data[key] for key in ("tenancy", "url") if data.get(key)}
    task = erase_tenant.with_options(tenant=data.get("tenant"), retry_max_attempts=0, **options)
    return await task(confirm=bool(data.get("confirm")), cache_only=bool(data.get("cache_only")))
