"""Cluster units: a ``parallel`` job on a Flux worker runs its units as child executions.

The parent (``ingest_job`` or your workflow calling :func:`ingest_steps`, running on a Flux
worker) starts each unit as an execution of ``flux-chroma/ingest_unit`` through its Flux
server, at most ``parallel`` at a time; the server places them on any worker. Per unit:

1. ``call("flux-chroma/ingest_unit", payload, mode="async")``: a Flux task whose output
   (the child's execution id) is a checkpoint of the parent. A parent that is resumed
   (Flux re-dispatches an execution whose worker died) replays it and waits for the SAME
   child instead of starting a twin.
2. ``await_unit(child id, ...)``: a task polling the child until it ends (a cheap status
   call at intervals growing from 50 ms to 1 s; the child's event log only as often as the
   stall clock below needs it); its output (the unit's batch receipts) is the unit's replay
   checkpoint.

What Flux 0.87 does when a worker dies (flux/server.py, ``_reclaim_orphaned_executions``):
the worker's executions are unclaimed and dispatched again once it has been silent for
``heartbeat_timeout + eviction_grace_period`` (30 s + 30 s by default), and the new run
replays the child's finished batches. flux-chroma adds what Flux does not do: a unit
whose child shows no progress (no new event, state or worker) for ``unit_timeout``
seconds is cancelled and dispatched again as attempt ``n + 1``: a new payload, hence a
new deterministic task id in the parent. Two copies of one unit can overlap (a cancelled
child still finishing its batch, or a reclaimed one); they write the same planned content
(every batch is re-read and checked against its planned digest, and upserts are keyed by
content hash), so the overlap is harmless.

When the Flux server itself restarts, the workers reconnect and the children keep running;
the job's own calls to the server (starting a unit, polling it) are retried for up to
``unit_timeout`` seconds (:mod:`flux_chroma.ingest.outage`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from flux import task

import flux_chroma.errors as fc_errors
from flux_chroma.errors import ConfigurationError, FluxChromaError
from flux_chroma.ingest.outage import get_execution, start_child
from flux_chroma.ingest.units import bounded_gather

__all__ = [
    "UNIT_WORKFLOW",
    "DEFAULT_UNIT_TIMEOUT",
    "MAX_ATTEMPTS",
    "check_dispatch",
    "await_unit",
    "dispatch_units",
    "error_from_output",
]

UNIT_WORKFLOW = "flux-chroma/ingest_unit"
DEFAULT_UNIT_TIMEOUT = 600.0
"""Seconds a unit may show no progress before it is cancelled and dispatched again."""
MAX_ATTEMPTS = 3
POLL_FIRST = 0.05
"""Seconds before the first poll of a child; each next wait is ``POLL_GROWTH`` times longer..."""
POLL_GROWTH = 1.25
POLL_MAX = 1.0
"""...up to this."""
DETAIL_SECONDS = 15.0
"""At most this long between two reads of a child's event log (the stall clock's evidence)."""
_TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}
_REGISTER_HINT = (
    "Register flux-chroma's ingestion workflows with the Flux server: flux workflow register "
    '"$(python -c \'import flux_chroma.ingest.workflow as m; print(m.__file__)\')" --server-url URL'
)


def _server_url() -> str:
    from flux.config import Configuration

    return str(Configuration.get().settings.workers.server_url)


async def _client() -> Any:
    from flux.client import FluxClient

    return await FluxClient.for_current_execution()


async def _check_dispatch() -> dict[str, Any]:
    """Check, once per job, that child executions can be started: a Flux server answers at
    ``FLUX_WORKERS__SERVER_URL`` and ``flux-chroma/ingest_unit`` is registered there.

    Raises:
        ConfigurationError: No Flux server answers, or the unit workflow is not registered.
    """
    import httpx

    url = _server_url()
    async with await _client() as client:
        health = await client.health_check()
        if not health or health.get("status") != "healthy":
            raise ConfigurationError(
                f"a parallel ingestion job starts its units through the Flux server, but no Flux server "
                f"answers at {url} (this worker's FLUX_WORKERS__SERVER_URL): either the server is down or "
                "restarting, or that variable does not name it. Set FLUX_WORKERS__SERVER_URL to the Flux "
                "server's URL on every worker and make sure the server is up, then re-submit the job "
                "(committed batches are not written again); or run with parallel=1."
            )
        try:
            await client.get_workflow(UNIT_WORKFLOW)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                raise ConfigurationError(
                    f"the workflow {UNIT_WORKFLOW} is not registered on the Flux server at {url}, so a "
                    f"parallel ingestion job cannot start its units. {_REGISTER_HINT}."
                ) from None
            raise
    return {"server_url": url}


def error_from_output(output: Any, context: str) -> FluxChromaError:
    """Rebuild a child's failure (``{"type", "message"}`` after Flux's JSON hop) as a typed error.

    The class is the flux-chroma error of that name when there is one (so a
    ``SourceChangedError`` in a unit stays one in the parent), else :class:`FluxChromaError`.
    """
    if isinstance(output, dict):
        name, message = str(output.get("type") or ""), str(output.get("message") or output)
    else:
        name, message = "", str(output)
    cls = getattr(fc_errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, FluxChromaError)):
        cls = FluxChromaError
        message = f"{name}: {message}" if name else message
    err = cls.__new__(cls)
    FluxChromaError.__init__(err, f"{context}: {message}")
    return err


class _StallClock:
    """What the parent has seen of one child, and since when nothing changed.

    Progress is a new state, a new worker, or a new event in the child's log. A cheap
    (non-detailed) status answers state and worker; the event count needs the detailed
    answer (all events), so it is asked for at most every ``detail_every`` seconds, and
    always before a stall is declared.
    """

    def __init__(self, unit_timeout: float, now: float) -> None:
        self.unit_timeout = unit_timeout
        self.detail_every = min(unit_timeout / 4, DETAIL_SECONDS)
        self.last_change = now
        self.last_detail = now
        self.status: tuple[Any, ...] | None = None
        self.events: int | None = None

    def wants_detail(self, now: float) -> bool:
        """Whether the next poll must count the child's events."""
        return now - self.last_detail >= self.detail_every or now - self.last_change > self.unit_timeout

    def saw(self, execution: dict[str, Any], detailed: bool, now: float) -> bool:
        """Record one poll's answer; ``True`` when the child has stalled (no progress for
        ``unit_timeout`` seconds, confirmed by its event count)."""
        status = (execution.get("state"), execution.get("current_worker"))
        changed = status != self.status
        self.status = status
        if detailed:
            self.last_detail = now
            events = len(execution.get("events") or ())
            changed = changed or events != self.events
            self.events = events
        if changed:
            self.last_change = now
            return False
        return detailed and now - self.last_change > self.unit_timeout


