"""One cached chromadb HTTP client per process per settings, every request bounded.

Nothing connects at import time (Flux replay and registration never need the server).
``chromadb.HttpClient`` calls the server from its constructor with no timeout, so
:func:`get_client` probes the server first and installs a ``BoundedSession`` before that call.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import TYPE_CHECKING, Any

import httpx

from flux_chroma.chroma.bounded_http import BoundedSession, RequestDeadlineError
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import (
    ChromaUnavailableError,
    FluxChromaError,
    NotChromaServerError,
    classify_chroma_error,
)
from flux_chroma.seams import (
    client_class_with_first_call_hook,
    client_server,
    http_session,
    set_http_session,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

__all__ = ["forget_clients", "get_client", "server_info"]

_DEFAULT_DATABASE = "default_database"
_DEFAULT_TENANT = "default_tenant"

_lock = threading.Lock()
_clients: dict[tuple[int, ConnectionSettings, str], ClientAPI] = {}
_known_databases: set[tuple[ConnectionSettings, str]] = set()


def _session(settings: ConnectionSettings, headers: Any = None, limits: httpx.Limits | None = None) -> BoundedSession:
    return BoundedSession(
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        headers=headers if headers is not None else settings.header_dict(),
        verify=settings.verify_tls,
        limits=limits,
    )


def _install_session(server: Any, settings: ConnectionSettings) -> None:
    """Replace chromadb's unbounded session (``timeout=None``) with a :class:`BoundedSession`."""
    old = http_session(server)
    if isinstance(old, BoundedSession):
        return
    set_http_session(server, _session(settings, headers=old.headers, limits=getattr(server, "http_limits", None)))
    old.close()


_building = threading.local()  # .settings while get_client constructs a client


@functools.cache
def _client_class() -> type[ClientAPI]:
    """chromadb's ``Client``, with the bounded session installed before its first request.

    Its constructor calls the server (identity, tenant, database) without a timeout: a server
    that answers the heartbeat but not those would hang it forever.
    """

    def bound(server: Any) -> None:
        settings = getattr(_building, "settings", None)
        if settings is not None:
            _install_session(server, settings)

    return client_class_with_first_call_hook(bound)


