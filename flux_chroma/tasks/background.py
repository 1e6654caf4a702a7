"""Run one function in a daemon thread and get its result as a ``concurrent.futures.Future``.

The write path's pipeline embeds the next batch here while the current one is upserted. A
daemon thread (not a ``ThreadPoolExecutor``, whose threads are joined at interpreter exit)
never holds up the exit of a process that is stopping: the work it does is only ever
read or computed ahead, never written. The thread runs in a copy of the caller's context
(task options stay visible).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future

__all__ = ["in_background"]


def in_background[**P, T](fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
    """Start ``fn(*args, **kwargs)`` in a new daemon thread.

    Args:
        fn: The function.
        *args: Its positional arguments.
        **kwargs: Its keyword arguments.

    Returns:
        A future holding its result or the exception it raised.
    """
    future: Future[T] = Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the result
            future.set_exception(exc)
        else:
            future.set_result(result)

    name = f"flux-chroma-ahead-{getattr(fn, '__name__', 'work')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    return future
