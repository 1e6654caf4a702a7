"""The ONNX runtime side of the default model: tokenizers, sessions, pooling.

Sessions and tokenizers are loaded once per model folder (sessions also per process, since ONNX
thread pools do not survive ``fork()``, and per thread count) and shared by threads. Processes
on one host do not coordinate their threads (docs/deployment.md, "Embedding threads").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from flux_chroma.embedding.model_files import MAX_TOKENS
from flux_chroma.errors import ConfigurationError, ModelNotAvailableError

__all__ = [
    "ATTENTION_BUDGET",
    "EMBED_THREADS_ENV",
    "cpu_count",
    "threads_per_process",
    "run_sizes",
    "load_session",
    "load_tokenizers",
    "pool",
    "validate_threads",
]

EMBED_THREADS_ENV = "FLUX_CHROMA_EMBED_THREADS"
"""Environment variable: intra-op threads of this process's ONNX sessions (a positive integer)."""

MAX_THREADS = 1024
"""Largest accepted thread count."""

ATTENTION_BUDGET = 4 * 256 * 256
"""Largest ``texts x padded_length**2`` of one ONNX run (4 texts of 256 tokens).

Measured on all-MiniLM-L6-v2 (onnxruntime 1.32, CPU): a run's attention buffers take about 420
bytes per ``texts x length**2`` (27 MiB per text of 256 tokens), kept by onnxruntime's arena as
the session's high-water mark. The budget holds a run to about 70 MiB at the same throughput
(``python -m bench.cold_memory``, docs/benchmarks.md, "Cold-ingest memory").
"""


@dataclass(frozen=True)
class _Tokenizers:
    truncating: Any  # tokenizers.Tokenizer: truncation at MAX_TOKENS, no padding
    counting: Any  # tokenizers.Tokenizer: no truncation, no padding


_TOKENIZERS: dict[str, _Tokenizers] = {}
_SESSIONS: dict[tuple[int, str, int], Any] = {}  # (pid, folder, threads) -> session
_LOCK = threading.Lock()


def validate_threads(value: object, source: str, *, text: bool = False) -> int:
    """Return ``value`` (an int, or with ``text`` a decimal string) as a thread count.

    ``source`` names what set it in the message (``"threads="``, the variable's name).

    Raises:
        ConfigurationError: Not a whole number from 1 to :data:`MAX_THREADS`.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif text and isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 1 <= number <= MAX_THREADS:
        raise ConfigurationError(
            f"{source} must be a whole number of threads from 1 to {MAX_THREADS}, got {value!r}. "
            f"Leave it unset to use every core this process may run on."
        )
    return number


def cpu_count() -> int:
    """Cores this process may run on (its CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def threads_per_process(processes: int) -> int:
    """Each process's share of the cores when ``processes`` embed at once: max(1, cores // N),
    what docs/deployment.md ("Embedding threads") advises for ``FLUX_CHROMA_EMBED_THREADS``."""
    return max(1, cpu_count() // processes)


def session_threads(explicit: int | None = None) -> int:
    """Return ``explicit``, else ``$FLUX_CHROMA_EMBED_THREADS``, else :func:`cpu_count`."""
    if explicit is not None:
        return explicit
    env = os.environ.get(EMBED_THREADS_ENV, "").strip()
    return validate_threads(env, EMBED_THREADS_ENV, text=True) if env else cpu_count()


def run_sizes(lengths: Sequence[int], batch_size: int) -> list[int]:
    """Cut texts sorted longest first into ONNX runs; return each run's size, in order.

    A run holds at most ``batch_size`` texts and ``ATTENTION_BUDGET // L**2`` (at least one),
    ``L`` being its longest text's length (the budget is read at call time, for the bench).
    """
    sizes: list[int] = []
    start = 0
    while start < len(lengths):
        width = max(1, int(lengths[start]))
        count = max(1, min(batch_size, ATTENTION_BUDGET // (width * width), len(lengths) - start))
        sizes.append(count)
        start += count
    return sizes


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


def load_session(folder: Path, threads: int | None = None) -> Any:
    """The ``InferenceSession`` of ``folder`` with :func:`session_threads` intra-op threads.

    Raises:
        ModelNotAvailableError: ``model.onnx`` could not be loaded.
    """
    want = session_threads(threads)
    key = (os.getpid(), str(folder), want)  # ONNX thread pools do not survive fork()
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is not None:
            return session
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
