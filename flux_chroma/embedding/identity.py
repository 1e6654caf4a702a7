"""Embedding-function identity and behavioural fingerprint, which pin collections and key the cache.

:func:`ef_identity` (Chroma's ``name()``, ``get_config()``) cannot tell two models apart behind
one name, so a collection is also pinned to a :class:`Fingerprint` of the vectors of the fixed
:data:`CANARY_TEXTS`. Those are short (functions differing only in truncation share a
fingerprint), so cache entries are keyed by :func:`cache_namespace`: name, config and digest.

:func:`fingerprints_match` (every probe within 1e-3) is the authority: implementations of one
model differ by ~1e-7, another model (or an int8 copy) by >= 1e-2. Never compare digests for
pinning: rarely (~1e-3) equivalent implementations straddle a rounding boundary of the digest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flux_chroma.errors import InvalidDocumentError

if TYPE_CHECKING:  # numpy and the model code load when a fingerprint is computed
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CANARY_TEXTS",
    "DEFAULT_TOLERANCE",
    "Fingerprint",
    "cache_namespace",
    "clear_fingerprint_cache",
    "compute_fingerprint",
    "ef_identity",
    "fingerprint_dir",
    "fingerprint_from_vectors",
    "fingerprints_match",
    "load_fingerprint",
    "model_files_key",
    "uncacheable_reason",
]

CANARY_TEXTS: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "Flux workflows store their documents in a Chroma collection.",
    "Quarterly revenue grew 12% while operating costs fell in Q3 2024.",
    "Ünïcödé façade: 東京の天気は晴れです 🌤",
)
"""Fixed texts embedded to fingerprint an embedding function. Never change them."""

DEFAULT_TOLERANCE = 1e-3
"""Largest probe difference for which two fingerprints still match."""

_FORMAT = 1
_NAMESPACE_FORMAT = 2  # changing it orphans every cache entry
_PROBES = 64
_DIGEST_DECIMALS = 2
_PROBE_DECIMALS = 6


def _stated_name(ef: Any) -> str | None:
    """``ef.name()`` when it is a non-empty string, else None (a legacy function)."""
    try:
        name = ef.name()
    except Exception:  # noqa: BLE001 - any EF, any failure (no name() too): treat as legacy
        return None
    return name if isinstance(name, str) and name else None


def _stated_config(ef: Any) -> dict[str, Any] | None:
    """``ef.get_config()`` made JSON-safe, or None (missing, raising, or not a dict)."""
    try:
        config = ef.get_config()
        if not isinstance(config, dict):
            return None
        safe = json.loads(json.dumps(config, sort_keys=True, default=str))
    except Exception:  # noqa: BLE001 - any EF, any failure (no get_config() too): no config
        return None
    return safe if isinstance(safe, dict) else None


def ef_identity(ef: Any) -> dict[str, Any]:
    """Return the identity Chroma persists for any embedding function (even a plain callable).

    Returns:
        ``{"name": str, "config": dict}``, config JSON-safe (other values become strings). A
        legacy function (no ``name()``) is named by its class' module and qualified name;
        config is ``{}`` when ``get_config()`` is missing or unusable.
    """
    name = _stated_name(ef)
    if name is None:
        cls = type(ef)
        return {"name": f"{cls.__module__}.{cls.__qualname__}", "config": {}}
    return {"name": name, "config": _stated_config(ef) or {}}


def uncacheable_reason(ef: Any) -> str | None:
    """Say why ``ef``'s vectors cannot be cached safely (naming the missing method), or None."""
    if _stated_name(ef) is None:
        return "it has no name() returning a non-empty string"
    if _stated_config(ef) is None:
        return "it has no get_config() returning a dict"
    return None


