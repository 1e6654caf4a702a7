"""Two tenants, one Chroma server, the same collection name: what each tenant can see.

Run it inside the venv: ``python examples/multi_tenant_kb.py``. It starts a Chroma server
it owns (temporary folder, free loopback port), keeps Flux's state in the same temporary
folder, and shows:

1. ``acme`` and ``globex`` both ingest into a collection called ``handbook``; on the server these
   are two collections, ``acme__handbook`` and ``globex__handbook``.
2. The same question gets each tenant only its own documents.
3. Each tenant's collection list shows only its own ``handbook``.
4. A tenant cannot name its way into another's namespace: ``globex__handbook`` is refused.
5. Deleting ``acme``'s ``handbook`` leaves ``globex``'s untouched.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import ChromaServer, delete_collection, embed_and_add, list_collections, query

COLLECTION = "handbook"
DOCS: dict[str, list[dict[str, Any]]] = {
    "acme": [
        {"id": "refunds", "text": "Acme refunds any order within 30 days.", "metadata": {"team": "billing"}},
        {"id": "anvils", "text": "Acme anvils ship by freight in five days.", "metadata": {"team": "shipping"}},
    ],
    "globex": [
        {"id": "refunds", "text": "Globex gives store credit, never refunds.", "metadata": {"team": "billing"}},
        {"id": "badges", "text": "Globex badges are required on every floor.", "metadata": {"team": "security"}},
    ],
}
QUESTION = "can I get my money back?"


def _opts(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    return {"tenant": ctx.input["tenant"], "url": ctx.input["url"]}


@workflow.with_options(namespace="examples")
async def tenant_ingest(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert ``input.docs`` into the tenant's ``handbook``."""
    return await embed_and_add.with_options(**_opts(ctx))(ctx.input["collection"], ctx.input["docs"])


@workflow.with_options(namespace="examples")
async def tenant_view(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """What one tenant sees: its answer to the question and its collection list."""
    hits = await query.with_options(**_opts(ctx))(ctx.input["collection"], ctx.input["question"], k=5)
    return {"hits": hits, "collections": await list_collections.with_options(**_opts(ctx))()}


@workflow.with_options(namespace="examples")
async def tenant_drop(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Delete the tenant's ``input.collection``."""
    return await delete_collection.with_options(**_opts(ctx))(ctx.input["collection"])


def _ok(run: ExecutionContext[Any]) -> Any:
    if not run.has_succeeded:
        raise SystemExit(f"{run.workflow_name} failed: {run.output}")
    return run.output


def main() -> int:
    """Run the walkthrough; return 0 when every isolation property held."""
    from flux.config import Configuration

    with tempfile.TemporaryDirectory(prefix="flux-chroma-tenants-") as tmp:
        home = Path(tmp) / "flux"
        home.mkdir()
        Configuration.get().override(home=str(home), database_url=f"sqlite:///{home / 'flux.db'}")
        with ChromaServer(Path(tmp) / "chroma-data", port=0) as server:
            print(f"Chroma server {server.url} (pid {server.pid})\n")
            base = {"url": server.url, "collection": COLLECTION}
            for tenant, docs in DOCS.items():
                receipt = _ok(tenant_ingest.run({**base, "tenant": tenant, "docs": docs}))
                print(f"1. {tenant:<6} wrote {receipt['upserted']} docs to {COLLECTION!r} -> server collection {receipt['physical_name']!r}")

            isolated = True
            for tenant, docs in DOCS.items():
                view = _ok(tenant_view.run({**base, "tenant": tenant, "question": QUESTION}))
                texts = [h["document"] for h in view["hits"]]
                own = {d["text"] for d in docs}
                isolated &= set(texts) <= own
                print(f"2. {tenant:<6} asks {QUESTION!r}: top hit {texts[0]!r} ({len(texts)} hits, all its own: {set(texts) <= own})")
                names = [c["name"] for c in view["collections"]]
                isolated &= names == [COLLECTION]
                print(f"3. {tenant:<6} sees collections {names}")

            escape = tenant_ingest.run({**base, "tenant": "acme", "collection": "globex__handbook", "docs": DOCS["acme"]})
            isolated &= escape.has_failed
            print(f"4. acme writing to 'globex__handbook' -> {type(escape.output).__name__}: {escape.output}")

            dropped = _ok(tenant_drop.run({**base, "tenant": "acme"}))
            after = _ok(tenant_view.run({**base, "tenant": "globex", "question": QUESTION}))
            remaining = {c["name"]: c["count"] for c in after["collections"]}
            isolated &= dropped["deleted"] and remaining == {COLLECTION: len(DOCS["globex"])}
            print(f"5. acme deleted its handbook (deleted={dropped['deleted']}); globex still has {remaining}")
        Configuration.get().reset()
    print("\ntenants isolated:", "yes" if isolated else "NO")
    return 0 if isolated else 1


if __name__ == "__main__":
    sys.exit(main())
