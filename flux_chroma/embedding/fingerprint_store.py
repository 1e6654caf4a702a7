"""Fingerprints of local model files, remembered per host so a pin check needs no model load.

Computing a :class:`~flux_chroma.embedding.identity.Fingerprint` runs the model on the canary
texts, which means loading the ONNX session (about a quarter of a second) even on a run that
embeds nothing. For embedding functions whose behaviour is fixed by local model files
(:class:`~flux_chroma.embedding.FastDefaultEmbedding` and Chroma's own ``all-MiniLM-L6-v2``
functions) the fingerprint is stored beside the host's embedding cache folder (see
:func:`fingerprint_dir`), keyed by what identifies those files on this host:

* the class, ``name()`` and ``get_config()`` of the function and the resolved model folder;
* for each of the six model files: size, ``mtime_ns``, ``ctime_ns``, inode and device
  (``ctime`` changes on every write, even one that restores the old ``mtime``);
* the installed versions of onnxruntime, tokenizers, chromadb and flux-chroma.

A changed, replaced, touched or removed model file changes the key: the fingerprint is then
computed again from the model. An entry that is unreadable, truncated, or whose check sum
does not match is ignored (and overwritten). Writing is best effort: a read-only folder only
costs the model load it would have saved.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flux_chroma.embedding.identity import Fingerprint

__all__ = ["fingerprint_dir", "load_fingerprint", "model_files_key", "save_fingerprint"]

_FORMAT = 1
_VERSIONED = ("onnxruntime", "tokenizers", "chromadb", "flux-chroma")


def fingerprint_dir() -> Path:
    """Return the folder of persisted fingerprints.

    Returns:
        The default embedding cache folder's sibling with ``-fingerprints`` appended
        (``~/.cache/flux-chroma/embeddings-fingerprints`` unless ``$FLUX_CHROMA_CACHE_DIR``
        or ``$XDG_CACHE_HOME`` say otherwise).
    """
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
    """Return what identifies ``ef``'s model files on this host, or None when it has none.

    Args:
        ef: An embedding function.

    Returns:
        A JSON string (see the module docstring), or None for functions not backed by
        local model files (their fingerprint is never persisted).
    """
    from flux_chroma.embedding.fast_default import MODEL_FILES, local_model_dir
    from flux_chroma.embedding.identity import ef_identity

    folder = local_model_dir(ef)
    if folder is None:
        return None
    cls = type(ef)
    folder = folder.resolve()
    return json.dumps(
        {
            "format": _FORMAT,
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
    """Return the fingerprint stored for ``key``, or None (missing, stale or damaged).

    Args:
        key: From :func:`model_files_key`.

    Returns:
        The stored fingerprint, or None.
    """
    from flux_chroma.embedding.identity import Fingerprint

    try:
        data = json.loads(_entry_path(key).read_text(encoding="utf-8"))
        if data["key"] != key or data["check"] != _check(key, data["fingerprint"]):
            return None
        return Fingerprint.from_json(data["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_fingerprint(key: str, fingerprint: Fingerprint) -> None:
    """Store ``fingerprint`` under ``key`` (atomically; errors are ignored).

    Args:
        key: From :func:`model_files_key`.
        fingerprint: The fingerprint computed from the model.
    """
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
