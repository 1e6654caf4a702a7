"""Run ingestion jobs inline with deterministic execution ids (resume instead of twins).

Example:
    >>> ctx = run_ingest({"tenant": "acme", "collection": "handbook",
    ...                   "sources": [{"kind": "files", "path": "docs"}], "cleanup": "full"})
    >>> ctx.has_succeeded, ctx.output["added"], ctx.execution_id
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flux import ExecutionContext

from flux_chroma.ingest.jobs import Progress, execution_base, execution_id, run_durable
from flux_chroma.ingest.plan import build_plan, submitted_plans
from flux_chroma.ingest.spec import IngestJob, digest_of
from flux_chroma.ingest.workflow import ingest_job, ingest_tenants

__all__ = ["run_ingest", "run_ingest_tenants", "ingest_execution_id", "corpus_digest"]


def corpus_digest(job: IngestJob | Mapping[str, Any]) -> str:
    """Digest of every chunk the job would write (reads the sources; no server needed)."""
    return str(build_plan(IngestJob.from_dict(job))["digest"])


def ingest_execution_id(job: IngestJob | Mapping[str, Any], run: int = 1) -> str:
    """The execution id of run ``run`` of a job (stable across processes and machines)."""
    spec = IngestJob.from_dict(job)
    return execution_id(execution_base("ingest", spec.tenant, spec.collection, spec.job_key), run)


def run_ingest(job: IngestJob | Mapping[str, Any], *, on_progress: Progress | None = None) -> ExecutionContext[Any]:
    """Run an ingestion job inline, resuming or re-running it as needed.

    The latest run of the job (same job key) is resumed when its process died, re-run with
    its completed batches replayed when it failed, or followed by a fresh run (an incremental
    sync) when it completed (see :mod:`flux_chroma.ingest.jobs`).

    Args:
        job: The job spec. Its ``key`` (default: a digest of the spec) decides the execution ids.
        on_progress: Called with every progress value: ``{"phase": "reading", ...}`` in the
            calling thread while the sources are read (see :func:`build_plan`), then
            ``{"phase": "execution"|"planned"|"batch"|"cleanup", ...}`` in the workflow's thread.

    Returns:
        The execution context: ``has_succeeded``, ``output`` (the report, or the error).

    Raises:
        ConfigurationError: Invalid job spec; the job is busy in another process.
        DuplicateIdError: Duplicate document ids with ``duplicates="error"`` (before any run).
        InvalidDocumentError: A malformed record (before any run).
        SourceChangedError: A source is missing (before any run).
    """
    spec = IngestJob.from_dict(job)
    base = execution_base("ingest", spec.tenant, spec.collection, spec.job_key)
    with submitted_plans([spec], on_progress) as (digest,):
        return run_durable(ingest_job, {"job": spec.to_dict(), "digest": digest}, base=base, on_progress=on_progress)


def run_ingest_tenants(
    jobs: Sequence[IngestJob | Mapping[str, Any]],
    *,
    max_concurrent: int = 2,
    key: str | None = None,
    on_progress: Progress | None = None,
) -> ExecutionContext[Any]:
    """Run several tenants' jobs in one workflow, at most ``max_concurrent`` at a time.

    When one tenant's job fails, the others still finish; the execution then fails, and
    running it again replays the finished work and resumes the failed job.

    Returns:
        The execution context; ``output["jobs"]`` maps ``"tenant/collection"`` to reports.
    """
    specs = [IngestJob.from_dict(j) for j in jobs]
    dicts = [s.to_dict() for s in specs]
    family = key or digest_of([dicts, max_concurrent], 20)
    tenants = "-".join(sorted({s.tenant for s in specs}))[:60].strip("-")
    base = execution_base("fanout", tenants, "*", family)
    with submitted_plans(specs, on_progress) as digests:
        payload = {"jobs": dicts, "digests": digests, "max_concurrent": max_concurrent}
        return run_durable(ingest_tenants, payload, base=base, on_progress=on_progress)
