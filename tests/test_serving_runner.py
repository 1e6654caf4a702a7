"""The distributed example serves questions on Flux's in-process runner, ingestion isolated.

Checked twice: on the declarations Flux reads (``workflow.runner``), and through a real Flux
server and worker (OS processes on loopback): the ``kb-<tenant>/ask`` execution ran inside the
worker's own process: the ``pid`` it reports is the worker's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from bench.flux_stack import FluxStack
from flux_chroma import ChromaServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "distributed" / "workflows.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distributed_workflows_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_declares_in_process_serving_and_isolated_ingestion() -> None:
    example = _example()
    assert example.ask.runner == "inprocess"
    assert example.collections.runner == "inprocess"
    assert example.ingest.runner is None  # the worker's default: a fresh process per execution


@pytest.mark.slow
def test_example_question_runs_inside_the_worker_process(
    chroma_server: ChromaServer, tenant: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("Refunds are paid within 30 days of the order.\n")
    (docs / "shipping.md").write_text("Parcels ship by freight within five days.\n")
    copy = _example().register_for(tenant, tmp_path / f"kb-{tenant}.py")  # the tenant's own namespace
    with FluxStack(tmp_path / "stack", chroma_url=chroma_server.url) as stack:
        names = {w["name"] for w in stack.register(copy)}
        assert {"ask", "collections", "ingest"} <= names
        worker_pid = stack.pid("worker-1")

        ingest = stack.run_sync(f"kb-{tenant}/ingest", {"path": str(docs)})
        assert ingest["state"] == "COMPLETED", ingest
        assert ingest["output"]["added"] == 2

        for question in ("how long do refunds take?", "how are parcels shipped?"):
            answer = stack.run_sync(f"kb-{tenant}/ask", {"question": question, "k": 1})
            assert answer["state"] == "COMPLETED", answer
            assert answer["output"]["pid"] == worker_pid
            assert answer["output"]["collections"][0]["count"] == 2
        assert answer["output"]["hits"][0]["document"].startswith("Parcels ship")

        listing = stack.run_sync(f"kb-{tenant}/collections", {})
        assert [c["name"] for c in listing["output"]] == ["handbook"]
