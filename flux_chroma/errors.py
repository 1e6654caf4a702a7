"""Typed errors of flux-chroma, and the one place where client errors are classified.

Every error derives from :class:`FluxChromaError`, a subclass of Flux's ``ExecutionError``,
which Flux stores unchanged and serialises as ``{type, message}`` (anything else is wrapped:
``str(ExecutionError(ValueError("x")))`` is ``"None"``), so the text survives pickling, replay
and JSON. Each error says what failed, names the culprit and what to do.
"""

from __future__ import annotations

from typing import Any

import httpx
from flux.errors import ExecutionError

__all__ = [
    "ChromaRequestError",
    "ChromaUnavailableError",
    "CollectionNotFoundError",
    "ConfigurationError",
    "DuplicateIdError",
    "EmbeddingFunctionError",
    "EmbeddingMismatchError",
    "FluxChromaError",
    "InvalidDocumentError",
    "InvalidNameError",
    "InvalidQueryError",
    "ModelNotAvailableError",
    "NotChromaServerError",
    "OneOwnerError",
    "QualityGateError",
    "ServerStartError",
    "SourceChangedError",
    "SourceConflictError",
    "TenantError",
    "UnpinnedCollectionError",
    "classify_chroma_error",
]


class FluxChromaError(ExecutionError):
    """Base class of every flux-chroma error.

    Attributes:
        transient: True when retrying later can succeed (Flux's ``retry_max_attempts`` applies).
    """

    transient: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(inner_exception=None, message=message)

    def __str__(self) -> str:
        return self.message or self.__class__.__name__

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickling calls cls(*args); keep the message and any extra attributes.
        state = {k: v for k, v in self.__dict__.items() if k not in ("_message", "_inner_exception")}
        return (restore_error, (self.__class__, self.message or "", state))


def restore_error(cls: type[FluxChromaError], message: str, state: dict[str, Any]) -> FluxChromaError:
    """Rebuild an error of class ``cls`` without calling its ``__init__``.

    Used by unpickling and wherever an error is re-raised with a new message (for example one
    read back from a child execution's output), so subclasses with their own ``__init__``
    arguments come back as themselves. ``state``: extra attributes to set (e.g. ``report``).
    """
    err = cls.__new__(cls)
    FluxChromaError.__init__(err, message)
    err.__dict__.update(state)
    return err


class ConfigurationError(FluxChromaError):
    """An option or environment variable is invalid or two options conflict."""


class OneOwnerError(ConfigurationError):
    """A PersistentClient, a filesystem path, or a second owner of a data directory was used."""


class InvalidNameError(FluxChromaError):
    """A tenant id or collection name breaks a naming rule (the message names the rule)."""


class TenantError(InvalidNameError):
    """The tenant is missing, invalid, or a call tried to leave the tenant's namespace."""


class InvalidDocumentError(FluxChromaError):
    """A document, its id, text or metadata cannot be written (the message names it)."""


class DuplicateIdError(InvalidDocumentError):
    """The same id appears more than once in one call or one job."""


class InvalidQueryError(FluxChromaError):
    """A query argument (``k``, ``where``, ``where_document``, question text) is invalid."""


class CollectionNotFoundError(FluxChromaError):
    """The tenant's collection does not exist on the server."""


class EmbeddingMismatchError(FluxChromaError):
    """The configured embedding function differs from the one the collection is pinned to."""


class UnpinnedCollectionError(FluxChromaError):
    """The collection was created outside flux-chroma and carries no pin."""


class EmbeddingFunctionError(FluxChromaError):
    """The embedding function raised (the server was not called); never retried."""


class ModelNotAvailableError(FluxChromaError):
    """The embedding model's files are not available on this worker (never retried)."""


class SourceChangedError(FluxChromaError):
    """An ingestion source changed under a running job (its digest no longer matches)."""


class SourceConflictError(ConfigurationError):
    """An ingestion source's id already names records read from another folder, file or loader.

    Raised before anything is written. Give the source another id, or opt in to ``relocate``
    when the folder really moved.
    """


class QualityGateError(FluxChromaError):
    """A migration's new collection answers a labelled set worse than allowed.

    Raised before the alias is switched (readers keep the old collection); the new collection
    is left for inspection.
    """


