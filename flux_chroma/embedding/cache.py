"""A host-wide, process-safe embedding cache on diskcache (SQLite), shared by every worker.

Keys are ``f"{namespace}:{sha256(text)}"`` (namespace:
:func:`~flux_chroma.embedding.identity.cache_namespace`). Values are raw bytes, never pickles::

    b"FCE2" | dimension (uint32 LE) | tokens (uint32 LE) | check (16 bytes) | float32 LE payload

``tokens`` (before truncation; ``0xFFFFFFFF``: unknown) spares a hit the tokenizer. ``check``
(SHA-256 over key and the rest) makes a damaged or moved value a miss, never a wrong vector; it
is no MAC, so the folder is mode 0700.
Any cache failure degrades to logged misses, never a failed embedding call.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import diskcache
import numpy as np
import numpy.typing as npt

from flux_chroma.embedding.cache_storage import BUSY_TIMEOUT, BoundedCache, SafeDisk

__all__ = ["CACHE_DIR_ENV", "CacheStats", "EmbeddingCache", "SafeDisk", "default_cache_dir"]

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "FLUX_CHROMA_CACHE_DIR"
"""Environment variable naming the cache folder."""

_MAGIC = b"FCE2"
_HEAD = struct.Struct("<4sII16s")
_NO_TOKENS = 0xFFFFFFFF
_REOPEN_AFTER = 30.0  # seconds without cache after a failed open


def default_cache_dir() -> Path:
    """Return the cache folder used when none is given.

    ``$FLUX_CHROMA_CACHE_DIR``, else ``$XDG_CACHE_HOME/flux-chroma/embeddings``, else
    ``~/.cache/flux-chroma/embeddings``.
    """
    env = os.environ.get(CACHE_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "flux-chroma" / "embeddings"


@dataclass
class CacheStats:
    """Counters of one :class:`EmbeddingCache` instance.

    Attributes:
        hits: Valid entries returned.
        misses: Keys not found (or rejected).
        rejected: Entries found but invalid (tampered, truncated, wrong dimension or mode).
        errors: Cache operations that failed (treated as misses / skipped writes).
    """

    hits: int = 0
    misses: int = 0
    rejected: int = 0
    errors: int = 0


def text_hash(text: str) -> str:
    """The text part of a cache key: the hex SHA-256 of ``text`` (the key holds no tenant)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _key(namespace: str, text: str) -> str:
    return f"{namespace}:{text_hash(text)}"


def text_entries(directory: Path, hashes: set[str], *, delete: bool = False) -> int:
    """Entries of the cache at ``directory`` whose :func:`text_hash` is in ``hashes``.

    Deletes them if ``delete``. Unlike :class:`EmbeddingCache`, a cache that cannot be read
    raises: an erasure must not report "nothing found" for a cache it could not open.
    """
    if not hashes or not (directory / "cache.db").exists():
        return 0
    with diskcache.Cache(str(directory), disk=SafeDisk) as cache:
        keys = [k for k in cache.iterkeys() if isinstance(k, str) and k.rsplit(":", 1)[-1] in hashes]
        if delete:
            for key in keys:
                cache.delete(key)
    return len(keys)


def _check(key: str, dimension: int, payload: bytes, tokens: int) -> bytes:
    h = hashlib.sha256(key.encode())
    h.update(_MAGIC)
    h.update(struct.pack("<II", dimension, tokens))
    h.update(payload)
    return h.digest()[:16]


def encode_entry(key: str, vector: npt.ArrayLike, tokens: int | None = None) -> bytes:
    """Encode one vector and its text's token count (None: unknown) as a value for ``key``."""
    array = np.ascontiguousarray(np.asarray(vector, dtype="<f4").reshape(-1))
    payload = array.tobytes()
    count = _NO_TOKENS if tokens is None or not 0 <= tokens < _NO_TOKENS else int(tokens)
    check = _check(key, array.size, payload, count)
    return _HEAD.pack(_MAGIC, array.size, count, check) + payload


def decode_full(
    key: str, value: Any, dimension: int
) -> tuple[npt.NDArray[np.float32], int | None] | None:
    """Decode a value read under ``key``: ``(float32 vector, tokens or None)``, None if invalid."""
    if not isinstance(value, bytes) or len(value) != _HEAD.size + 4 * dimension:
        return None
    if value[:4] != _MAGIC:
        return None
    _, dim, count, check = _HEAD.unpack_from(value)
    payload = value[_HEAD.size :]
    if check != _check(key, dim, payload, count) or dim != dimension:
        return None
    tokens = None if count == _NO_TOKENS else count
    vector = np.frombuffer(payload, dtype="<f4").astype(np.float32)
    return (vector, tokens) if bool(np.isfinite(vector).all()) else None


