"""One cached ``chromadb.HttpClient`` per process per settings, always with timeouts.

Connect lazily: nothing here runs at import time, so Flux replay and workflow registration
never need the server. ``chromadb.HttpClient`` has no timeout by default (a hung server
blocks a worker forever); :func:`get_client` probes the heartbeat with the configured
timeouts before building the client and then installs them on the client's HTTP session.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import httpx

from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import ChromaUnavailableError, OneOwnerError, classify_chroma_error

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

__all__ = ["forget_clients", "get_client", "refuse_local_client", "server_info"]

_DEFAULT_DATABASE = "default_database"
_DEFAULT_TENANT = "default_tenant"

_lock = threading.Lock()
_clients: dict[tuple[int, ConnectionSettings, str], ClientAPI] = {}


def _timeout(settings: ConnectionSettings) -> httpx.Timeout:
    return httpx.Timeout(
        settings.read_timeout,
        connect=settings.connect_timeout,
        pool=settings.connect_timeout,
    )


def refuse_local_client(client: Any) -> None:
    """Raise :class:`OneOwnerError` when ``client`` is an in-process (Persistent/Ephemeral) client.

    Args:
        client: Any object a caller tried to use as a Chroma connection.

    Raises:
        OneOwnerError: Always for non-HTTP chromadb clients, with the fix.
    """
    settings = getattr(getattr(client, "_system", None), "settings", None)
    impl = getattr(settings, "chroma_api_impl", "")
    if impl and "fastapi" not in str(impl).lower():
        path = getattr(settings, "persist_directory", None)
        raise OneOwnerError(
            f"A local chromadb client ({type(client).__name__}, path={path!r}) cannot be used: "
            "two processes opening the same PersistentClient path silently serve stale search "
            "results. Run one server (`flux-chroma server --path DIR`) and give flux-chroma its "
            "url= instead."
        )


def server_info(settings: ConnectionSettings) -> dict[str, Any]:
    """Probe the server's heartbeat and pre-flight checks with the configured timeouts.

    Args:
        settings: Connection settings.

    Returns:
        ``{"heartbeat": ..., "max_batch_size": ..., "version": ...}``.

    Raises:
        ChromaUnavailableError: The server did not answer in time.
    """
    base = settings.url + "/api/v2"
    try:
        with httpx.Client(
            timeout=_timeout(settings),
            headers=settings.header_dict(),
            verify=settings.ssl_verify,
        ) as http:
            beat = http.get(base + "/heartbeat")
            beat.raise_for_status()
            checks = http.get(base + "/pre-flight-checks")
            checks.raise_for_status()
            version = http.get(base + "/version")
            return {
                "heartbeat": beat.json(),
                "max_batch_size": int(checks.json().get("max_batch_size", 0)),
                "version": version.json() if version.status_code == 200 else None,
            }
    except (httpx.HTTPError, ValueError) as exc:
        raise classify_chroma_error(exc, action="heartbeat", url=settings.url) from None


def get_client(settings: ConnectionSettings, database: str | None = None) -> ClientAPI:
    """Return this process's cached HttpClient for ``settings`` (and ``database``).

    Args:
        settings: Where the server is, with headers and timeouts.
        database: Chroma database name (``None`` = Chroma's default database).

    Returns:
        A ``chromadb`` client bound to the server, with connect/read timeouts installed.

    Raises:
        ChromaUnavailableError: The server is unreachable or did not answer in time.
    """
    import chromadb
    from chromadb.config import Settings

    db = database or _DEFAULT_DATABASE
    key = (os.getpid(), settings, db)
    client = _clients.get(key)
    if client is not None:
        return client
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        server_info(settings)  # bounded probe: the constructor below has no timeout
        try:
            client = chromadb.HttpClient(
                host=settings.host,
                port=settings.port,
                ssl=settings.ssl,
                headers=settings.header_dict(),
                settings=Settings(
                    anonymized_telemetry=False,
                    chroma_server_ssl_verify=settings.ssl_verify if settings.ssl else None,
                ),
                tenant=_DEFAULT_TENANT,
                database=db,
            )
        except Exception as exc:  # noqa: BLE001 - classified in one place
            raise classify_chroma_error(exc, action="connect", url=settings.url) from None
        session = getattr(getattr(client, "_server", None), "_session", None)
        if not isinstance(session, httpx.Client):
            raise ChromaUnavailableError(
                "chromadb's HttpClient no longer exposes its HTTP session; flux-chroma cannot "
                "install timeouts. Use the chromadb version range flux-chroma declares."
            )
        session.timeout = _timeout(settings)
        _clients[key] = client
        return client


def forget_database(settings: ConnectionSettings, database: str | None) -> None:
    """Forget that ``database`` exists (it may vanish: a server restored from a snapshot)."""
    if database is not None:
        _known_databases.discard((settings, database))


def forget_clients() -> None:
    """Drop every cached client of this process (tests and server replacement)."""
    with _lock:
        _clients.clear()


def database_exists_or_create(settings: ConnectionSettings, database: str) -> None:
    """Create ``database`` on the server through its admin API when it does not exist.

    Args:
        settings: Connection settings.
        database: Database name (already validated).

    Raises:
        ChromaUnavailableError: The server is unreachable.
    """
    from chromadb import AdminClient
    from chromadb.config import Settings

    if (settings, database) in _known_databases:
        return
    try:
        admin = AdminClient(
            Settings(
                chroma_api_impl="chromadb.api.fastapi.FastAPI",
                chroma_server_host=settings.host,
                chroma_server_http_port=settings.port,
                chroma_server_ssl_enabled=settings.ssl,
                chroma_server_headers=settings.header_dict(),
                anonymized_telemetry=False,
            )
        )
        session = getattr(getattr(admin, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = _timeout(settings)
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


_known_databases: set[tuple[ConnectionSettings, str]] = set()
