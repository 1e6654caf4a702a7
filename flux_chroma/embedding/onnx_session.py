"""The ONNX runtime side of the default model: tokenizers, one session per process, pooling.

Sessions and tokenizers are loaded once per model folder (and per process: ONNX thread pools
do not survive ``fork()``) under one lock, so threads share them. A session's thread count
comes from :mod:`flux_chroma.embedding.threads`; when it shares the host's cores and the share
changes (another embedding process started or ended), the session is built again.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from flux_chroma.embedding.model_files import MAX_TOKENS
from flux_chroma.embedding.threads import Budget, configured_threads
from flux_chroma.errors import ModelNotAvailableError

__all__ = ["load_session", "load_tokenizers", "pool"]


@dataclass(frozen=True)
class _Tokenizers:
    truncating: Any  # tokenizers.Tokenizer: truncation at MAX_TOKENS, no padding
    counting: Any  # tokenizers.Tokenizer: no truncation, no padding


_TOKENIZERS: dict[str, _Tokenizers] = {}
_SESSIONS: dict[tuple[int, str], tuple[int, Any]] = {}  # (pid, folder) -> (threads, session)
_LOCK = threading.Lock()
_BUDGET = Budget()


def load_tokenizers(folder: Path) -> _Tokenizers:
    """The truncating and counting tokenizers of ``folder`` (loaded once, shared)."""
    key = str(folder)
    with _LOCK:
        cached = _TOKENIZERS.get(key)
        if cached is None:
            from tokenizers import Tokenizer

            path = str(folder / "tokenizer.json")
            try:
                truncating = Tokenizer.from_file(path)
                counting = Tokenizer.from_file(path)
            except Exception as exc:
                raise ModelNotAvailableError(
                    f"The tokenizer file {path} could not be loaded ({type(exc).__name__}: "
                    f"{exc}). Replace the model folder {folder} with an intact copy."
                ) from exc
            # Same settings as Chroma's ONNXMiniLM_L6_V2, minus the fixed padding to 256.
            truncating.enable_truncation(max_length=MAX_TOKENS)
            truncating.no_padding()
            counting.no_truncation()
            counting.no_padding()
            cached = _Tokenizers(truncating=truncating, counting=counting)
            _TOKENIZERS[key] = cached
        return cached


def session_threads(threads: int | None = None) -> int:
    """The intra-op thread count a session of this process gets now.

    Args:
        threads: ``threads=`` of the embedding function, if set.

    Returns:
        ``threads``, else ``$FLUX_CHROMA_EMBED_THREADS``, else this process's share of the
        host's cores (see :mod:`flux_chroma.embedding.threads`).
    """
    fixed = configured_threads(threads)
    return fixed if fixed is not None else _BUDGET.threads()


def load_session(folder: Path, threads: int | None = None) -> Any:
    """The ``onnxruntime.InferenceSession`` of ``folder`` for this process (loaded once).

    Args:
        folder: The model folder.
        threads: ``threads=`` of the embedding function, if set (see :func:`session_threads`).

    Returns:
        The session, built again when its thread count no longer matches.
    """
    key = (os.getpid(), str(folder))  # ONNX thread pools do not survive fork(): one per process
    want = session_threads(threads)
    with _LOCK:
        current = _SESSIONS.get(key)
        if current is not None and current[0] == want:
            return current[1]
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = want
        options.inter_op_num_threads = 1
        path = str(folder / "model.onnx")
        try:
            session = ort.InferenceSession(
                path, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelNotAvailableError(
                f"The ONNX model {path} could not be loaded ({type(exc).__name__}: {exc}). "
                f"Replace the model folder {folder} with an intact copy."
            ) from exc
        _SESSIONS[key] = (want, session)
        return session


def pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Masked mean pooling and L2 normalisation, with Chroma's float64 arithmetic."""
    weights = mask[:, :, np.newaxis].astype(np.float64)
    summed = np.sum(hidden.astype(np.float64) * weights, axis=1)
    counts = np.clip(weights.sum(axis=1), a_min=1e-9, a_max=None)
    mean = summed / counts
    norm = np.linalg.norm(mean, axis=1)
    norm[norm == 0] = 1e-12
    return cast(npt.NDArray[np.float32], (mean / norm[:, np.newaxis]).astype(np.float32))
