"""Re-embedding migration: rebuild a tenant's collection with a new model, then switch an alias.

Readers keep using the name (say ``kb``). ``plan_migration`` resolves it to the source and
creates the target (``kb-<8 hex of the new fingerprint>``) pinned to the new model;
``migrate_page`` re-embeds each page with the same ids, documents and metadata;
``reconcile_migration`` catches up with what the source gained or lost and verifies both match;
an optional quality gate (``labels``, ``max_recall_drop``) may refuse the new model; then
``switch_alias`` points ``kb`` at the target, only if it still resolves to the source. A query
resolves the alias once, so it never mixes models. The old collection is left in place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow

from flux_chroma.chroma.aliases import list_aliases, resolve_alias, set_alias
from flux_chroma.chroma.collections import Target, open_collection, pages, rows
from flux_chroma.chroma.connection import get_client, server_info
from flux_chroma.chroma.naming import validate_collection_name, validate_tenant
from flux_chroma.chroma.pinning import Pin, pin_for
from flux_chroma.errors import (
    ChromaUnavailableError,
    CollectionNotFoundError,
    ConfigurationError,
    InvalidDocumentError,
    UnpinnedCollectionError,
    classify_chroma_error,
)
from flux_chroma.ingest.batch import send_progress
from flux_chroma.ingest.jobs import Progress, execution_base, run_durable
from flux_chroma.ingest.spec import (
    DEFAULT_BATCH_SIZE,
    check_embedding,
    check_options,
    digest_of,
    embedding_from_spec,
)
from flux_chroma.quality.gate import check_gate, quality_gate
from flux_chroma.quality.labels import load_labels
from flux_chroma.tasks.context import chroma_options
from flux_chroma.tasks.decorator import RETRY, chroma_task
from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.reader import public_metadata
from flux_chroma.tasks.validation import RESERVED_PREFIX, Document
from flux_chroma.tasks.writer import HASH_KEY, content_hash, write_documents

__all__ = ["MigrationSpec", "migration_steps", "migrate_collection", "run_migration", "plan_migration", "migrate_page", "reconcile_migration", "switch_alias"]


@dataclass(frozen=True)
class MigrationSpec:
    """What to migrate and to which model.

    Args:
        collection: The name readers use (a collection, or an alias of one).
        embedding_function: ``{"name", "config"}`` of the new (registered) embedding function.
        target: New collection name (default ``{collection}-{fingerprint[:8]}``).
        batch_size: Records per page task (capped by the server's max batch size).
        space: Distance space of the target (default: the source's).
        options: Loggable task options (as for :class:`~flux_chroma.ingest.IngestJob`).
        key: Job key for execution ids (default: a digest of the spec).
        labels: ``{"question", "relevant_documents"}`` dicts for the quality gate (None: no gate).
        max_recall_drop: The largest recall@10 drop (old minus new, 0..1) the gate accepts
            (default 0.0 when ``labels`` is given).
    """

    tenant: str
    collection: str
    embedding_function: dict[str, Any]
    target: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    space: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    labels: list[dict[str, Any]] | None = None
    max_recall_drop: float | None = None

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        validate_collection_name(self.collection)
        if self.target is not None:
            validate_collection_name(self.target)
        ef = check_embedding(self.embedding_function, "migration")
        if ef is None:
            raise ConfigurationError("migration.embedding_function is required: the model to migrate to.")
        object.__setattr__(self, "embedding_function", ef)
        object.__setattr__(self, "options", check_options(self.options, "migration"))
        labels, drop = check_gate(self.labels, self.max_recall_drop)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "max_recall_drop", drop)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {self.batch_size!r}.")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | MigrationSpec) -> MigrationSpec:
        """Build from the JSON form (or return unchanged)."""
        if isinstance(data, MigrationSpec):
            return data
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"a migration spec must be a dict, got {type(data).__name__}.")
        known = {f.name for f in fields(cls)}
        if set(data) - known:
            raise ConfigurationError(f"migration spec has unknown field(s) {sorted(set(data) - known)}.")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        out = {"tenant": self.tenant, "collection": self.collection, "embedding_function": self.embedding_function, "batch_size": self.batch_size}
        for name in ("target", "space", "key", "labels", "max_recall_drop"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.options:
            out["options"] = dict(self.options)
        return out

    def task_options(self) -> dict[str, Any]:
        """Task options: tenant, loggable options, and the NEW embedding function."""
        return {**self.options, "tenant": self.tenant, "embedding_function": embedding_from_spec(self.embedding_function)}


def _raw(target: Target) -> Any:
    try:
        return get_client(target.settings, target.namespace.database).get_collection(target.physical, embedding_function=None)
    except Exception as exc:  # noqa: BLE001
        raise classify_chroma_error(exc, action=f"open {target.label!r}", url=target.settings.url) from None


def _copy(records: list[tuple[str, Any, Any]], target: Target, options: ChromaOptions) -> dict[str, Any]:
    """Write source records into the target in one write (batched by the server's limit).

    Each keeps its own ``fc_*`` keys through ``record_metadata``, outside the content hash
    (text and user metadata), as the reconcile step expects.
    """
    missing = [rid for rid, doc, _ in records if not isinstance(doc, str)]
    if missing:
        raise InvalidDocumentError(
            f"records {missing[:5]} have no document text, so they cannot be re-embedded with a new model."
        )
    docs: list[Document] = []
    own: dict[str, dict[str, Any]] = {}
    for rid, doc, meta in records:
        meta = meta or {}
        own[rid] = {k: v for k, v in meta.items() if k.startswith(RESERVED_PREFIX) and k != HASH_KEY}
        docs.append(Document(rid, doc, public_metadata(meta)))
    written: Mapping[str, Any] = write_documents(target, docs, options.write_options(adopt=False, record_metadata=own))
    return {key: written[key] for key in ("added", "updated", "skipped", "embedded", "embed_seconds")}


_MIGRATION_KEY = "fc_migration_source"


def _refuse_foreign_target(spec: MigrationSpec, source: Target, target: Target) -> None:
    """Refuse a target that holds records this migration did not write, or that an alias serves.

    Reconciliation deletes whatever the source lacks: it would delete someone else's records.
    """
    others = {a: t for a, t in list_aliases(target.settings, target.namespace).items() if t == target.name and a != spec.collection}
    if others:
        raise ConfigurationError(
            f"migration target {target.label!r} is what alias(es) {sorted(others)} serve to readers; a "
            "migration would overwrite it. Choose another target= . Nothing was written."
        )
    try:
        existing = _raw(target)
    except CollectionNotFoundError:
        return
    count = int(existing.count())
    if count and (existing.metadata or {}).get(_MIGRATION_KEY) != source.name:
        raise ConfigurationError(
            f"migration target {target.label!r} already holds {count} records that no migration of "
            f"{source.label!r} wrote; migrating into it would delete them (the target is made to match "
            "the source). Choose another target= , or delete that collection first if its records "
            "are disposable. Nothing was written."
        )


def _mark_target(target: Target, source: str) -> None:
    """Record in the target's metadata which source it is being built from."""
    collection = _raw(target)
    metadata = dict(collection.metadata or {})
    if metadata.get(_MIGRATION_KEY) != source:
        try:
            collection.modify(metadata={**metadata, _MIGRATION_KEY: source})
        except Exception as exc:  # noqa: BLE001
            raise classify_chroma_error(exc, action=f"mark {target.label!r}", url=target.settings.url) from None


def _plan_sync(options: ChromaOptions, spec: MigrationSpec) -> dict[str, Any]:
    source = resolve_alias(options.target(spec.collection))
    source_coll = _raw(source)
    source_pin = Pin.from_metadata(source_coll.metadata)
    if source_pin is None:
        raise UnpinnedCollectionError(f"collection {source.label!r} has no pin; adopt it before migrating it.")
    new_pin = pin_for(options.embedding_function, spec.space or source_pin.space)
    same = (new_pin.name, new_pin.config, new_pin.fingerprint.digest, new_pin.space) == (
        source_pin.name, source_pin.config, source_pin.fingerprint.digest, source_pin.space)
    target_name = spec.target or f"{spec.collection}-{new_pin.fingerprint.digest[:8]}"
    plan: dict[str, Any] = {"source": source.name, "target": target_name, "pin": new_pin.summary(), "source_pin": source_pin.summary(), "noop": same}
    if same:
        return {**plan, "target": source.name, "count": 0, "page_size": 0, "pages": []}
    if target_name == source.name:
        raise ConfigurationError(f"migration target {target_name!r} is the source collection itself; choose another target.")
    target = options.target(target_name)
    _refuse_foreign_target(spec, source, target)
    open_collection(target, ef=options.embedding_function, space=new_pin.space, create=True)  # pinned to the new model
    _mark_target(target, source.name)
    size = min(spec.batch_size, int(server_info(source.settings)["max_batch_size"]) or spec.batch_size)
    count = int(source_coll.count())
    pages = [{"page": i, "offset": off, "limit": size} for i, off in enumerate(range(0, count, size))]
    return {**plan, "count": count, "page_size": size, "pages": pages}


@chroma_task(**RETRY)
async def plan_migration(spec: dict[str, Any]) -> dict[str, Any]:
    """Resolve the source, create the pinned target, and cut the source into pages.

    ``noop`` in the result is True when the name already serves this model.
    """
    return await asyncio.to_thread(_plan_sync, chroma_options(), MigrationSpec.from_dict(spec))


def _page_sync(options: ChromaOptions, source: str, target: str, page: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    got = _raw(options.target(source)).get(include=["documents", "metadatas"], limit=page["limit"], offset=page["offset"])
    records = rows(got)
    totals = _copy(records, options.target(target), options) if records else {}
    return {"page": page["page"], "records": len(records), **totals, "seconds": round(time.perf_counter() - started, 6)}


@chroma_task(**RETRY)
async def migrate_page(source: str, target: str, page: dict[str, Any]) -> dict[str, Any]:
    """Re-embed one page of the source into the target (same ids, documents, metadata)."""
    options = chroma_options()
    receipt = await asyncio.to_thread(_page_sync, options, source, target, page)
    await send_progress({"phase": "migrate", "tenant": options.tenant, "source": source, "target": target, **receipt})
    return receipt


def _hashes(options: ChromaOptions, name: str, page: int, *, from_documents: bool) -> dict[str, str]:
    include = ["documents", "metadatas"] if from_documents else ["metadatas"]
    out: dict[str, str] = {}
    for got in pages(_raw(options.target(name)), page, include=include):
        for rid, doc, meta in rows(got):
            stored = None if from_documents else (meta or {}).get(HASH_KEY)
            out[rid] = str(stored or content_hash(Document(rid, doc or "", public_metadata(meta))))
    return out


def _reconcile_sync(options: ChromaOptions, source: str, target: str) -> dict[str, Any]:
    page = int(server_info(options.settings())["max_batch_size"]) or 1000
    want = _hashes(options, source, page, from_documents=True)
    have = _hashes(options, target, page, from_documents=False)
    todo = [rid for rid, h in want.items() if have.get(rid) != h]
    extra = [rid for rid in have if rid not in want]
    src = _raw(options.target(source))
    for start in range(0, len(todo), page):
        got = src.get(ids=todo[start : start + page], include=["documents", "metadatas"])
        _copy(rows(got), options.target(target), options)
    tgt = _raw(options.target(target))
    for start in range(0, len(extra), page):
        tgt.delete(ids=extra[start : start + page])
    if _hashes(options, target, page, from_documents=False) != _hashes(options, source, page, from_documents=True):
        raise ChromaUnavailableError(
            f"collection {source!r} changed while its migration to {target!r} was being verified; the "
            "reconcile step is retried. The alias was not switched."
        )
    return {"count": len(want), "copied": len(todo), "deleted": len(extra), "verified": True}


@chroma_task(**RETRY)
async def reconcile_migration(source: str, target: str) -> dict[str, Any]:
    """Make the target match the source (copy missing/changed, delete extra) and verify it.

    Raises:
        ChromaUnavailableError: The source kept changing; retried by Flux.
    """
    return await asyncio.to_thread(_reconcile_sync, chroma_options(), source, target)


@chroma_task(**RETRY)
async def switch_alias(alias: str, target: str, expected: str) -> dict[str, Any]:
    """Point ``alias`` at ``target`` if it still resolves to ``expected``."""
    options = chroma_options()
    return await asyncio.to_thread(set_alias, options.settings(), options.namespace(), alias, target, expected=expected)


async def migration_steps(spec: MigrationSpec | dict[str, Any]) -> dict[str, Any]:
    """Run a migration as Flux tasks inside the current workflow.

    Returns:
        ``{"tenant", "collection", "source", "target", "noop", "count", "pages", "added",
        "updated", "skipped", "embedded", "embed_seconds", "reconcile", "gate", "switch", "pin"}``.

    Raises:
        QualityGateError: The spec has a labelled set and the new model's recall@10 drops by
            more than ``max_recall_drop`` (the alias is not switched).
    """
    spec = MigrationSpec.from_dict(spec)
    spec_dict, opts = spec.to_dict(), spec.task_options()
    plan = await plan_migration.with_options(**opts)(spec_dict)
    report: dict[str, Any] = {"tenant": spec.tenant, "collection": spec.collection, "source": plan["source"], "target": plan["target"], "noop": plan["noop"], "count": plan["count"], "pages": len(plan["pages"]), "pin": plan["pin"]}
    if plan["noop"]:
        return {**report, "reconcile": None, "gate": None, "switch": None}
    page_task = migrate_page.with_options(**opts)
    receipts = [await page_task(plan["source"], plan["target"], ref) for ref in plan["pages"]]
    for key in ("added", "updated", "skipped", "embedded"):
        report[key] = sum(int(r.get(key, 0)) for r in receipts)
    report["embed_seconds"] = round(sum(float(r.get("embed_seconds", 0.0)) for r in receipts), 6)
    report["reconcile"] = await reconcile_migration.with_options(**opts)(plan["source"], plan["target"])
    report["gate"] = None
    if spec.labels is not None and spec.max_recall_drop is not None:
        report["gate"] = await quality_gate(plan["source"], plan["target"], spec.labels, spec.max_recall_drop, opts)  # type: ignore[arg-type]
    report["switch"] = await switch_alias.with_options(**opts)(spec.collection, plan["target"], plan["source"])
    return report


@workflow.with_options(namespace="flux-chroma")
async def migrate_collection(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Re-embed a tenant's collection into a new one and switch its alias. Input: a spec."""
    data = ctx.input or {}
    return await migration_steps(data.get("spec", data))


def run_migration(
    spec: MigrationSpec | Mapping[str, Any],
    *,
    on_progress: Progress | None = None,
    labels: str | Path | Iterable[Mapping[str, Any]] | None = None,
    max_recall_drop: float | None = None,
) -> ExecutionContext[Any]:
    """Run a migration inline with deterministic execution ids (resume/re-run like ingestion).

    Args:
        on_progress: Progress callback (one value per migrated page).
        labels: A labelled set (JSON-lines path or list of dicts) for the quality gate; it
            replaces the spec's ``labels``.
        max_recall_drop: The largest recall@10 drop the gate accepts (default 0.0).

    Returns:
        The execution context; ``output`` is the report (see :func:`migration_steps`), or a
        :class:`~flux_chroma.errors.QualityGateError` when the gate refused the new model.

    Raises:
        ConfigurationError: A malformed spec or labelled set.

    Example:
        >>> run = run_migration(spec, labels="labels.jsonl", max_recall_drop=0.02)  # doctest: +SKIP
    """
    spec = MigrationSpec.from_dict(spec)
    if labels is not None or max_recall_drop is not None:
        gate_labels = [dict(q) for q in load_labels(labels)] if labels is not None else spec.labels
        spec = replace(spec, labels=gate_labels, max_recall_drop=max_recall_drop)
    key = spec.key or digest_of({k: v for k, v in spec.to_dict().items() if k != "key"}, 20)
    base = execution_base("migrate", spec.tenant, spec.collection, key)
    return run_durable(migrate_collection, {"spec": spec.to_dict()}, base=base, on_progress=on_progress)