def _cause[E: BaseException](exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of type ``kind`` in ``exc``'s cause/context chain."""
    seen: BaseException | None = exc
    for _ in range(10):  # bounded: a chain can loop
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _not_chroma(url: str, path: str, response: httpx.Response, why: str) -> NotChromaServerError:
    body = " ".join(response.text[:120].split())
    return NotChromaServerError(
        f"{url} answered but is not a Chroma server (GET /api/v2{path} -> {response.status_code} "
        f"{response.reason_phrase}{': ' + why if why else ''}{'; body: ' + repr(body) if body else ''}). "
        "Point url= / FLUX_CHROMA_URL at a `chroma run` server (`flux-chroma server --path DIR` "
        "starts one); this is not retried."
    )


def _chroma_json(http: httpx.Client, url: str, path: str, key: str) -> dict[str, Any]:
    """The JSON object Chroma answers on ``GET /api/v2{path}`` (it must hold ``key``)."""
    response = http.get(f"{url}/api/v2{path}")
    status = response.status_code
    if status in (401, 403) or status >= 500 or status in (408, 425, 429):
        response.raise_for_status()  # credentials or transient: classified by the caller
    if status != 200:
        raise _not_chroma(url, path, response, "")
    try:
        body = response.json()
    except ValueError:
        raise _not_chroma(url, path, response, "the answer is not JSON") from None
    if not isinstance(body, dict) or key not in body:
        raise _not_chroma(url, path, response, f"the answer has no {key!r}")
    return body


def server_info(settings: ConnectionSettings) -> dict[str, Any]:
    """Probe the server's heartbeat and pre-flight checks, each request bounded as a whole.

    Returns:
        ``{"heartbeat": ..., "max_batch_size": ..., "version": ...}``.

    Raises:
        ChromaUnavailableError: The server did not answer in time.
        NotChromaServerError: Something answers at the URL, but not Chroma.
    """
    try:
        with _session(settings) as http:
            beat = _chroma_json(http, settings.url, "/heartbeat", "nanosecond heartbeat")
            checks = _chroma_json(http, settings.url, "/pre-flight-checks", "max_batch_size")
            version = http.get(settings.url + "/api/v2/version")
            return {
                "heartbeat": beat,
                "max_batch_size": int(checks.get("max_batch_size") or 0),
                "version": version.json() if version.status_code == 200 else None,
            }
    except (httpx.HTTPError, ValueError) as exc:
        raise classify_chroma_error(exc, action="heartbeat", url=settings.url) from None


def _connect_error(exc: BaseException, settings: ConnectionSettings) -> FluxChromaError:
    """What a failing client constructor means, after the server answered the heartbeat."""
    url = settings.url
    late = _cause(exc, RequestDeadlineError)
    if late is not None:
        return ChromaUnavailableError(
            f"Chroma server at {url} answered heartbeat but never answered {late.what} within "
            f"{late.budget:g} s (read_timeout) while connecting. The server (or a proxy in front of "
            "it) is stuck or overloaded; the task is retried when it has retry_max_attempts > 0."
        )
    mapped = classify_chroma_error(exc, action="connect", url=url)
    if isinstance(exc, (TypeError, KeyError, ValueError)) and not isinstance(mapped, ChromaUnavailableError):
        return NotChromaServerError(
            f"{url} answered heartbeat but is not a Chroma server: its answers to the client's "
            f"start-up calls (/api/v2/auth/identity, tenant, database) are not Chroma's "
            f"({type(exc).__name__}: {exc}). Point url= / FLUX_CHROMA_URL at a `chroma run` server; "
            "this is not retried."
        )
    return mapped


def get_client(settings: ConnectionSettings, database: str | None = None) -> ClientAPI:
    """Return this process's cached HttpClient for ``settings`` and ``database``.

    Every request (the constructor's included) is bounded: ``connect_timeout`` to connect,
    ``read_timeout`` for the complete answer.

    Args:
        database: Chroma database name (``None`` = Chroma's default database).

    Raises:
        ChromaUnavailableError: The server is unreachable or did not answer in time.
        NotChromaServerError: Something answers at the URL, but not Chroma.
    """
    db = database or _DEFAULT_DATABASE
    key = (os.getpid(), settings, db)
    client = _clients.get(key)
    if client is not None:
        return client
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        server_info(settings)  # names a dead or non-Chroma server before chromadb's client does
        _building.settings = settings
        try:
            client = _client_class()(tenant=_DEFAULT_TENANT, database=db, settings=_chroma_settings(settings))  # type: ignore[call-arg]
        except Exception as exc:  # noqa: BLE001 - classified in one place
            raise _connect_error(exc, settings) from None
        finally:
            _building.settings = None
        _install_session(client_server(client), settings)  # no-op when already bounded
        _clients[key] = client
        return client


def _chroma_settings(settings: ConnectionSettings) -> Any:
    """chromadb ``Settings`` for the server (fresh each time: chromadb's clients mutate them)."""
    from chromadb.config import Settings

    return Settings(
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=settings.host,
        chroma_server_http_port=settings.port,
        chroma_server_ssl_enabled=settings.ssl,
        chroma_server_headers=settings.header_dict(),
        anonymized_telemetry=False,
        # chromadb's own session is replaced by a BoundedSession before its first request.
        chroma_server_ssl_verify=settings.verify_tls,
    )


def admin_client(settings: ConnectionSettings) -> Any:
    """A chromadb ``AdminClient`` of the server, its requests bounded like :func:`get_client`'s."""
    from chromadb import AdminClient

    admin = AdminClient(_chroma_settings(settings))
    _install_session(client_server(admin), settings)
    return admin


def forget_database(settings: ConnectionSettings, database: str | None) -> None:
    """Forget that ``database`` exists (it may vanish: a server restored from a snapshot)."""
    if database is not None:
        _known_databases.discard((settings, database))


def forget_clients() -> None:
    """Drop every cached client of this process (tests and server replacement)."""
    with _lock:
        _clients.clear()


def database_exists_or_create(settings: ConnectionSettings, database: str) -> None:
    """Create ``database`` (already validated) through the admin API when it does not exist."""
    if (settings, database) in _known_databases:
        return
    try:
        admin = admin_client(settings)
        try:
            admin.get_database(database, tenant=_DEFAULT_TENANT)
        except Exception as exc:  # noqa: BLE001
            mapped = classify_chroma_error(exc, action=f"get database {database!r}", url=settings.url)
            if mapped.transient:
                raise mapped from None
            admin.create_database(database, tenant=_DEFAULT_TENANT)
    except Exception as exc:  # noqa: BLE001
        raise classify_chroma_error(exc, action=f"create database {database!r}", url=settings.url) from None
    _known_databases.add((settings, database))

