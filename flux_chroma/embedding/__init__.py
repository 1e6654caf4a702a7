"""Embedding functions, fingerprints and the host-wide embedding cache of flux-chroma."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flux_chroma._lazy import lazy_exports

if TYPE_CHECKING:
    from flux_chroma.embedding.cache import (
        CACHE_DIR_ENV,
        CacheStats,
        EmbeddingCache,
        default_cache_dir,
    )
    from flux_chroma.embedding.embedder import CachingEmbedder, EmbedResult
    from flux_chroma.embedding.fast_default import (
        MAX_TOKENS,
        MODEL_DIR_ENV,
        FastDefaultEmbedding,
        chroma_default_model_dir,
        ensure_model_available,
    )
    from flux_chroma.embedding.identity import (
        CANARY_TEXTS,
        DEFAULT_TOLERANCE,
        Fingerprint,
        clear_fingerprint_cache,
        compute_fingerprint,
        ef_identity,
        fingerprint_from_vectors,
        fingerprints_match,
    )

# Imported on first use: the model code needs chromadb and onnxruntime, the cache diskcache
# and numpy, and a workflow module that only declares tasks needs none of them.
_LAZY = {
    "cache": ("CACHE_DIR_ENV", "CacheStats", "EmbeddingCache", "default_cache_dir"),
    "embedder": ("CachingEmbedder", "EmbedResult"),
    "fast_default": (
        "MAX_TOKENS",
        "MODEL_DIR_ENV",
        "FastDefaultEmbedding",
        "chroma_default_model_dir",
        "ensure_model_available",
    ),
    "identity": (
        "CANARY_TEXTS",
        "DEFAULT_TOLERANCE",
        "Fingerprint",
        "clear_fingerprint_cache",
        "compute_fingerprint",
        "ef_identity",
        "fingerprint_from_vectors",
        "fingerprints_match",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "CACHE_DIR_ENV",
    "CANARY_TEXTS",
    "DEFAULT_TOLERANCE",
    "MAX_TOKENS",
    "MODEL_DIR_ENV",
    "CacheStats",
    "CachingEmbedder",
    "EmbedResult",
    "EmbeddingCache",
    "FastDefaultEmbedding",
    "Fingerprint",
    "chroma_default_model_dir",
    "clear_fingerprint_cache",
    "compute_fingerprint",
    "default_cache_dir",
    "ef_identity",
    "ensure_model_available",
    "fingerprint_from_vectors",
    "fingerprints_match",
]
