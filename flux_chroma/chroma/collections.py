"""Resolve a tenant's collection by NAME, create it with a pin, and verify the pin.

Never by a caller-supplied id: Chroma's tenants and databases isolate names, not ids. A verified
(collection, pin) pair is cached per process and dropped when the server says the collection is
gone, so a recreated collection or a restored snapshot is re-resolved, never served stale.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flux_chroma.chroma.connection import database_exists_or_create, forget_database, get_client
from flux_chroma.chroma.naming import Namespace
from flux_chroma.chroma.pinning import DEFAULT_SPACE, SPACES, Pin, check_pin, ef_from_pin, pin_for
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.embedding.identity import compute_fingerprint, ef_identity
from flux_chroma.errors import (
    CollectionNotFoundError,
    ConfigurationError,
    EmbeddingMismatchError,
    UnpinnedCollectionError,
    classify_chroma_error,
)

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["SEARCH_EF", "Resolved", "Target", "forget_collection", "open_collection", "pages", "rows", "with_collection"]

SEARCH_EF = 400
"""``hnsw.ef_search`` of the collections flux-chroma creates (Chroma's default: 100): how many
candidates the server's vector index explores per query. At 100 it missed the nearest record
for 4 of 200 section titles asked of the Rust book (3,057 chunks) and 1.3% of the exact top
10; at 400, none, for about 1-2 ms more server time per query (``docs/retrieval.md``, "The
vector index")."""


@dataclass(frozen=True)
class Target:
    """Which collection an operation addresses: server, tenant namespace, tenant-relative name."""

    settings: ConnectionSettings
    namespace: Namespace
    name: str

    @property
    def physical(self) -> str:
        """The Chroma collection name (always inside the tenant's namespace)."""
        return self.namespace.physical(self.name)

    @property
    def label(self) -> str:
        """``tenant/name`` for messages."""
        return f"{self.namespace.tenant}/{self.name}"


@dataclass(frozen=True)
class Resolved:
    """A collection whose pin matches the embedding function ``ef`` to use with it.

    ``collection`` has ``embedding_function=None``: flux-chroma always passes vectors.
    """

    collection: Collection
    pin: Pin
    ef: Any


_lock = threading.Lock()
_cache: dict[tuple[Any, ...], Resolved] = {}  # (settings, namespace, physical, ef key, space)


def _ef_key(ef: Any) -> tuple[Any, ...] | None:
    """Class, identity and fingerprint of ``ef``: never ``id(ef)``, which is reused after
    garbage collection (and a function built per run would grow the cache without bound)."""
    if ef is None:
        return None
    fingerprint = compute_fingerprint(ef)
    identity = json.dumps(ef_identity(ef), sort_keys=True)
    return (type(ef).__module__, type(ef).__qualname__, identity, fingerprint.to_json())


def forget_collection(target: Target) -> None:
    """Drop every cached resolution of ``target`` (and of its tenant database) in this process."""
    physical = target.physical
    with _lock:
        for key in [k for k in _cache if k[0] == target.settings and k[2] == physical]:
            _cache.pop(key, None)
    forget_database(target.settings, target.namespace.database)


def _adopt(collection: Collection, pin: Pin, target: Target) -> None:
    sample = collection.get(limit=1, include=["embeddings"])
    embeddings = sample.get("embeddings")
    if embeddings is not None and len(embeddings) > 0 and len(embeddings[0]) != pin.dimension:
        raise EmbeddingMismatchError(
            f"collection {target.label!r} holds {len(embeddings[0])}-dimensional vectors; the "
            f"configured embedding function makes {pin.dimension}. It cannot be adopted."
        )
    collection.modify(metadata={**(collection.metadata or {}), **pin.to_metadata()})


def _open(target: Target, ef: Any, space: str | None, *, create: bool, adopt: bool) -> Resolved:
    settings, namespace, physical = target.settings, target.namespace, target.physical
    database = namespace.database
    action = f"open collection {target.label!r}"
    try:
        if database is not None and create:
            database_exists_or_create(settings, database)
        client = get_client(settings, database)
        try:
            collection = client.get_collection(physical, embedding_function=None)
        except Exception as exc:  # noqa: BLE001 - classified below
            mapped = classify_chroma_error(exc, action=action, url=settings.url)
            if not isinstance(mapped, CollectionNotFoundError):
                raise mapped from None
            if not create:
                raise CollectionNotFoundError(
                    f"collection {target.name!r} of tenant {namespace.tenant!r} does not exist "
                    "on the server. Ingest into it first (embed_and_add), or check the name."
                ) from None
            use_ef = ef if ef is not None else _default_ef()
            pin = pin_for(use_ef, space or DEFAULT_SPACE)
            collection = client.get_or_create_collection(
                physical,
                metadata={**pin.to_metadata(), "fc_tenant": namespace.tenant},
                configuration={"hnsw": {"space": pin.space, "ef_search": SEARCH_EF}},  # type: ignore[arg-type]
                embedding_function=use_ef,
            )
    except Exception as exc:  # noqa: BLE001 - one place maps client errors (ours pass unchanged)
        raise classify_chroma_error(exc, action=action, url=settings.url) from None

    pinned = Pin.from_metadata(collection.metadata)
    if pinned is None:
        if not adopt:
            raise UnpinnedCollectionError(
                f"collection {target.label!r} exists but was not created by flux-chroma (it has "
                "no embedding pin), so flux-chroma cannot prove which model built it. Pass "
                "adopt=True in the task options to pin it to the configured embedding function."
            )
        use_ef = ef if ef is not None else _default_ef()
        pinned = pin_for(use_ef, space or DEFAULT_SPACE)
        _adopt(collection, pinned, target)
        return Resolved(collection, pinned, use_ef)
    use_ef = ef if ef is not None else ef_from_pin(pinned, collection=target.label)
    configured = pin_for(use_ef, space or pinned.space)
    check_pin(pinned, configured, collection=target.label)
    return Resolved(collection, pinned, use_ef)


def _default_ef() -> Any:
    from flux_chroma.embedding import FastDefaultEmbedding

    return FastDefaultEmbedding()


def open_collection(
    target: Target,
    *,
    ef: Any = None,
    space: str | None = None,
    create: bool,
    adopt: bool = False,
) -> Resolved:
    """Resolve a tenant's collection by name and verify its pin (cached per process).

    Args:
        ef: The configured embedding function, or ``None`` to use the pinned one (new
            collections then use the fast default model).
        space: Distance space for new collections (``None`` = the pinned or default one).
        create: Create the collection (with a pin) when it does not exist.
        adopt: Pin a collection created outside flux-chroma instead of refusing it.

    Raises:
        CollectionNotFoundError: Missing and ``create`` is False.
        EmbeddingMismatchError: The configured function differs from the pin.
        UnpinnedCollectionError: The collection has no pin and ``adopt`` is False.
        ChromaUnavailableError: The server is unreachable.
    """
    if space is not None and space not in SPACES:
        raise ConfigurationError(f"space={space!r} is not supported; use one of {SPACES}.")
    key = (target.settings, target.namespace, target.physical, _ef_key(ef), space)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    resolved = _open(target, ef, space, create=create, adopt=adopt)
    with _lock:
        _cache[key] = resolved
    return resolved


def with_collection[T](
    target: Target,
    operation: Callable[[Resolved], T],
    *,
    ef: Any = None,
    space: str | None = None,
    create: bool,
    adopt: bool = False,
    action: str,
) -> T:
    """Run ``operation`` on the resolved collection; re-resolve once if the server lost it.

    A cached handle can point at a recreated collection (new id) or a server restored from a
    snapshot: on a not-found answer the cache entry is dropped and the name resolved again
    (re-resolution, not a retry loop). Other arguments are :func:`open_collection`'s.

    Args:
        operation: Called with the resolved collection; its chromadb errors are classified.
        action: What the operation does, for error messages.
    """
    for attempt in (1, 2):
        try:
            # Resolution is inside the try: a cached database can vanish too (snapshot restore).
            resolved = open_collection(target, ef=ef, space=space, create=create, adopt=adopt)
            return operation(resolved)
        except Exception as exc:
            mapped = classify_chroma_error(exc, action=action, url=target.settings.url)
            if isinstance(mapped, CollectionNotFoundError) and attempt == 1:
                forget_collection(target)
                continue
            if mapped is exc:
                raise
            raise mapped from None
    raise AssertionError("unreachable")  # pragma: no cover


def pages(collection: Any, size: int, **kwargs: Any) -> Iterator[Any]:
    """``collection.get(**kwargs)`` page by page, ``size`` records each; a short page is the last."""
    offset = 0
    while True:
        got = collection.get(limit=size, offset=offset, **kwargs)
        yield got
        if len(got["ids"]) < size:
            return
        offset += size


def rows(got: Any) -> list[tuple[str, str | None, dict[str, Any] | None]]:
    """A ``get`` result as ``(id, document, metadata)`` tuples (``None`` where not included)."""
    ids = [str(i) for i in got["ids"]]
    docs = list(got.get("documents") or [None] * len(ids))
    metas = list(got.get("metadatas") or [None] * len(ids))
    return list(zip(ids, docs, metas, strict=True))
