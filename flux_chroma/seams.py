"""Every use of another library's private API, in one place.

Each internal of flux-core, chromadb, httpx, diskcache or Typer without a public equivalent is
wrapped in a function whose docstring says what it relies on; nothing else in the package
touches another library's underscore names. ``tests/test_seams.py`` holds one contract test per
seam against the real library. A broken seam raises :class:`SeamError`: pin the library back or
update the seam and its test.

Checked against: flux-core 0.87.5, chromadb 1.5.9 with overrides 7.7.0, httpx 0.28.1 with
httpcore 1.0.9, diskcache 5.6.3, typer 0.29.2 with click 8.5.1 (the ranges pyproject.toml
declares).
"""

from __future__ import annotations

import functools
import inspect
import sys
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
    "client_server",
    "collection_server",
    "http_session",
    "set_http_session",
    "client_class_with_first_call_hook",
    "chroma_server_command",
    "skip_override_checks",
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
    Flux's handler then records (or retries) what it returns (``retry_attempts =
    self.retry_max_attempts`` makes the failure final).

    Relies on: flux-core's async ``flux.task.__handle_exception`` (0.87.5), with the parameters
    checked below, through which every failure of a task goes. No public hook exists.
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

    Relies on: flux-core's ``Workflow._ensure_registered()`` (0.87.5), run by ``Workflow.run``.
    """
    method = _attr(wf, "_ensure_registered", "flux-core", "Workflow")
    return str(method())


def execution_store() -> Any:
    """Flux's store of executions (``flux.context_managers.ContextManager.create()``, 0.87.5)."""
    try:
        from flux.context_managers import ContextManager
    except ImportError:
        raise SeamError("flux-core", "flux.context_managers.ContextManager") from None
    return _attr(ContextManager, "create", "flux-core", "ContextManager")()


def save_execution(ctx: Any) -> None:
    """Store an execution context whole (relies on :func:`execution_store`'s ``save(ctx)``)."""
    execution_store().save(ctx)


# ---------------------------------------------------------------------------------- chromadb


def client_server(client: Any) -> Any:
    """The ``ServerAPI`` behind a client (chromadb's ``[Admin]Client._server``, 1.5.9)."""
    return _attr(client, "_server", "chromadb", type(client).__name__)


def collection_server(collection: Any) -> Any:
    """The ``ServerAPI`` of a ``Collection`` (chromadb's ``Collection._client``, 1.5.9)."""
    return _attr(collection, "_client", "chromadb", "Collection")


def http_session(server: Any) -> httpx.Client:
    """The ``httpx.Client`` chromadb's HTTP ``ServerAPI`` sends every request through.

    Relies on: chromadb's ``chromadb.api.fastapi.FastAPI._session`` (1.5.9), an httpx.Client.
    """
    import httpx

    session = _attr(server, "_session", "chromadb", type(server).__name__)
    if not isinstance(session, httpx.Client):
        raise SeamError("chromadb", "FastAPI._session", f"a {type(session).__name__}, not an httpx.Client")
    return session


def set_http_session(server: Any, session: httpx.Client) -> None:
    """Send a ``ServerAPI``'s requests through ``session`` (``FastAPI._session``, read per call)."""
    http_session(server)
    server._session = session


def client_class_with_first_call_hook(hook: Callable[[Any], None]) -> type[Any]:
    """chromadb's ``Client``, calling ``hook(server)`` before the constructor's first request.

    Relies on: chromadb's ``chromadb.api.client.Client.__init__`` (1.5.9) setting
    ``self._server`` and then calling ``self.get_user_identity()`` as its first request.
    """
    from chromadb.api.client import Client

    class HookedClient(Client):
        def get_user_identity(self) -> Any:
            hook(client_server(self))
            return super().get_user_identity()

    return HookedClient


# The ``chroma`` console script's body (chromadb.cli.cli:app) without its ``import chromadb``;
# argv[1] is "chroma", so the process still reads "... chroma run --path DIR ..." in ps.
_CHROMA_MAIN = """import sys, contextlib, chromadb_rust_bindings as chroma
with contextlib.suppress(KeyboardInterrupt): chroma.cli(sys.argv[1:])"""


