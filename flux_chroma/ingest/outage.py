"""Riding out a Flux server restart in the parent of a cluster job.

The parent of a ``parallel`` job on a Flux worker talks to its Flux server for every unit:
it starts the unit's child execution and then polls it. When the server restarts (same
database), Flux 0.87's workers reconnect on their own and re-send the checkpoints they
could not deliver, so the children keep running and their batches land; only the parent's
own calls fail, with connection errors (or a 5xx while the server starts). Unhandled, the
first one failed the whole job (``ConnectError('All connection attempts failed')``).

:func:`get_execution` and :func:`start_child` retry such failures with capped backoff for
up to ``patience`` seconds (the job's ``unit_timeout``), then raise a
:class:`~flux_chroma.errors.FluxChromaError` that names the server and says to submit the
job again (committed batches are skipped, not embedded again). Within ``patience`` of one
call giving up, the job's other calls to that server try once. Any other failure (a 404, a
child that failed) is raised at once.

Not covered: with Flux authentication enabled, flux-core 0.87.5 authorizes every task call
with the server first and fails closed (``TaskAuthorizationError``) when it cannot reach it,
so tasks starting during the outage fail in the job and in its units (re-submit the job).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx

from flux_chroma.errors import FluxChromaError

__all__ = ["FIRST_DELAY", "MAX_DELAY", "transient_cause", "get_execution", "start_child"]

FIRST_DELAY = 0.5
"""Seconds before the first retry; doubled after each failure..."""
MAX_DELAY = 5.0
"""...up to this."""
_UNREACHABLE = "Could not connect to the Flux server"  # flux.tasks.call's message (survives replay)
_given_up: dict[str, float] = {}  # server URL -> when a call of this process last gave up on it


def transient_cause(exc: BaseException) -> BaseException | None:
    """The connection-level failure behind ``exc`` (itself, its inner exception or cause).

    Returns:
        The ``httpx`` transport error or 5xx answer (or Flux's "Could not connect" error,
        as replayed from a parent's log), or ``None`` when ``exc`` is not one.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, httpx.TransportError):
            return err
        if isinstance(err, httpx.HTTPStatusError) and err.response.status_code >= 500:
            return err
        if str(getattr(err, "message", "") or "").startswith(_UNREACHABLE):
            return err
        inner = getattr(err, "inner_exception", None)
        todo.extend(
            [inner if isinstance(inner, BaseException) else None, err.__cause__, err.__context__]
        )
    return None


def _delays() -> Iterator[float]:
    delay = FIRST_DELAY
    while True:
        yield delay
        delay = min(MAX_DELAY, delay * 2)


async def _patiently[T](
    attempt: Callable[[], Awaitable[T]], patience: float, what: str, server_url: str
) -> T:
    # Within ``patience`` of a call giving up on this server, the next ones try once: a parent
    # with hundreds of units waiting to start must not wait ``patience`` again for each.
    gave_up = _given_up.get(server_url)
    recently = gave_up is not None and time.monotonic() - gave_up < patience
    deadline = time.monotonic() + (0.0 if recently else patience)
    delays = _delays()
    while True:
        try:
            result = await attempt()
        except Exception as exc:  # classified below; anything else is re-raised
            cause = transient_cause(exc)
            if cause is None:
                raise
            if time.monotonic() >= deadline:
                _given_up[server_url] = time.monotonic()
                raise FluxChromaError(
                    f"the Flux server at {server_url} did not answer for more than {patience:.0f} s "
                    f"(unit_timeout) while the job {what} ({type(cause).__name__}: {cause}). Start the Flux "
                    "server again (its state is in its database; the workers reconnect), then submit the job "
                    "again."
                ) from None
        else:
            _given_up.pop(server_url, None)
            return result
        await asyncio.sleep(min(next(delays), max(0.0, deadline - time.monotonic())))


async def get_execution(
    client: Any, execution_id: str, detailed: bool, patience: float, server_url: str
) -> dict[str, Any]:
    """``client.get_execution``, retried while the Flux server is unreachable.

    Args:
        client: A ``flux.client.FluxClient``.
        execution_id: The child execution.
        detailed: Ask for its events too.
        patience: Seconds the server may stay unreachable.
        server_url: For the error message.

    Raises:
        FluxChromaError: The server stayed unreachable for ``patience`` seconds.
    """

    async def once() -> dict[str, Any]:
        execution: dict[str, Any] = await client.get_execution(execution_id, detailed=detailed)
        return execution

    return await _patiently(
        once, patience, f"was waiting for unit execution {execution_id}", server_url
    )


async def start_child(
    workflow: str, payload: dict[str, Any], patience: float, server_url: str
) -> str:
    """Start a child execution (``flux.tasks.call`` in ``async`` mode), retried while the Flux
    server is unreachable; its execution id.

    Each failed call is a ``TASK_FAILED`` in the parent's log and the retry is the next
    occurrence of the same task, so a resumed parent replays the same sequence. A call that
    reached the server but whose answer was lost leaves an unawaited twin: it writes the
    same planned content as the awaited one (see :mod:`flux_chroma.ingest.dispatch`).

    Raises:
        FluxChromaError: The server stayed unreachable for ``patience`` seconds.
    """
    from flux.tasks.call import call

    async def once() -> str:
        return str(await call(workflow, payload, mode="async"))

    return await _patiently(
        once, patience, f"was starting unit {payload['unit']['unit']}", server_url
    )
