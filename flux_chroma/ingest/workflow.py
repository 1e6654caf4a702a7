"""The ingestion workflows, and the async steps they are made of (for your own workflows).

``ingest_job`` runs :func:`ingest_steps` for one job spec; ``ingest_tenants`` runs several
jobs with bounded concurrency; ``ingest_unit`` is one unit of a ``parallel`` job, started as a
child execution on a Flux worker (register this module with the Flux server).

Flux re-executes this module when it registers the workflows: definitions only, no side
effects at import time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from flux import ExecutionContext, workflow
from flux.routing import least, load, score

from flux_chroma.errors import ConfigurationError, FluxChromaError, restore_error
from flux_chroma.ingest.batch import cleanup_ingest, find_lost_batches, ingest_batch, plan_ingest
from flux_chroma.ingest.dispatch import DEFAULT_UNIT_TIMEOUT, dispatch_units
from flux_chroma.ingest.spec import IngestJob
from flux_chroma.ingest.units import bounded_gather, run_units_inline, shard
from flux_chroma.telemetry import span

__all__ = ["ingest_steps", "ingest_job", "ingest_unit", "ingest_tenants", "build_report", "bounded_gather"]

_SUMS = ("added", "updated", "skipped", "embedded", "cache_hits", "verified")
_COUNTS = ("skipped_file_count", "unmatched_files", "excluded_files", "symlinked_folder_count")
_TIMED = ("batch", "chunks", "added", "skipped", "seconds", "embed_seconds", "execution_id", "pid")


def build_report(job: IngestJob, plan: dict[str, Any], receipts: list[dict[str, Any]], cleanup: dict[str, Any] | None) -> dict[str, Any]:
    """Summarize a job from its plan, batch receipts and cleanup result (JSON-able).

    Returns:
        The plan's ``digest``, ``sources``, ``docs``, ``chunks``, ``truncated``, ``chunker``,
        duplicate, skipped-file and symlinked-folder fields; ``tenant``, ``collection`` (written),
        ``requested_collection``, ``physical_name``, ``batches``; the receipts' sums
        (``added``, ``updated``, ``skipped``, ``embedded``, ``cache_hits``, ``embed_seconds``,
        ``verified``), ``deleted``, ``failed`` (chunks not written), ``cleanup``, and
        ``batch_timings`` (per batch, with the worker, execution and process that wrote it).
    """
    return {
        "tenant": job.tenant,
        "collection": plan["collection"],
        "requested_collection": job.collection,
        "physical_name": plan["physical_name"],
        "digest": plan["digest"],
        "sources": plan["sources"],
        "docs": plan["docs"],
        "chunks": plan["chunks"],
        "truncated": plan.get("truncated"),
        "chunker": plan.get("chunker"),
        "batches": len(plan["batches"]),
        **{key: sum(int(r[key]) for r in receipts) for key in _SUMS},
        "deleted": int((cleanup or {}).get("deleted", 0)),
        "failed": plan["chunks"] - sum(int(r["chunks"]) for r in receipts),
        "embed_seconds": round(sum(float(r["embed_seconds"]) for r in receipts), 6),
        "cleanup": cleanup,
        "duplicates": plan["duplicates"],
        "duplicate_count": plan["duplicate_count"],
        "skipped_files": plan.get("skipped_files", []),
        "symlinked_folders": plan.get("symlinked_folders", []),
        "unmatched_sample": plan.get("unmatched_sample", []),
        **{key: plan.get(key, 0) for key in _COUNTS},
        "batch_timings": [
            {**{k: r[k] for k in _TIMED}, "worker": r.get("worker")} for r in receipts
        ],
    }


def _stopped(exc: BaseException, job: IngestJob, plan: dict[str, Any], receipts: list[dict[str, Any]], ref: dict[str, Any]) -> FluxChromaError:
    """The batch's own error class, with the job's progress in the message and ``.report``."""
    if isinstance(exc, FluxChromaError):
        inner = exc
    else:  # e.g. a stored failure revived by Flux as ExecutionError, whose str() is "None"
        text = getattr(exc, "message", None) or repr(getattr(exc, "inner_exception", None) or exc)
        inner = FluxChromaError(f"{type(exc).__name__}: {text}")
    message = (
        f"ingestion job {job.tenant}/{plan['collection']} stopped after {len(receipts)} of "
        f"{len(plan['batches'])} batches committed (batch {ref['batch'] + 1} of {len(plan['batches'])} failed, "
        f"cleanup not run): {(inner.message or type(inner).__name__).rstrip('.')}. "
        "Run the job again (run_ingest): committed batches are replayed, not rewritten."
    )
    return restore_error(inner.__class__, message, {"report": build_report(job, plan, receipts, None)})


async def ingest_steps(job: IngestJob | dict[str, Any], *, expected_digest: str | None = None) -> dict[str, Any]:
    """Run an ingestion job as Flux tasks inside the current workflow.

    Plan, then one ``ingest_batch`` call per batch (each a replay checkpoint), then
    ``cleanup_ingest`` once every batch has committed. With ``job.parallel > 1`` up to
    ``parallel`` units (:mod:`flux_chroma.ingest.units`) run at once: inline in this
    process, or on a Flux worker as child executions (:mod:`flux_chroma.ingest.dispatch`).

    Returns:
        The report (see :func:`build_report`).

    Raises:
        FluxChromaError: The failing batch's error class; ``.report`` holds the partial
            report. Nothing is deleted when a batch failed.
    """
    spec = IngestJob.from_dict(job)
    spec_dict = spec.work_dict()
    opts = spec.task_options()
    plan = await plan_ingest.with_options(**opts)(spec_dict, expected_digest)
    write = partial(ingest_batch.with_options(**opts), plan["collection"], spec_dict)
    units = shard(plan["batches"], spec.parallel)
    if spec.parallel > 1 and (await ExecutionContext.get()).current_worker:
        timeout = float(spec.options.get("unit_timeout") or DEFAULT_UNIT_TIMEOUT)
        receipts, failure = await dispatch_units(spec_dict, plan["collection"], units, spec.parallel, timeout)
    else:
        receipts, failure = await run_units_inline(units, write, spec.parallel)
    if failure is not None:
        raise _stopped(failure.cause, spec, plan, receipts, failure.ref) from None
    receipts = await _rewrite_lost(plan, spec_dict, receipts, opts, write)
    cleanup = None
    if spec.cleanup is not None:
        cleanup = await cleanup_ingest.with_options(**opts)(plan["collection"], spec_dict, plan["digest"])
    return build_report(spec, plan, receipts, cleanup)


async def _rewrite_lost(
    plan: dict[str, Any],
    spec_dict: dict[str, Any],
    receipts: list[dict[str, Any]],
    opts: dict[str, Any],
    write: Callable[..., Awaitable[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """On a re-run after ``FAILED``, write again the replayed batches the server lost.

    The collection may have been dropped or the server wiped since the failed run; lost
    batches run again through the skip-unchanged writer, under a task id unique to this run.
    """
    ctx = await ExecutionContext.get()
    if not (isinstance(ctx.input, dict) and ctx.input.get("replayed_from")):
        return receipts
    replayed = {int(r["batch"]) for r in receipts if r.get("execution_id") not in (None, ctx.execution_id)}
    if not replayed:
        return receipts
    refs = [ref for ref in plan["batches"] if int(ref["batch"]) in replayed]
    check = find_lost_batches.with_options(**opts)
    lost = set(await check(plan["collection"], spec_dict, refs, ctx.execution_id))
    again = {}
    for ref in refs:
        if int(ref["batch"]) in lost:
            again[int(ref["batch"])] = await write({**ref, "rewrite_of_lost": ctx.execution_id})
    return [again.get(int(r["batch"]), r) for r in receipts]


@workflow.with_options(namespace="flux-chroma")
async def ingest_job(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest one job: input is a job spec, or ``{"job": spec, "digest": corpus digest}``."""
    if isinstance(ctx.input, dict) and "job" in ctx.input:
        return await ingest_steps(ctx.input["job"], expected_digest=ctx.input.get("digest"))
    return await ingest_steps(ctx.input)


