"""Child process for tests/test_telemetry.py: real Flux executions with OpenTelemetry's SDK on.

``python tests/telemetry_scenario.py MODE URL WORKDIR`` prints one JSON line.

* ``inmemory``: installs a TracerProvider with an ``InMemorySpanExporter`` and a MeterProvider
  with an ``InMemoryMetricReader`` (the real SDK), then turns Flux's observability on with
  ``flux.observability.setup`` (Flux keeps the providers already installed, as OpenTelemetry
  allows one global provider). It runs ``embed_and_add``, ``query`` and an ingestion job whose
  documents, ids, metadata, file names and questions hold a sentinel, then one failing
  ``embed_and_add``, and prints every exported span and metric.
* ``otlp-down``: Flux's own set-up with an OTLP endpoint on a closed loopback port, then the
  same ingestion job; prints its report and the spans an in-memory exporter added to Flux's
  tracer provider saw.

A child process, because OpenTelemetry's global providers can be set once per process.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

SENTINEL = "ZQXSENTINEL"


def _docs(root: Path) -> Path:
    folder = root / f"corpus-{SENTINEL}"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        words = " ".join(f"{SENTINEL} alpha{n} word{i}" for i in range(60))
        (folder / f"{SENTINEL}-{n}.md").write_text(f"# {SENTINEL} {n}\n\n{words}\n")
    return folder


def _job(tenant: str, folder: Path) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(folder)}],
        "chunking": {"size": 120, "overlap": 20},
        "batch_size": 8,
        "cleanup": "full",
    }


def _workflows() -> tuple[Any, Any]:
    from flux import ExecutionContext, workflow

    from flux_chroma import embed_and_add, query

    @workflow
    async def write_and_ask(ctx: ExecutionContext[str]) -> Any:
        tenant = ctx.input
        add = embed_and_add.with_options(tenant=tenant, cache=True)
        docs = [
            {"id": f"{SENTINEL}-{i}", "text": f"{SENTINEL} secret text {i}", "metadata": {"topic": SENTINEL, SENTINEL: i}}
            for i in range(5)
        ]
        receipt = await add("facts", docs)
        again = await add("facts", docs)  # unchanged: skipped
        copied = await add("copy", docs)  # the same texts: vectors from the embedding cache
        hits = await query.with_options(tenant=tenant)("facts", f"{SENTINEL} question?", k=2, where={"topic": SENTINEL})
        return {"receipt": receipt, "again": again, "copied": copied, "hits": len(hits)}

    @workflow
    async def bad_write(ctx: ExecutionContext[str]) -> Any:
        docs = [{"id": f"{SENTINEL}-dup", "text": "a"}, {"id": f"{SENTINEL}-dup", "text": "b"}]
        return await embed_and_add.with_options(tenant=ctx.input)("facts", docs)

    return write_and_ask, bad_write


def inmemory(url: str, root: Path) -> dict[str, Any]:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    import flux.observability
    from flux.observability.config import ObservabilityConfig

    flux.observability.setup(ObservabilityConfig(enabled=True, prometheus_enabled=False))

    from flux_chroma.ingest import run_ingest

    tenant = f"tel{int(time.time() * 1000) % 10**9}"
    write_and_ask, bad_write = _workflows()
    asked = write_and_ask.run(tenant)
    ingested = run_ingest(_job(tenant, _docs(root)))
    good_spans = [json.loads(s.to_json()) for s in exporter.get_finished_spans()]
    good_metrics = json.loads(reader.get_metrics_data().to_json())
    exporter.clear()
    failed = bad_write.run(tenant)
    bad_spans = [json.loads(s.to_json()) for s in exporter.get_finished_spans()]
    bad_metrics = json.loads(reader.get_metrics_data().to_json())
    return {
        "tenant": tenant,
        "asked": {"ok": asked.has_succeeded, "output": asked.output if asked.has_succeeded else repr(asked.output)},
        "ingested": {"ok": ingested.has_succeeded, "output": ingested.output if ingested.has_succeeded else repr(ingested.output)},
        "failed": {"ok": failed.has_succeeded, "error": type(failed.output).__name__, "message": str(failed.output)},
        "spans": good_spans,
        "metrics": good_metrics,
        "bad_spans": bad_spans,
        "bad_metrics": bad_metrics,
    }


def otlp_down(url: str, root: Path, port: str) -> dict[str, Any]:
    import flux.observability
    from flux.observability.config import ObservabilityConfig
    from flux.observability.provider import get_tracer_provider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    flux.observability.setup(
        ObservabilityConfig(
            enabled=True, prometheus_enabled=False, otlp_endpoint=f"http://127.0.0.1:{port}", metric_export_interval=1
        )
    )
    exporter = InMemorySpanExporter()
    get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))

    from flux_chroma.ingest import run_ingest

    tenant = f"otl{int(time.time() * 1000) % 10**9}"
    started = time.perf_counter()
    ingested = run_ingest(_job(tenant, _docs(root)))
    seconds = time.perf_counter() - started
    names = sorted({s.name for s in exporter.get_finished_spans()})
    started = time.perf_counter()
    flux.observability.shutdown()  # flushes to the dead endpoint: bounded by the exporters' timeouts
    return {
        "ok": ingested.has_succeeded,
        "output": ingested.output if ingested.has_succeeded else repr(ingested.output),
        "seconds": seconds,
        "shutdown_seconds": time.perf_counter() - started,
        "span_names": names,
    }


def main() -> None:
    mode, url, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if mode == "inmemory":
        result = inmemory(url, workdir)
    else:
        result = otlp_down(url, workdir, sys.argv[4])
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
