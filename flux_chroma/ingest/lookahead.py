"""Overlap between ingestion batches: embed batch N+1 while batch N is written.

Each batch is its own ``ingest_batch`` task (a replay checkpoint), so the overlap crosses task
boundaries without changing what a task receives or records:

1. The job's loop over a unit's batches (:func:`~flux_chroma.ingest.units.run_units_inline`)
   names the batch that comes next with :func:`ahead` (a context variable: never a task
   argument, so task ids and Flux's log are unchanged).
2. The running ``ingest_batch`` task, once its own vectors are ready and before its upsert,
   starts :func:`start_prefetch`: a daemon thread re-reads the next batch from its reference, asks the
   server which of its chunks are unchanged and embeds the rest WITHOUT storing anything
   (:meth:`~flux_chroma.embedding.CachingEmbedder.precompute`).
3. The next ``ingest_batch`` task :func:`take_prefetched`-s those vectors and then does all its usual
   work itself (re-read and digest check, ``get`` of what the server holds, cache lookups,
   upsert, verify); a prefetched vector only replaces a model run of that exact text with
   that exact model, and still counts as embedded. Receipts, written contents and
   checkpoints are those of a sequential run.

Nothing computed ahead is ever written by the thread that computed it. If batch N fails,
the vectors of N+1 are dropped (:func:`drop_prefetched`); a prefetch that failed is ignored (the task
redoes the work and raises its own typed error). At most :data:`MAX_PENDING` prefetches are
kept per process.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from flux_chroma.ingest.spec import canonical_json
from flux_chroma.tasks.background import in_background

__all__ = [
    "MAX_PENDING",
    "ahead",
    "next_batch",
    "key_of",
    "start_prefetch",
    "take_prefetched",
    "drop_prefetched",
]

MAX_PENDING = 8
"""Prefetches kept per process (oldest dropped first): one per unit in flight is enough."""

_next: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "flux_chroma_next_batch", default=None
)
_lock = threading.Lock()
_pending: OrderedDict[str, Future[Any]] = OrderedDict()


@contextlib.contextmanager
def ahead(ref: dict[str, Any] | None) -> Iterator[None]:
    """Name the batch that follows the one written inside this block (None: no overlap)."""
    token = _next.set(ref)
    try:
        yield
    finally:
        _next.reset(token)


def next_batch() -> dict[str, Any] | None:
    """The batch reference named by the enclosing :func:`ahead`, if any."""
    return _next.get()


def key_of(url: str, physical: str, ref: dict[str, Any]) -> str:
    """Identify one batch of one collection on one server (the batch's content digest included)."""
    return canonical_json([url, physical, ref])


def start_prefetch(key: str, work: Callable[[], Any]) -> None:
    """Run ``work`` in a daemon thread for the batch ``key`` (once: a retry reuses it)."""
    with _lock:
        if key in _pending:
            return
        _pending[key] = in_background(work)
        while len(_pending) > MAX_PENDING:
            _pending.popitem(last=False)


def take_prefetched(key: str) -> Any:
    """Remove and return the prefetched result for ``key`` (waiting for it); None if absent or failed."""
    with _lock:
        future = _pending.pop(key, None)
    if future is None:
        return None
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - the task redoes the work and raises its own error
        return None


def drop_prefetched(key: str) -> None:
    """Forget the prefetch for ``key`` (its batch will not be written by this run)."""
    with _lock:
        _pending.pop(key, None)
