"""flux-chroma's own task options, which sit beside Flux's (``tenant=``, ``url=``, ...).

They live on the task object, never in task arguments, so tokens and headers stay out of
Flux's event log and task ids.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from flux_chroma.chroma.collections import Target
from flux_chroma.chroma.naming import Namespace, validate_tenant
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import ConfigurationError
from flux_chroma.tasks.writer import WriteOptions

__all__ = ["CHROMA_OPTION_NAMES", "ChromaOptions"]

@dataclass(frozen=True)
class ChromaOptions:
    """Options of a flux-chroma task (pass them to ``task.with_options``).

    Args:
        tenant: Required for every task that touches a collection. Lowercase letters,
            digits and single hyphens, 3-63 characters.
        tenancy: ``"prefix"`` (default: ``{tenant}__{name}`` collections) or ``"database"``
            (one Chroma database per tenant, created on demand).
        url: Chroma server URL (default ``FLUX_CHROMA_URL`` or ``http://localhost:8000``).
        headers: Extra HTTP headers (e.g. for a token-checking proxy). Never logged.
        token: Bearer token (default ``FLUX_CHROMA_TOKEN``). Never logged.
        token_secret: Name of a Flux secret holding the token (uses ``secret_requests``).
        connect_timeout: Seconds to connect (default 5).
        read_timeout: Seconds for each whole request once connected (default 60).
        embedding_function: A chromadb embedding function. ``None`` uses the collection's
            pinned function, or the fast default model for new collections.
        cache: Reuse embeddings through the per-text embedding cache (never skips a write).
        cache_dir: Embedding cache directory (default ``FLUX_CHROMA_CACHE_DIR`` or
            ``~/.cache/flux-chroma/embeddings``).
        cache_size_limit: Embedding cache size limit in bytes (LRU eviction).
        space: Distance space of new collections: ``l2`` (default), ``cosine`` or ``ip``.
        adopt: Pin and use a collection that was created outside flux-chroma.
    """

    tenant: str | None = None
    tenancy: Literal["prefix", "database"] = "prefix"
    url: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_secret: str | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    embedding_function: Any = None
    cache: bool = False
    cache_dir: str | None = None
    cache_size_limit: int | None = None
    space: str | None = None
    adopt: bool = False

    def __post_init__(self) -> None:
        if self.tenant is not None:
            validate_tenant(self.tenant)
        if self.tenancy not in ("prefix", "database"):
            raise ConfigurationError(f"tenancy={self.tenancy!r}: use 'prefix' or 'database'.")
        if not isinstance(self.cache, bool):
            raise ConfigurationError(f"cache= must be True or False, got {self.cache!r}.")
        ef = self.embedding_function
        if ef is not None and (isinstance(ef, str) or not callable(ef)):
            raise ConfigurationError(
                f"embedding_function= must be a chromadb embedding function object, got {ef!r}."
            )
        if self.url is not None:
            ConnectionSettings.resolve(self.url)  # fail at configuration time, not in a worker

    def settings(self, secrets: Mapping[str, Any] | None = None) -> ConnectionSettings:
        """Resolve connection settings (options, then Flux secret, then environment)."""
        token = self.token
        if token is None and self.token_secret and secrets:
            value = secrets.get(self.token_secret)
            token = str(value) if value is not None else None
        return ConnectionSettings.resolve(
            self.url,
            headers=self.headers,
            token=token,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
        )

    def namespace(self) -> Namespace:
        """The tenant namespace (raises TenantError when ``tenant`` is missing)."""
        return Namespace(validate_tenant(self.tenant), self.tenancy)

    def target(self, name: object, secrets: Mapping[str, Any] | None = None) -> Target:
        """Validate ``name`` inside the tenant's namespace and return the target."""
        namespace = self.namespace()
        target = Target(self.settings(secrets), namespace, str(name) if isinstance(name, str) else name)  # type: ignore[arg-type]
        namespace.physical(name)  # validates before any network call
        return target

    def write_options(self, **overrides: Any) -> WriteOptions:
        """These options' :class:`~flux_chroma.tasks.writer.WriteOptions`, with ``overrides``."""
        return WriteOptions(**{
            "ef": self.embedding_function,
            "cache": self.embedding_cache(),
            "space": self.space,
            "adopt": self.adopt,
            **overrides,
        })

    def embedding_cache(self) -> Any:
        """This process's shared :class:`EmbeddingCache` when ``cache=True``, else ``None``."""
        if not self.cache:
            return None
        from flux_chroma.embedding.cache import EmbeddingCache

        key = (self.cache_dir, self.cache_size_limit)
        with _caches_lock:
            if key not in _caches:
                cap = self.cache_size_limit
                kwargs = {} if cap is None else {"size_limit": cap}
                _caches[key] = EmbeddingCache(self.cache_dir, **kwargs)
            return _caches[key]


CHROMA_OPTION_NAMES = frozenset(f.name for f in fields(ChromaOptions))

_caches_lock = threading.Lock()
_caches: dict[tuple[Any, ...], Any] = {}
