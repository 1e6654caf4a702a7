"""Replayable ingestion jobs: reference-driven, batch-checkpointed, crash-resumable, incremental.

* :class:`IngestJob`: the small JSON-able job spec (sources by reference, never documents).
* :func:`run_ingest`, :func:`run_ingest_tenants`: run inline with deterministic execution
  ids: resume a crashed run, re-run a failed one replaying its committed batches.
* Workflows ``ingest_job``, ``ingest_tenants`` and ``migrate_collection`` (namespace
  ``flux-chroma``), and the building blocks for your own: :func:`ingest_steps` and the
  tasks ``plan_ingest``, ``ingest_batch``, ``cleanup_ingest``.
* :func:`register_loader`: custom source kinds. :func:`split_text`, :func:`chunk_id`:
  deterministic chunking.
* :func:`run_migration`: re-embed a tenant's collection with a new model into a new
  collection, verify it, then switch readers through an alias.
"""

from flux_chroma.ingest.batch import cleanup_ingest, ingest_batch, plan_ingest
from flux_chroma.ingest.chunking import ChunkingOptions, chunk_id, split_text
from flux_chroma.ingest.jobs import JobBusyError
from flux_chroma.ingest.migrate import (
    MigrationSpec,
    migrate_collection,
    migration_steps,
    run_migration,
)
from flux_chroma.ingest.plan import build_plan, read_batch
from flux_chroma.ingest.sources import register_loader
from flux_chroma.ingest.spec import IngestJob
from flux_chroma.ingest.submit import (
    corpus_digest,
    ingest_execution_id,
    run_ingest,
    run_ingest_tenants,
)
from flux_chroma.ingest.workflow import ingest_job, ingest_steps, ingest_tenants

__all__ = [
    "IngestJob",
    "ChunkingOptions",
    "run_ingest",
    "run_ingest_tenants",
    "ingest_execution_id",
    "corpus_digest",
    "ingest_job",
    "ingest_tenants",
    "ingest_steps",
    "plan_ingest",
    "ingest_batch",
    "cleanup_ingest",
    "build_plan",
    "read_batch",
    "register_loader",
    "split_text",
    "chunk_id",
    "JobBusyError",
    "MigrationSpec",
    "migrate_collection",
    "migration_steps",
    "run_migration",
]
