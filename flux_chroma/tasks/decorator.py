"""``@chroma_task``: write a Flux task that gets flux-chroma's tenancy, pinning and errors.

The model is flux-core's own library tasks (``flux/tasks/call.py``): a plain ``async def``
under a decorator whose options configure the task, and whose signature is the API. The
built-in tasks (``embed_and_add``, ``query``, ...) are written this way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, overload

from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.task import ChromaTask, split_options

__all__ = ["chroma_task"]

TaskFunction = Callable[..., Awaitable[Any]]


@overload
def chroma_task(func: TaskFunction, /) -> ChromaTask: ...


@overload
def chroma_task(func: None = None, /, **options: Any) -> Callable[[TaskFunction], ChromaTask]: ...


def chroma_task(
    func: TaskFunction | None = None, /, **options: Any
) -> ChromaTask | Callable[[TaskFunction], ChromaTask]:
    """Turn an ``async def`` into a flux-chroma task (a :class:`ChromaTask`, a genuine Flux task).

    The function's parameters are the task's arguments: Flux records and hashes exactly
    those. The task's flux-chroma options (tenant, URL, credentials, embedding function, ...)
    are never arguments; inside the body reach them with :func:`chroma_options`, resolve a
    tenant-relative collection name with :func:`chroma_target`, or run a blocking operation
    on the tenant's pin-checked collection with :func:`use_collection`. The task inherits
    flux-chroma's behaviour: permanent errors fail at once and transient ones are retried
    with Flux's retry options, HTTP timeouts are capped at ``timeout=``, unexpected errors
    and exhausted retries are stored as readable, picklable errors, and credentials are
    scrubbed from every stored error.

    Args:
        func: The ``async def`` (when used as ``@chroma_task`` without parentheses).
        **options: Flux task options (``retry_max_attempts``, ``retry_delay``,
            ``retry_backoff``, ``timeout``, ``name``, ...) and flux-chroma options
            (``tenant``, ``url``, ``embedding_function``, ``cache``, ...; see
            :class:`ChromaOptions`). ``cache`` means embedding reuse, never Flux's output
            cache. Usually only defaults go here; deployments add ``tenant=``/``url=`` with
            ``.with_options(...)``.

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
