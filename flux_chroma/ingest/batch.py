"""The ingestion tasks: ``plan_ingest``, ``ingest_batch`` and ``cleanup_ingest``.

:class:`~flux_chroma.tasks.task.ChromaTask` instances whose arguments are references (job spec,
batch reference, digest), never documents: Flux's log stays small; each call is a checkpoint.

Example:
    >>> plan = await plan_ingest.with_options(tenant="acme")(job)
    >>> for ref in plan["batches"]:
    ...     await ingest_batch.with_options(tenant="acme")(plan["collection"], job, ref)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

from flux import ExecutionContext

from flux_chroma.chroma.aliases import resolve_alias
from flux_chroma.chroma.collections import Resolved, Target, open_collection, with_collection
from flux_chroma.chroma.connection import server_info
from flux_chroma.errors import (
    ChromaUnavailableError,
    CollectionNotFoundError,
    SourceChangedError,
    TenantError,
    classify_chroma_error,
)
from flux_chroma.ingest.cleanup import claim_sources, cleanup_stale, source_metadata
from flux_chroma.ingest.plan import build_plan, read_batch, take_plan
from flux_chroma.ingest.spec import IngestJob
from flux_chroma.tasks.context import chroma_options, chroma_target
from flux_chroma.tasks.decorator import RETRY, chroma_task
from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.writer import write_documents
from flux_chroma.telemetry import count, observe, record_receipt, span

__all__ = ["plan_ingest", "ingest_batch", "find_lost_batches", "cleanup_ingest", "send_progress"]


def _context(job: Any, collection: str | None = None) -> tuple[ChromaOptions, IngestJob, Target]:
    """The task's options, its job (for the task's tenant) and target (default: the job's)."""
    options = chroma_options()
    spec = IngestJob.from_dict(job)
    if options.tenant is not None and options.tenant != spec.tenant:
        raise TenantError(
            f"this task is bound to tenant {options.tenant!r} but the job is for {spec.tenant!r}; "
            "use task.with_options(**job.task_options())."
        )
    return options, spec, chroma_target(spec.collection if collection is None else collection)


async def send_progress(value: dict[str, Any]) -> None:
    """Emit Flux progress from inside a task (streamed to callers, never persisted)."""
    from flux.tasks.progress import progress

    await progress(value)


def _plan_sync(target: Target, job: IngestJob, expected: str | None, options: ChromaOptions) -> dict[str, Any]:
    resolved = resolve_alias(target)
    max_batch = int(server_info(target.settings)["max_batch_size"]) or None
    moved = claim_sources(resolved, job, ef=options.embedding_function, adopt=options.adopt)  # before any write
    plan = take_plan(job, max_batch, expected) or build_plan(job, max_batch)
    for stats in plan["sources"]:
        if stats["id"] in moved:
            stats["relocated"] = moved[stats["id"]]
    if expected is not None and plan["digest"] != expected:
        raise SourceChangedError(
            f"the sources of ingestion job {job.tenant}/{job.collection} changed between submission and "
            "planning; nothing was written. Submit the job again."
        )
    return {**plan, "collection": resolved.name, "physical_name": resolved.physical}


@chroma_task(**RETRY)
async def plan_ingest(job: dict[str, Any], expected_digest: str | None = None) -> dict[str, Any]:
    """Read a job's sources once and cut it into batch references.

    First :func:`~flux_chroma.ingest.cleanup.claim_sources`: a source with ``relocate: true``
    takes over its id's records of another location (``plan["sources"][i]["relocated"]``).

    Args:
        job: The job spec (:meth:`IngestJob.to_dict`).
        expected_digest: The corpus digest the job was submitted with (``None``: no check).

    Returns:
        The plan (see :func:`~flux_chroma.ingest.plan.build_plan`) plus ``collection`` (the
        alias-resolved collection to write) and ``physical_name``.

    Raises:
        SourceConflictError: A source's id holds records of another location (nothing written).
        SourceChangedError: A source is missing, or its digest is not ``expected_digest``.
        DuplicateIdError: A document id repeats and ``duplicates="error"``.
        InvalidDocumentError: A malformed record (named by source and position).
    """
    options, spec, target = _context(job)
    plan = await asyncio.to_thread(_plan_sync, target, spec, expected_digest, options)
    skipped_files = int(plan["skipped_file_count"])
    count("flux_chroma_files_skipped_total", skipped_files, spec.tenant, plan["collection"])
    await send_progress({"phase": "planned", "tenant": spec.tenant, "collection": plan["collection"], "batches": len(plan["batches"]), "chunks": plan["chunks"]})
    return plan


def _verify(resolved: Resolved, ids: list[str], label: str, url: str) -> int:
    try:
        found = set(resolved.collection.get(ids=ids, include=[])["ids"])
    except Exception as exc:  # noqa: BLE001 - classified in one place
        raise classify_chroma_error(exc, action=f"verify {label}", url=url) from None
    missing = [i for i in ids if i not in found]
    if missing:
        raise ChromaUnavailableError(
            f"verify-after-write of {label}: {len(missing)} of {len(ids)} written ids are missing on "
            f"the server (e.g. {missing[:3]}). The batch is retried."
        )
    return len(ids)


def _batch_sync(target: Target, job: IngestJob, ref: dict[str, Any], options: ChromaOptions) -> dict[str, Any]:
    started = time.perf_counter()
    chunks = read_batch(job, ref)
    source = job.sources[ref["source"]]
    opts = options.write_options(extra_metadata=source_metadata(source))
    receipt: Mapping[str, Any] = write_documents(target, [c.document() for c in chunks], opts)
    resolved = open_collection(target, ef=options.embedding_function, space=options.space, create=False, adopt=options.adopt)
    verified = _verify(resolved, [c.id for c in chunks], f"batch {ref['batch']} of {target.label!r}", target.settings.url)
    written = ("added", "updated", "skipped", "embedded", "cache_hits", "embed_seconds")
    return {
        "batch": ref["batch"],
        "source": source["id"],
        "chunks": len(chunks),
        **{key: receipt[key] for key in written},
        "seconds": round(time.perf_counter() - started, 6),
        "verified": verified,
        "pid": os.getpid(),
    }


@chroma_task(**RETRY)
async def ingest_batch(collection: str, job: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    """Re-read one batch from its reference, write it, and verify the ids on the server.

    Args:
        collection: The collection to write (``plan["collection"]``).
        batch: One entry of ``plan["batches"]``.

    Returns:
        A receipt: ``batch``, ``source``, ``chunks``, the write's counts, ``seconds``,
        ``verified``, ``execution_id``, ``worker``, ``pid``.

    Raises:
        SourceChangedError: The slice no longer matches its digest (nothing is written).
        EmbeddingMismatchError: The configured model differs from the collection's pin.
        ChromaUnavailableError: The server is unreachable (retried by Flux).
    """
    options, spec, target = _context(job, collection)
    base = {"phase": "batch", "tenant": spec.tenant, "collection": collection, "batch": batch["batch"], "of": batch.get("of")}
    await send_progress({**base, "status": "started", "chunks": batch["count"]})
    with span("flux_chroma.ingest.batch", spec.tenant, collection, batch=int(batch["batch"]), chunks=int(batch["count"])) as current:
        receipt = await asyncio.to_thread(_batch_sync, target, spec, batch, options)
        if current is not None:
            for key in ("added", "updated", "skipped", "embedded", "cache_hits"):
                current.set_attribute(f"flux_chroma.{key}", int(receipt[key]))
    record_receipt(receipt, spec.tenant, collection)
    observe("flux_chroma_batch_duration_seconds", receipt["seconds"], spec.tenant, collection)
    ctx = await ExecutionContext.get()
    receipt["execution_id"] = ctx.execution_id
    receipt["worker"] = ctx.current_worker or None  # "" inline
    await send_progress({**base, "status": "done", **receipt})
    return receipt


def _lost_sync(target: Target, job: IngestJob, refs: list[dict[str, Any]], options: ChromaOptions) -> list[int]:
    def lost(resolved: Resolved) -> list[int]:
        out = []
        for ref in refs:
            ids = [c.id for c in read_batch(job, ref)]
            found = resolved.collection.get(ids=ids, include=[])["ids"]
            if len(set(found)) < len(set(ids)):
                out.append(int(ref["batch"]))
        return out

    try:
        return with_collection(
            target, lost, ef=options.embedding_function, space=options.space, create=False,
            adopt=options.adopt, action=f"check replayed batches of {target.label!r}",
        )
    except CollectionNotFoundError:
        return [int(ref["batch"]) for ref in refs]  # the whole collection is gone


@chroma_task(**RETRY)
async def find_lost_batches(collection: str, job: dict[str, Any], batches: list[dict[str, Any]], run: str) -> list[int]:
    """Numbers of the given (replayed) batches with at least one id missing on the server.

    A re-run after ``FAILED`` replays the failed run's batches, but the collection may have
    been dropped since. ``run`` (the current execution id) makes the check fresh per run.
    """
    options, spec, target = _context(job, collection)
    return await asyncio.to_thread(_lost_sync, target, spec, list(batches), options)


@chroma_task(**RETRY)
async def cleanup_ingest(collection: str, job: dict[str, Any], plan_digest: str) -> dict[str, Any]:
    """Delete the job's stale chunks (after all batches committed), per ``job["cleanup"]``.

    Returns:
        ``{"mode", "scanned", "deleted"}``.

    Raises:
        SourceChangedError: The sources changed since the plan (``plan_digest``).
    """
    options, spec, target = _context(job, collection)
    result = await asyncio.to_thread(cleanup_stale, target, spec, plan_digest, ef=options.embedding_function)
    count("flux_chroma_chunks_deleted_total", int(result.get("deleted", 0)), spec.tenant, collection)
    await send_progress({"phase": "cleanup", "tenant": spec.tenant, "collection": collection, **result})
    return result
