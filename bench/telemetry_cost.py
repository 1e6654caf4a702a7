"""What flux-chroma's telemetry costs a task, with Flux observability off and on.

Run: ``python -m bench.telemetry_cost``. Prints three figures:

* the check every task pays when observability is off (``telemetry.enabled()``), in ns;
* one trivial ``@chroma_task`` call through Flux (inline, SQLite in a temporary
  ``FLUX_HOME``), observability off, in microseconds;
* the same call with observability on (OpenTelemetry's SDK with an in-memory span exporter
  and metric reader, set up through ``flux.observability.setup``), which adds Flux's own
  span and metrics as well as flux-chroma's.

No Chroma server is needed: the task touches no collection.
"""

from __future__ import annotations

import os
import tempfile
import time
import timeit
from typing import Any

__all__ = ["main"]

CALLS = 200


def _per_task_us(calls: int) -> float:
    from flux import ExecutionContext, workflow

    from flux_chroma import chroma_task

    @chroma_task(tenant="bench")
    async def noop(collection: str, n: int) -> int:
        return n

    @workflow
    async def many(ctx: ExecutionContext[int]) -> int:
        total = 0
        for n in range(ctx.input):
            total += await noop("notes", n)
        return total

    many.run(3)  # warm up (schema, imports)
    started = time.perf_counter()
    ctx = many.run(calls)
    seconds = time.perf_counter() - started
    assert ctx.has_succeeded, ctx.output
    return seconds / calls * 1e6


def _enable() -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))

    import flux.observability
    from flux.observability.config import ObservabilityConfig

    flux.observability.setup(ObservabilityConfig(enabled=True, prometheus_enabled=False))


def main() -> dict[str, Any]:
    """Print and return the three figures."""
    home = tempfile.mkdtemp(prefix="fc-telemetry-bench-")
    os.environ["FLUX_HOME"] = home
    os.environ["FLUX_DATABASE_URL"] = f"sqlite:///{home}/flux.db"
    from flux_chroma import telemetry

    loops = 1_000_000
    check_ns = timeit.timeit(telemetry.enabled, number=loops) / loops * 1e9
    off = _per_task_us(CALLS)
    _enable()
    on = _per_task_us(CALLS)
    result = {"disabled_check_ns": round(check_ns, 1), "task_off_us": round(off, 1), "task_on_us": round(on, 1)}
    print(f"telemetry.enabled() with observability off: {check_ns:.0f} ns per task")
    print(f"one @chroma_task call through Flux, observability off: {off:.0f} us ({CALLS} calls)")
    print(f"the same, observability on (in-memory SDK): {on:.0f} us")
    print(f"the disabled check is {check_ns / (off * 1000) * 100:.3f}% of a task call")
    return result


if __name__ == "__main__":
    main()
