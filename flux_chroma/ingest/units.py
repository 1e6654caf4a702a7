"""Units: shards of consecutive batches, the pieces a ``parallel`` job runs at once.

Inline, up to ``parallel`` units run concurrently in the one workflow, each writing its batches
in order (every batch is still a replay checkpoint); on a Flux worker each unit is a child
execution (:mod:`flux_chroma.ingest.dispatch`). Size trade-off: on Flux's default ``subprocess``
runner a child is a new process that imports flux-chroma and chromadb and loads the model before
its first batch, so units hold as many batches as balance allows; :data:`UNITS_PER_SLOT` per slot
are cut so a slow unit does not leave the other slots idle for long at the end of a job.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["UNITS_PER_SLOT", "MAX_UNIT_BATCHES", "unit_size", "shard", "run_units_inline", "bounded_gather", "UnitFailure"]

UNITS_PER_SLOT = 2
"""Units cut per slot of ``parallel`` (load balance at the end of a job; each more is a process
per slot: 4 cost the cluster tests 16% more CPU for the same jobs)."""

MAX_UNIT_BATCHES = 16
"""Largest unit, in batches (bounds the work a lost unit repeats)."""

WriteBatch = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def unit_size(batches: int, parallel: int) -> int:
    """Batches per unit (1 to :data:`MAX_UNIT_BATCHES`) for a plan run ``parallel`` at a time."""
    if parallel <= 1 or batches <= 1:
        return max(1, batches)
    return max(1, min(MAX_UNIT_BATCHES, math.ceil(batches / (parallel * UNITS_PER_SLOT))))


def shard(batches: list[dict[str, Any]], parallel: int) -> list[dict[str, Any]]:
    """Cut ``plan["batches"]`` into units of consecutive batches.

    Returns:
        ``[{"unit": i, "of": n, "batches": [ref, ...]}, ...]`` (JSON-able, in plan order).
    """
    size = unit_size(len(batches), parallel)
    cuts = [batches[start : start + size] for start in range(0, len(batches), size)]
    return [{"unit": i, "of": len(cuts), "batches": refs} for i, refs in enumerate(cuts)]


async def bounded_gather(coros: list[Awaitable[Any]], max_concurrent: int) -> list[Any]:
    """Await coroutines with at most ``max_concurrent`` running; exceptions are returned.

    Unlike ``flux.tasks.parallel`` (a task, replayed as a whole), each branch's own tasks are
    the checkpoints: a failed branch is retried on the next run, the finished ones replay.
    """
    semaphore = asyncio.Semaphore(max_concurrent)

    async def bounded(coro: Awaitable[Any]) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(bounded(c) for c in coros), return_exceptions=True)


class UnitFailure(Exception):
    """A unit stopped at one batch; carries the batch reference and the cause."""

    def __init__(self, ref: dict[str, Any], cause: BaseException) -> None:
        super().__init__(f"batch {ref.get('batch')} failed: {cause!r}")
        self.ref = ref
        self.cause = cause


async def _run_unit(unit: dict[str, Any], write: WriteBatch, receipts: list[dict[str, Any]]) -> None:
    for ref in unit["batches"]:
        try:
            receipts.append(await write(ref))
        except Exception as exc:  # noqa: BLE001 - reported with the job's progress by the caller
            raise UnitFailure(ref, exc) from None


async def run_units_inline(units: list[dict[str, Any]], write: WriteBatch, parallel: int) -> tuple[list[dict[str, Any]], UnitFailure | None]:
    """Run units in this process, at most ``parallel`` at once, each unit's batches in order.

    A failing unit stops at its failing batch; the other units run to their end (their
    batches commit and replay on the next run).

    Args:
        units: From :func:`shard`.
        write: Writes one batch reference (an ``ingest_batch`` task call); returns its receipt.

    Returns:
        ``(receipts in batch order, the earliest failing batch's failure or None)``.
    """
    receipts: list[dict[str, Any]] = []
    results = await bounded_gather([_run_unit(u, write, receipts) for u in units], parallel)
    receipts.sort(key=lambda r: int(r["batch"]))
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, UnitFailure):
            raise result
    failures = [r for r in results if isinstance(r, UnitFailure)]
    return receipts, min(failures, key=lambda f: int(f.ref["batch"]), default=None)