class EmbeddingCache:
    """Embedding vectors shared by every process on a host, with LRU eviction.

    Args:
        directory: Cache folder; default from :func:`default_cache_dir`.
        size_limit: Bytes before least-recently-used entries are evicted (default 2 GiB).

    A cache that cannot be opened logs a warning and behaves as empty for 30 s.
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, size_limit: int = 2 * 2**30
    ):
        self.directory = (
            Path(directory).expanduser() if directory is not None else default_cache_dir()
        )
        self.size_limit = int(size_limit)
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._cache: BoundedCache | None = None
        self._pid = -1
        self._retry_at = 0.0  # after a failed open, try again at this time.monotonic()

    def __repr__(self) -> str:
        return f"EmbeddingCache(directory={str(self.directory)!r}, size_limit={self.size_limit})"

    def _open(self) -> BoundedCache | None:
        with self._lock:
            if time.monotonic() < self._retry_at:
                return None
            if self._cache is not None and self._pid == os.getpid():
                return self._cache
            # A connection inherited through fork() must not be used: open a fresh one.
            try:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._cache = BoundedCache(
                    str(self.directory),
                    size_limit=self.size_limit,
                    eviction_policy="least-recently-used",
                    disk=SafeDisk,
                    disk_min_file_size=2**30,
                    statistics=False,
                    timeout=BUSY_TIMEOUT,
                )
                self._pid = os.getpid()
            except Exception as exc:  # noqa: BLE001 - a broken cache must not fail embedding
                self._cache = None
                self._retry_at = time.monotonic() + _REOPEN_AFTER
                self.stats.errors += 1
                log.warning(
                    "embedding cache %s cannot be opened (%s); working without it for %.0f s",
                    self.directory,
                    exc,
                    _REOPEN_AFTER,
                )
                return None
            return self._cache

    def get_many(
        self, namespace: str, texts: Sequence[str], dimension: int
    ) -> list[npt.NDArray[np.float32] | None]:
        """Look texts up: one float32 vector or None (miss) per text, in order."""
        return [None if e is None else e[0] for e in self.lookup(namespace, texts, dimension)]

    def lookup(
        self, namespace: str, texts: Sequence[str], dimension: int
    ) -> list[tuple[npt.NDArray[np.float32], int | None] | None]:
        """Look texts up: one ``(vector, token count or None)`` or None (miss) per text."""
        result: list[tuple[npt.NDArray[np.float32], int | None] | None] = [None] * len(texts)
        cache = self._open() if texts else None
        if cache is None:
            self.stats.misses += len(texts)
            return result
        keys = [_key(namespace, t) for t in texts]
        try:
            # Plain reads (never wait for a writer), then a best-effort LRU touch.
            raw, rowids = cache.read_many(keys)
            cache.touch(rowids)
        except Exception as exc:  # noqa: BLE001 - a broken cache must not fail embedding
            self.stats.errors += 1
            self.stats.misses += len(texts)
            log.warning(
                "embedding cache %s read failed, treated as misses (%s)", self.directory, exc
            )
            return result
        result = [decode_full(key, value, dimension) for key, value in zip(keys, raw, strict=True)]
        hits = sum(entry is not None for entry in result)
        self.stats.hits += hits
        self.stats.misses += len(texts) - hits
        self.stats.rejected += sum(value is not None for value in raw) - hits
        return result

    def set_many(
        self,
        namespace: str,
        texts: Sequence[str],
        vectors: Sequence[npt.ArrayLike] | npt.NDArray[Any],
        tokens: Sequence[int | None] | None = None,
    ) -> None:
        """Store one vector (and optional token count) per text, overwriting, in one transaction.

        Raises:
            ValueError: ``texts``, ``vectors`` and ``tokens`` differ in length.
        """
        rows = list(vectors)
        counts = list(tokens) if tokens is not None else [None] * len(rows)
        if len(rows) != len(texts) or len(counts) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(rows)} vectors, {len(counts)} counts")
        cache = self._open() if texts else None
        if cache is None:
            return
        keys = [_key(namespace, t) for t in texts]
        entries = [(k, encode_entry(k, v, n)) for k, v, n in zip(keys, rows, counts, strict=True)]
        try:
            with cache.transact():
                for key, value in entries:
                    cache.set(key, value)
        except Exception as exc:  # noqa: BLE001 - a broken cache must not fail embedding
            self.stats.errors += 1
            log.warning("embedding cache %s write skipped (%s)", self.directory, exc)

    def close(self) -> None:
        """Close this process' database connection (using the cache reopens it)."""
        with self._lock:
            if self._cache is not None and self._pid == os.getpid():
                self._cache.close()
            self._cache = None

    def __enter__(self) -> Self:
        """Return self (``with EmbeddingCache() as cache:``)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the connection."""
        self.close()