def cache_namespace(ef: Any, digest: str) -> str | None:
    """Return the embedding-cache namespace of ``ef`` and its fingerprint ``digest``.

    Returns:
        ``"ns2-"`` and 32 hex chars of SHA-256 over name, config and digest (not the class, so
        Chroma's default and ``FastDefaultEmbedding`` share vectors); None when ``ef`` has no
        ``name()`` or no usable ``get_config()`` (never cached).
    """
    name, config = _stated_name(ef), _stated_config(ef)
    if name is None or config is None:
        return None
    canonical = json.dumps(
        {"v": _NAMESPACE_FORMAT, "name": name, "config": config, "fingerprint": str(digest)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return f"ns{_NAMESPACE_FORMAT}-{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class Fingerprint:
    """What an embedding function does to the canary texts.

    Attributes:
        digest: 16 hex chars of SHA-256 over dimension and probes at 2 decimals (cache only).
        dimension: Vector length.
        probe: 64 fixed +/-1 projections (signs from SHA-256, the same on every platform) of
            the concatenated canary vectors over sqrt(their length), 6 decimals.
    """

    digest: str
    dimension: int
    probe: tuple[float, ...] = ()

    def to_json(self) -> str:
        """Serialise to compact JSON (about 700 characters, fit for a Chroma metadata value)."""
        return json.dumps(
            {"v": _FORMAT, "digest": self.digest, "dim": self.dimension, "probe": self.probe},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        """Parse a string made by :meth:`to_json`.

        Raises:
            ValueError: Not a fingerprint of a known format (plain, so a pin reader can wrap
                it in its own typed error).
        """
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("v") != _FORMAT:
                raise ValueError(
                    f"unknown format {data.get('v') if isinstance(data, dict) else data!r}"
                )
            digest, dim, probe = data["digest"], data["dim"], data.get("probe", [])
            if not isinstance(digest, str) or type(dim) is not int or dim < 1:
                raise ValueError("bad digest or dimension")
            values = tuple(float(x) for x in probe)
            if any(not math.isfinite(x) for x in values):
                raise ValueError("non-finite probe")
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(
                f"Stored embedding fingerprint {str(text)[:80]!r} is unreadable ({exc}); the pin "
                "was written by another flux-chroma version or edited by hand."
            ) from exc
        return cls(digest=digest, dimension=dim, probe=values)


def fingerprints_match(
    a: Fingerprint, b: Fingerprint, tolerance: float = DEFAULT_TOLERANCE
) -> bool:
    """Tell whether two fingerprints come from equivalent embedding functions.

    Dimensions must agree and every probe be within ``tolerance`` (digests are compared only
    when a fingerprint carries no probe).
    """
    if a.dimension != b.dimension:
        return False
    if not a.probe or not b.probe or len(a.probe) != len(b.probe):
        return a.digest == b.digest
    return max(abs(x - y) for x, y in zip(a.probe, b.probe, strict=True)) <= tolerance


@functools.cache
def _signs(length: int) -> npt.NDArray[np.float64]:
    """A fixed (_PROBES, length) matrix of +/-1 derived from SHA-256 (platform-independent)."""
    import numpy as np

    need = (_PROBES * length + 7) // 8
    stream = b"".join(
        hashlib.sha256(f"flux-chroma-fingerprint:{length}:{i}".encode()).digest()
        for i in range((need + 31) // 32)
    )
    bits = np.unpackbits(np.frombuffer(stream[:need], dtype=np.uint8))[: _PROBES * length]
    return (bits.astype(np.float64) * 2.0 - 1.0).reshape(_PROBES, length)


def fingerprint_from_vectors(vectors: npt.ArrayLike) -> Fingerprint:
    """Build a fingerprint from the canary vectors, shape ``(len(CANARY_TEXTS), dimension)``.

    Raises:
        InvalidDocumentError: The vectors are not a finite 2-D array of that shape.
    """
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(CANARY_TEXTS) or matrix.shape[1] < 1:
        raise InvalidDocumentError(
            f"The embedding function returned vectors of shape {matrix.shape} for the "
            f"{len(CANARY_TEXTS)} canary texts; expected one non-empty vector per text."
        )
    if not np.isfinite(matrix).all():
        raise InvalidDocumentError("The embedding function returned NaN/inf for a canary text.")
    flat = matrix.reshape(-1)
    probe = (_signs(flat.size) @ flat) / math.sqrt(flat.size)
    coarse = np.round(probe, _DIGEST_DECIMALS) + 0.0  # + 0.0 turns -0.0 into 0.0
    payload = f"v{_FORMAT}:{matrix.shape[1]}:" + ",".join(
        f"{x:.{_DIGEST_DECIMALS}f}" for x in coarse
    )
    digest = hashlib.sha256(payload.encode()).hexdigest()[:16]
    fine = tuple(float(round(float(x), _PROBE_DECIMALS)) + 0.0 for x in probe)
    return Fingerprint(digest=digest, dimension=int(matrix.shape[1]), probe=fine)


_CACHE: dict[str, Fingerprint] = {}  # single get/set calls: atomic, no lock needed


def _cache_key(ef: Any) -> str | None:
    """A per-process cache key, or None when the identity does not pin the behaviour."""
    from flux_chroma.embedding.fast_default import local_model_dir

    if uncacheable_reason(ef) is not None:
        return None  # no name() or no config: two instances of one class may differ
    cls, folder = type(ef), local_model_dir(ef)
    return json.dumps(
        [cls.__module__, cls.__qualname__, ef_identity(ef), str(folder or "")], sort_keys=True
    )


def compute_fingerprint(ef: Any, *, use_cache: bool = True) -> Fingerprint:
    """Embed the canary texts with ``ef`` and fingerprint the result.

    With ``use_cache``, memoised per process by class, identity and model folder (not for
    functions without ``name()`` or a usable ``get_config()``) and, for local model files,
    persisted on this host (:func:`model_files_key`) so a pin check needs no model load.

    Raises:
        ModelNotAvailableError: The model files of a local ONNX function are missing.
        InvalidDocumentError: The function returned malformed or non-finite vectors.
    """
    import numpy as np

    from flux_chroma.embedding.fast_default import ensure_model_available

    ensure_model_available(ef)
    key = _cache_key(ef) if use_cache else None
    found = _CACHE.get(key) if key is not None else None
    if found is not None:
        return found
    files_key = model_files_key(ef) if use_cache else None
    found = load_fingerprint(files_key) if files_key is not None else None
    if found is None:
        vectors = [np.asarray(v, dtype=np.float64) for v in ef(list(CANARY_TEXTS))]
        if len({v.shape for v in vectors}) > 1:
            raise InvalidDocumentError(
                f"The embedding function returned vectors of different lengths "
                f"{sorted({v.shape for v in vectors})} for the canary texts."
            )
        found = fingerprint_from_vectors(vectors)
        if files_key is not None:
            save_fingerprint(files_key, found)
    if key is not None:
        _CACHE[key] = found
    return found


def clear_fingerprint_cache() -> None:
    """Forget every fingerprint computed in this process (for tests)."""
    _CACHE.clear()


# Persisted fingerprints of local model files (FastDefaultEmbedding, Chroma's all-MiniLM-L6-v2),
# so a pin check skips the ~0.25 s ONNX load. Keyed by the function's class, identity and model
# folder, each model file's size, mtime_ns, ctime_ns (changes on every write, even one restoring
# mtime), inode and device, and the versions in _VERSIONED: any change recomputes. Damaged
# entries are ignored; writing is best effort.

_STORE_FORMAT = 1
_VERSIONED = ("onnxruntime", "tokenizers", "chromadb", "flux-chroma")


def fingerprint_dir() -> Path:
    """Return the folder of persisted fingerprints (the cache folder + ``-fingerprints``)."""
    from flux_chroma.embedding.cache import default_cache_dir

    cache = default_cache_dir()
    return cache.with_name(f"{cache.name}-fingerprints")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _file_facts(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError:
        return [path.name, None]
    return [path.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def model_files_key(ef: Any) -> str | None:
    """Return a JSON string identifying ``ef``'s local model files on this host, or None."""
    from flux_chroma.embedding.fast_default import MODEL_FILES, local_model_dir

    folder = local_model_dir(ef)
    if folder is None:
        return None
    cls = type(ef)
    folder = folder.resolve()
    return json.dumps(
        {
            "format": _STORE_FORMAT,
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "identity": ef_identity(ef),
            "folder": str(folder),
            "files": [_file_facts(folder / name) for name in MODEL_FILES],
            "versions": {p: _version(p) for p in _VERSIONED},
        },
        sort_keys=True,
    )


def _entry_path(key: str) -> Path:
    return fingerprint_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _check(key: str, fingerprint_json: str) -> str:
    return hashlib.sha256(f"{key}\n{fingerprint_json}".encode()).hexdigest()


def load_fingerprint(key: str) -> Fingerprint | None:
    """Return the fingerprint stored for a :func:`model_files_key`, or None (missing, damaged)."""
    try:
        data = json.loads(_entry_path(key).read_text(encoding="utf-8"))
        if data["key"] != key or data["check"] != _check(key, data["fingerprint"]):
            return None
        return Fingerprint.from_json(data["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_fingerprint(key: str, fingerprint: Fingerprint) -> None:
    """Store ``fingerprint`` under a :func:`model_files_key`, atomically; errors are ignored."""
    text = fingerprint.to_json()
    payload = json.dumps({"key": key, "fingerprint": text, "check": _check(key, text)})
    path = _entry_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fingerprint-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(payload)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return  # best effort: the next run computes it again
