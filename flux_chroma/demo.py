"""The quickstart's main job: one Chroma server, an ingestion and a query workflow, run inline.

Used by ``examples/quickstart.py`` and ``flux-chroma demo``. Definitions only at import (Flux
re-executes a workflow's module when it registers it).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.errors import FluxChromaError
from flux_chroma.tasks.builtin import embed_and_add, query

__all__ = ["TENANT", "COLLECTION", "DOCS", "QUESTION", "DemoResult", "ingest", "search", "run_demo", "main"]

TENANT = "demo"
"""Tenant the demo writes to."""

COLLECTION = "handbook"
"""Tenant-relative collection the demo writes to."""

QUESTION = "what is chroma?"
"""The demo's default question."""

DOCS: list[dict[str, Any]] = [
    {"id": "flux", "text": "Flux persists every state transition.", "metadata": {"topic": "flux"}},
    {"id": "sse", "text": "Workers claim executions over SSE.", "metadata": {"topic": "flux"}},
    {"id": "chroma", "text": "ChromaDB is an embedding database.", "metadata": {"topic": "chroma"}},
]
"""The three sample documents."""


def _options(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    # The server URL comes from the input when given, else from FLUX_CHROMA_URL at call time.
    options: dict[str, Any] = {"tenant": ctx.input.get("tenant", TENANT)}
    if ctx.input.get("url"):
        options["url"] = ctx.input["url"]
    return options


# The namespace keeps these apart from your own ``ingest``; Flux reads it from this file's
# source when registering, so it must stay a literal.
@workflow.with_options(namespace="flux-chroma-demo")
async def ingest(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert ``input.docs`` into the demo collection (idempotent: a re-run changes nothing)."""
    add = embed_and_add.with_options(**_options(ctx))
    receipt: dict[str, Any] = await add(ctx.input.get("collection", COLLECTION), ctx.input["docs"])
    return receipt


@workflow.with_options(namespace="flux-chroma-demo")
async def search(ctx: ExecutionContext[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the ranked hits for ``input.question``."""
    ask = query.with_options(**_options(ctx))
    hits: list[dict[str, Any]] = await ask(
        ctx.input.get("collection", COLLECTION), ctx.input["question"], k=ctx.input.get("k", 3)
    )
    return hits


@dataclass
class DemoResult:
    """What one demo run did.

    Attributes:
        url: The Chroma server used.
        server_pid: Pid of the server the demo started (None when it used ``url=``).
        data_dir: Data directory of that server (None when it used ``url=``).
        receipt: The ingestion receipt (see ``embed_and_add``).
        hits: Ranked hits, nearest first.
    """

    url: str
    server_pid: int | None = None
    data_dir: str | None = None
    receipt: dict[str, Any] = field(default_factory=dict)
    question: str = QUESTION
    hits: list[dict[str, Any]] = field(default_factory=list)


def _output(run: ExecutionContext[Any], what: str) -> Any:
    """The output of a finished run, or the stored error raised with its readable text."""
    if run.has_succeeded:
        return run.output
    error = run.output
    if isinstance(error, FluxChromaError):
        raise error
    raise FluxChromaError(f"{what} failed: {error!r}")


@contextmanager
def _server(url: str | None, workdir: Path) -> Iterator[tuple[str, int | None, str | None]]:
    if url:
        yield url, None, None
        return
    from flux_chroma.chroma.server import ChromaServer

    with ChromaServer(workdir / "chroma-data", port=0) as server:
        yield server.url, server.pid, str(server.path)


def run_demo(
    question: str = QUESTION,
    *,
    url: str | None = None,
    tenant: str = TENANT,
    flux_home: str | os.PathLike[str] | None = None,
    announce: Callable[[DemoResult], None] | None = None,
) -> DemoResult:
    """Start a server (unless ``url`` is given), ingest :data:`DOCS`, ask one question.

    Args:
        url: Use this running Chroma server instead of starting a temporary one.
        tenant: Tenant to write to and query.
        flux_home: Folder for Flux's state; default a temporary folder removed afterwards.
        announce: Called once the server is up (before ingesting), e.g. to print its URL.

    Raises:
        FluxChromaError: A step failed (the error keeps its readable message).
    """
    from flux_chroma.flux_state import flux_home as use_flux_home

    with tempfile.TemporaryDirectory(prefix="flux-chroma-quickstart-") as tmp:
        home = Path(flux_home) if flux_home is not None else Path(tmp) / "flux"
        with use_flux_home(home), _server(url, Path(tmp)) as (server_url, pid, data_dir):
            result = DemoResult(url=server_url, server_pid=pid, data_dir=data_dir, question=question)
            if announce is not None:
                announce(result)
            base = {"tenant": tenant, "url": server_url}
            result.receipt = _output(ingest.run({**base, "docs": DOCS}), "ingest")
            result.hits = _output(search.run({**base, "question": question}), "search")
    return result


def main(question: str = QUESTION) -> int:
    """Run the quickstart and print the hits; return 0, or 1 when a step failed (see stderr)."""

    def announce(result: DemoResult) -> None:
        print(f"Chroma server {result.url} (pid {result.server_pid}) owns {result.data_dir}")

    from flux_chroma.flux_state import quiet_flux_logs

    quiet_flux_logs()  # an entry point: Flux's INFO lines would bury the hits
    try:
        result = run_demo(question, announce=announce)
    except FluxChromaError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    receipt = result.receipt
    print(
        f"ingested {receipt['upserted']} docs into {receipt['physical_name']} "
        f"({receipt['embedding']['name']} model, dim {receipt['embedding']['dimension']})"
    )
    print(f"\nquestion: {question}")
    for rank, hit in enumerate(result.hits, start=1):
        print(f"{rank}. {hit['document']}  (id={hit['id']}, distance={hit['distance']:.4f})")
    return 0
