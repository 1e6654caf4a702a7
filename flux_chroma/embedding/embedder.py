"""Embed texts through an optional host-wide cache, with validation and truncation counts."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from flux_chroma.embedding.cache import EmbeddingCache
from flux_chroma.embedding.fast_default import (
    MAX_TOKENS,
    FastDefaultEmbedding,
    ensure_model_available,
    local_model_dir,
)
from flux_chroma.embedding.identity import (
    _stated_name,
    cache_namespace,
    compute_fingerprint,
    uncacheable_reason,
)
from flux_chroma.errors import EmbeddingFunctionError, FluxChromaError, InvalidDocumentError

__all__ = ["CachingEmbedder", "EmbedResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbedResult:
    """The outcome of :meth:`CachingEmbedder.embed`.

    Attributes:
        vectors: float32 array of shape ``(len(texts), dimension)``, in input order.
        hits: Distinct texts served from the cache.
        misses: Distinct texts embedded by the model (identical texts count once).
        seconds: Time spent in the embedding function (cache lookups excluded).
        truncated: Input texts longer than the model's token limit (0 when unknown).
        truncated_indices: Their positions in the input.
        truncation_checked: True when the embedding function's tokenizer was consulted
            (FastDefaultEmbedding and Chroma's default); False means "unknown".
    """

    vectors: npt.NDArray[np.float32]
    hits: int
    misses: int
    seconds: float
    truncated: int = 0
    truncated_indices: tuple[int, ...] = ()
    truncation_checked: bool = False


def _ef_label(ef: Any) -> str:
    """``ClassName ('registry-name')`` of an embedding function, for messages."""
    name, kind = _stated_name(ef), type(ef).__name__
    return f"{kind} ({name!r})" if name is not None and name != kind else kind


class CachingEmbedder:
    """Wrap a Chroma embedding function with a cache, validation and truncation counting.

    Args:
        ef: Any Chroma embedding function (called with a list of strings).
        cache: Optional host-wide :class:`EmbeddingCache`, used only when ``ef`` states its
            whole identity (``name()`` and a ``get_config()`` dict; else a warning says so).
        digest: The fingerprint digest in the cache namespace: pass the collection pin's
            (after checking it with ``fingerprints_match``) so every worker shares one
            namespace. Default: the digest of ``compute_fingerprint(ef)``.
        dimension: Required vector length. Default: ``compute_fingerprint(ef).dimension``.
        count_tokens: Count texts beyond the token limit when the function's tokenizer is
            known (costs one extra tokenizer pass, no model run).
    """

    def __init__(
        self,
        ef: Any,
        cache: EmbeddingCache | None = None,
        *,
        digest: str | None = None,
        dimension: int | None = None,
        count_tokens: bool = True,
    ) -> None:
        self.ef = ef
        self.cache = cache
        self._digest = digest
        self._dimension = dimension
        self._cache_namespace: str | None = None
        self._namespace_known = False
        self._counter: FastDefaultEmbedding | None = None
        if count_tokens and isinstance(ef, FastDefaultEmbedding):
            self._counter = ef
        elif count_tokens and (folder := local_model_dir(ef)) is not None:
            self._counter = FastDefaultEmbedding(model_dir=folder)

    def __repr__(self) -> str:
        return f"CachingEmbedder(ef={type(self.ef).__name__}, cache={self.cache!r})"

    def _namespace(self) -> tuple[str | None, int]:
        """The cache namespace (None: never cached) and dimension, fingerprinting if unknown."""
        if self._digest is None or self._dimension is None:
            fingerprint = compute_fingerprint(self.ef)
            self._digest = fingerprint.digest if self._digest is None else self._digest
            self._dimension = fingerprint.dimension if self._dimension is None else self._dimension
        if not self._namespace_known:
            namespace = cache_namespace(self.ef, self._digest)
            if namespace is None and self.cache is not None:
                log.warning(
                    "cache=True: the vectors of embedding function %s are not cached, because "
                    "%s (its settings are invisible, so another configuration's vectors could "
                    "be served). To cache them, give it name() and a get_config() returning "
                    "every setting that can change a vector.",
                    _ef_label(self.ef),
                    uncacheable_reason(self.ef),
                )
            self._cache_namespace, self._namespace_known = namespace, True
        return self._cache_namespace, self._dimension

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        """Embed texts, serving repeats from the cache and embedding each distinct text once.

        Raises:
            InvalidDocumentError: A text is not a string, or a returned vector has the wrong
                dimension or NaN/inf values.
            ModelNotAvailableError: A local model's files are missing (checked before any call).
            EmbeddingFunctionError: The embedding function raised.
        """
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidDocumentError(
                    f"Document #{i} is a {type(text).__name__}, not a string; only text can be "
                    "embedded."
                )
        ensure_model_available(self.ef)
        namespace, dim = self._namespace()
        unique = list(dict.fromkeys(items))
        first = {text: u for u, text in enumerate(unique)}
        entries: list[tuple[npt.NDArray[np.float32], int | None] | None] = [None] * len(unique)
        if self.cache is not None and namespace is not None:
            entries = self.cache.lookup(namespace, unique, dim)
        found = [None if e is None else e[0] for e in entries]
        counts = [None if e is None else e[1] for e in entries]  # tokens before truncation
        todo = [u for u, vector in enumerate(found) if vector is None]
        # Token counts come from the cache for hits; the tokenizer runs only for the rest, and
        # hits cached without a count (older entries) are written again with it.
        recount: list[int] = []
        uncounted = [u for u, n in enumerate(counts) if n is None]
        if self._counter is not None and uncounted:
            fresh = self._counter.token_counts([unique[u] for u in uncounted])
            for u, n in zip(uncounted, fresh, strict=True):
                counts[u] = n
            recount = [u for u in uncounted if found[u] is not None]
        seconds = 0.0
        if todo:
            todo_texts = [unique[u] for u in todo]
            start = time.perf_counter()
            computed = self._compute(todo_texts)
            seconds = time.perf_counter() - start
            rows = self._validate(computed, todo_texts, dim, items)
            for u, row in zip(todo, rows, strict=True):
                found[u] = row
        matrix = np.asarray(found, dtype=np.float32).reshape(len(unique), dim)
        if self.cache is not None and namespace is not None:
            new = sorted({*todo, *recount})
            texts_new, counts_new = [unique[u] for u in new], [counts[u] for u in new]
            self.cache.set_many(namespace, texts_new, matrix[new], counts_new)
        truncated: tuple[int, ...] = ()
        if self._counter is not None:
            truncated = tuple(
                i for i, t in enumerate(items) if (counts[first[t]] or 0) > MAX_TOKENS
            )
        return EmbedResult(
            vectors=matrix[[first[t] for t in items]],
            hits=len(unique) - len(todo),
            misses=len(todo),
            seconds=seconds,
            truncated=len(truncated),
            truncated_indices=truncated,
            truncation_checked=self._counter is not None,
        )

    def _compute(self, texts: list[str]) -> list[Any]:
        try:
            return list(self.ef(texts))
        except FluxChromaError:
            raise
        except Exception as exc:
            raise EmbeddingFunctionError(
                f"the embedding function {_ef_label(self.ef)} raised {type(exc).__name__}: {exc} "
                f"while embedding {len(texts)} text(s); the Chroma server was not called for "
                "them. Fix the embedding function or its backend, then run the call again."
            ) from exc

    @staticmethod
    def _validate(
        computed: list[Any], texts: list[str], dim: int, items: list[str]
    ) -> list[npt.NDArray[np.float32]]:
        def where(j: int) -> str:
            return f"document #{items.index(texts[j])}"

        if len(computed) != len(texts):
            raise InvalidDocumentError(
                f"The embedding function returned {len(computed)} vectors for {len(texts)} "
                "documents; it must return exactly one per document."
            )
        rows: list[npt.NDArray[np.float32]] = []
        for j, vector in enumerate(computed):
            try:
                row = np.asarray(vector, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise InvalidDocumentError(
                    f"The embedding function returned a non-numeric vector for {where(j)} ({exc})."
                ) from exc
            if row.shape != (dim,):
                raise InvalidDocumentError(
                    f"The embedding function returned a vector of shape {row.shape} for "
                    f"{where(j)}; the collection's embeddings have dimension {dim}."
                )
            if not bool(np.isfinite(row).all()):
                raise InvalidDocumentError(
                    f"The embedding function returned NaN or infinite values for {where(j)}; "
                    "check the text (e.g. empty or binary content) or the model."
                )
            rows.append(row)
        return rows
