"""Every use of another library's private API, in one place.

flux-chroma relies on a few internals of flux-core, chromadb, httpx, diskcache and Typer that
have no public equivalent. Each one is wrapped here in a small function whose docstring says
exactly what it relies on and in which version it was checked; the rest of the package calls
these functions and never touches an underscore name of another library. A contract test per
seam (``tests/test_seams.py``) exercises the real library, so an upgrade that breaks one fails
there with the library, the attribute and what to do, not deep inside a task.

Checked against: flux-core 0.87.5, chromadb 1.5.9, httpx 0.28.1 with httpcore 1.0.9,
diskcache 5.6.3, typer 0.29.2 with click 8.5.1 (the ranges pyproject.toml declares).

When a seam breaks after an upgrade, it raises :class:`SeamError` naming the library and the
attribute. Either pin the library back to the range flux-chroma declares, or update the seam
here (and its contract test) to the library's new internals.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from flux_chroma.errors import ConfigurationError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "SeamError",
    "route_task_failures",
    "register_workflow",
    "execution_store",
    "save_execution",
    "client_settings",
    "client_server",
    "collection_server",
    "http_session",
    "set_http_session",
    "client_class_with_first_call_hook",
    "set_connection_pool",
    "cache_sql",
    "cache_connection",
    "cache_disk",
    "disk_directory",
    "retry_cache_statements",
    "show_arguments_plain",
]


class SeamError(ConfigurationError):
    """An internal of another library that flux-chroma relies on is gone or has changed.

    Attributes:
        library: The distribution (``chromadb``, ``flux-core``, ...).
        attribute: The internal that is missing (``Client._server``, ...).
    """

    def __init__(self, library: str, attribute: str, detail: str = "") -> None:
        super().__init__(
            f"{library}'s internal {attribute} is missing or has changed{': ' + detail if detail else ''}. "
            f"flux-chroma relies on it (flux_chroma/seams.py). Install the {library} version range "
            "flux-chroma declares in its pyproject.toml, or update the seam and its contract test "
            "(tests/test_seams.py) for the new version."
        )
        self.library = library
        self.attribute = attribute


def _attr(obj: Any, name: str, library: str, owner: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise SeamError(library, f"{owner}.{name}") from None


# ---------------------------------------------------------------------------------- flux-core


def route_task_failures[T: type](cls: T) -> T:
    """Class decorator: a Flux task subclass adjusts each failure before Flux handles it.

    ``cls.adjust_failure(self, ex, kwargs, retry_attempts) -> (ex, retry_attempts)`` runs first;
    Flux's own handler then records (or retries) what it returns. Returning
    ``retry_attempts = self.retry_max_attempts`` makes the failure final at once.

    Relies on: flux-core's ``flux.task.__handle_exception`` (name-mangled
    ``_task__handle_exception``; 0.87.5), an ``async`` method taking ``(ctx, ex, task_id,
    task_full_name, task_args, args, kwargs, retry_attempts=0)`` that every failure of a task
    goes through (retries, timeouts, fallback, final error). Flux has no public hook for it.

    Args:
        cls: A subclass of ``flux.task`` with an ``adjust_failure`` method.

    Returns:
        ``cls``, its failures routed through ``adjust_failure``.

    Raises:
        SeamError: flux-core's handler is gone or takes other parameters.
    """
    from flux import task

    original: Callable[..., Awaitable[Any]] = _attr(
        task, "_task__handle_exception", "flux-core", "flux.task"
    )
    params = list(inspect.signature(original).parameters)
    expected = ["self", "ctx", "ex", "task_id", "task_full_name", "task_args", "args", "kwargs", "retry_attempts"]
    if params != expected:
        raise SeamError("flux-core", "flux.task._task__handle_exception", f"parameters {params}")

    async def handle(
        self: Any,
        ctx: Any,
        ex: Exception,
        task_id: str,
        task_full_name: str,
        task_args: dict[str, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retry_attempts: int = 0,
    ) -> Any:
        ex, retry_attempts = self.adjust_failure(ex, kwargs, retry_attempts)
        return await original(self, ctx, ex, task_id, task_full_name, task_args, args, kwargs, retry_attempts)

    setattr(cls, "_task__handle_exception", handle)  # noqa: B010 - mypy cannot see the name
    return cls


def register_workflow(wf: Any) -> str:
    """Register a workflow in Flux's database (idempotent) and return its id.

    Relies on: flux-core's ``Workflow._ensure_registered()`` (0.87.5), what ``Workflow.run``
    does before an inline run; Flux has no public call for it.

    Raises:
        SeamError: ``Workflow._ensure_registered`` is gone.
    """
    method = _attr(wf, "_ensure_registered", "flux-core", "Workflow")
    return str(method())


def execution_store() -> Any:
    """Flux's store of executions (``get``, ``save``, ``update`` an ``ExecutionContext``).

    Relies on: flux-core's ``flux.context_managers.ContextManager.create()`` (0.87.5), the
    internal persistence class its inline runs and workers use.

    Raises:
        SeamError: The module or its ``ContextManager.create`` is gone.
    """
    try:
        from flux.context_managers import ContextManager
    except ImportError:
        raise SeamError("flux-core", "flux.context_managers.ContextManager") from None
    return _attr(ContextManager, "create", "flux-core", "ContextManager")()


def save_execution(ctx: Any) -> None:
    """Store an execution context whole (what Flux's inline checkpoint, ``Workflow._save``, does).

    Relies on: :func:`execution_store` and its ``save(ctx)`` (flux-core 0.87.5).
    """
    execution_store().save(ctx)


# ---------------------------------------------------------------------------------- chromadb


def client_settings(client: Any) -> Any:
    """The chromadb ``Settings`` a client was built with, or None for any other object.

    Relies on: chromadb's ``Client._system.settings`` (1.5.9): the client's ``System`` and its
    settings (``chroma_api_impl``, ``persist_directory``). Tolerant by design: it is used to
    recognise in-process clients among arbitrary objects.
    """
    return getattr(getattr(client, "_system", None), "settings", None)


def client_server(client: Any) -> Any:
    """The ``ServerAPI`` (for HTTP: ``chromadb.api.fastapi.FastAPI``) behind a client.

    Relies on: chromadb's ``Client._server`` / ``AdminClient._server`` (1.5.9).

    Raises:
        SeamError: The client has no ``_server``.
    """
    return _attr(client, "_server", "chromadb", type(client).__name__)


def collection_server(collection: Any) -> Any:
    """The ``ServerAPI`` a ``Collection`` was built with (``get_max_batch_size``, ...).

    Relies on: chromadb's ``Collection._client`` (1.5.9), which holds the ServerAPI, not the
    user-facing client.

    Raises:
        SeamError: The collection has no ``_client``.
    """
    return _attr(collection, "_client", "chromadb", "Collection")


def http_session(server: Any) -> httpx.Client:
    """The ``httpx.Client`` chromadb's HTTP ``ServerAPI`` sends every request through.

    Relies on: chromadb's ``chromadb.api.fastapi.FastAPI._session`` (1.5.9), built in its
    constructor with ``timeout=None``.

    Raises:
        SeamError: No ``_session``, or it is not an ``httpx.Client``.
    """
    import httpx

    session = _attr(server, "_session", "chromadb", type(server).__name__)
    if not isinstance(session, httpx.Client):
        raise SeamError("chromadb", "FastAPI._session", f"a {type(session).__name__}, not an httpx.Client")
    return session


def set_http_session(server: Any, session: httpx.Client) -> None:
    """Make chromadb's HTTP ``ServerAPI`` send its requests through ``session``.

    Relies on: chromadb's ``FastAPI._session`` (1.5.9) being read at every request.

    Raises:
        SeamError: ``server`` has no ``_session`` to replace.
    """
    http_session(server)
    server._session = session


def client_class_with_first_call_hook(hook: Callable[[Any], None]) -> type[Any]:
    """chromadb's ``Client``, calling ``hook(server)`` before the constructor's first request.

    ``chromadb.HttpClient`` calls the server from its constructor; ``hook`` receives the
    ``ServerAPI`` just before that (e.g. to install a bounded HTTP session).

    Relies on: chromadb's ``chromadb.api.client.Client.__init__`` (1.5.9) setting
    ``self._server`` and then calling ``self.get_user_identity()`` as its first request.

    Args:
        hook: Called with the client's ``ServerAPI``.

    Returns:
        A subclass of ``chromadb.api.client.Client``.
    """
    from chromadb.api.client import Client

    class HookedClient(Client):
        def get_user_identity(self) -> Any:
            hook(client_server(self))
            return super().get_user_identity()

    return HookedClient


# ---------------------------------------------------------------------------------- httpx


def set_connection_pool(transport: httpx.HTTPTransport, pool: Any) -> None:
    """Replace the httpcore connection pool of an httpx transport (to give it another network backend).

    Relies on: httpx's ``HTTPTransport._pool`` (0.28.1), the ``httpcore.ConnectionPool`` every
    request of the transport goes through; httpx has no public hook for httpcore's network
    backend.

    Args:
        transport: A fresh transport.
        pool: An ``httpcore.ConnectionPool`` built like the one it replaces.

    Raises:
        SeamError: The transport has no ``_pool``.
    """
    old = _attr(transport, "_pool", "httpx", "HTTPTransport")
    transport._pool = pool
    old.close()


# ---------------------------------------------------------------------------------- diskcache


def cache_sql(cache: Any) -> Callable[..., Any]:
    """diskcache's statement runner of a ``Cache`` (``sql(statement, params) -> cursor``).

    Relies on: diskcache's ``Cache._sql`` (5.6.3): the bound ``execute`` of the thread's
    SQLite connection.

    Raises:
        SeamError: ``Cache._sql`` is gone.
    """
    sql: Callable[..., Any] = _attr(cache, "_sql", "diskcache", "Cache")
    return sql


def cache_connection(cache: Any) -> Any:
    """The thread's ``sqlite3.Connection`` of a diskcache ``Cache``.

    Relies on: diskcache's ``Cache._con`` (5.6.3).

    Raises:
        SeamError: ``Cache._con`` is gone.
    """
    return _attr(cache, "_con", "diskcache", "Cache")


def cache_disk(cache: Any) -> Any:
    """The ``Disk`` (serialiser) of a diskcache ``Cache``.

    Relies on: diskcache's ``Cache._disk`` (5.6.3).

    Raises:
        SeamError: ``Cache._disk`` is gone.
    """
    return _attr(cache, "_disk", "diskcache", "Cache")


def disk_directory(disk: Any) -> str:
    """The cache folder of a diskcache ``Disk``.

    Relies on: diskcache's ``Disk._directory`` (5.6.3).

    Raises:
        SeamError: ``Disk._directory`` is gone.
    """
    return str(_attr(disk, "_directory", "diskcache", "Disk"))


def retry_cache_statements[T: type](
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Callable[[T], T]:
    """Class decorator for a diskcache ``Cache`` subclass: its retried statements run through ``wrap``.

    diskcache retries some statements (those of ``Cache.__init__`` among them) for 60 s on a
    locked database; ``wrap(sql)`` returns the statement runner to use instead.

    Relies on: diskcache's ``Cache._sql_retry`` (5.6.3), a property returning the retrying
    runner, and :func:`cache_sql`.

    Args:
        wrap: Given the plain runner, returns the one to use for retried statements.

    Returns:
        The decorator.
    """
    import diskcache

    if not isinstance(inspect.getattr_static(diskcache.Cache, "_sql_retry", None), property):
        raise SeamError("diskcache", "Cache._sql_retry", "not a property")

    def decorate(cls: T) -> T:
        setattr(cls, "_sql_retry", property(lambda self: wrap(cache_sql(self))))  # noqa: B010
        return cls

    return decorate


# ---------------------------------------------------------------------------------- typer/click


def show_arguments_plain(params: list[Any]) -> None:
    """Show a command's Typer arguments by their metavar alone in usage and help.

    ``PATH...``, ``TEXT``, ``[QUESTION]`` rather than ``{paths}...`` or ``<list[Path]>``.

    Relies on: typer's ``TyperArgument._usage_display_name()`` (0.29.2), which builds an
    argument's usage text, and ``display_type_rich``; each plain ``TyperArgument`` of
    ``params`` becomes an instance of a subclass overriding both (its ``__class__`` is swapped:
    Typer builds the arguments itself, so there is no constructor to hand a class to).

    Args:
        params: The command's ``params`` (changed in place).
    """
    from typer.core import TyperArgument

    plain = _plain_argument_class()
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = plain


@functools.cache
def _plain_argument_class() -> type[Any]:
    from typer.core import TyperArgument

    if not callable(getattr(TyperArgument, "_usage_display_name", None)):
        raise SeamError("typer", "TyperArgument._usage_display_name")

    class PlainArgument(TyperArgument):
        """An argument shown by its metavar alone (no ``{...}`` braces, no ``<type>`` label)."""

        def display_type_rich(self, ctx: Any) -> str | None:
            return None

        def _usage_display_name(self) -> str:
            name = self.display_name_raw
            return name if self.required else f"[{name}]"

    return PlainArgument
