"""Write your own flux-chroma task: ``get_documents(collection, ids)`` with ``@chroma_task``.

Run it inside the venv: ``python examples/user_task.py``. It starts a Chroma server it owns
(temporary folder, free loopback port), keeps Flux's state in the same temporary folder, and:

1. writes three documents for tenant ``acme`` with the built-in ``embed_and_add``;
2. fetches two of them (and one id that does not exist) with ``get_documents``, the task
   defined below: a plain ``async def`` whose signature is what Flux records;
3. shows what the task inherits without a line of its own: a name that tries to leave the
   tenant is refused before any request, and a missing collection fails at once (permanent
   errors are never retried).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from flux import ExecutionContext, workflow

from flux_chroma import ChromaServer, InvalidQueryError, chroma_task, embed_and_add, use_collection
from flux_chroma.chroma.collections import Resolved
from flux_chroma.tasks.reader import public_metadata


class Record(TypedDict):
    """One record as ``get_documents`` returns it."""

    id: str
    document: str | None
    metadata: dict[str, Any]


@chroma_task(retry_max_attempts=3, retry_delay=1, retry_backoff=2)
async def get_documents(collection: str, ids: list[str]) -> list[Record]:
    """Fetch records by id from the tenant's collection, in the order asked.

    Args:
        collection: Tenant-relative collection name (an alias is followed, as by ``query``).
        ids: Record ids; ids that do not exist are left out of the result.

    Returns:
        ``[{"id", "document", "metadata"}, ...]`` without flux-chroma's ``fc_*`` keys.

    Raises:
        InvalidQueryError: ``ids`` is not a non-empty list of non-empty strings.
        TenantError: The task has no valid ``tenant=`` option.
        InvalidNameError: ``collection`` is not a valid tenant-relative name.
        CollectionNotFoundError: The collection does not exist.
        EmbeddingMismatchError: The configured model differs from the collection's pin.
        ChromaUnavailableError: The server is unreachable (retried by Flux).
    """
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise InvalidQueryError(
            f"get_documents: ids= must be a non-empty list of non-empty strings, got {ids!r}."
        )

    def fetch(found: Resolved) -> list[Record]:
        got = found.collection.get(ids=ids, include=["documents", "metadatas"])
        documents = got["documents"] or [None] * len(got["ids"])
        metadatas = got["metadatas"] or [None] * len(got["ids"])
        by_id = {
            rid: Record(id=rid, document=doc, metadata=public_metadata(dict(meta or {})))
            for rid, doc, meta in zip(got["ids"], documents, metadatas, strict=True)
        }
        return [by_id[i] for i in ids if i in by_id]

    return await use_collection(collection, fetch, follow_alias=True)


@workflow.with_options(namespace="examples")
async def remember(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert ``input.docs`` into the tenant's ``input.collection``."""
    add = embed_and_add.with_options(tenant=ctx.input["tenant"], url=ctx.input["url"])
    return await add(ctx.input["collection"], ctx.input["docs"])


@workflow.with_options(namespace="examples")
async def recall(ctx: ExecutionContext[dict[str, Any]]) -> list[Record]:
    """Fetch ``input.ids`` from the tenant's ``input.collection``."""
    get = get_documents.with_options(tenant=ctx.input["tenant"], url=ctx.input["url"])
    return await get(ctx.input["collection"], ctx.input["ids"])


DOCS = [
    {"id": "refunds", "text": "Refunds are accepted within 30 days.", "metadata": {"team": "billing"}},
    {"id": "shipping", "text": "Orders ship within two business days.", "metadata": {"team": "ops"}},
    {"id": "badges", "text": "Badges are required on every floor.", "metadata": {"team": "security"}},
]


def main() -> int:
    """Run the walkthrough; return 0 when every step behaved as described."""
    from flux.config import Configuration

    ok = True
    with tempfile.TemporaryDirectory(prefix="flux-chroma-user-task-") as tmp:
        home = Path(tmp) / "flux"
        home.mkdir()
        Configuration.get().override(home=str(home), database_url=f"sqlite:///{home / 'flux.db'}")
        with ChromaServer(Path(tmp) / "chroma-data", port=0) as server:
            base = {"tenant": "acme", "url": server.url, "collection": "handbook"}
            written = remember.run({**base, "docs": DOCS})
            ok &= written.has_succeeded
            print(f"1. wrote {written.output['upserted']} docs to {written.output['physical_name']!r}")

            got = recall.run({**base, "ids": ["shipping", "missing", "refunds"]})
            ok &= got.has_succeeded and [r["id"] for r in got.output] == ["shipping", "refunds"]
            for record in got.output:
                print(f"2. {record['id']}: {record['document']!r} {record['metadata']}")

            escape = recall.run({**base, "collection": "globex__handbook", "ids": ["refunds"]})
            ok &= escape.has_failed
            print(f"3. 'globex__handbook' -> {type(escape.output).__name__}: {escape.output}")

            absent = recall.run({**base, "collection": "archive", "ids": ["refunds"]})
            retries = [e for e in absent.events if e.type.name == "TASK_RETRY_STARTED"]
            ok &= absent.has_failed and not retries
            print(f"4. 'archive' -> {type(absent.output).__name__} after {len(retries) + 1} attempt")
        Configuration.get().reset()
    print("\nuser task inherits flux-chroma's guarantees:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
