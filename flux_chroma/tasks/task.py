"""``ChromaTask``: a genuine Flux task that also carries flux-chroma's options.

``cache=True`` means embedding reuse, never Flux's output cache (which SKIPS the task on a hit
and would silently skip writes). :meth:`ChromaTask.adjust_failure` (called first by Flux's
exception handler, see :func:`~flux_chroma.seams.route_task_failures`) skips retries for
permanent errors, and replaces what Flux 0.87 stores when retries run out
(``ExecutionError(RetryError(...))``: text ``"None"``, cannot be unpickled) by a typed error.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from flux import task
from flux.errors import ExecutionTimeoutError, RetryError

from flux_chroma.chroma.settings import DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, _env_float
from flux_chroma.errors import ConfigurationError, FluxChromaError
from flux_chroma.seams import route_task_failures
from flux_chroma.tasks.context import task_scope
from flux_chroma.tasks.failures import final_error, scrub, unrecordable
from flux_chroma.tasks.options import CHROMA_OPTION_NAMES, ChromaOptions
from flux_chroma.telemetry import enabled as observability_on
from flux_chroma.telemetry import observe, record_error, record_receipt, span

__all__ = ["FLUX_OPTION_NAMES", "ChromaTask", "emit_progress", "split_options"]

# ``task.with_options`` on the class is Flux's public decorator factory: it takes every task option.
FLUX_OPTION_NAMES = frozenset(inspect.signature(task.with_options).parameters)
# The options a copy made by ``with_options`` reads back from the task (``cache`` is always
# False, ``name`` and ``secret_requests`` are rebuilt).
_KEPT_FLUX_OPTIONS = FLUX_OPTION_NAMES - {"cache", "name", "secret_requests"}


def split_options(owner: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split task options into ``(flux-chroma's, Flux's)`` (``cache`` is flux-chroma's).

    Raises:
        ConfigurationError: An option that is neither (``owner`` names what received it).
    """
    unknown = set(kwargs) - FLUX_OPTION_NAMES - CHROMA_OPTION_NAMES
    if unknown:
        raise ConfigurationError(
            f"{owner} got unknown option(s) {sorted(unknown)}; "
            f"flux-chroma options: {sorted(CHROMA_OPTION_NAMES)}, Flux options: "
            f"{sorted(FLUX_OPTION_NAMES - {'cache'})}."
        )
    chroma = {k: v for k, v in kwargs.items() if k in CHROMA_OPTION_NAMES}
    flux = {k: v for k, v in kwargs.items() if k in FLUX_OPTION_NAMES and k != "cache"}
    return chroma, flux