def chroma_server_command() -> list[str]:
    """The argv that runs Chroma's ``chroma`` command in this environment (add ``run ...``).

    Relies on: chromadb's ``chroma`` console script (``chromadb.cli.cli:app``, 1.5.9) handing its
    ``sys.argv`` to ``chromadb_rust_bindings.cli``, which runs the Rust server. Calling it
    directly skips the script's ``import chromadb``, which the server never uses: about 1.3 s of
    CPU and of start-up time per server.
    """
    import chromadb_rust_bindings

    _attr(chromadb_rust_bindings, "cli", "chromadb", "chromadb_rust_bindings")
    return [sys.executable, "-c", _CHROMA_MAIN, "chroma"]


def _marked_override(method: Any = None, **_: Any) -> Any:
    def mark(m: Any) -> Any:
        m.__override__ = True
        return m

    return mark(method) if method is not None else mark


def skip_override_checks() -> bool:
    """Make the coming ``import chromadb`` skip ``overrides``' class-definition checks.

    chromadb decorates about 160 methods with ``overrides.override``/``overrides``, which check,
    while each class is defined, that a base class has the method and that the signatures
    agree: development-time checks of chromadb's own code, a quarter of ``import chromadb``
    (0.93 -> 0.69 s on this project's 2-core host). Called by the ``flux-chroma`` command before
    anything imports chromadb, it replaces both names with a decorator that only sets the
    ``__override__`` marker that ``overrides.EnforceOverrides`` reads (overrides 7.7.0). Does
    nothing, and returns False, when chromadb is already imported.
    """
    if "chromadb" in sys.modules:
        return False
    import overrides

    _attr(overrides, "override", "overrides", "overrides")
    _attr(overrides, "EnforceOverrides", "overrides", "overrides")
    overrides.override = overrides.overrides = _marked_override
    return True


# ---------------------------------------------------------------------------------- httpx


def set_connection_pool(transport: httpx.HTTPTransport, pool: Any) -> None:
    """Replace a fresh httpx transport's httpcore pool (to give it another network backend).

    Relies on: httpx's ``HTTPTransport._pool`` (0.28.1), the ``httpcore.ConnectionPool`` every
    request of the transport goes through.
    """
    old = _attr(transport, "_pool", "httpx", "HTTPTransport")
    transport._pool = pool
    old.close()


# ---------------------------------------------------------------------------------- diskcache


def cache_sql(cache: Any) -> Callable[..., Any]:
    """diskcache's statement runner ``sql(statement, params) -> cursor`` (``Cache._sql``, 5.6.3)."""
    sql: Callable[..., Any] = _attr(cache, "_sql", "diskcache", "Cache")
    return sql


def cache_connection(cache: Any) -> Any:
    """The thread's ``sqlite3.Connection`` of a diskcache ``Cache`` (``Cache._con``, 5.6.3)."""
    return _attr(cache, "_con", "diskcache", "Cache")


def cache_disk(cache: Any) -> Any:
    """The ``Disk`` (serialiser) of a diskcache ``Cache`` (relies on ``Cache._disk``, 5.6.3)."""
    return _attr(cache, "_disk", "diskcache", "Cache")


def disk_directory(disk: Any) -> str:
    """The cache folder of a diskcache ``Disk`` (relies on ``Disk._directory``, 5.6.3)."""
    return str(_attr(disk, "_directory", "diskcache", "Disk"))


def retry_cache_statements[T: type](
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Callable[[T], T]:
    """Class decorator for a diskcache ``Cache`` subclass: retried statements use ``wrap(sql)``
    instead of diskcache's 60 s retry on a locked database (``Cache.__init__``'s among them).

    Relies on: diskcache's ``Cache._sql_retry`` (5.6.3), a property returning the retrying
    runner, and :func:`cache_sql`.
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
    """Show a command's Typer arguments (``params``, changed in place) by their metavar alone.

    ``PATH...``, ``TEXT``, ``[QUESTION]`` rather than ``{paths}...`` or ``<list[Path]>``.

    Relies on: typer's ``TyperArgument._usage_display_name()`` (0.29.2) and
    ``display_type_rich``, overridden by swapping each plain ``TyperArgument``'s ``__class__``
    (Typer builds the arguments itself).
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
