"""Erasing a tenant: ``erase_tenant`` and ``flux-chroma tenant erase TENANT --yes``.

What goes: every collection of the tenant's namespace with its alias registry (prefix mode:
``{tenant}__*`` in the default database; tenant ids hold no ``_``, so ``acme__`` never matches
``acme-eu__x``), or in database mode the tenant's database; then this host's cache entries of
the tenant's texts. Cache keys hold no tenant, so the text hashes come from the stored
documents before they are deleted, and entries whose text another tenant stores are kept.
What cannot go from here is listed in the receipt's ``remains``.

A running ingestion job of the tenant on this host (its job lock is held), or a collection
re-created during the erasure, fails it with :class:`TenantBusyError`; it is idempotent.
"""

from __future__ import annotations

import asyncio
import fcntl
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flux_chroma.chroma.aliases import list_aliases
from flux_chroma.chroma.connection import admin_client, forget_clients, forget_database, get_client
from flux_chroma.chroma.naming import Namespace
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.errors import FluxChromaError, classify_chroma_error
from flux_chroma.tasks.context import chroma_options, chroma_settings
from flux_chroma.tasks.decorator import RETRY, chroma_task

__all__ = ["TenantBusyError", "erase_tenant"]

_PAGE = 1000


class TenantBusyError(FluxChromaError):
    """An ingestion job of the tenant runs (or something wrote to it) while it is being erased."""


def _collections(settings: ConnectionSettings, database: str | None) -> list[Any]:
    try:
        return list(get_client(settings, database).list_collections())
    except Exception as exc:  # noqa: BLE001 - classified in one place
        mapped = classify_chroma_error(exc, action=f"list collections of database {database or 'default'!r}", url=settings.url)
        if database is not None and not mapped.transient:
            return []  # the tenant's database does not exist (any more)
        raise mapped from None


def _text_hashes(collection: Any) -> Iterator[str]:
    """The embedding cache's text hash of every document the collection stores."""
    from flux_chroma.embedding.cache import text_hash

    total = collection.count()
    for offset in range(0, total, _PAGE):
        got = collection.get(limit=_PAGE, offset=offset, include=["documents"])
        yield from (text_hash(d) for d in got["documents"] or [] if isinstance(d, str))


def _databases(settings: ConnectionSettings) -> list[str | None]:
    try:
        listed = admin_client(settings).list_databases()
    except Exception as exc:  # noqa: BLE001
        raise classify_chroma_error(exc, action="list databases", url=settings.url) from None
    return [None, *(str(d["name"]) for d in listed if d["name"] != "default_database")]


def _mine(namespace: Namespace, settings: ConnectionSettings) -> list[Any]:
    return [c for c in _collections(settings, namespace.database) if namespace.owns(c.name)]


def _other_hashes(namespace: Namespace, settings: ConnectionSettings, wanted: set[str]) -> set[str]:
    """Hashes among ``wanted`` that a record of another tenant (any database) also stores."""
    shared: set[str] = set()
    for database in _databases(settings):
        if database is not None and database == namespace.database:
            continue
        for collection in _collections(settings, database):
            if database is None and namespace.tenancy == "prefix" and namespace.owns(collection.name):
                continue
            shared.update(h for h in _text_hashes(collection) if h in wanted)
            if shared == wanted:
                return shared
    return shared


def _busy_jobs(tenant: str) -> list[str]:
    """Ingestion jobs of ``tenant`` whose lock (``ingest/jobs.py``) a live process holds here."""
    from flux_chroma.ingest.jobs import job_lock_dir

    pattern = re.compile(rf"^fc-[a-z]+-{re.escape(tenant)}-[0-9a-f]{{16}}\.lock$")
    busy = []
    for path in sorted(p for p in job_lock_dir().glob("*.lock") if pattern.match(p.name)):
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy.append(path.stem)
    return busy