class ServerStartError(FluxChromaError):
    """A managed ``chroma run`` server could not be started (port taken, timeout, crash)."""


class ChromaUnavailableError(FluxChromaError):
    """The Chroma server could not be reached or failed transiently (retried by Flux)."""

    transient = True


class ChromaRequestError(FluxChromaError):
    """The Chroma server rejected a request permanently (invalid argument, conflict, ...)."""


class NotChromaServerError(ChromaRequestError):
    """The URL answers HTTP, but not as a Chroma server (wrong port, a proxy); never retried."""


_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}


def _refused_credentials(exc: BaseException, status: int | None) -> bool:
    """A 401/403 answer, seen as an HTTP status, a chromadb auth error or chromadb's bare
    ``Exception(response text)`` for error names it does not know (e.g. a proxy's 401)."""
    from chromadb import errors as chroma_errors

    if status in (401, 403) or isinstance(exc, (chroma_errors.ChromaAuthError, chroma_errors.AuthorizationError)):
        return True
    text = str(exc)
    return type(exc) is Exception and any(m in text for m in ('"Unauthorized"', '"Forbidden"', '"AuthError"'))


def classify_chroma_error(exc: BaseException, *, action: str, url: str) -> FluxChromaError:
    """Map an exception raised by chromadb/httpx into a typed flux-chroma error to raise.

    The single place where transient failures (httpx transport errors and timeouts, Chroma
    ``InternalError``, 408/429/5xx) are told from permanent ones (everything else).

    Args:
        exc: The exception raised by the client.
        action: What flux-chroma was doing, e.g. ``"upsert into 'acme__handbook'"``.
        url: The server URL (never includes credentials).
    """
    if isinstance(exc, FluxChromaError):
        return exc
    from chromadb import errors as chroma_errors

    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout):
        return ChromaUnavailableError(
            f"Chroma server at {url} did not answer in time during {action} ({exc}; read_timeout "
            "bounds each whole request). The server may be overloaded or frozen; the task is "
            "retried when it has retry_max_attempts > 0, or raise read_timeout= for big batches."
        )
    if isinstance(exc, (httpx.TransportError, TimeoutError, ConnectionError)):
        return ChromaUnavailableError(
            f"Chroma server at {url} is unreachable during {action} ({detail}). "
            "Check that `chroma run` (or `flux-chroma server`) is up; the task is retried "
            "when it has retry_max_attempts > 0."
        )
    if isinstance(exc, ValueError) and "Could not connect" in str(exc):
        return ChromaUnavailableError(
            f"Chroma server at {url} is unreachable during {action} ({detail}). "
            "Start it with `flux-chroma server --path DIR` or point FLUX_CHROMA_URL at it."
        )
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if not isinstance(status, int):
        status = None
    if _refused_credentials(exc, status):
        # The server's text is left out on purpose: auth failure bodies may quote credentials.
        return ChromaRequestError(
            f"Chroma server at {url} (or the proxy in front of it) refused the credentials during "
            f"{action} (HTTP {status or '401/403'}). This is not retried: check token=, headers= or "
            "FLUX_CHROMA_TOKEN (the Chroma 1.5 server has no authentication of its own; tokens are "
            "checked by a proxy or Chroma Cloud)."
        )
    if isinstance(exc, httpx.HTTPStatusError) and status in _TRANSIENT_STATUS:
        return ChromaUnavailableError(
            f"Chroma server at {url} answered HTTP {status} during {action}; retry later."
        )
    if isinstance(exc, chroma_errors.InternalError):
        return ChromaUnavailableError(
            f"Chroma server at {url} reported an internal error during {action} ({detail}); "
            "it is usually transient and retried."
        )
    if isinstance(exc, chroma_errors.NotFoundError) or "does not exist" in str(exc):
        return CollectionNotFoundError(f"Not found during {action}: {detail}.")
    message = str(exc).lower()
    if isinstance(exc, chroma_errors.ChromaError) and any(
        marker in message for marker in ("rate limit", "too many requests", "service unavailable")
    ):
        return ChromaUnavailableError(
            f"Chroma server at {url} is overloaded during {action} ({detail}); retry later."
        )
    return ChromaRequestError(
        f"Chroma rejected {action} ({detail}). This is not retried: fix the request."
    )
