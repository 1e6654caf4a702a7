"""Collection aliases: a per-tenant name readers use, pointing at a real collection.

A migration builds a new collection, then switches the alias: readers never see a half-built
one. Aliases live in a reserved collection of the tenant's namespace (``fc.aliases``, prefixed
in prefix mode), so every worker sees a switch on its next query. Resolution is one level deep
and costs one small ``get`` per query; an alias wins over a real collection of the same name.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from flux_chroma.chroma.collections import Target
from flux_chroma.chroma.connection import database_exists_or_create, get_client
from flux_chroma.chroma.naming import Namespace, validate_collection_name
from flux_chroma.chroma.pinning import Pin
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import (
    CollectionNotFoundError,
    ConfigurationError,
    UnpinnedCollectionError,
    classify_chroma_error,
)

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

__all__ = ["REGISTRY_NAME", "resolve_alias", "get_alias", "set_alias", "remove_alias", "list_aliases"]

REGISTRY_NAME = "fc.aliases"
_TARGET_KEY = "fc_target"

_handles: dict[tuple[ConnectionSettings, Namespace], Collection] = {}


def _registry(settings: ConnectionSettings, namespace: Namespace, *, create: bool) -> Collection | None:
    key = (settings, namespace)
    handle = _handles.get(key)
    if handle is not None:
        return handle
    action = f"open the alias registry of tenant {namespace.tenant!r}"
    physical = namespace.prefix + REGISTRY_NAME
    try:
        if create and namespace.database is not None:
            database_exists_or_create(settings, namespace.database)
        client = get_client(settings, namespace.database)
        if create:
            handle = client.get_or_create_collection(
                physical,
                metadata={"fc_registry": "aliases", "fc_tenant": namespace.tenant},
                embedding_function=None,
            )
        else:
            handle = client.get_collection(physical, embedding_function=None)
    except Exception as exc:  # noqa: BLE001 - classified in one place
        mapped = classify_chroma_error(exc, action=action, url=settings.url)
        if isinstance(mapped, CollectionNotFoundError) and not create:
            return None
        raise mapped from None
    _handles[key] = handle  # one dict write: no lock needed (at worst a handle is built twice)
    return handle


def _lookup(
    settings: ConnectionSettings, namespace: Namespace, names: list[str] | None
) -> dict[str, dict[str, Any]]:
    """``{alias: metadata}`` of the registry entries ``names`` (``None``: all)."""
    action = f"{'list' if names is None else 'read'} aliases of {namespace.tenant!r}"
    for _ in range(2):
        registry = _registry(settings, namespace, create=False)
        if registry is None:
            return {}
        try:
            got = registry.get(ids=names, include=["metadatas"])
            return {rid: dict(meta or {}) for rid, meta in zip(got["ids"], got["metadatas"] or [], strict=False)}
        except Exception as exc:  # noqa: BLE001
            mapped = classify_chroma_error(exc, action=action, url=settings.url)
            _handles.pop((settings, namespace), None)
            if not isinstance(mapped, CollectionNotFoundError):
                raise mapped from None
            # The registry was dropped (and maybe recreated): look once more by name.
    return {}


def get_alias(settings: ConnectionSettings, namespace: Namespace, name: str) -> str | None:
    """Return the collection alias ``name`` points at, or ``None`` when it is no alias."""
    validate_collection_name(name)
    meta = _lookup(settings, namespace, [name]).get(name)
    target = (meta or {}).get(_TARGET_KEY)
    return str(target) if target else None


def resolve_alias(target: Target, *, drop: bool = False) -> Target:
    """The collection every task addresses for ``target.name`` (itself when it is no alias).

    The one place aliases are resolved, so every task follows them alike. Blocking (one small
    request): call it from a worker thread in async code.

    Args:
        drop: The caller is about to delete the collection itself: refused for an alias, which
            would delete a collection readers no longer see or leave the alias dangling.

    Raises:
        ConfigurationError: ``drop`` and ``target.name`` is an alias.
        ChromaUnavailableError: The server is unreachable.
    """
    real = get_alias(target.settings, target.namespace, target.name)
    if real is None:
        return target
    if drop:
        raise ConfigurationError(
            f"{target.label} is an alias of the collection {target.namespace.tenant}/{real} (readers, "
            f"writes and deletes of documents by that name go there); deleting a collection by an "
            f"alias name is refused. Delete {real!r} by its own name, or remove the alias first "
            "(flux_chroma.chroma.aliases.remove_alias). Nothing was deleted."
        )
    return Target(target.settings, target.namespace, real)


def list_aliases(settings: ConnectionSettings, namespace: Namespace) -> dict[str, str]:
    """All aliases of a tenant: ``{alias: collection}``."""
    entries = _lookup(settings, namespace, None)
    return {alias: str(meta.get(_TARGET_KEY)) for alias, meta in entries.items()}


def _check_target(settings: ConnectionSettings, namespace: Namespace, name: str) -> None:
    physical = namespace.physical(name)
    try:
        collection = get_client(settings, namespace.database).get_collection(physical, embedding_function=None)
    except Exception as exc:  # noqa: BLE001
        mapped = classify_chroma_error(exc, action=f"open {namespace.tenant}/{name}", url=settings.url)
        if isinstance(mapped, CollectionNotFoundError):
            raise CollectionNotFoundError(
                f"cannot point an alias at {namespace.tenant}/{name}: the collection does not exist."
            ) from None
        raise mapped from None
    if Pin.from_metadata(collection.metadata) is None:
        raise UnpinnedCollectionError(
            f"cannot point an alias at {namespace.tenant}/{name}: it has no embedding pin, so "
            "queries could not prove which model built it. Adopt it first (adopt=True)."
        )


def set_alias(
    settings: ConnectionSettings,
    namespace: Namespace,
    alias: str,
    target: str,
    *,
    expected: str | None = None,
) -> dict[str, Any]:
    """Point ``alias`` at the tenant's collection ``target`` (visible to every process at once).

    Args:
        target: Existing, pinned collection of the same tenant; not itself an alias.
        expected: When given, switch only if ``alias`` currently resolves to it (to itself
            when it is no alias yet), so two migrations cannot overwrite each other.

    Returns:
        ``{"alias", "target", "previous"}`` (``previous``: what ``alias`` resolved to before).

    Raises:
        InvalidNameError: Invalid or reserved names.
        ConfigurationError: ``alias == target``, ``target`` is an alias, or ``expected``
            does not match.
        CollectionNotFoundError: ``target`` does not exist.
        UnpinnedCollectionError: ``target`` has no pin.
    """
    validate_collection_name(alias)
    validate_collection_name(target)
    if alias == target:
        raise ConfigurationError(f"alias {alias!r} cannot point at itself.")
    current = _lookup(settings, namespace, [alias, target])
    if _TARGET_KEY in current.get(target, {}):
        raise ConfigurationError(f"{namespace.tenant}/{target} is itself an alias; point {alias!r} at a real collection.")
    previous = str(current.get(alias, {}).get(_TARGET_KEY) or alias)
    if expected is not None and previous != expected:
        raise ConfigurationError(
            f"alias {namespace.tenant}/{alias} resolves to {previous!r}, not {expected!r}: another "
            "switch happened meanwhile. Nothing was changed."
        )
    _check_target(settings, namespace, target)
    registry = _registry(settings, namespace, create=True)
    assert registry is not None
    meta: dict[str, Any] = {_TARGET_KEY: target, "fc_previous": previous, "fc_switched_at": time.time()}
    try:
        registry.upsert(ids=[alias], embeddings=[[0.0]], documents=[target], metadatas=[meta])  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001
        _handles.pop((settings, namespace), None)
        raise classify_chroma_error(exc, action=f"set alias {namespace.tenant}/{alias}", url=settings.url) from None
    return {"alias": alias, "target": target, "previous": previous}


def remove_alias(settings: ConnectionSettings, namespace: Namespace, alias: str) -> bool:
    """Remove an alias; True when it existed (readers then use the collection of that name)."""
    if get_alias(settings, namespace, alias) is None:  # validates the name
        return False
    registry = _registry(settings, namespace, create=False)
    if registry is None:
        return False
    try:
        registry.delete(ids=[alias])
    except Exception as exc:  # noqa: BLE001
        _handles.pop((settings, namespace), None)
        raise classify_chroma_error(exc, action=f"remove alias {namespace.tenant}/{alias}", url=settings.url) from None
    return True
