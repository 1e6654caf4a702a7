"""flux-chroma: ChromaDB as a safe, durable step inside Flux workflows.

One Chroma server process owns the data directory; every Flux worker is a stateless
``chromadb.HttpClient``. The tasks are genuine Flux tasks configured with ``.with_options()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flux_chroma._lazy import lazy_exports
from flux_chroma._version import __version__
from flux_chroma.chroma.collections import Resolved
from flux_chroma.chroma.server import ChromaServer
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.erasure import TenantBusyError, erase_tenant
from flux_chroma.errors import (
    ChromaRequestError,
    ChromaUnavailableError,
    CollectionNotFoundError,
    ConfigurationError,
    DuplicateIdError,
    EmbeddingFunctionError,
    EmbeddingMismatchError,
    FluxChromaError,
    InvalidDocumentError,
    InvalidNameError,
    InvalidQueryError,
    ModelNotAvailableError,
    NotChromaServerError,
    OneOwnerError,
    QualityGateError,
    ServerStartError,
    SourceChangedError,
    SourceConflictError,
    TenantError,
    UnpinnedCollectionError,
)
from flux_chroma.ingest import (
    IngestJob,
    MigrationSpec,
    ingest_job,
    ingest_tenants,
    migrate_collection,
    register_loader,
    run_ingest,
    run_ingest_tenants,
    run_migration,
)
from flux_chroma.quality import evaluate, load_labels
from flux_chroma.tasks.builtin import (
    delete_collection,
    delete_documents,
    embed_and_add,
    list_collections,
    query,
)
from flux_chroma.tasks.context import chroma_options, chroma_target, use_collection
from flux_chroma.tasks.decorator import chroma_task
from flux_chroma.tasks.documents import (
    DocumentEntry,
    Passage,
    Record,
    expand_hit,
    get_document,
    get_records,
    list_documents,
)
from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.reader import public_metadata
from flux_chroma.tasks.results import CollectionEntry, Hit, PinSummary, Receipt
from flux_chroma.tasks.task import ChromaTask

if TYPE_CHECKING:
    from flux_chroma.embedding import EmbeddingCache, FastDefaultEmbedding

# Imported on first use: they need chromadb, onnxruntime, numpy and diskcache.
_LAZY = {"embedding": ("EmbeddingCache", "FastDefaultEmbedding")}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "__version__",
    # tasks
    "embed_and_add",
    "query",
    "list_collections",
    "delete_collection",
    "delete_documents",
    "get_document",
    "expand_hit",
    "get_records",
    "list_documents",
    "erase_tenant",
    "ChromaTask",
    "ChromaOptions",
    # writing your own tasks
    "chroma_task",
    "chroma_options",
    "chroma_target",
    "use_collection",
    "Resolved",
    "public_metadata",
    # task outputs
    "Receipt",
    "Hit",
    "CollectionEntry",
    "PinSummary",
    "Passage",
    "Record",
    "DocumentEntry",
    # measured retrieval quality
    "evaluate",
    "load_labels",
    # replayable ingestion and migration
    "IngestJob",
    "run_ingest",
    "run_ingest_tenants",
    "ingest_job",
    "ingest_tenants",
    "register_loader",
    "MigrationSpec",
    "migrate_collection",
    "run_migration",
    # infrastructure
    "ChromaServer",
    "ConnectionSettings",
    "FastDefaultEmbedding",
    "EmbeddingCache",
    # errors
    "FluxChromaError",
    "ConfigurationError",
    "OneOwnerError",
    "QualityGateError",
    "InvalidNameError",
    "TenantError",
    "InvalidDocumentError",
    "DuplicateIdError",
    "InvalidQueryError",
    "CollectionNotFoundError",
    "EmbeddingMismatchError",
    "EmbeddingFunctionError",
    "UnpinnedCollectionError",
    "ModelNotAvailableError",
    "ChromaUnavailableError",
    "ChromaRequestError",
    "NotChromaServerError",
    "ServerStartError",
    "SourceChangedError",
    "SourceConflictError",
    "TenantBusyError",
]
