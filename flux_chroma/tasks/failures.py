"""How a flux-chroma task's failures are stored: typed, picklable, readable, credential-free."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from flux.errors import ExecutionTimeoutError, RetryError

from flux_chroma.errors import ChromaUnavailableError, FluxChromaError, restore_error

__all__ = ["final_error", "scrub", "unrecordable"]


def final_error(exc: BaseException, attempts: int) -> FluxChromaError:
    """The typed, picklable error stored when a task gives up."""
    inner = exc.inner_exception if isinstance(exc, RetryError) else exc
    suffix = f" (gave up after {attempts + 1} attempts)" if attempts else ""
    if isinstance(inner, ExecutionTimeoutError):
        return ChromaUnavailableError(
            f"the task timed out ({inner.message or 'timeout'}){suffix}. The Chroma server may be "
            "overloaded or frozen; raise timeout= or check the server."
        )
    if isinstance(inner, FluxChromaError):
        return restore_error(inner.__class__, f"{inner.message}{suffix}", {}) if suffix else inner
    text = str(inner) if inner is not None and str(inner) not in ("", "None") else type(inner).__name__
    return FluxChromaError(f"{type(inner).__name__}: {text}{suffix}")


_PLAIN = (str, int, float, bool, type(None))


def _opaque(value: Any, path: str) -> tuple[str, type] | None:
    """``(path, type)`` of the first value below ``value`` that is not plain JSON-like data."""
    if isinstance(value, _PLAIN) and type(value).__module__ == "builtins":
        return None
    if type(value) is dict:
        items: Any = ((f"{path}[{k!r}]", v) for k, v in value.items())
    elif type(value) in (list, tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return path, type(value)
    for sub, item in items:
        found = _opaque(item, sub)
        if found is not None:
            return found
    return None


def unrecordable(
    name: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], exc: TypeError
) -> FluxChromaError:
    """A typed error naming the argument Flux could not record (see ``ChromaTask.__call__``)."""
    from flux_chroma.errors import InvalidDocumentError, InvalidQueryError
    from flux_chroma.tasks.validation import validate_documents

    try:
        bound: dict[str, Any] = dict(inspect.signature(func).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        bound = {}
    for arg, value in bound.items():
        found = _opaque(value, arg)
        if found is None:
            continue
        if arg == "docs":
            try:
                validate_documents(value)  # names the document id and the metadata key
            except FluxChromaError as err:
                return err
        path, kind = found
        error = InvalidDocumentError if arg == "docs" else InvalidQueryError
        return error(
            f"{name}: argument {path} is a {kind.__module__}.{kind.__name__}, which Flux cannot "
            "record in its event log. Pass plain str/int/float/bool values, lists and dicts "
            "(convert numpy values with .item() or .tolist())."
        )
    return FluxChromaError(f"{name}: {exc}")


def scrub(ex: Exception, credentials: list[str]) -> Exception:
    """The same error with every credential in its message replaced by ``***``.

    A proxy's error body may quote the headers it received; stored errors must never carry them.
    """
    if not isinstance(ex, FluxChromaError) or not ex.message:
        return ex
    text = ex.message
    for secret in credentials:
        text = text.replace(secret, "***")
    if text == ex.message:
        return ex
    kept = {k: v for k, v in ex.__dict__.items() if k not in ("_message", "_inner_exception")}
    return restore_error(ex.__class__, text, kept)
