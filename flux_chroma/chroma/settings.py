"""Connection settings: where the ONE Chroma server is and how to talk to it.

Credentials never appear in ``repr()``, receipts, errors or the Flux event log: settings are
task options (never task arguments), and their ``repr`` redacts header values.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from flux_chroma.errors import ConfigurationError, OneOwnerError

__all__ = ["DEFAULT_URL", "ConnectionSettings"]

DEFAULT_URL = "http://localhost:8000"
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 60.0

_ONE_OWNER_HINT = (
    "flux-chroma only talks to a Chroma server over HTTP: exactly one `chroma run` process owns "
    "a data directory and every Flux worker is a stateless HttpClient (two processes opening "
    "the same PersistentClient path silently serve stale search results). Start the server with "
    "`flux-chroma server --path DIR` (or `chroma run --path DIR`) and pass url='http://HOST:PORT'."
)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={raw!r} is not a number of seconds.") from exc
    if value <= 0:
        raise ConfigurationError(f"{name}={raw!r} must be > 0 seconds.")
    return value


def _check_url(url: Any) -> str:
    if isinstance(url, os.PathLike):
        raise OneOwnerError(f"url= {os.fspath(url)!r} is a filesystem path, not a server URL. {_ONE_OWNER_HINT}")
    if not isinstance(url, str):
        kind = type(url).__name__
        if "Client" in kind or hasattr(url, "heartbeat"):
            raise OneOwnerError(f"url= got a {kind} object, not a server URL. {_ONE_OWNER_HINT}")
        raise ConfigurationError(f"url= must be a string like 'http://127.0.0.1:8000', got {kind}.")
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme in ("http", "https") and parts.hostname:
        if parts.username or parts.password:
            raise ConfigurationError(
                "url= must not carry credentials (user:password@); use token= or headers= "
                "(or FLUX_CHROMA_TOKEN) so they stay out of logs."
            )
        if parts.path not in ("", "/"):
            raise ConfigurationError(
                f"url= {text!r} has a path {parts.path!r}; give only scheme://host:port."
            )
        return text.rstrip("/")
    if parts.scheme == "file" or text.startswith(("/", "./", "../", "~")) or os.path.exists(text):
        raise OneOwnerError(f"url= {text!r} is a filesystem path, not a server URL. {_ONE_OWNER_HINT}")
    raise ConfigurationError(
        f"url= {text!r} is not an http(s) server URL; expected e.g. 'http://127.0.0.1:8000'."
    )


@dataclass(frozen=True)
class ConnectionSettings:
    """How to reach the Chroma server. Frozen and hashable: one cached client per settings.

    Args:
        url: ``http(s)://host:port`` of the Chroma server.
        headers: Extra HTTP headers (e.g. a proxy token), redacted in ``repr``.
        read_timeout: Seconds for each whole request once connected (send + complete answer).
        ssl_verify: Verify TLS certificates (https only).
    """

    url: str = DEFAULT_URL
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    ssl_verify: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", _check_url(self.url))
        for name in ("connect_timeout", "read_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"{name}= must be a positive number of seconds, got {value!r}.")

    def __repr__(self) -> str:
        redacted = {k: "***" for k, _ in self.headers}
        return (
            f"ConnectionSettings(url={self.url!r}, headers={redacted}, "
            f"connect_timeout={self.connect_timeout}, read_timeout={self.read_timeout})"
        )

    @property
    def host(self) -> str:
        """Host name or address of the server."""
        return urlsplit(self.url).hostname or "localhost"

    @property
    def ssl(self) -> bool:
        """True for https URLs."""
        return urlsplit(self.url).scheme == "https"

    @property
    def verify_tls(self) -> bool:
        """``ssl_verify`` for https; False for plain HTTP (no TLS: no CA bundle to load, ~30 ms)."""
        return self.ssl and self.ssl_verify

    @property
    def port(self) -> int:
        """TCP port (scheme default when the URL has none)."""
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def header_dict(self) -> dict[str, str]:
        """A fresh header dict (chromadb mutates the dict it is given)."""
        return dict(self.headers)

    def secrets(self) -> list[str]:
        """Header values that must never be printed (used to scrub error text)."""
        return [v for _, v in self.headers if v]

    @classmethod
    def resolve(
        cls,
        url: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        ssl_verify: bool = True,
    ) -> ConnectionSettings:
        """Build settings from explicit values, falling back to ``FLUX_CHROMA_*`` variables.

        Args:
            url: Server URL; default ``FLUX_CHROMA_URL`` or ``http://localhost:8000``.
            headers: Extra headers; merged over ``FLUX_CHROMA_HEADERS`` (a JSON object).
            token: Sent as ``Authorization: Bearer <token>`` (for a token-checking proxy or
                Chroma Cloud); default ``FLUX_CHROMA_TOKEN``.
            connect_timeout: Seconds; default ``FLUX_CHROMA_CONNECT_TIMEOUT`` or 5.
            read_timeout: Seconds; default ``FLUX_CHROMA_READ_TIMEOUT`` or 60.

        Raises:
            ConfigurationError: A value is malformed.
            OneOwnerError: ``url`` is a filesystem path or a client object.
        """
        merged: dict[str, str] = {}
        raw_headers = os.environ.get("FLUX_CHROMA_HEADERS")
        if raw_headers:
            try:
                parsed = json.loads(raw_headers)
            except json.JSONDecodeError as exc:
                raise ConfigurationError("FLUX_CHROMA_HEADERS is not a JSON object.") from exc
            if not isinstance(parsed, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()
            ):
                raise ConfigurationError("FLUX_CHROMA_HEADERS must be a JSON object of strings.")
            merged.update(parsed)
        for key, value in (headers or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError(f"headers= values must be strings (header {key!r}).")
            merged[key] = value
        token = token if token is not None else os.environ.get("FLUX_CHROMA_TOKEN")
        if token:
            merged["Authorization"] = f"Bearer {token}"
        return cls(
            url=url if url is not None else os.environ.get("FLUX_CHROMA_URL", DEFAULT_URL),
            headers=tuple(sorted(merged.items())),
            connect_timeout=connect_timeout
            if connect_timeout is not None
            else _env_float("FLUX_CHROMA_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT),
            read_timeout=read_timeout
            if read_timeout is not None
            else _env_float("FLUX_CHROMA_READ_TIMEOUT", DEFAULT_READ_TIMEOUT),
            ssl_verify=ssl_verify,
        )
