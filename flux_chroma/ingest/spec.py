"""The job spec: a small, JSON-able description of an ingestion job (never the documents).

Example:
    >>> job = IngestJob.from_dict({
    ...     "tenant": "acme", "collection": "handbook",
    ...     "sources": [{"kind": "files", "path": "docs"}],
    ...     "chunking": {"size": 200, "overlap": 20}, "cleanup": "full",
    ... })
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from flux_chroma.chroma.naming import validate_collection_name, validate_tenant
from flux_chroma.errors import ConfigurationError
from flux_chroma.ingest.chunking import ChunkingOptions, splitter_version
from flux_chroma.ingest.sources import normalize_source

__all__ = ["IngestJob", "DUPLICATE_POLICIES", "CLEANUP_MODES", "canonical_json", "digest_of", "embedding_from_spec"]

DUPLICATE_POLICIES = ("error", "last_wins")
CLEANUP_MODES = (None, "incremental", "full")
DEFAULT_BATCH_SIZE = 256
MAX_PARALLEL = 256

# ChromaOptions that may travel in a job spec (never secrets: the spec is stored in Flux's log).
_CHROMA_KEYS = frozenset(
    {"tenancy", "url", "token_secret", "connect_timeout", "read_timeout", "cache", "cache_dir", "cache_size_limit", "space", "adopt"}
)
_FLUX_KEYS = frozenset({"retry_max_attempts", "retry_delay", "retry_backoff", "timeout"})
# Options of the job itself (not passed to tasks): seconds a cluster unit may stall.
_JOB_KEYS = frozenset({"unit_timeout"})
_SECRET_KEYS = frozenset({"token", "headers"})


def canonical_json(value: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) used for digests."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def digest_of(value: Any, length: int = 32) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``value``, truncated to ``length``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:length]


def check_options(options: Any, where: str) -> dict[str, Any]:
    """Validate the ``options`` dict of a spec (task options that are safe to log)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{where}.options must be a dict, got {type(options).__name__}.")
    secret = set(options) & _SECRET_KEYS
    if secret:
        raise ConfigurationError(
            f"{where}.options must not carry {sorted(secret)}: job specs are stored in Flux's event "
            "log. Use FLUX_CHROMA_TOKEN in the workers' environment or options.token_secret."
        )
    unknown = set(options) - _CHROMA_KEYS - _FLUX_KEYS - _JOB_KEYS
    if unknown:
        raise ConfigurationError(
            f"{where}.options has unknown key(s) {sorted(unknown)}; allowed: {sorted(_CHROMA_KEYS | _FLUX_KEYS | _JOB_KEYS)}."
        )
    timeout = options.get("unit_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigurationError(f"{where}.options.unit_timeout must be a positive number of seconds, got {timeout!r}.")
    return dict(options)


def check_embedding(spec: Any, where: str) -> dict[str, Any] | None:
    """Validate an embedding-function reference ``{"name": ..., "config": {...}}``."""
    if spec is None:
        return None
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or set(spec) - {"name", "config"}:
        raise ConfigurationError(
            f"{where}.embedding_function must be {{'name': <registered chromadb name>, 'config': {{...}}}}, got {spec!r}."
        )
    config = spec.get("config") or {}
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"{where}.embedding_function.config must be a dict.")
    return {"name": spec["name"], "config": dict(config)}


_EF_CACHE: dict[str, Any] = {}


def embedding_from_spec(spec: dict[str, Any] | None) -> Any:
    """Build (once per process) the embedding function a spec names.

    ``"default"`` is flux-chroma's fast build of Chroma's default model; any other name is
    built from chromadb's registry (``@register_embedding_function``) with its config.

    Raises:
        ConfigurationError: The name is not registered in this process.
    """
    if spec is None:
        return None
    key = canonical_json(spec)
    if key in _EF_CACHE:
        return _EF_CACHE[key]
    if spec["name"] == "default" and not spec["config"]:
        from flux_chroma.embedding import FastDefaultEmbedding

        ef: Any = FastDefaultEmbedding()
    else:
        from chromadb.utils.embedding_functions import known_embedding_functions

        factory = known_embedding_functions.get(spec["name"])
        if factory is None:
            raise ConfigurationError(
                f"embedding function {spec['name']!r} is not registered in this process. Import the "
                "module that registers it (@register_embedding_function) in every worker."
            )
        ef = factory.build_from_config(spec["config"])
    _EF_CACHE[key] = ef
    return ef


