"""Quickstart: one Chroma server, an ingestion workflow and a query workflow, run inline.

Run it with ``bash scripts/quickstart.sh`` (sets up .venv first) or, inside the venv,
``python examples/quickstart.py``. It starts a local Chroma server that it owns (in a
temporary directory, on a free loopback port), keeps Flux's state in embedded SQLite in the
same temporary directory, prints the ranked hits and stops the server.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma import ChromaServer, embed_and_add, query

TENANT = "demo"
COLLECTION = "handbook"
DOCS = [
    {"id": "flux", "text": "Flux persists every state transition.", "metadata": {"topic": "flux"}},
    {"id": "sse", "text": "Workers claim executions over SSE.", "metadata": {"topic": "flux"}},
    {"id": "chroma", "text": "ChromaDB is an embedding database.", "metadata": {"topic": "chroma"}},
]

# Tasks are configured once; the server URL comes from FLUX_CHROMA_URL at call time.
add = embed_and_add.with_options(tenant=TENANT)
ask = query.with_options(tenant=TENANT)


@workflow
async def ingest(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert the sample documents (idempotent: a re-run changes nothing)."""
    return await add(COLLECTION, ctx.input["docs"])


@workflow
async def search(ctx: ExecutionContext[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the ranked hits for one question."""
    return await ask(COLLECTION, ctx.input["question"], k=3)


def main(question: str = "what is chroma?") -> int:
    """Start a server, ingest, query, print the hits, stop the server."""
    from flux.config import Configuration

    with tempfile.TemporaryDirectory(prefix="flux-chroma-quickstart-") as tmp:
        home = Path(tmp) / "flux"
        home.mkdir()
        Configuration.get().override(home=str(home), database_url=f"sqlite:///{home / 'flux.db'}")
        with ChromaServer(Path(tmp) / "chroma-data", port=0) as server:
            os.environ["FLUX_CHROMA_URL"] = server.url
            print(f"Chroma server {server.url} (pid {server.pid}) owns {server.path}")
            run = ingest.run({"docs": DOCS})
            if not run.has_succeeded:
                print(f"ingest failed: {run.output}", file=sys.stderr)
                return 1
            receipt = run.output
            print(
                f"ingested {receipt['upserted']} docs into {receipt['physical_name']} "
                f"({receipt['embedding']['name']} model, dim {receipt['embedding']['dimension']})"
            )
            found = search.run({"question": question})
            if not found.has_succeeded:
                print(f"query failed: {found.output}", file=sys.stderr)
                return 1
            print(f"\nquestion: {question}")
            for rank, hit in enumerate(found.output, start=1):
                print(f"{rank}. {hit['document']}  (id={hit['id']}, distance={hit['distance']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
