"""The public surface is explicit and stable (langchain's test_imports pattern)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from flux import task

import flux_chroma

EXPECTED = {
    "__version__",
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
    "chroma_task",
    "chroma_options",
    "chroma_target",
    "use_collection",
    "Resolved",
    "public_metadata",
    "Receipt",
    "Hit",
    "CollectionEntry",
    "PinSummary",
    "Passage",
    "Record",
    "DocumentEntry",
    "evaluate",
    "load_labels",
    "IngestJob",
    "run_ingest",
    "run_ingest_tenants",
    "ingest_job",
    "ingest_tenants",
    "register_loader",
    "MigrationSpec",
    "migrate_collection",
    "run_migration",
    "ChromaServer",
    "ConnectionSettings",
    "FastDefaultEmbedding",
    "EmbeddingCache",
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
}


def test_all_matches_expected() -> None:
    assert set(flux_chroma.__all__) == EXPECTED
    for name in flux_chroma.__all__:
        assert hasattr(flux_chroma, name), name


def test_tasks_are_genuine_flux_tasks_and_with_options_returns_new_ones() -> None:
    for t in (flux_chroma.embed_and_add, flux_chroma.query, flux_chroma.list_collections):
        assert isinstance(t, task)
        configured = t.with_options(tenant="acme", retry_max_attempts=7, timeout=9, cache=True)
        assert isinstance(configured, flux_chroma.ChromaTask) and configured is not t
        assert configured.retry_max_attempts == 7 and configured.timeout == 9
        assert configured.options.tenant == "acme" and configured.options.cache is True
        assert configured.cache is False  # Flux's output cache would skip writes
        assert t.options.tenant is None  # the original is unchanged
        assert configured.name.endswith("_acme")


def test_public_names_have_docstrings() -> None:
    for name in flux_chroma.__all__:
        obj = getattr(flux_chroma, name)
        if name == "__version__":
            continue
        assert (obj.__doc__ or "").strip(), name


def test_version_matches_pyproject() -> None:
    data = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert data["project"]["version"] == flux_chroma.__version__