@dataclass(frozen=True)
class IngestJob:
    """An ingestion job: sources by reference, destination, chunking and policies.

    Args:
        collection: Tenant-relative collection name (or an alias of one).
        sources: Source references (see :mod:`flux_chroma.ingest.sources`).
        chunking: :class:`~flux_chroma.ingest.chunking.ChunkingOptions` (or its dict):
            200 model tokens by default, ``{"unit": "chars", ...}`` for the character chunker.
        batch_size: Chunks per batch task (the replay checkpoint); capped by the server.
        duplicates: ``"error"`` (a document id seen twice fails the job before any write) or
            ``"last_wins"`` (the later source/record wins).
        cleanup: ``None`` (never delete), ``"incremental"`` (stale chunks of the documents seen
            in this job) or ``"full"`` (also chunks of documents that left the sources). Runs
            after every batch committed.
        embedding_function: ``{"name", "config"}`` of a registered chromadb embedding
            function for a NEW collection (default: the pinned one, or the default model).
        options: Loggable task options (``tenancy``, ``url``, ``token_secret``, timeouts,
            ``cache``, ``space``, ``adopt``, Flux's retry options and ``timeout``), and
            ``unit_timeout``: seconds a cluster unit may show no progress (default 600).
        key: Job key for deterministic execution ids (default: a digest of the spec).
        parallel: Units (shards of consecutive batches) in flight at once, 1 to 256: inline,
            concurrently in the process; on a Flux worker, child executions of
            ``flux-chroma/ingest_unit``. Not part of the job key.

    Raises:
        ConfigurationError: Invalid values (the message names the field).
        TenantError: Invalid tenant.
        InvalidNameError: Invalid collection name.
    """

    tenant: str
    collection: str
    sources: tuple[dict[str, Any], ...]
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)
    batch_size: int = DEFAULT_BATCH_SIZE
    duplicates: str = "error"
    cleanup: str | None = None
    embedding_function: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    parallel: int = 1

    def __post_init__(self) -> None:
        validate_tenant(self.tenant)
        validate_collection_name(self.collection)
        if not self.sources:
            raise ConfigurationError("sources is empty: an ingestion job needs at least one source.")
        normalized = tuple(normalize_source(s, i) for i, s in enumerate(self.sources))
        ids = [s["id"] for s in normalized]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigurationError(f"source ids must be unique within a job; repeated: {dupes}. Set 'id' on each source.")
        object.__setattr__(self, "sources", normalized)
        if isinstance(self.chunking, Mapping):
            object.__setattr__(self, "chunking", ChunkingOptions(**dict(self.chunking)))
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {self.batch_size!r}.")
        if self.duplicates not in DUPLICATE_POLICIES:
            raise ConfigurationError(f"duplicates={self.duplicates!r}: use one of {DUPLICATE_POLICIES}.")
        if self.cleanup not in CLEANUP_MODES:
            raise ConfigurationError(f"cleanup={self.cleanup!r}: use one of {CLEANUP_MODES}.")
        object.__setattr__(self, "embedding_function", check_embedding(self.embedding_function, "job"))
        object.__setattr__(self, "options", check_options(self.options, "job"))
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise ConfigurationError(f"key must be a non-empty string, got {self.key!r}.")
        value = self.parallel
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL:
            raise ConfigurationError(
                f"parallel must be an integer from 1 to {MAX_PARALLEL} (units in flight at once), "
                f"got {value!r}."
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | IngestJob) -> IngestJob:
        """Build a job from its JSON form (or return it unchanged)."""
        if isinstance(data, IngestJob):
            return data
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"an ingestion job must be a dict, got {type(data).__name__}.")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigurationError(f"job has unknown field(s) {sorted(unknown)}; allowed: {sorted(known)}.")
        missing = {"tenant", "collection", "sources"} - set(data)
        if missing:
            raise ConfigurationError(f"job is missing {sorted(missing)}.")
        sources = data["sources"]
        if isinstance(sources, Mapping) or not isinstance(sources, (list, tuple)):
            raise ConfigurationError("job.sources must be a list of source dicts.")
        return cls(**{**data, "sources": tuple(sources)})

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form (what workflows and tasks receive)."""
        out: dict[str, Any] = {
            "tenant": self.tenant,
            "collection": self.collection,
            "sources": [dict(s) for s in self.sources],
            "chunking": self.chunking.to_dict(),
            "batch_size": self.batch_size,
            "duplicates": self.duplicates,
            "cleanup": self.cleanup,
        }
        optional = {
            "embedding_function": self.embedding_function,
            "options": dict(self.options) or None,
            "key": self.key,
            "parallel": None if self.parallel == 1 else self.parallel,
        }
        return out | {key: value for key, value in optional.items() if value is not None}

    def work_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without ``parallel``: task ids must not depend on units in flight."""
        return {key: value for key, value in self.to_dict().items() if key != "parallel"}

    @property
    def job_key(self) -> str:
        """The explicit key, or a digest of the spec."""
        if self.key is not None:
            return self.key
        spec = self.work_dict()
        spec.pop("key", None)
        if self.chunking.unit == "tokens":  # a new splitter version may cut differently: a new job
            spec["chunker"] = splitter_version()
        return digest_of(spec, 20)

    def task_options(self) -> dict[str, Any]:
        """Options for ``task.with_options(...)``: tenant, spec options, embedding function."""
        opts = {k: v for k, v in self.options.items() if k not in _JOB_KEYS}
        opts["tenant"] = self.tenant
        ef = embedding_from_spec(self.embedding_function)
        if ef is not None:
            opts["embedding_function"] = ef
        return opts
