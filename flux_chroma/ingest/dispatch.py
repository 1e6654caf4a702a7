"""Cluster units: a ``parallel`` job on a Flux worker runs its units as child executions.

Each unit is an execution of ``flux-chroma/ingest_unit``, started through the Flux server (at
most ``parallel`` at a time) and awaited; both steps are Flux tasks, so a resumed job waits for
the SAME child and replays its receipts. No progress (new state, worker or event) for
``unit_timeout`` s cancels the child and fails the job; so does no answer from the Flux server
for that long. A dead worker is Flux's to handle: it unclaims the child after
``heartbeat_timeout + eviction_grace_period`` (60 s by default), so keep ``unit_timeout`` above
that. Once a unit has failed, units not yet started are not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

import httpx
from flux import task

import flux_chroma.errors as fc_errors
from flux_chroma.errors import ConfigurationError, FluxChromaError, restore_error
from flux_chroma.ingest.batch import send_progress
from flux_chroma.ingest.units import UnitFailure, bounded_gather

__all__ = ["UNIT_WORKFLOW", "DEFAULT_UNIT_TIMEOUT", "await_unit", "check_dispatch", "dispatch_units", "error_from_output"]

UNIT_WORKFLOW = "flux-chroma/ingest_unit"
DEFAULT_UNIT_TIMEOUT = 600.0
"""Seconds a unit may show no progress (or the Flux server no answer) before the job fails."""
_RESUBMIT = "then submit the job again (committed batches are skipped)."


def _server_url() -> str:
    from flux.config import Configuration

    return str(Configuration.get().settings.workers.server_url)


async def _check_dispatch() -> dict[str, Any]:
    """Check that a Flux server answers at this worker's URL and has the unit workflow.

    Raises:
        ConfigurationError: No Flux server answers, or the unit workflow is not registered.
    """
    from flux.client import FluxClient

    url = _server_url()
    async with await FluxClient.for_current_execution() as client:
        health = await client.health_check()
        if not health or health.get("status") != "healthy":
            raise ConfigurationError(
                f"a parallel ingestion job starts its units through the Flux server, but no Flux server answers at "
                f"{url} (this worker's FLUX_WORKERS__SERVER_URL): either the server is down or restarting, or that "
                "variable does not name it. Set FLUX_WORKERS__SERVER_URL to the Flux server's URL on every worker and "
                f"make sure the server is up, {_RESUBMIT[:-1]}; or run with parallel=1."
            )
        try:
            await client.get_workflow(UNIT_WORKFLOW)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
            raise ConfigurationError(
                f"the workflow {UNIT_WORKFLOW} is not registered on the Flux server at {url}, so a parallel ingestion "
                "job cannot start its units. Register flux-chroma's ingestion workflows with the Flux server: flux "
                "workflow register \"$(python -c 'import flux_chroma.ingest.workflow as m; print(m.__file__)')\" "
                "--server-url URL."
            ) from None
    return {"server_url": url}


def error_from_output(output: Any, context: str) -> FluxChromaError:
    """Rebuild a child's failure (``{"type", "message"}`` after Flux's JSON hop) as a typed error.

    The flux-chroma error of that name when there is one, else :class:`FluxChromaError`.
    """
    name, message = (str(output.get("type") or ""), str(output.get("message") or output)) if isinstance(output, dict) else ("", str(output))
    cls = getattr(fc_errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, FluxChromaError)):
        cls, message = FluxChromaError, (f"{name}: {message}" if name else message)
    return restore_error(cls, f"{context}: {message}", {})


async def _await_unit(execution_id: str, unit: int, unit_timeout: float) -> dict[str, Any]:
    """Wait for one unit's child execution; its output (the unit's receipts).

    Polls its status (intervals growing to 1 s) and, every ``min(unit_timeout / 4, 15)`` s,
    its event log (the summary carries no event count). Raises the child's own error class.
    """
    from flux.client import FluxClient

    async with await FluxClient.for_current_execution() as client:
        answered = changed = read_events = time.monotonic()
        seen: tuple[Any, ...] = ()
        events, delay = -1, 0.05
        while True:
            detailed = time.monotonic() - read_events >= min(unit_timeout / 4, 15.0)
            try:
                execution = await client.get_execution(execution_id, detailed=detailed)
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:  # no answer: only silence counts
                if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code < 500:
                    raise
                if time.monotonic() - answered > unit_timeout:
                    raise FluxChromaError(
                        f"the Flux server at {_server_url()} did not answer for more than {unit_timeout:.0f} s "
                        f"(unit_timeout) while the job was waiting for unit {unit} (execution {execution_id}; "
                        f"{type(exc).__name__}: {exc}). Start the Flux server again (its state is in its database; "
                        f"the workers reconnect), {_RESUBMIT}"
                    ) from None
                seen = ()  # the child gets a fresh unit_timeout once the server answers again
                await asyncio.sleep(1.0)
                continue
            now = answered = time.monotonic()
            state, worker = str(execution.get("state")), execution.get("current_worker") or "no worker"
            if state == "COMPLETED":
                output: dict[str, Any] = execution.get("output") or {}
                for receipt in output.get("receipts", []):
                    await send_progress({"phase": "batch", "status": "done", "unit": unit, **receipt})
                return output
            if state in ("FAILED", "CANCELLED"):
                raise error_from_output(execution.get("output"), f"unit {unit} (execution {execution_id} on {worker}) ended {state}")
            if detailed:
                read_events, events = now, len(execution.get("events") or ())
            if (state, worker, events) != seen:
                seen, changed = (state, worker, events), now
            elif detailed and now - changed > unit_timeout:
                with contextlib.suppress(Exception):  # best effort: the child may be finishing or gone
                    await client.cancel_execution(UNIT_WORKFLOW, execution_id)
                raise FluxChromaError(
                    f"unit {unit} (execution {execution_id}, {state} on {worker}) made no progress (no new event, "
                    f"state or worker) for more than {unit_timeout:.0f} s (unit_timeout), so it was cancelled. Check "
                    f"that worker and the Chroma server (or raise options.unit_timeout), {_RESUBMIT}"
                )
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 1.25)


check_dispatch: Any = task.with_options(name="check_dispatch")(_check_dispatch)
await_unit: Any = task.with_options(name="await_unit")(_await_unit)


async def _start(payload: dict[str, Any], unit_timeout: float) -> str:
    """Start a unit's child execution; its id. Flux retries (1, 2, 4 ... s) ``unit_timeout`` s."""
    from flux.tasks.call import call

    retries = max(1, math.ceil(math.log2(unit_timeout + 1)))
    start = call.with_options(retry_max_attempts=retries, retry_delay=1, retry_backoff=2)
    try:
        return str(await start(UNIT_WORKFLOW, payload, mode="async"))
    except Exception as exc:  # noqa: BLE001 - Flux's retries ran out: say what failed, readably
        cause: BaseException = exc
        while isinstance(getattr(cause, "inner_exception", None), BaseException):  # ExecutionError(RetryError(..))
            cause = cause.inner_exception  # type: ignore[attr-defined]
        raise FluxChromaError(
            f"the Flux server at {_server_url()} did not start unit {payload['unit']['unit']} in {retries + 1} "
            f"attempts over more than {unit_timeout:.0f} s (unit_timeout): "
            f"{getattr(cause, 'message', None) or repr(cause)}. Make sure the Flux server is up, {_RESUBMIT}"
        ) from None


