"""``@chroma_task``: write a Flux task that gets flux-chroma's tenancy, pinning and errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, overload

from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.task import ChromaTask, split_options

__all__ = ["chroma_task"]

TaskFunction = Callable[..., Awaitable[Any]]
RETRY: dict[str, Any] = {"retry_max_attempts": 3, "retry_delay": 1, "retry_backoff": 2}
"""The retry options of flux-chroma's own tasks (``@chroma_task(**RETRY)``)."""


@overload
def chroma_task(func: TaskFunction, /) -> ChromaTask: ...


@overload
def chroma_task(func: None = None, /, **options: Any) -> Callable[[TaskFunction], ChromaTask]: ...


def chroma_task(
    func: TaskFunction | None = None, /, **options: Any
) -> ChromaTask | Callable[[TaskFunction], ChromaTask]:
    """Turn an ``async def`` into a flux-chroma task (a :class:`ChromaTask`, a genuine Flux task).

    The function's parameters are the task's arguments, which Flux records and hashes; the
    options never are. Inside the body use :func:`chroma_options`, :func:`chroma_target` or
    :func:`use_collection`. Permanent errors fail at once, transient ones are retried, HTTP
    timeouts are capped at ``timeout=``, and stored errors are picklable and credential-free.

    Args:
        func: The ``async def`` (when used as ``@chroma_task`` without parentheses).
        **options: Flux task options (``retry_max_attempts``, ``timeout``, ``name``, ...) and
            :class:`ChromaOptions` fields. ``cache`` means embedding reuse, never Flux's
            output cache.

    Returns:
        The task, or a decorator that makes it.

    Raises:
        ConfigurationError: An unknown option, an invalid value, or ``func`` is not an
            ``async def`` function.

    Example:
        >>> @chroma_task(retry_max_attempts=3, retry_delay=1, retry_backoff=2)
        ... async def count_records(collection: str) -> int:
        ...     return await use_collection(collection, lambda c: c.collection.count())
        >>> count = count_records.with_options(tenant="acme", url="http://127.0.0.1:8000")
    """
    chroma, flux = split_options("@chroma_task()", options)
    chroma_options = ChromaOptions(**chroma)  # validated now, at decoration time

    def decorate(function: TaskFunction) -> ChromaTask:
        return ChromaTask(function, chroma_options, **flux)

    return decorate if func is None else decorate(func)
