"""Quickstart: one Chroma server, an ingestion workflow and a query workflow, run inline.

Run it with ``bash scripts/quickstart.sh`` (sets up .venv first) or, inside the venv,
``python examples/quickstart.py [QUESTION]`` (the same job as ``flux-chroma demo``). It
starts a local Chroma server that it owns (in a temporary directory, on a free loopback
port), keeps Flux's state in embedded SQLite in the same temporary directory, prints the
ranked hits and stops the server.

The workflows live in :mod:`flux_chroma.demo`; in short they are::

    @workflow.with_options(namespace="flux-chroma-demo")
    async def ingest(ctx):
        add = embed_and_add.with_options(tenant="demo")
        return await add("handbook", ctx.input["docs"])

    @workflow.with_options(namespace="flux-chroma-demo")
    async def search(ctx):
        ask = query.with_options(tenant="demo")
        return await ask("handbook", ctx.input["question"], k=3)
"""

from __future__ import annotations

import sys

from flux_chroma.demo import DOCS, ingest, main, search

__all__ = ["DOCS", "ingest", "search", "main"]

if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
