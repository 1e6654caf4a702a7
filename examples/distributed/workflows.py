"""The workflows ``run_local.py`` registers with the Flux server, once per tenant.

**The tenant is bound to the deployment, never to the caller's input.** Each tenant gets its
own copy of these workflows in its own Flux namespace, ``kb-<tenant>`` (``kb-acme/ask``,
``kb-globex/ask``): :func:`register_for` writes the copy and ``flux workflow register``
registers it. A workflow reads its tenant from its own namespace (``ctx.workflow_namespace``),
which the Flux server sets from the workflow the caller was allowed to run. With Flux
authentication on, grant each caller only its tenant's namespace
(``workflow:kb-acme:*:run``): Flux's RBAC is by namespace and workflow, so a role cannot
restrict which *input value* a caller passes. A workflow that took ``tenant`` from its input
would let anyone allowed to run it read or write every tenant's data.

Only the registered file travels to the workers: they import flux-chroma from their own
environment and find the ONE Chroma server through ``FLUX_CHROMA_URL``. Run them by hand::

    python -c 'import workflows; print(workflows.register_for("acme", "/tmp/kb-acme.py"))'
    flux workflow register /tmp/kb-acme.py --server-url http://127.0.0.1:8080
    flux workflow run kb-acme/ingest '{"path": "/srv/docs/acme"}' --mode sync --server-url ...
    flux workflow run kb-acme/ask '{"question": "..."}' --mode sync --server-url ...

Runners: ``ingest`` keeps Flux's default runner, a fresh process per execution (a crash or a
leak in one ingestion cannot take the worker down). ``ask`` and ``collections`` are
latency-critical and declare ``runner="inprocess"``: they run on the worker's own event loop,
where flux-chroma, the Chroma client and the model stay loaded between executions (about
1 s less per question; row 8 of docs/benchmarks.md). See docs/deployment.md for the trade-off.

Definitions only: Flux re-executes this module when it registers or runs a workflow.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import list_collections, query
from flux_chroma.errors import TenantError
from flux_chroma.ingest import ingest_steps

COLLECTION = "handbook"
TEMPLATE = "kb-template"  # the namespace of this file as written; register_for() replaces it


def register_for(tenant: str, target: str | os.PathLike[str]) -> Path:
    """Write this file with its workflows in namespace ``kb-<tenant>`` to ``target``.

    Args:
        tenant: The tenant id (3-63 lowercase letters, digits, single hyphens).
        target: Where to write the copy to register.

    Returns:
        The written path.
    """
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", tenant) or not 3 <= len(tenant) <= 63:
        raise TenantError(f"tenant id {tenant!r} is invalid: 3-63 lowercase letters, digits, single hyphens.")
    source = Path(__file__).read_text().replace(f'namespace="{TEMPLATE}"', f'namespace="kb-{tenant}"')
    path = Path(target)
    path.write_text(source)
    return path


def tenant_of(ctx: ExecutionContext[Any]) -> str:
    """The tenant this workflow was registered for: its namespace without ``kb-``."""
    namespace = ctx.workflow_namespace
    if namespace == TEMPLATE or not namespace.startswith("kb-"):
        raise TenantError(
            f"workflow namespace {namespace!r} binds no tenant: register a copy per tenant with "
            "register_for(tenant, path) (namespace kb-<tenant>), never this file as it is."
        )
    return namespace.removeprefix("kb-")


@workflow.with_options(namespace="kb-template")
async def ingest(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest the Markdown/text files under ``input.path`` into this tenant's collection.

    The input is a reference (a folder every worker can read), never the documents: the
    plan and each batch re-read their slice from it, and each batch is one Flux checkpoint.
    Embeddings go through the host's embedding cache.
    """
    job = {
        "tenant": tenant_of(ctx),
        "collection": ctx.input.get("collection", COLLECTION),
        "sources": [{"kind": "files", "path": ctx.input["path"]}],
        "batch_size": ctx.input.get("batch_size", 2),
        "cleanup": "full",
        "options": {"cache": True},
    }
    return await ingest_steps(job)


@workflow.with_options(namespace="kb-template", runner="inprocess")
async def ask(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Answer ``input.question`` from this tenant's collection, with the tenant's collection list.

    In-process: ``pid`` in the answer is the worker's own process id.
    """
    tenant = tenant_of(ctx)
    hits = await query.with_options(tenant=tenant, cache=True)(
        ctx.input.get("collection", COLLECTION), ctx.input["question"], k=ctx.input.get("k", 3)
    )
    listing = await list_collections.with_options(tenant=tenant)()
    return {"tenant": tenant, "hits": hits, "collections": listing, "pid": os.getpid()}


@workflow.with_options(namespace="kb-template", runner="inprocess")
async def collections(ctx: ExecutionContext[dict[str, Any]]) -> list[dict[str, Any]]:
    """List this tenant's collections (name, count, pin), in-process like ``ask``."""
    return await list_collections.with_options(tenant=tenant_of(ctx))()