@workflow.with_options(namespace="flux-chroma")
async def ingest_tenants(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest several tenants' jobs concurrently; fail (after all finished) if any failed.

    Input: ``{"jobs": [spec, ...], "max_concurrent": 2, "digests": [...] (optional)}``.
    """
    data = ctx.input or {}
    jobs = [IngestJob.from_dict(j) for j in data.get("jobs") or []]
    if not jobs:
        raise ConfigurationError("ingest_tenants needs input {'jobs': [job spec, ...]}.")
    digests = list(data.get("digests") or [None] * len(jobs))
    max_concurrent = int(data.get("max_concurrent", 2))
    keys = [(j.tenant, j.collection) for j in jobs]
    if len(set(keys)) != len(keys):
        raise ConfigurationError(f"ingest_tenants got the same tenant/collection twice: {keys}.")
    if max_concurrent < 1:
        raise ConfigurationError(f"max_concurrent must be a positive integer, got {max_concurrent!r}.")
    results = await bounded_gather([ingest_steps(j, expected_digest=d) for j, d in zip(jobs, digests, strict=True)], max_concurrent)
    failures = [(j, r) for j, r in zip(jobs, results, strict=True) if isinstance(r, BaseException)]
    reports = {f"{j.tenant}/{j.collection}": r for j, r in zip(jobs, results, strict=True) if not isinstance(r, BaseException)}
    if failures:
        detail = "; ".join(f"{j.tenant}/{j.collection}: {type(e).__name__}: {e}" for j, e in failures)
        err = FluxChromaError(
            f"{len(failures)} of {len(jobs)} tenant jobs failed ({detail}). The others finished; run "
            "again to replay them and resume the failed ones."
        )
        err.reports = reports  # type: ignore[attr-defined]
        raise err
    return {"jobs": reports, "tenants": sorted({j.tenant for j in jobs})}


@workflow.with_options(namespace="flux-chroma", runner="inprocess", routing=score(least(load())))
async def ingest_unit(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Write one unit of a ``parallel`` job (started by the job; see ``flux_chroma.ingest.dispatch``).

    Input: ``{"job": spec, "collection": str, "unit": {"unit", "of", "batches"}}``. Units go
    to the least-loaded worker (Flux's event dispatch mode; in poll mode any free worker).
    """
    data = ctx.input or {}
    spec = IngestJob.from_dict(data["job"])
    unit = data["unit"]
    write = partial(ingest_batch.with_options(**spec.task_options()), data["collection"], spec.work_dict())
    with span("flux_chroma.ingest.unit", spec.tenant, data["collection"], unit=int(unit["unit"]), batches=len(unit["batches"])):
        receipts, failure = await run_units_inline([unit], write, 1)
    if failure is not None:
        cause = failure.cause if isinstance(failure.cause, FluxChromaError) else FluxChromaError(repr(failure.cause))
        raise restore_error(cause.__class__, (
            f"unit {unit['unit']} of {unit['of']} stopped at batch {failure.ref['batch']} ({len(receipts)} of its "
            f"{len(unit['batches'])} batches committed): {cause.message or type(cause).__name__}"), {})
    return {"unit": unit["unit"], "receipts": receipts}