async def dispatch_units(
    job: dict[str, Any], collection: str, units: list[dict[str, Any]], parallel: int, unit_timeout: float
) -> tuple[list[dict[str, Any]], UnitFailure | None]:
    """Run units as child executions, at most ``parallel`` at once.

    ``job`` is :meth:`IngestJob.work_dict`, ``units`` from :func:`~flux_chroma.ingest.units.shard`.

    Returns:
        ``(receipts in batch order, the earliest failed unit's UnitFailure or None)``.
    """
    await check_dispatch()
    failed = asyncio.Event()

    async def run(unit: dict[str, Any]) -> list[dict[str, Any]]:
        if failed.is_set():  # the job fails anyway: start nothing more
            return []
        try:
            child = await _start({"job": job, "collection": collection, "unit": unit}, unit_timeout)
            output = await await_unit(child, int(unit["unit"]), unit_timeout)
        except BaseException:
            failed.set()
            raise
        return list(output["receipts"])

    results = await bounded_gather([run(unit) for unit in units], parallel)
    pairs = zip(units, results, strict=True)
    failures = [UnitFailure(u["batches"][0], r) for u, r in pairs if isinstance(r, BaseException)]
    done = [receipt for r in results if not isinstance(r, BaseException) for receipt in r]
    return sorted(done, key=lambda r: int(r["batch"])), (failures[0] if failures else None)