def _poll_delays() -> Iterator[float]:
    """Seconds between two polls of a child: from ``POLL_FIRST`` growing to ``POLL_MAX``.

    A short unit is noticed soon after it ends; a long one costs one cheap status call a
    second.
    """
    delay = POLL_FIRST
    while True:
        yield delay
        delay = min(POLL_MAX, delay * POLL_GROWTH)


async def _poll(client: Any, execution_id: str, detailed: bool, unit_timeout: float) -> dict[str, Any]:
    """One look at the child (``detailed``: with all its events), retried while the Flux
    server is unreachable, for up to ``unit_timeout`` seconds (:mod:`~flux_chroma.ingest.outage`)."""
    return await get_execution(client, execution_id, detailed, unit_timeout, _server_url())


async def _await_unit(execution_id: str, unit: int, attempt: int, unit_timeout: float) -> dict[str, Any]:
    """Wait for one unit's child execution; cancel it when it stalls.

    Polls the child's status (cheap: no events) at growing intervals (:func:`_poll_delays`),
    and its event log only as often as the stall clock needs it (:class:`_StallClock`).

    Args:
        execution_id: The child execution.
        unit: Unit number (for messages).
        attempt: Dispatch attempt of this unit (part of the task id).
        unit_timeout: Seconds without progress before the child is given up.

    Returns:
        ``{"state": "COMPLETED", "output": {...}}`` or ``{"state": "STALLED", ...}``.

    Raises:
        FluxChromaError: The child failed or was cancelled (its error class and message).
    """
    from flux_chroma.ingest.batch import send_progress

    async with await _client() as client:
        clock = _StallClock(unit_timeout, time.monotonic())
        delays = _poll_delays()
        detailed = False
        while True:
            execution = await _poll(client, execution_id, detailed, unit_timeout)
            state = str(execution.get("state"))
            if state == "COMPLETED":
                output = execution.get("output") or {}
                for receipt in output.get("receipts", []):
                    await send_progress({"phase": "batch", "status": "done", "unit": unit, **receipt})
                return {"state": state, "output": output}
            if state in _TERMINAL:
                raise error_from_output(
                    execution.get("output"),
                    f"unit {unit} (execution {execution_id} on worker {execution.get('current_worker') or '?'}) ended {state}",
                )
            if clock.saw(execution, detailed, time.monotonic()):
                with contextlib.suppress(Exception):  # best effort: the child may be gone or finishing
                    await client.cancel_execution(UNIT_WORKFLOW, execution_id)
                return {"state": "STALLED", "execution_id": execution_id, "worker": execution.get("current_worker"), "attempt": attempt}
            await asyncio.sleep(next(delays))
            detailed = clock.wants_detail(time.monotonic())


