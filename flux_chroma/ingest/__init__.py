"""Replayable ingestion jobs: reference-driven, batch-checkpointed, crash-resumable, incremental.

Run a job inline with :func:`run_ingest` (deterministic execution ids: a crashed run resumes,
a failed one re-runs replaying its committed batches), or as the Flux workflows ``ingest_job``,
``ingest_tenants`` and ``migrate_collection`` (namespace ``flux-chroma``); build your own from
:func:`ingest_steps` and the tasks. :func:`run_migration` re-embeds a collection with a new
model and switches readers through an alias.
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
