"""What a running flux-chroma task can reach without taking it as an argument.

The task's options and the secrets Flux injected live in a :class:`contextvars.ContextVar` for
the duration of one call, so they never enter Flux's event log. ``asyncio.to_thread`` copies
the context, so the helpers work in worker threads too; outside a running ``@chroma_task``
body they raise :class:`ConfigurationError`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flux_chroma.chroma.aliases import resolve_alias
from flux_chroma.chroma.collections import Resolved, Target, with_collection
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import ConfigurationError
from flux_chroma.tasks.options import ChromaOptions

__all__ = ["chroma_options", "chroma_settings", "chroma_target", "task_scope", "use_collection"]


@dataclass(frozen=True)
class _Scope:
    name: str
    options: ChromaOptions
    secrets: Mapping[str, Any] | None


_current: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "flux_chroma_task", default=None
)


@contextmanager
def task_scope(
    name: str, options: ChromaOptions, secrets: Mapping[str, Any] | None
) -> Iterator[None]:
    """Make ``options`` and ``secrets`` the current task's while the block runs (internal)."""
    token = _current.set(_Scope(name, options, secrets))
    try:
        yield
    finally:
        _current.reset(token)


def _scope(helper: str) -> _Scope:
    scope = _current.get()
    if scope is None:
        raise ConfigurationError(
            f"{helper}() works only inside the body of a @chroma_task function while Flux runs "
            "it (or in a thread started there with asyncio.to_thread). Call the task from a "
            "Flux workflow instead of calling the helper directly."
        )
    return scope


def chroma_options() -> ChromaOptions:
    """Return the running task's :class:`~flux_chroma.tasks.options.ChromaOptions`.

    HTTP timeouts are capped at the task's Flux ``timeout=`` when one is set.

    Example:
        >>> @chroma_task()
        ... async def tenant_of() -> str | None:
        ...     return chroma_options().tenant
    """
    return _scope("chroma_options").options


def chroma_settings() -> ConnectionSettings:
    """Return the running task's connection settings, credentials resolved."""
    scope = _scope("chroma_settings")
    return scope.options.settings(scope.secrets)


def chroma_target(collection: str) -> Target:
    """Resolve a tenant-relative collection name for the running task, without a request.

    The name is validated and mapped into the task's tenant namespace, so no name can
    address another tenant's collection.

    Returns:
        The :class:`~flux_chroma.chroma.collections.Target` (``.physical`` is the Chroma
        name, ``.label`` is ``tenant/name`` for messages).

    Raises:
        TenantError: The task has no valid ``tenant=`` option.
        InvalidNameError: ``collection`` is not a valid tenant-relative name.
    """
    scope = _scope("chroma_target")
    return scope.options.target(collection, scope.secrets)


async def use_collection[T](
    collection: str,
    operation: Callable[[Resolved], T],
    *,
    create: bool = False,
    follow_alias: bool = True,
    action: str | None = None,
) -> T:
    """Run ``operation`` on the running task's collection in a worker thread.

    The collection's embedding pin is checked against the task's ``embedding_function``
    (``adopt=`` and ``space=`` apply), and every chromadb/httpx error ``operation`` raises is
    mapped to a typed flux-chroma error (transient ones are retried by Flux). A cached handle
    whose collection was dropped and recreated is re-resolved once.

    Args:
        collection: Tenant-relative collection name.
        operation: A blocking function called with the
            :class:`~flux_chroma.chroma.collections.Resolved` collection (``.collection`` is
            the chromadb handle, ``.ef`` the pinned embedding function, ``.pin`` the pin).
        create: Create (and pin) the collection when it is missing.
        follow_alias: Resolve the tenant's alias of that name first (default), as the
            built-in tasks do.
        action: What ``operation`` does, for error messages (default: the task's name).

    Raises:
        TenantError: The task has no valid ``tenant=`` option.
        InvalidNameError: ``collection`` is not a valid tenant-relative name.
        CollectionNotFoundError: The collection does not exist and ``create`` is False.
        EmbeddingMismatchError: The task's embedding function differs from the pin.
        UnpinnedCollectionError: The collection has no pin and ``adopt`` is not set.
        ChromaUnavailableError: The server is unreachable (retried by Flux).
    """
    scope = _scope("use_collection")
    options = scope.options
    target = options.target(collection, scope.secrets)
    label = action or scope.name

    def run() -> T:
        resolved_target = resolve_alias(target) if follow_alias else target
        return with_collection(
            resolved_target,
            operation,
            ef=options.embedding_function,
            space=options.space,
            create=create,
            adopt=options.adopt,
            action=f"{label} on {resolved_target.label!r}",
        )

    return await asyncio.to_thread(run)