check_dispatch: Any = task.with_options(name="check_dispatch")(_check_dispatch)
"""Flux task: see ``_check_dispatch`` (checked once per job; a checkpoint)."""

await_unit: Any = task.with_options(name="await_unit")(_await_unit)
"""Flux task: see ``_await_unit`` (the unit's replay checkpoint)."""


async def _run_unit(payload: dict[str, Any], unit_timeout: float) -> list[dict[str, Any]]:
    stalls: list[str] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        child = await start_child(UNIT_WORKFLOW, {**payload, "attempt": attempt}, unit_timeout, _server_url())
        result = await await_unit(str(child), int(payload["unit"]["unit"]), attempt, unit_timeout)
        if result["state"] == "COMPLETED":
            receipts: list[dict[str, Any]] = result["output"]["receipts"]
            return receipts
        stalls.append(f"{result['execution_id']} on {result.get('worker') or 'no worker'}")
    raise FluxChromaError(
        f"unit {payload['unit']['unit']} made no progress for {unit_timeout:.0f} s in {MAX_ATTEMPTS} attempts "
        f"({'; '.join(stalls)}). Check that the Flux workers are running and can reach the Chroma server, "
        "then run the job again: committed batches are skipped."
    )


async def dispatch_units(
    job: dict[str, Any], collection: str, units: list[dict[str, Any]], parallel: int, unit_timeout: float, *, overlap: bool = False
) -> tuple[list[dict[str, Any]], tuple[dict[str, Any], BaseException] | None]:
    """Run units as child executions, at most ``parallel`` at once.

    Args:
        job: The job spec the tasks receive (:meth:`IngestJob.work_dict`).
        collection: The collection to write (the plan's).
        units: From :func:`~flux_chroma.ingest.units.shard`.
        parallel: Child executions in flight at once.
        unit_timeout: Seconds without progress before a unit is dispatched again.
        overlap: The job's ``overlap`` (sent to the units only when ``True``).

    Returns:
        ``(receipts in batch order, (first batch of the earliest failed unit, its error) or None)``.
    """
    await check_dispatch()
    extra = {"overlap": True} if overlap else {}  # default payloads (and their task ids) unchanged
    payloads = [{"job": job, "collection": collection, "unit": unit, **extra} for unit in units]
    results = await bounded_gather([_run_unit(p, unit_timeout) for p in payloads], parallel)
    receipts: list[dict[str, Any]] = []
    failure: tuple[dict[str, Any], BaseException] | None = None
    for unit, result in zip(units, results, strict=True):
        if isinstance(result, BaseException):
            if failure is None:
                failure = (unit["batches"][0], result)
        else:
            receipts.extend(result)
    receipts.sort(key=lambda r: int(r["batch"]))
    return receipts, failure
