"""flux-chroma's spans and metrics from Flux workers, received over OTLP/gRPC as a collector would.

A PostgreSQL-backed fleet (2 workers) runs with ``FLUX_OBSERVABILITY__ENABLED=true`` and
``FLUX_OBSERVABILITY__OTLP_ENDPOINT`` pointing at :class:`otlp_receiver.Receiver`, exactly as
docs/operations.md tells operators to configure workers. A ``parallel`` job over files whose
names and text hold a sentinel is ingested; the sentinel must not reach the receiver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_stack import Fleet
from otlp_receiver import Receiver

from flux_chroma import ChromaServer

pytestmark = pytest.mark.slow

HANG_GUARD = 240.0  # seconds; only stops a broken test from hanging
SENTINEL = "QZWSENTINEL"


@pytest.fixture(scope="module")
def observed(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Receiver]]:
    work = tmp_path_factory.mktemp("otlp-fleet")
    with Receiver() as receiver:
        stack = Fleet(work, chroma_server.url, work / "embedded.jsonl")
        stack.worker_env.update(
            {
                "FLUX_OBSERVABILITY__ENABLED": "true",
                "FLUX_OBSERVABILITY__OTLP_ENDPOINT": receiver.endpoint,
                "FLUX_OBSERVABILITY__METRIC_EXPORT_INTERVAL": "1",
            }
        )
        try:
            yield stack.start(2), receiver
        finally:
            stack.stop()


def _points(receiver: Receiver, name: str) -> list[dict[str, Any]]:
    """The latest data point of each series: exports repeat cumulative values, and a series is
    one worker process's (its ``startTimeUnixNano``) for one label set."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for metric in list(receiver.metrics):  # a copy: the receiver's threads append to it
        if metric["name"] == name:
            data = next(v for k, v in metric.items() if isinstance(v, dict) and "dataPoints" in v)
            for point in data["dataPoints"]:
                latest[(point["startTimeUnixNano"], str(point["attributes"]))] = point
    return list(latest.values())


def test_workers_export_unit_and_batch_spans_and_metrics_without_content(
    observed: tuple[Fleet, Receiver], tenant: str, tmp_path: Path
) -> None:
    fleet, receiver = observed
    docs = tmp_path / f"docs-{SENTINEL}"
    docs.mkdir()
    for n in range(6):
        (docs / f"{SENTINEL}-{n}.md").write_text(" ".join(f"{SENTINEL} w{n}-{i}" for i in range(70)))
    job = {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(docs), "id": "notes"}],
        "chunking": {"size": 120, "overlap": 20},
        "batch_size": 8,
        "embedding_function": {"name": "counting-toy"},
        "parallel": 2,
        "options": {"url": fleet.chroma_url},
    }
    execution_id = fleet.submit("flux-chroma/ingest_job", job)
    execution = fleet.wait_terminal(execution_id, HANG_GUARD)
    assert execution["state"] == "COMPLETED", execution.get("output")
    report = execution["output"]

    def batch_spans() -> list[dict[str, Any]]:
        return [s for s in list(receiver.spans) if s["name"] == "flux_chroma.ingest.batch"]

    deadline = time.monotonic() + HANG_GUARD  # metrics are exported every second, spans every 5 s
    while (
        sum(int(p["asInt"]) for p in _points(receiver, "flux_chroma_chunks_written_total")) < report["added"]
        or len(batch_spans()) < report["batches"]
    ):
        assert time.monotonic() < deadline, (sorted(receiver.metric_names()), len(batch_spans()))
        time.sleep(0.5)

    assert {"flux.workflow.execute", "flux.task.execute", "flux_chroma.ingest.unit", "flux_chroma.task", "flux_chroma.ingest.batch"} <= receiver.span_names()
    assert len(batch_spans()) == report["batches"]
    for point in _points(receiver, "flux_chroma_chunks_written_total"):
        assert {a["key"] for a in point["attributes"]} == {"tenant", "collection"}
    written = sum(int(p["asInt"]) for p in _points(receiver, "flux_chroma_chunks_written_total"))
    assert written == report["added"] == report["chunks"]
    assert not any(SENTINEL in text for text in receiver.raw)