def erase_tenant_sync(
    namespace: Namespace,
    settings: ConnectionSettings,
    cache_dir: str | Path | None = None,
    *,
    confirm: bool = False,
    cache_only: bool = False,
) -> dict[str, Any]:
    """Erase (or, without ``confirm``, list) a tenant's collections, aliases and cache entries.

    The synchronous body of :func:`erase_tenant`, with the same receipt and errors;
    ``cache_dir`` defaults to the default cache folder.
    """
    from flux_chroma.embedding.cache import default_cache_dir, text_entries

    tenant = namespace.tenant
    busy = _busy_jobs(tenant)
    if busy and confirm:
        raise TenantBusyError(
            f"tenant {tenant!r} has running ingestion job(s) on this host: {busy}; nothing was erased. "
            "Stop them (or wait for them to end), then erase again."
        )
    collections = _mine(namespace, settings)
    aliases = list_aliases(settings, namespace) if collections else {}
    records = {c.name: c.count() for c in collections}
    hashes = {h for c in collections for h in _text_hashes(c)}
    shared = _other_hashes(namespace, settings, hashes) if hashes else set()
    directory = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    kept = text_entries(directory, shared)
    removed = text_entries(directory, hashes - shared, delete=confirm)
    deleted_database = False
    if confirm and not cache_only:
        for collection in collections:
            try:
                get_client(settings, namespace.database).delete_collection(collection.name)
            except Exception as exc:  # noqa: BLE001
                mapped = classify_chroma_error(exc, action=f"delete collection {collection.name!r}", url=settings.url)
                if mapped.transient:
                    raise mapped from None  # already gone is fine: idempotent
        if namespace.database is not None:
            deleted_database = _drop_database(settings, namespace.database)
        back = _mine(namespace, settings)
        if back:
            raise TenantBusyError(
                f"collections of tenant {tenant!r} reappeared while it was erased: "
                f"{sorted(c.name for c in back)} (a writer is still running). Stop it and erase again."
            )
    return {
        "tenant": tenant,
        "tenancy": namespace.tenancy,
        "dry_run": not confirm,
        "cache_only": cache_only,
        "collections": sorted(records) if not cache_only else [],
        "collections_deleted": len(records) if confirm and not cache_only else 0,
        "records_deleted": sum(records.values()) if confirm and not cache_only else 0,
        "records": sum(records.values()),
        "aliases": len(aliases),
        "database_deleted": deleted_database,
        "cache_directory": str(directory),
        "cache_entries_deleted": removed if confirm else 0,
        "cache_entries_to_delete": removed,
        "cache_entries_kept_shared": kept,
        "running_jobs": busy,
        "remains": _remains(tenant),
    }


def _drop_database(settings: ConnectionSettings, database: str) -> bool:
    admin = admin_client(settings)
    try:
        admin.delete_database(database)
    except Exception as exc:  # noqa: BLE001
        mapped = classify_chroma_error(exc, action=f"delete database {database!r}", url=settings.url)
        if mapped.transient:
            raise mapped from None
        return False  # already gone
    finally:
        forget_database(settings, database)
        forget_clients()  # cached clients of the dropped database must not be reused
    return True


def _remains(tenant: str) -> list[str]:
    return [
        ("other hosts' embedding caches: before erasing, run "
        f"`flux-chroma tenant erase {tenant} --cache-only --yes` on every other host that ran its "
        "tasks (the text hashes come from the records erased here), or delete their cache folders"),
        ("question embeddings cached by queries: the cache cannot tell whose they are; they age out "
        "by LRU eviction (cache_size_limit), or delete the cache folder"),
        ("Flux executions that recorded the tenant's documents by value (embed_and_add arguments, "
        f"task names ending in _{tenant}): Flux 0.87 has no call to delete one execution; enable "
        "Flux retention ([flux.retention] enabled = true, retention_days) or delete those rows from "
        "the Flux database. Ingestion jobs record file references, not texts."),
    ]


@chroma_task(**RETRY)
async def erase_tenant(confirm: bool = False, cache_only: bool = False) -> dict[str, Any]:
    """Erase the task's tenant (its options): collections and aliases (or database), cache entries.

    Args:
        confirm: Delete; ``False`` is a dry run listing what would go.
        cache_only: Only this host's embedding-cache entries of the tenant's texts (run it on
            every other host first, while the records still exist).

    Returns:
        An audit receipt: ``tenant``, ``tenancy``, ``dry_run``, ``cache_only``, ``collections``
        (physical names), ``collections_deleted``, ``records`` / ``records_deleted``,
        ``aliases``, ``database_deleted``, ``cache_directory``, ``cache_entries_deleted``,
        ``cache_entries_to_delete``, ``cache_entries_kept_shared`` (texts another tenant also
        stores), ``running_jobs``, ``remains`` (what this call cannot erase, and how to).

    Raises:
        TenantError: No or invalid ``tenant=`` option.
        TenantBusyError: An ingestion job of the tenant runs on this host, or a collection
            reappeared during the erasure; run again once it stopped.
        ChromaUnavailableError: The server is unreachable (retried by Flux).
    """
    options = chroma_options()
    namespace = options.namespace()
    return await asyncio.to_thread(
        erase_tenant_sync, namespace, chroma_settings(), options.cache_dir, confirm=confirm, cache_only=cache_only
    )