def _bounded(options: ChromaOptions, timeout: float) -> ChromaOptions:
    """Cap the HTTP timeouts at the Flux task ``timeout`` (when one is set).

    Flux's ``timeout=`` cannot stop a worker thread blocked in HTTP: without the cap the
    execution lasts until the read timeout (60 s; measured with a SIGSTOPped server).
    """
    if not timeout or timeout <= 0:
        return options
    read = options.read_timeout or _env_float("FLUX_CHROMA_READ_TIMEOUT", DEFAULT_READ_TIMEOUT)
    connect = options.connect_timeout or _env_float("FLUX_CHROMA_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT)
    if read <= timeout and connect <= timeout:
        return options
    return replace(options, read_timeout=min(read, float(timeout)), connect_timeout=min(connect, float(timeout)))


def _make_body(func: Callable[..., Any], name: str, options: ChromaOptions, timeout: float = 0) -> Callable[..., Any]:
    """Flux's view of ``func``: the same signature, with the task's options in scope."""
    signature = inspect.signature(func)
    passes_secrets = "secrets" in signature.parameters

    async def body(*args: Any, **kwargs: Any) -> Any:
        secrets = kwargs.get("secrets") if passes_secrets else kwargs.pop("secrets", None)
        with task_scope(name, _bounded(options, timeout), secrets if isinstance(secrets, dict) else None):
            if not observability_on():
                return await func(*args, **kwargs)
            return await _traced(func, name, options.tenant, _collection_arg(signature, args, kwargs), args, kwargs)

    functools.update_wrapper(body, func)
    body.__signature__ = signature  # type: ignore[attr-defined]
    return body


def _collection_arg(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The task's ``collection`` argument, when it has one (a telemetry label)."""
    if "collection" not in signature.parameters:
        return None
    try:
        return signature.bind_partial(*args, **kwargs).arguments.get("collection")
    except TypeError:
        return None


async def _traced(
    func: Callable[..., Any], name: str, tenant: str | None, collection: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run a task body in a ``flux_chroma.task`` span, recording its metrics (observability on)."""
    started = time.perf_counter()
    with span("flux_chroma.task", tenant, collection, task=name):
        try:
            output = await func(*args, **kwargs)
        except Exception as exc:
            record_error(exc, tenant, collection)
            raise
        finally:
            if name == "query":
                observe("flux_chroma_query_duration_seconds", time.perf_counter() - started, tenant, collection)
    if isinstance(output, dict) and "upserted" in output and "cache_hits" in output:  # a write Receipt
        record_receipt(output, tenant, collection)
    return output


@route_task_failures
class ChromaTask(task):
    """A Flux task bound to flux-chroma options; usually made with ``@chroma_task``.

    Args:
        func: The ``async def`` that is the task: its signature is what Flux records and
            hashes, its docstring the task's.
        options: flux-chroma options.
        **flux_options: Flux task options (``retry_max_attempts``, ``timeout``, ...).

    Raises:
        ConfigurationError: ``func`` is not an ``async def`` function.
    """

    def __init__(
        self,
        func: Callable[..., Awaitable[Any]],
        options: ChromaOptions | None = None,
        **flux_options: Any,
    ) -> None:
        if not inspect.iscoroutinefunction(func):
            raise ConfigurationError(
                f"a flux-chroma task must be an `async def` function, got {func!r}; "
                "write `async def` (run blocking calls with asyncio.to_thread or use_collection)."
            )
        self.definition = func
        self.options = options or ChromaOptions()
        self._explicit_name = flux_options.pop("name", None)
        base = func.__name__
        name = self._explicit_name or (f"{base}_{self.options.tenant}" if self.options.tenant else base)
        secret_requests = list(flux_options.pop("secret_requests", None) or [])
        if self.options.token_secret and self.options.token_secret not in secret_requests:
            secret_requests.append(self.options.token_secret)
        flux_options["cache"] = False  # Flux's output cache would skip writes; see module doc
        super().__init__(
            _make_body(func, base, self.options, flux_options.get("timeout") or 0),
            name=name,
            secret_requests=secret_requests,
            **flux_options,
        )

    def _with_options(self, **kwargs: Any) -> ChromaTask:  # type: ignore[override]
        """Return a new task with merged Flux and flux-chroma options (``cache``: embedding reuse).

        Raises:
            ConfigurationError: An unknown option, or an invalid value.
        """
        chroma, flux = split_options(f"{self.definition.__name__}.with_options()", kwargs)
        merged = {name: getattr(self, name) for name in _KEPT_FLUX_OPTIONS}
        token_secret = self.options.token_secret  # re-added by __init__ from the new options
        merged["secret_requests"] = [s for s in self.secret_requests if s != token_secret]
        merged.update({k: v for k, v in flux.items() if v is not None})
        name = merged.pop("name", None) or self._explicit_name
        return ChromaTask(self.definition, replace(self.options, **chroma), name=name, **merged)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task through Flux (records events, replays, retries).

        Raises:
            InvalidDocumentError: A document holds a value Flux cannot record (numpy, ...).
            InvalidQueryError: Another argument holds such a value.
        """
        try:
            return await super().__call__(*args, **kwargs)
        except TypeError as exc:
            # Flux hashes the arguments into the task id before anything runs; a numpy value
            # fails there with a message that names neither the document nor the key.
            if "deterministic task id" not in str(exc):
                raise
            raise unrecordable(self.definition.__name__, self.definition, args, kwargs, exc) from None

    def adjust_failure(
        self, ex: Exception, kwargs: dict[str, Any], retry_attempts: int
    ) -> tuple[Exception, int]:
        """Skip retries for permanent errors; store a typed error when retries run out.

        Returns:
            The error Flux records and the attempt count it sees (``retry_max_attempts``: final).
        """
        if isinstance(ex, RetryError):
            ex = final_error(ex, ex.retry_attempts)
            retry_attempts = self.retry_max_attempts
        elif isinstance(ex, ExecutionTimeoutError):
            if self.retry_max_attempts == 0:
                ex = final_error(ex, 0)  # transient, but no retry configured: store it readable
        elif isinstance(ex, FluxChromaError):
            if not ex.transient:
                retry_attempts = self.retry_max_attempts  # permanent: fail at once
        elif type(ex).__module__.split(".")[0] != "flux":
            # An unexpected error (a bug, or a custom embedding function failing): permanent,
            # stored as a readable, picklable FluxChromaError rather than ExecutionError(None).
            ex = final_error(ex, 0)
            retry_attempts = self.retry_max_attempts
        return scrub(ex, self._credentials(kwargs)), retry_attempts

    def _credentials(self, kwargs: dict[str, Any]) -> list[str]:
        """Credential strings this task sends (header values and bare tokens), longest first."""
        injected = kwargs.get("secrets")
        try:
            values = self.options.settings(injected if isinstance(injected, dict) else None).secrets()
        except FluxChromaError:
            return []
        found = set(values) | {part for value in values for part in value.split() if len(part) >= 8}
        return sorted(found, key=len, reverse=True)


def emit_progress(value: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Return a callback that streams Flux progress from any thread; call it in the task body."""
    from flux.tasks.progress import progress

    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()

    def send(update: dict[str, Any]) -> None:
        payload = {**value, **update}
        loop.call_soon_threadsafe(lambda: loop.create_task(progress(payload), context=context))

    return send
