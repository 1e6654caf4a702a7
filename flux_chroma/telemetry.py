"""Spans and metrics through Flux's own observability (``flux.observability``), never a second stack.

With ``FLUX_OBSERVABILITY__ENABLED`` unset, Flux's ``get_tracer`` / ``get_meter`` return
``None`` and every function here stops there (``bench/telemetry_cost.py``).

Only constant span names, the tenant, collection, task function name, integers and error class
names (never messages) are recorded: never a document, question, metadata value, record id or
credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "METRICS",
    "count",
    "enabled",
    "observe",
    "record_error",
    "record_receipt",
    "span",
]

METER_NAME = "flux_chroma"
"""Instrumentation scope of flux-chroma's tracer and meter."""

METRICS: dict[str, str] = {
    "flux_chroma_documents_embedded_total": "Texts embedded by the model (cache misses)",
    "flux_chroma_cache_hits_total": "Texts whose vectors came from the embedding cache",
    "flux_chroma_cache_misses_total": "Texts not found in the embedding cache",
    "flux_chroma_chunks_written_total": "Records upserted (added or changed)",
    "flux_chroma_chunks_skipped_total": "Records already stored with the same content hash",
    "flux_chroma_chunks_deleted_total": "Stale records deleted by ingestion cleanup",
    "flux_chroma_files_skipped_total": "Source files an ingestion plan skipped",
    "flux_chroma_errors_total": "Failed flux-chroma task attempts, by error class",
    "flux_chroma_batch_duration_seconds": "Duration of one ingestion batch (read, embed, write, verify)",
    "flux_chroma_query_duration_seconds": "Duration of one query task attempt",
}
"""Every instrument flux-chroma records: name -> description."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,512}$")


def _name(value: object) -> str:
    """A tenant or collection label: the validated name itself, or ``-``."""
    return value if isinstance(value, str) and _SAFE_NAME.fullmatch(value) else "-"


def labels(tenant: object, collection: object = None) -> dict[str, str]:
    """The only labels flux-chroma metrics carry."""
    return {"tenant": _name(tenant), "collection": _name(collection)}


_instruments: tuple[object, dict[str, Any]] | None = None  # (meter provider, name -> instrument)


def _meter_instruments() -> dict[str, Any] | None:
    """Every instrument of :data:`METRICS` by name, made again for a new meter provider."""
    global _instruments
    from flux.observability import get_meter

    meter = get_meter(METER_NAME)
    if meter is None:
        return None
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    if _instruments is None or _instruments[0] is not provider:
        made = {
            name: meter.create_histogram(name, description=text, unit="s")
            if name.endswith("_seconds")
            else meter.create_counter(name, description=text)
            for name, text in METRICS.items()
        }
        _instruments = (provider, made)
    return _instruments[1]


def enabled() -> bool:
    """Whether Flux observability is on in this process (``flux.observability.is_enabled``)."""
    from flux.observability import is_enabled

    return bool(is_enabled())


def count(metric: str, value: int, tenant: object, collection: object = None) -> None:
    """Add ``value`` to the counter ``metric`` (a no-op when observability is off or value is 0)."""
    if not value:
        return
    instruments = _meter_instruments()
    if instruments is not None:
        instruments[metric].add(int(value), labels(tenant, collection))


def observe(metric: str, seconds: float, tenant: object, collection: object = None) -> None:
    """Record ``seconds`` in the histogram ``metric`` (a no-op when observability is off)."""
    instruments = _meter_instruments()
    if instruments is not None:
        instruments[metric].record(float(seconds), labels(tenant, collection))


def record_error(exc: BaseException, tenant: object, collection: object = None) -> None:
    """Count a failed attempt by its exception class name (never its message)."""
    instruments = _meter_instruments()
    if instruments is not None:
        attrs = {**labels(tenant, collection), "error_type": type(exc).__name__}
        instruments["flux_chroma_errors_total"].add(1, attrs)


def record_receipt(receipt: Mapping[str, Any], tenant: object, collection: object = None) -> None:
    """Count what a write receipt (``embed_and_add``'s or an ingestion batch's) reports."""
    if _meter_instruments() is None:
        return
    written = receipt.get("upserted")
    if written is None:
        written = int(receipt.get("added", 0)) + int(receipt.get("updated", 0))
    embedded = int(receipt.get("embedded", 0))
    count("flux_chroma_documents_embedded_total", embedded, tenant, collection)
    count("flux_chroma_cache_hits_total", int(receipt.get("cache_hits", 0)), tenant, collection)
    count("flux_chroma_cache_misses_total", int(receipt.get("cache_misses", embedded)), tenant, collection)
    count("flux_chroma_chunks_written_total", int(written), tenant, collection)
    count("flux_chroma_chunks_skipped_total", int(receipt.get("skipped", 0)), tenant, collection)


@contextmanager
def span(name: str, tenant: object, collection: object = None, **numbers: int | str) -> Iterator[Any]:
    """A span nested under the current one (Flux's ``flux.task.execute``), or nothing.

    Args:
        name: A constant span name (``flux_chroma.task``, ...).
        **numbers: Integer attributes (``batch=3``), or ``task=`` the task's function name.

    Yields:
        The span, or ``None`` when observability is off; an exception marks it failed.
    """
    from flux.observability import get_tracer

    tracer = get_tracer(METER_NAME)
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    fields = {**labels(tenant, collection), **numbers}
    attributes = {
        f"flux_chroma.{k}": v if isinstance(v, int) else _name(v) for k, v in fields.items()
    }
    with tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
