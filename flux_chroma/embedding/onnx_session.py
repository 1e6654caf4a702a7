"""The ONNX runtime side of the default model: tokenizers, one session per process, pooling.

Sessions and tokenizers are loaded once per model folder (and per process: ONNX thread pools
do not survive ``fork()``) under one lock, so threads share them.
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
from flux_chroma.errors import ModelNotAvailableError

__all__ = ["load_session", "load_tokenizers", "pool"]


@dataclass(frozen=True)
class _Tokenizers:
    truncating: Any  # tokenizers.Tokenizer: truncation at MAX_TOKENS, no padding
    counting: Any  # tokenizers.Tokenizer: no truncation, no padding


_TOKENIZERS: dict[str, _Tokenizers] = {}
_SESSIONS: dict[tuple[int, str], Any] = {}  # (pid, folder) -> onnxruntime.InferenceSession
_LOCK = threading.Lock()


def _cpu_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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


def load_session(folder: Path) -> Any:
    """The ``onnxruntime.InferenceSession`` of ``folder`` for this process (loaded once)."""
    key = (os.getpid(), str(folder))  # ONNX thread pools do not survive fork(): one per process
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = _cpu_threads()
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
            _SESSIONS[key] = session
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
